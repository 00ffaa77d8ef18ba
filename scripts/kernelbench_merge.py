"""Merge several ``kernelpilot kernelbench run`` folders (lanes of one device call, one GPU each) into one table.

    python3 scripts/kernelbench_merge.py RUN [RUN ...] --out DIR

Reads each RUN/kernelbench.json, concatenates its rows, recomputes fast_p over all rows with kernelpilot's own
function (:func:`kernelpilot.app.kernelbench_run.fast_p_table`), writes DIR/kernelbench.json and prints the rows and
fast_p as Markdown. A lane whose folder has no kernelbench.json (killed) is named, not skipped silently.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernelpilot.app.kernelbench_run import KernelBenchRow, fast_p_table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    rows: list[KernelBenchRow] = []
    for run in a.runs:
        f = run / "kernelbench.json"
        if not f.is_file():
            print(f"missing: {f} (the lane wrote no result)")
            continue
        rows += [KernelBenchRow.model_validate(r) for r in json.loads(f.read_text())["rows"]]
    rows.sort(key=lambda r: (r.level or 0, r.problem_id, r.sample_id))
    fp = fast_p_table(rows)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "kernelbench.json").write_text(json.dumps({"rows": [r.model_dump(mode="json") for r in rows],
                                                         "fast_p": fp}, indent=1))
    us = lambda ns: "—" if ns is None else f"{ns / 1e3:.1f}"  # noqa: E731
    x = lambda s: "—" if s is None else f"{s:.2f}×"  # noqa: E731
    print("| level | problem | sample | status | solution µs | eager µs | torch.compile µs | vs eager | vs compile |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        d = r.durations_ns
        status = r.status + (f" ({r.failure})" if r.failure and r.failure != r.status else "")
        flag = " (over 10×: flagged)" if r.excessive_speedup else ""
        print(f"| {r.level} | {r.problem} | {r.sample_id} | {status} | {us(d.get('solution'))} | "
              f"{us(d.get('eager'))} | {us(d.get('compile'))} | {x(r.speedup_vs_eager)}{flag} | "
              f"{x(r.speedup_vs_compile)} |")
    print()
    for base, vals in fp.items():
        print(f"fast_p vs {base}: " + ", ".join(f"{k}={'not measured' if v is None else f'{v:.2f}'}"
                                              for k, v in vals.items()))
    print(f"{sum(r.correct for r in rows)}/{len(rows)} correct")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
