#!/usr/bin/env python3
"""The strategies on every measured landscape we have, on the CPU: ``tune --replay`` of each exhaustive cache.

    python3 benchmarks/search/landscapes.py [--only torchao,attention] [--strategies auto,bayes] [--seeds 0,1,2]
        [--budget-s 200] [--jobs 2] [--json-out PATH]
    python3 benchmarks/search/landscapes.py --in-process [--top-k 0,5] [--seeds 0-29] ...

A landscape is an evaluation cache that an exhaustive ``tune`` filled on a GPU (every config of the space answered):

| name | cache | kernel | GPU | configs |
|---|---|---|---|---|
| torchao | tests/data/search/torchao_int8_mm-h200.jsonl.gz | torchao's int8 mm | H200 | 960 |
| attention | .../triton_tutorial_attention-h200.jsonl.gz | Triton's fused-attention tutorial | H200 | 21 |
| matmul_tutorial | .../triton_tutorial_matmul-h200.jsonl.gz | Triton's matmul tutorial | H200 | 16 |
| geglu | .../liger_geglu-h200.jsonl.gz | Liger GeGLU | H200 | 8 |
| softmax | tests/data/search/softmax-h100.jsonl | the softmax example, ``num_stages == 2`` | H100 | 105 |
| matmul | tests/data/search/matmul-h100.jsonl | the matmul example as measured (tests/data/search/matmul.py) | H100 | 128 |

Each run is ``kernelpilot tune KERNEL --replay CACHE --strategy S --seed N --budget-s B`` (B = optimize's default
budget, 200 s, charged in the device seconds each replayed evaluation cost when it was measured) in a home, cache
folder and experience log of its own. Printed per landscape, strategy and seed: the evaluations made, the best found
against the landscape's best (over the configs timed in full), and the evaluations and device seconds until the best
so far was first within 1 % of it (``—``: never); the exhaustive column is the same for the space's own order.
A replay has the GPU's answers but not its costs beyond each evaluation's wall: no compile waits, no A/B timings,
and light cards without compile metadata where this machine's Triton cannot compile the kernel for sm_90.
The library kernels need their packages (``torchao``, ``liger_kernel``) and third_party/triton_tutorials, and
the tutorials query the GPU at import: a landscape whose kernel does not load prints a row saying so.

``--in-process`` runs the strategy itself against each landscape, without the tool around it: the space is the
configs the cache holds (each one admitted by a constraint that lists them), the answers are the stored statuses and
medians, the budget is the same device seconds, and no kernel is imported, so every landscape runs on any machine,
``big`` too (session 10's 10,800-config softmax space, docs/device-runs/2026-11-27-s10/ex-big-evaluations.csv.gz:
the configs its exhaustive run measured, each charged 2.3 s, the cost of one of optimize's versions there). There
are no cards (the card's moves explore), no A/B decisions and no racing; ``--top-k`` sets ``auto``'s centers
(:class:`kernelpilot.search.strategies.polish.Polish`; 0: TPE alone after the card's moves).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import gzip
import statistics
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
S12 = ROOT / "tests" / "data" / "search"  # session 12's H200 landscapes (docs/device-runs/2026-11-27-s12)
DATA = ROOT / "tests" / "data" / "search"
LIB = ROOT / "benchmarks" / "library"
EXAMPLES = ROOT / "src" / "kernelpilot" / "examples"
#: name -> (cache, kernel, constraints): the constraints are those the cache was filled under (tests/test_engine.py)
LANDSCAPES: dict[str, tuple[Path, Path, list[str]]] = {
    "torchao": (S12 / "torchao_int8_mm-h200.jsonl.gz", LIB / "torchao_int8_mm.py", []),
    "attention": (S12 / "triton_tutorial_attention-h200.jsonl.gz", LIB / "triton_tutorial_attention.py", []),
    "matmul_tutorial": (S12 / "triton_tutorial_matmul-h200.jsonl.gz", LIB / "triton_tutorial_matmul.py", []),
    "geglu": (S12 / "liger_geglu-h200.jsonl.gz", LIB / "liger_geglu.py", []),
    "softmax": (DATA / "softmax-h100.jsonl", EXAMPLES / "softmax.py", ["num_stages == 2"]),
    "matmul": (DATA / "matmul-h100.jsonl", DATA / "matmul.py",
               ["GROUP_M == 8", "BLOCK_K <= 64", "num_warps >= 4", "num_stages >= 3", "num_stages <= 4"]),
}
SKIPPED = ("pruned", "invalid_config", "not_in_cache")
BIG_CSV = ROOT / "docs" / "device-runs" / "2026-11-27-s10" / "ex-big-evaluations.csv.gz"
BIG_COST_S = 2.3


def unpack(src: Path, folder: Path) -> Path:
    """The cache file ``src`` (gzip or not) as ``folder/<kernel>-<key16>.jsonl``, the name ``tune`` writes."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as fh:
        text = fh.read()
    head = json.loads(text.splitlines()[0])
    dest = folder / f"{head['context']['kernel']}-{head['key'][:16]}.jsonl"
    dest.write_text(text)
    return dest


