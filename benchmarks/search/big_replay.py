#!/usr/bin/env python3
"""The strategies on a measured 10,800-config landscape, on the CPU: replays of the H200 exhaustive tune of
``benchmarks/search/softmax_big.py`` (session 10, docs/device-runs/2026-11-27-s10/ex-big-evaluations.csv.gz).

    python3 benchmarks/search/big_replay.py [--strategies auto,bayes,random] [--seeds 0,1,2] [--budget-evals 400]
        [--cost-s 2.3] [--csv PATH]

The CSV holds every measured config's median (9,000 of the 10,800; the 1,800 pruned ones are absent, and a replay
skips them as ``not_in_cache``). This script writes them as an evaluation cache in a temporary folder, one line per
config with 30 samples drawn around its median (0.3 % spread, so the A/B decisions have samples to judge; the
stored median is the median of those samples), then runs ``kernelpilot tune --replay`` with each strategy and
seed. A config the exhaustive run raced out has the median of its few samples: as a landscape, good enough to
rank it.

Printed per run: the evaluations made, the best found, and the number of evaluations until the best-so-far was
first within 1 % and within 3 % of the landscape's best (37.14 µs over the configs timed in full). The cost model
is one evaluation = ``--cost-s`` seconds: 2.3 s is what optimize spent per version on one H200 in session 8 (87
versions in its 200 s budget on this space), so ``--budget-evals 87`` is optimize's default budget. Real runs differ
from replays: there are no cards here (the guided moves need an incumbent's card), and compile waits, records and
A/B timings are the cost model's constant.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "benchmarks" / "search" / "softmax_big.py"
CSV = ROOT / "docs" / "device-runs" / "2026-11-27-s10" / "ex-big-evaluations.csv.gz"
#: The session-10 run's environment (its device-runs README): the cache's context names it.
ENV = {"gpu": "NVIDIA H200", "driver": "580.159.04", "torch": "2.11.0+cu130", "triton": "3.6.0", "python": "3.12.3"}


def load_landscape(path: Path) -> list[tuple[dict, float, bool]]:
    """(config, median ns, raced out) of every ``ok`` line of the CSV."""
    with gzip.open(path, "rt") as fh:
        return [(json.loads(r["config"]), float(r["duration_ns"]), r["raced_out"] == "1")
                for r in csv.DictReader(fh) if r["status"] == "ok" and r["duration_ns"]]


def write_cache(root: Path, rows: list[tuple[dict, float, bool]], cost_s: float) -> Path:
    """The landscape as an evaluation cache under ``root``; returns its file."""
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.search.cache_store import CacheContext, EvaluationCache
    from kernelpilot.search.model import Evaluation

    kf = load_kernel(KERNEL, None)
    ctx = CacheContext(kernel=kf.name, kernel_sha256=kf.source_sha256, shape=dict(kf.shape), interpreted=False,
                       **ENV)
    cache = EvaluationCache(ctx, root)
    rng = random.Random(0)
    for config, median_ns, _raced in rows:  # each put signs the line and makes it durable, as a live tune's does
        samples = [median_ns * (1 + rng.gauss(0, 0.003)) for _ in range(30)]
        q = statistics.quantiles(samples, n=4)
        cache.put(Evaluation(config=config, status="ok", duration_ns=statistics.median(samples), samples_ns=samples,
                             iqr_ns=q[2] - q[0], measured=True, wall_s=cost_s, worker="cuda:0"))
    return cache.path


def run(cache: Path, strategy: str, seed: int, budget_evals: int, best_ns: float) -> dict:
    """One ``tune --replay``; the evaluations until 1 % and 3 % of ``best_ns``."""
    p = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "tune", str(KERNEL), "--replay", str(cache),
                        "--strategy", strategy, "--seed", str(seed), "--budget-evals", str(budget_evals), "--json",
                        "--all", "--quiet"], capture_output=True, text=True, timeout=3600)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"error": (p.stderr or p.stdout)[-400:]}
    evs = [e for e in out.get("evaluations", []) if e.get("status") != "not_in_cache"]
    best_so_far, to = float("inf"), {}
    for i, e in enumerate(evs, 1):
        if e.get("status") == "ok" and e.get("duration_ns") and not str(e.get("message", "")).startswith("raced out"):
            best_so_far = min(best_so_far, e["duration_ns"])
        for pct in (1, 3):
            if pct not in to and best_so_far <= best_ns * (1 + pct / 100):
                to[pct] = i
    return {"evaluations": len(evs), "best_ns": (out.get("best") or {}).get("duration_ns"), "to1": to.get(1),
            "to3": to.get(3), "stopped": out.get("stopped", "")[:80]}


def main() -> None:
    """Parse the options, write the cache, run and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strategies", default="auto,bayes,random")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget-evals", type=int, default=400)
    ap.add_argument("--cost-s", type=float, default=2.3)
    ap.add_argument("--csv", type=Path, default=CSV)
    args = ap.parse_args()
    rows = load_landscape(args.csv)
    best_ns = min(d for _c, d, raced in rows if not raced)
    with tempfile.TemporaryDirectory(prefix="kp-big-replay-") as tmp:
        # a home, cache folder and experience log of their own: the user's are neither read nor written
        os.environ.update(KERNELPILOT_HOME=str(Path(tmp) / "home"), KERNELPILOT_CACHE=str(Path(tmp) / "cache"),
                          KERNELPILOT_EXPERIENCE="off")
        cache = write_cache(Path(tmp) / "cache", rows, args.cost_s)
        print(f"landscape: {len(rows)} measured configs, best {best_ns / 1e3:.2f} µs (timed in full); cache {cache.name}")
        print(f"budget {args.budget_evals} evaluations x {args.cost_s} s each\n")
        print("| strategy | seed | evaluations | best µs | evaluations to 1 % | to 3 % | stopped |")
        print("|---|---|---|---|---|---|---|")
        for strategy in args.strategies.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                r = run(cache, strategy, seed, args.budget_evals, best_ns)
                if "error" in r:
                    print(f"| {strategy} | {seed} | error: {r['error']!r} |||||", flush=True)
                    continue
                best = f"{r['best_ns'] / 1e3:.2f}" if r["best_ns"] else "—"
                print(f"| {strategy} | {seed} | {r['evaluations']} | {best} | {r['to1'] or '—'} | {r['to3'] or '—'} "
                      f"| {r['stopped']} |", flush=True)


if __name__ == "__main__":
    main()
