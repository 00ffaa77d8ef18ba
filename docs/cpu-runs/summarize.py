"""Summarise the runs of docs/cpu-runs/run-inspect-all.sh: one markdown row per example and pass.

    python3 docs/cpu-runs/summarize.py /tmp/kp-cpu-runs [--csv docs/cpu-runs/inspect-all-configs.cold.csv]

Columns: configs in the space; ok; OutOfResources (shared memory / threads); rejected by run_kernel (ValueError at
capture); other failures; wall time of the command (s); sum and median of the per-config Triton compile time (s,
``compile_s``: milliseconds on a cache hit); configs that spill (local memory > 0).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path


def row(run: Path, example: str, pass_: str) -> str | None:
    data_path, time_path = run / f"{example}.{pass_}.json", run / f"{example}.{pass_}.time"
    if not data_path.is_file() or not time_path.is_file():
        return None
    timing = json.loads(time_path.read_text())
    try:
        data = json.loads(data_path.read_text())
    except json.JSONDecodeError:
        return f"| {example} | {pass_} | rc {timing['rc']}: no JSON | | | | | {timing['wall_s']:.0f} | | | |"
    results = data["results"]
    kinds = Counter()
    for r in results:
        if r["status"] == "ok":
            kinds["ok"] += 1
        elif r["stage"] == "resources":
            kinds["oor smem" if "shared memory" in r["message"] else "oor threads" if "threads" in r["message"]
                  else "oor other"] += 1
        elif r["stage"] == "capture" and r["error_type"] == "ValueError":
            kinds["rejected"] += 1
        else:
            kinds["other"] += 1
    ok = [r for r in results if r["status"] == "ok"]
    compile_s = [r["compile_s"] for r in ok]
    spilling = sum(r["local_mem_bytes_per_thread"] > 0 for r in ok)
    oor = f"{kinds['oor smem']} / {kinds['oor threads']}" + (f" (+{kinds['oor other']})" if kinds["oor other"] else "")
    return (f"| {example} | {pass_} | {data['n_configs_total']} | {kinds['ok']} | {oor} | {kinds['rejected']} | "
            f"{kinds['other']} | {timing['wall_s']:.0f} | {sum(compile_s):.0f} | "
            f"{statistics.median(compile_s) if compile_s else 0:.2f} | {spilling} |")


def write_csv(run: Path, out: Path, pass_: str = "cold") -> None:
    """One row per config of every example: status, registers/thread, local bytes/thread, shared bytes/block,
    threads/block, max threads/block, theoretical occupancy (%), limiter, compile seconds, failure reason."""
    import csv

    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["example", "config", "status", "regs", "local_B", "shared_B", "threads", "max_threads",
                    "occupancy_pct", "limiter", "compile_s", "failure"])
        for example in ("vector_add", "layer_norm", "softmax", "matmul"):
            path = run / f"{example}.{pass_}.json"
            if not path.is_file():
                continue
            for r in json.loads(path.read_text())["results"]:
                cfg = ",".join(f"{k}={v}" for k, v in r["config"].items())
                if r["status"] == "ok":
                    occ = r["occupancy"] or {}
                    w.writerow([example, cfg, "ok", r["registers_per_thread"], r["local_mem_bytes_per_thread"],
                                r["shared_mem_bytes"], r["threads_per_block"], r["max_threads_per_block"],
                                occ.get("occupancy_pct"), occ.get("limiter"), r["compile_s"], ""])
                else:
                    first = (r["message"] or "").splitlines()[0][:120] if r["message"] else ""
                    w.writerow([example, cfg, f"{r['stage']}:{r['error_type']}", r.get("registers_per_thread"), "",
                                r.get("shared_mem_bytes"), "", "", "", "", round(r.get("compile_s") or 0, 4), first])


def main(run: Path) -> None:
    print("| example | Triton cache | configs | ok | OutOfResources (smem / threads) | rejected by run_kernel | "
          "other failures | wall s | Σ compile s | median compile s | spilling configs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for pass_ in ("cold", "warm"):
        for example in ("vector_add", "layer_norm", "softmax", "matmul"):
            line = row(run, example, pass_)
            if line:
                print(line)


if __name__ == "__main__":
    args = sys.argv[1:]
    csv_out = None
    if "--csv" in args:
        i = args.index("--csv")
        csv_out = Path(args[i + 1])
        del args[i:i + 2]
    folder = Path(args[0] if args else "/tmp/kp-cpu-runs")
    main(folder)
    if csv_out:
        write_csv(folder, csv_out)
