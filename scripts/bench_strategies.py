"""Benchmark the search strategies by replay (no GPU): evaluations each needs to get within 3 % of the exhaustive best.

The caches in tests/data/search/ were filled on the device by ``scripts/issue4-device.sh exhaustive matmul|softmax``
(every config of the constrained space measured, static pruning only reported). For each strategy and seed this
replays a search through the cache with a budget of the whole space and counts the evaluations until the first
config within 3 % of the exhaustive best (the best fully timed, not raced-out, median). It also reports what static
pruning removed there and the device-seconds those configs had cost.

    python3 scripts/bench_strategies.py [--seeds 20] [--json out.json]

Prints one Markdown table per kernel. A benchmark, not a test: numbers depend on the cached measurements.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelpilot.search.cache import ReplayRunner
from kernelpilot.search.model import config_key
from kernelpilot.search.tune import tune

RUNS = ROOT / "docs/device-runs/2026-11-22-h100/search/runs"
KERNELS = {
    "matmul": {
        "kernel": ROOT / "src/kernelpilot/examples/matmul.py",
        "cache": ROOT / "tests/data/search/matmul-h100.jsonl",
        "constraints": ["GROUP_M == 8", "BLOCK_K <= 64", "num_warps >= 4", "num_stages >= 3", "num_stages <= 4"],
        "prune_from": RUNS / "matmul-guided/tune.json",  # same space, same device: its prune report
    },
    "softmax": {
        "kernel": ROOT / "src/kernelpilot/examples/softmax.py",
        "cache": ROOT / "tests/data/search/softmax-h100.jsonl",
        "constraints": ["num_stages == 2"],
        "prune_from": RUNS / "softmax-exhaustive/tune.json",
    },
}
STRATEGIES = ("exhaustive", "guided", "random", "local", "bayes")
DETERMINISTIC = {"exhaustive", "guided"}  # the seed does not change their order


def evals_to_target(evaluations: list, target_ns: float) -> int | None:
    """1-based index of the first evaluation within the target, or None when never reached."""
    for i, ev in enumerate(evaluations, 1):
        if ev.ok and ev.duration_ns <= target_ns:
            return i
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    report: dict = {}
    for name, k in KERNELS.items():
        replay = ReplayRunner(k["cache"])
        evs = replay.evaluations()
        full = [e for e in evs if e.ok and not e.message.startswith("raced out")]
        best = min(full, key=lambda e: e.duration_ns)
        target = best.duration_ns * 1.03
        n_near = sum(1 for e in evs if e.ok and e.duration_ns <= target)
        prune = json.loads(Path(k["prune_from"]).read_text())["prune"]
        by_key = {e.key: e for e in evs}
        saved_s = sum(by_key[key].wall_s for key in prune["pruned"] if key in by_key)
        total_s = sum(e.wall_s for e in evs)
        rows = []
        for strategy in STRATEGIES:
            seeds = [0] if strategy in DETERMINISTIC else list(range(args.seeds))
            counts, t0 = [], time.monotonic()
            for seed in seeds:
                r = tune(k["kernel"], strategy=strategy, replay=k["cache"], seed=seed, constraints=k["constraints"],
                         budget_evals=len(evs))
                counts.append(evals_to_target(r.evaluations, target))
                final = r.best
            reached = [c for c in counts if c is not None]
            rows.append({
                "strategy": strategy, "seeds": len(seeds), "reached": len(reached),
                "median": statistics.median(reached) if reached else None,
                "min": min(reached) if reached else None, "max": max(reached) if reached else None,
                "final_best_us": final.duration_ns / 1e3 if final else None,
                "replay_s": time.monotonic() - t0,
            })
        report[name] = {"space": len(evs), "best": best.config, "best_us": best.duration_ns / 1e3,
                        "within_3pct": n_near, "pruned": prune["n_pruned"], "pruned_by": prune["by_reason"],
                        "pruned_device_s": saved_s, "total_device_s": total_s, "rows": rows,
                        "best_key": config_key(best.config)}
        print(f"\n## {name}: {len(evs)} configs measured on {replay.context.gpu if replay.context else '?'}; "
              f"exhaustive best {best.duration_ns / 1e3:.2f} µs `{best.config}`; {n_near} configs within 3 %\n")
        print(f"Static pruning removed {prune['n_pruned']} of {len(evs)} configs ({prune['n_pruned'] / len(evs):.0%}; "
              f"{prune['by_reason']}), which had cost {saved_s:.1f} of the {total_s:.1f} device-seconds of the "
              f"exhaustive fill ({saved_s / total_s:.0%}).\n")
        print("| strategy | seeds | reached 3 % | evaluations to 3 % (median) | min | max |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            med = "—" if row["median"] is None else f"{row['median']:g}"
            print(f"| {row['strategy']} | {row['seeds']} | {row['reached']}/{row['seeds']} | {med} | "
                  f"{row['min'] if row['min'] is not None else '—'} | {row['max'] if row['max'] is not None else '—'} |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