def landscape(cache: Path) -> tuple[list[dict[str, Any]], float]:
    """(every stored evaluation in the order the exhaustive tune made them, the best median timed in full)."""
    rows = [json.loads(line)["evaluation"] for line in cache.read_text().splitlines() if '"evaluation"' in line]
    full = [r["duration_ns"] for r in rows if r["status"] == "ok" and not r["message"].startswith("raced out")]
    timed = [r["duration_ns"] for r in rows if r["status"] == "ok"]
    return rows, min(full or timed)


def to_within(evs: list[dict[str, Any]], best_ns: float, pct: float = 1.0) -> tuple[int | None, float | None]:
    """(evaluations, device seconds) until the first ``ok`` answer within ``pct`` % of ``best_ns`` (None: never);
    pruned, invalid and uncached configs cost nothing, as in a replay's budget."""
    spent, n = 0.0, 0
    for e in evs:
        if e.get("status") in SKIPPED:
            continue
        n += 1
        spent += e.get("wall_s") or 0.0
        if e.get("status") == "ok" and e.get("duration_ns") and e["duration_ns"] <= best_ns * (1 + pct / 100):
            return n, spent
    return None, None


def replay(name: str, cache: Path, kernel: Path, constraints: list[str], strategy: str, seed: int,
           budget_s: float, best_ns: float) -> dict[str, Any]:
    """One ``tune --replay`` in a home of its own; its numbers (or ``error``)."""
    with tempfile.TemporaryDirectory(prefix="kp-landscape-") as tmp:
        env = {**os.environ, "KERNELPILOT_HOME": f"{tmp}/home", "KERNELPILOT_CACHE": f"{tmp}/cache",
               "KERNELPILOT_EXPERIENCE": "off"}
        cmd = [sys.executable, "-m", "kernelpilot.cli", "tune", str(kernel), "--replay", str(cache), "--strategy",
               strategy, "--seed", str(seed), "--budget-s", str(budget_s), "--json", "--all", "--quiet"]
        for c in constraints:
            cmd += ["--constraint", c]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    row: dict[str, Any] = {"landscape": name, "strategy": strategy, "seed": seed}
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {**row, "error": (p.stderr or p.stdout).strip()[-300:]}
    if out.get("error"):
        return {**row, "error": str(out["error"])[:300]}
    evs = out.get("evaluations", [])
    n1, s1 = to_within(evs, best_ns)
    found = (out.get("best") or {}).get("duration_ns")
    return {**row, "evaluations": sum(1 for e in evs if e.get("status") not in SKIPPED),
            "device_s": sum(e.get("wall_s") or 0.0 for e in evs if e.get("status") not in SKIPPED),
            "best_ratio": found / best_ns if found else None, "to1_evals": n1, "to1_s": s1}


def stored(name: str) -> tuple[list[dict[str, Any]], float]:
    """A landscape's evaluations (config, status, duration_ns, wall_s, message) and its best timed in full."""
    if name == "big":
        with gzip.open(BIG_CSV, "rt") as fh:
            rows = [{"config": json.loads(r["config"]), "status": r["status"],
                     "duration_ns": float(r["duration_ns"]) if r["duration_ns"] else None, "wall_s": BIG_COST_S,
                     "message": "raced out" if r["raced_out"] == "1" else ""} for r in csv.DictReader(fh)]
        full = [r["duration_ns"] for r in rows if r["status"] == "ok" and not r["message"]]
        return rows, min(full)
    with tempfile.TemporaryDirectory() as tmp:
        return landscape(unpack(LANDSCAPES[name][0], Path(tmp)))


def in_process(name: str, rows: list[dict[str, Any]], best_ns: float, top_k: int, seeds: list[int],
               budget_s: float) -> list[dict[str, Any]]:
    """``auto`` (``top_k`` centers) run against the landscape per seed: device seconds and evaluations to 1 %."""
    from kernelpilot.search.model import Budget, BudgetExhausted, Evaluation, OneByOne, config_key
    from kernelpilot.search.space import SearchSpace
    from kernelpilot.search.strategies.auto import AutoStrategy

    answers = {config_key(r["config"]): r for r in rows}
    if name == "big":
        from kernelpilot.kernels.contract import load_kernel

        space = SearchSpace.from_kernel(load_kernel(ROOT / "benchmarks" / "search" / "softmax_big.py"))
    else:
        from kernelpilot.backends.triton.autotune import listed_space

        tunables, listed = listed_space([r["config"] for r in rows])
        space = SearchSpace(tunables, [listed])
    out = []
    for seed in seeds:
        budget, asked = Budget(max_s=budget_s, charged=True).start(), []

        def evaluate(config: dict[str, Any]) -> Evaluation:
            budget.check()
            row = answers.get(config_key(config))
            if row is None:  # not measured (pruned in the big run): costs nothing, as in a replay
                return Evaluation(config=dict(config), status="pruned")
            budget.charge(row["wall_s"])
            asked.append(row)
            ok = row["status"] == "ok"
            return Evaluation(config=dict(config), status=row["status"] if ok else "compile_error",
                              duration_ns=row["duration_ns"] if ok else None)

        try:
            AutoStrategy(top_k=top_k).search(space, OneByOne(evaluate), seed=seed, start=rows[0]["config"])
        except BudgetExhausted:
            pass
        n1, s1 = to_within(asked, best_ns)
        found = min((r["duration_ns"] for r in asked if r["status"] == "ok"), default=None)
        out.append({"landscape": name, "strategy": f"auto top_k={top_k}", "seed": seed, "evaluations": len(asked),
                    "device_s": sum(r["wall_s"] for r in asked), "best_ratio": found / best_ns if found else None,
                    "to1_evals": n1, "to1_s": s1})
    return out


