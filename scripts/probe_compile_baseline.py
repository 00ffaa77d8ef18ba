#!/usr/bin/env python3
"""Where a torch.compile baseline's time goes (GPU): the round-robin of ``optimize``'s baselines in this process,
then torch.compile of the reference timed several ways, one variable changed at a time.

    python3 scripts/probe_compile_baseline.py [KERNEL_FILE]   # default: benchmarks/library/triton_tutorial_matmul.py

Prints one line per variant, median µs: the round-robin rows (report/benchmark.py), then, on fixed inputs and on the
case's refreshed inputs, eager and compiled with ``triton.testing.do_bench`` and with kernelpilot's timer, with and
without :func:`kernelpilot.measure.settings.pristine`; Dynamo's counters (recompiles, graph breaks) after each; the
settings put back. Session 11 saw torch.compile of the matmul tutorial's reference (``torch.matmul``, fp16 4096³)
at 1784 µs in the round-robin beside eager at 183 µs on an H200, where session 7 saw 187.5 µs.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    """Run every variant and print its line."""
    import torch
    import triton.testing

    from kernelpilot.kernels.case import make_case
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.measure import settings
    from kernelpilot.measure.timing import time_callable
    from kernelpilot.report.benchmark import run_benchmark
    from kernelpilot.target import Target

    settings.install()  # as a worker does, before the kernel file's import
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/library/triton_tutorial_matmul.py")
    kf = load_kernel(path, None)
    target = Target.gpu()
    shape = dict(kf.shape) if hasattr(kf, "shape") else dict(kf.default_shape)
    print("kernel", path, "shape", shape, "torch", torch.__version__, flush=True)

    def counters() -> str:
        import torch._dynamo.utils as u

        return json.dumps({k: dict(v) for k, v in u.counters.items() if v}, default=str)[:600]

    t0 = time.time()
    bench = run_benchmark(kf, shape, dict(kf.default_config), target)
    for row in bench.rows:
        med = statistics.median(row.timing.samples_ns) / 1e3 if row.timing else None
        print(f"round-robin  {row.name:45s} {med} µs  {row.skipped or ''}", flush=True)
    print(f"  ({time.time() - t0:.1f} s) dynamo counters: {counters()}", flush=True)
    print("  settings put back so far:", settings.restored()[:12], flush=True)

    case = make_case(kf, shape, 0, target.torch_device)
    inputs, refresh = case.inputs, case.refresher()
    fixed = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    torch._dynamo.reset()
    compiled = torch.compile(kf.reference)
    compiled(**fixed)
    torch.cuda.synchronize()
    variants = [
        ("eager fixed, do_bench", lambda: kf.reference(**fixed), None, "do_bench"),
        ("compiled fixed, do_bench", lambda: compiled(**fixed), None, "do_bench"),
        ("compiled fixed, pristine, do_bench", settings.pristine(lambda: compiled(**fixed)), None, "do_bench"),
        ("eager fixed, kp timer", lambda: kf.reference(**fixed), None, "kp"),
        ("compiled fixed, kp timer", lambda: compiled(**fixed), None, "kp"),
        ("compiled fixed, pristine, kp timer", settings.pristine(lambda: compiled(**fixed)), None, "kp"),
        ("compiled case inputs, kp timer, refreshed", lambda: compiled(**inputs), refresh, "kp"),
        ("compiled case inputs, pristine, refreshed", settings.pristine(lambda: compiled(**inputs)), refresh, "kp"),
        ("eager case inputs, pristine, refreshed", settings.pristine(lambda: kf.reference(**inputs)), refresh, "kp"),
    ]
    for name, fn, before, timer in variants:
        try:
            if before is not None:
                before()
            fn()
            torch.cuda.synchronize()
            if timer == "do_bench":
                med = triton.testing.do_bench(fn, return_mode="median") * 1e3
            else:
                med = statistics.median(time_callable(fn, target, before_each=before).samples_ns) / 1e3
            t = time.perf_counter()
            for _ in range(20):
                fn()
            host_us = (time.perf_counter() - t) / 20 * 1e6
            torch.cuda.synchronize()
            print(f"{name:45s} {med:10.2f} µs   host per call {host_us:8.1f} µs", flush=True)
        except Exception as exc:  # noqa: BLE001 - a probe prints what failed and goes on
            print(f"{name:45s} failed: {type(exc).__name__}: {exc}", flush=True)
        print(f"  dynamo counters: {counters()}", flush=True)
    print("settings put back:", settings.restored()[:20], flush=True)


if __name__ == "__main__":
    main()
