"""Benchmark the search strategies by replay (no GPU): evaluations each needs to get within 3 % of the exhaustive best.

The caches in tests/data/search/ were filled on the device by ``scripts/issue4-device.sh exhaustive matmul|softmax``
(every config of the constrained space measured, static pruning only reported). For each strategy and seed this
replays a search through the cache with a budget of the whole cache and counts the evaluations until the first
config within 3 % of the exhaustive best (the best fully timed, not raced-out, median), also without the configs
static pruning would have dropped (a replay does not prune). It also reports the constraints that narrowed the
space, how many configs lie within 3 %, what static pruning removed and the device-seconds those configs had cost.
Exhaustive and guided are deterministic: one run each.

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
        "kernel": ROOT / "tests/data/search/matmul.py",  # the file the cache was measured with
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


def evals_to_target(evaluations: list, target_ns: float, skip: frozenset[str] = frozenset()) -> int | None:
    """1-based index of the first evaluation within the target, or None when never reached; evaluations whose
    config key is in ``skip`` are not counted (and cannot be the hit)."""
    i = 0
    for ev in evaluations:
        if ev.key in skip:
            continue
        i += 1
        if ev.ok and ev.duration_ns <= target_ns:
            return i
    return None


def _stats(counts: list[int | None]) -> dict:
    reached = [c for c in counts if c is not None]
    return {"reached": len(reached), "median": statistics.median(reached) if reached else None,
            "min": min(reached) if reached else None, "max": max(reached) if reached else None}


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def preamble(seeds: int) -> str:
    return f"""# Search strategies compared by replay of the H100 caches

`python3 scripts/bench_strategies.py --seeds {seeds}` (no GPU). Each cache holds every config of the kernel's
constrained space, measured on the device by an exhaustive fill (`scripts/issue4-device.sh exhaustive`). Each search
replays it through `tune(..., replay=cache)` (the guided strategy with light cards for its incumbents, as live) with
a **replay budget of the whole cache** (`budget_evals` = configs in the cache), so every strategy can reach the
target: the first config within 3 % of the exhaustive best (the best fully timed, not raced-out, median). The
count is the evaluations the strategy needed until that config.

- **Seeds:** random, local and bayes run over {seeds} seeds (median, min, max). Exhaustive and guided are
  **deterministic** (their order does not depend on the seed): **1 run each**, so their min = median = max.
- **Static pruning is not applied in a replay:** the counts include the configs static pruning would have dropped
  before any GPU time. The column *w/o pruned* counts the same sequence without them; that is exact for exhaustive
  and random (their order does not depend on answers); a live search of the adaptive strategies with pruning would
  see those configs answered `pruned` and may move differently.
- *blind order* is what a uniformly random order is expected to need, (n + 1) / (k + 1) evaluations for k configs
  within 3 % among n.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    report: dict = {"seeds": args.seeds, "deterministic": sorted(DETERMINISTIC)}
    print(preamble(args.seeds))
    for name, k in KERNELS.items():
        replay = ReplayRunner(k["cache"])
        evs = replay.evaluations()
        # fully timed lines only: a replay reads a stored "raced out" back as a "short timing" (search/cache_trust.py)
        full = [e for e in evs if e.ok and not e.message.startswith(("raced out", "short timing"))]
        best = min(full, key=lambda e: e.duration_ns)
        target = best.duration_ns * 1.03
        n_near = sum(1 for e in evs if e.ok and e.duration_ns <= target)
        blind = (len(evs) + 1) / (n_near + 1)
        prune = json.loads(Path(k["prune_from"]).read_text())["prune"]
        pruned = frozenset(prune["pruned"])
        by_key = {e.key: e for e in evs}
        saved_s = sum(by_key[key].wall_s for key in pruned if key in by_key)
        total_s = sum(e.wall_s for e in evs)
        near_pruned = sum(1 for e in evs if e.ok and e.duration_ns <= target and e.key in pruned)
        budget = len(evs)
        rows, space = [], None
        for strategy in STRATEGIES:
            seeds = [0] if strategy in DETERMINISTIC else list(range(args.seeds))
            counts, unpruned, t0 = [], [], time.monotonic()
            for seed in seeds:
                r = tune(k["kernel"], strategy=strategy, replay=k["cache"], seed=seed, constraints=k["constraints"],
                         budget_evals=budget)
                counts.append(evals_to_target(r.evaluations, target))
                unpruned.append(evals_to_target(r.evaluations, target, pruned))
                final = r.best
                space = space or {"size": r.space_size, "total": r.space_total, "constraints": r.constraints}
            rows.append({
                "strategy": strategy, "seeds": len(seeds), "deterministic": strategy in DETERMINISTIC,
                **_stats(counts), "median_without_pruned": _stats(unpruned)["median"],
                "final_best_us": final.duration_ns / 1e3 if final else None,
                "replay_s": time.monotonic() - t0,
            })
        kernel_constraints = [c for c in space["constraints"] if c in k["constraints"]]
        automatic = [c for c in space["constraints"] if c not in k["constraints"]]
        report[name] = {"space": len(evs), "space_total": space["total"], "constraints": space["constraints"],
                        "budget_evals": budget, "best": best.config, "best_us": best.duration_ns / 1e3,
                        "within_3pct": n_near, "within_3pct_pruned": near_pruned, "blind_expected": blind,
                        "pruned": prune["n_pruned"], "pruned_by": prune["by_reason"],
                        "pruned_device_s": saved_s, "total_device_s": total_s, "rows": rows,
                        "best_key": config_key(best.config), "best_pruned": config_key(best.config) in pruned}
        gpu = replay.context.gpu if replay.context else "?"
        print(f"\n## {name}: {len(evs)} configs measured on {gpu}\n")
        print(f"Exhaustive best {best.duration_ns / 1e3:.2f} µs `{best.config}`; **{n_near} config"
              f"{'s' if n_near != 1 else ''} within 3 %** of it ({near_pruned} of them pruned statically); "
              f"a blind order expects {blind:.1f} evaluations to the first.\n")
        print(f"Space: {space['size']} of the {space['total']} TUNABLES combinations, narrowed by the constraints "
              + ", ".join(f"`{c}`" for c in kernel_constraints)
              + (" and the device limit " + ", ".join(f"`{c}`" for c in automatic) if automatic else "")
              + " (from the replayed search's context). "
              f"Replay budget: {budget} evaluations (the whole cache).\n")
        print(f"Static pruning removed {prune['n_pruned']} of {len(evs)} configs ({prune['n_pruned'] / len(evs):.0%}; "
              f"{prune['by_reason']}), which had cost {saved_s:.1f} of the {total_s:.1f} device-seconds of the "
              f"exhaustive fill ({saved_s / total_s:.0%}).\n")
        print("| strategy | seeds | reached 3 % | evaluations to 3 % (median) | min | max | median w/o pruned |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            seeds_txt = f"{row['seeds']} (deterministic)" if row["deterministic"] else str(row["seeds"])
            print(f"| {row['strategy']} | {seeds_txt} | {row['reached']}/{row['seeds']} | {_fmt(row['median'])} | "
                  f"{_fmt(row['min'])} | {_fmt(row['max'])} | {_fmt(row['median_without_pruned'])} |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
