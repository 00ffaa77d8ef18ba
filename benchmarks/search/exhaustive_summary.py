"""What a long exhaustive ``tune --out`` search found, from its ``evaluations.jsonl`` (or the CSV this script
writes from one): how many configs it answered and how, its best, when (search seconds, ``spent_s``) it first came
within 1 % and 3 % of that best, and the time it measured for given configs (another search's pick).

    python3 benchmarks/search/exhaustive_summary.py FOLDER_OR_FILE [--config JSON ...] [--csv-out FILE.csv.gz]
        [--compare OTHER]

``--compare OTHER`` (another evaluations.jsonl or CSV of the same space, e.g. a second run on the same machine)
prints the ratio of the two runs' medians over the configs both timed in full: how far one run's times are from
another's, the noise any "within X %" claim sits in. Prints a table; writes nothing else unless ``--csv-out``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import statistics
from pathlib import Path
from typing import Any

FIELDS = ("seq", "spent_s", "status", "duration_ns", "raced_out", "config")


def load(path: Path) -> list[dict[str, Any]]:
    """Rows (``FIELDS``) of a tune folder, its evaluations.jsonl, or a CSV (optionally gzipped) of this script."""
    path = path / "evaluations.jsonl" if path.is_dir() else path
    if path.suffix == ".jsonl":
        rows = []
        for n, line in enumerate(path.read_text().splitlines()):
            if not line.strip():
                continue
            d = json.loads(line)
            e = d["evaluation"]
            rows.append({"seq": n, "spent_s": d.get("spent_s", 0.0), "status": e["status"],
                         "duration_ns": e.get("duration_ns"),
                         "raced_out": e.get("message", "").startswith("raced out"), "config": e["config"]})
        return rows
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        return [{"seq": int(r["seq"]), "spent_s": float(r["spent_s"]), "status": r["status"],
                 "duration_ns": float(r["duration_ns"]) if r["duration_ns"] else None,
                 "raced_out": r["raced_out"] == "1", "config": json.loads(r["config"])} for r in csv.DictReader(fh)]


def key(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True)


def full(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows timed in full: correct, not raced out."""
    return [r for r in rows if r["status"] == "ok" and not r["raced_out"] and r["duration_ns"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", type=Path)
    ap.add_argument("--config", action="append", default=[], help="a config (JSON) whose time to print")
    ap.add_argument("--csv-out", type=Path)
    ap.add_argument("--compare", type=Path)
    args = ap.parse_args()
    rows = load(args.source)
    timed = full(rows)
    best = min(timed, key=lambda r: r["duration_ns"])
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    print(f"| answered | timed in full | raced out | statuses | best µs | best config | search s (last line) |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {len(rows)} | {len(timed)} | {sum(r['raced_out'] for r in rows)} | {statuses} | "
          f"{best['duration_ns'] / 1e3:.2f} | `{key(best['config'])}` | {rows[-1]['spent_s']:.1f} |")
    for within in (1.03, 1.01):
        first = next(r for r in rows if r in timed and r["duration_ns"] <= within * best["duration_ns"])
        print(f"first within {100 * (within - 1):.0f} %: line {first['seq'] + 1}, {first['spent_s']:.1f} search s, "
              f"{first['duration_ns'] / 1e3:.2f} µs")
    by_key = {key(r["config"]): r for r in rows}
    for text in args.config:
        r = by_key.get(key(json.loads(text)))
        print(f"{text}: " + ("not answered" if r is None else
                             f"{r['status']} {r['duration_ns'] / 1e3:.2f} µs ({r['duration_ns'] / best['duration_ns']:.4f}"
                             f" of the best){' raced out' if r['raced_out'] else ''}"))
    if args.compare:
        other = {key(r["config"]): r for r in full(load(args.compare))}
        ratios = sorted(r["duration_ns"] / other[key(r["config"])]["duration_ns"] for r in timed
                        if key(r["config"]) in other)
        if ratios:
            print(f"this run / {args.compare.name}: {len(ratios)} configs timed in full by both, median "
                  f"{statistics.median(ratios):.4f}, 5th–95th percentile {ratios[len(ratios) // 20]:.4f}–"
                  f"{ratios[-1 - len(ratios) // 20]:.4f}")
    if args.csv_out:
        opener = gzip.open if args.csv_out.suffix == ".gz" else open
        with opener(args.csv_out, "wt", newline="") as fh:
            w = csv.DictWriter(fh, FIELDS)
            w.writeheader()
            for r in rows:
                w.writerow({**r, "raced_out": int(r["raced_out"]), "config": key(r["config"]),
                            "spent_s": f"{r['spent_s']:.3f}",
                            "duration_ns": f"{r['duration_ns']:.1f}" if r["duration_ns"] else ""})


if __name__ == "__main__":
    main()
