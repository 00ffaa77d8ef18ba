"""Where the seconds of one correctness check go: ``check_correctness`` of one kernel file at its shape and default
config, run in this process the way a search worker runs it (the reference in its own process,
:mod:`kernelpilot.measure.refproc`), under ``cProfile``.

The check runs ``--repeat`` times (default 3): the first pays the compile and the reference process's float64 work;
the later ones stand for the next configs of a search (same seeds, the reference's results cached by content). For
each run it prints the wall seconds, and for the last run the functions with the most cumulative and own time.
Issue 25 saw Liger GeGLU's check (8192 x 16384 bf16) cost 5-7 s per config on an H200; this script says where.

Usage: ``python3 benchmarks/check_cost.py KERNEL [--repeat N] [--prof FILE] [--top N]`` on a GPU (on a CPU it runs
the Triton interpreter at the file's CPU shape). Prints tables; not a timed test.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path


def main() -> None:
    """Parse the arguments, run the checks, print the timings and the profile of the last run."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prof", type=Path, default=None, help="also write the last run's pstats file here")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--large-bytes", type=int, default=None,
                    help="set kernelpilot.measure.memory.LARGE_BYTES (bytes from which copies go through host "
                         "memory and comparisons go in chunks) for an A/B of that path")
    args = ap.parse_args()

    import torch

    from kernelpilot.kernels.contract import load_kernel, use_interpreter
    from kernelpilot.measure import refproc
    from kernelpilot.measure.correctness import check_correctness

    from kernelpilot.measure import memory

    if args.large_bytes is not None:
        memory.LARGE_BYTES = args.large_bytes
    gpu = torch.cuda.is_available()
    use_interpreter(not gpu)
    device = "cuda" if gpu else "cpu"
    t0 = time.perf_counter()
    kf = load_kernel(args.kernel, None, interpreted=not gpu)
    refproc.start_for(kf.reference_path, device)
    print(f"LARGE_BYTES {memory.LARGE_BYTES}\n\n| step | wall s |\n|---|---|")
    print(f"| import + reference process started | {time.perf_counter() - t0:.2f} |")
    shape = kf.shape if gpu else (kf.cpu_shape or kf.shape)
    config = dict(kf.default_config)
    prof = None
    for i in range(args.repeat):
        last = i == args.repeat - 1
        prof = cProfile.Profile() if last else None
        t = time.perf_counter()
        if prof:
            prof.enable()
        result = check_correctness(kf, shape, config, device)
        if gpu:
            torch.cuda.synchronize()
        if prof:
            prof.disable()
        print(f"| check {i + 1} ({'passed' if result.passed else 'FAILED ' + str(result.failed_stage)}, "
              f"{len(result.shapes_checked)} shapes) | {time.perf_counter() - t:.2f} |")
    server = refproc.serving(kf)
    if server is not None:
        print(f"\nreference calls {server.calls}, cache hits {server.hits}")
    if prof is not None:
        if args.prof:
            prof.dump_stats(str(args.prof))
        for key in ("cumulative", "tottime"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
            print(f"\n## last check by {key}\n")
            print("\n".join(line[:220] for line in buf.getvalue().splitlines()[4:]))
    refproc.shutdown()


if __name__ == "__main__":
    main()