def main_in_process(args: argparse.Namespace, seeds: list[int]) -> list[dict[str, Any]]:
    """Every landscape x ``--top-k`` in-process; one summary line each (seeds that met 1 %, median and worst)."""
    rows: list[dict[str, Any]] = []
    print("| landscape | configs | best µs | exhaustive to 1 %: s | auto top_k | seeds met 1 % | median s to 1 % | "
          "worst s to 1 % | median evaluations to 1 % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.only.split(","):
        stored_rows, best_ns = stored(name)
        _n, ex_s = to_within(stored_rows, best_ns)
        for k in (int(x) for x in args.top_k.split(",")):
            runs = in_process(name, stored_rows, best_ns, k, seeds, args.budget_s)
            rows += runs
            met = [r for r in runs if r["to1_s"] is not None]
            worst = "—" if len(met) < len(runs) else f"{max(r['to1_s'] for r in met):.1f}"
            median_s = statistics.median([r["to1_s"] if r["to1_s"] is not None else math.inf for r in runs])
            median_n = statistics.median([r["to1_evals"] or math.inf for r in runs])
            print(f"| {name} | {len(stored_rows)} | {best_ns / 1e3:.2f} | {ex_s:.1f} | {k} | {len(met)} of {len(runs)} "
                  f"| {median_s:.1f} | {worst} | {median_n:g} |", flush=True)
    return rows


def main() -> None:
    """Parse the options, run every replay, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(LANDSCAPES))
    ap.add_argument("--strategies", default="auto")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget-s", type=float, default=200.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--in-process", action="store_true", help="the strategy alone against each landscape")
    ap.add_argument("--top-k", default="5", help="with --in-process: auto's centers, a comma list (0: none)")
    args = ap.parse_args()
    seeds = [int(x) for part in args.seeds.split(",") for x in
             (range(int(part.split("-")[0]), int(part.split("-")[1]) + 1) if "-" in part else [part])]
    if args.in_process:
        if args.only == ",".join(LANDSCAPES):
            args.only += ",big"
        rows = main_in_process(args, seeds)
        if args.json_out:
            args.json_out.write_text(json.dumps(rows, indent=1))
        return
    rows: list[dict[str, Any]] = []
    print("| landscape | configs | best µs | exhaustive to 1 %: evals / s | strategy | seed | evaluations | "
          "device s | best found / best | to 1 %: evals | to 1 %: s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kp-landscapes-") as tmp, cf.ThreadPoolExecutor(args.jobs) as pool:
        for name in args.only.split(","):
            src, kernel, constraints = LANDSCAPES[name]
            folder = Path(tmp) / name
            folder.mkdir()
            cache = unpack(src, folder)
            stored, best_ns = landscape(cache)
            ex_n, ex_s = to_within(stored, best_ns)
            head = f"| {name} | {len(stored)} | {best_ns / 1e3:.2f} | {ex_n} / {ex_s:.1f} |"
            jobs = [pool.submit(replay, name, cache, kernel, constraints, s, int(seed), args.budget_s, best_ns)
                    for s in args.strategies.split(",") for seed in seeds]
            for job in jobs:
                r = job.result()
                rows.append({**r, "configs": len(stored), "landscape_best_ns": best_ns, "exhaustive_to1_s": ex_s})
                if "error" in r:
                    print(f"{head} {r['strategy']} | {r['seed']} | error: {r['error']!r} |||||", flush=True)
                    continue
                ratio = f"{r['best_ratio']:.3f}" if r["best_ratio"] else "—"
                s1 = f"{r['to1_s']:.1f}" if r["to1_s"] is not None else "—"
                print(f"{head} {r['strategy']} | {r['seed']} | {r['evaluations']} | {r['device_s']:.1f} | {ratio} "
                      f"| {r['to1_evals'] or '—'} | {s1} |", flush=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
