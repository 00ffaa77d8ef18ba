"""Where one search evaluation's wall goes, step by step, on a GPU (issue 11: the cost of hardening).

    python3 scripts/probe_eval_cost.py steps   EXAMPLE [CONFIG_JSON]   # each step timed alone, median of 5
    python3 scripts/probe_eval_cost.py evals   EXAMPLE [CONFIG_JSON]   # whole evaluations in-process, median of 7
    CUDA_LAUNCH_BLOCKING=1 python3 scripts/probe_eval_cost.py cprofile EXAMPLE   # functions by own time

Run with ``PYTHONPATH`` pointing at the source tree to measure (``src``, ``.old/head/src``, ...). Each timed step
ends with ``torch.cuda.synchronize()``, so its wall holds its GPU work. Prints tables; writes nothing.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import statistics
import sys
import time
from typing import Any, Callable


def _median_s(fn: Callable[[], Any], n: int = 5) -> tuple[float, float, float]:
    import torch

    walls = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls), min(walls), max(walls)


def _load(example: str, config_json: str | None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    from kernelpilot.kernels.contract import load_kernel

    kf = load_kernel(f"examples/{example}.py")
    config = json.loads(config_json) if config_json else dict(kf.default_config)
    return kf, dict(kf.shape), config


def steps(example: str, config_json: str | None) -> None:
    """Each step of an evaluation timed on its own (ms): what the hardening added and what it costs."""
    import kernelpilot.measure.correctness as corr
    from kernelpilot.kernels.contract import make_case, run_kernel
    from kernelpilot.measure.timing import time_callable

    kf, shape, config = _load(example, config_json)
    case = make_case(kf, shape, 0, "cuda")
    run_kernel(kf, case.inputs, config)
    refs, _ = corr.reference_outputs(kf, case.inputs, case.outputs)
    out = case.outputs[0]
    rows: list[tuple[str, Callable[[], Any]]] = [
        ("make_case (setup)", lambda: make_case(kf, shape, 1, "cuda")),
        ("one launch", lambda: run_kernel(kf, case.inputs, config)),
        ("reference_outputs (float64)", lambda: corr.reference_outputs(kf, case.inputs, case.outputs)),
        (f"compare {out!r}", lambda: corr.compare(out, case.inputs[out], refs[out], 1e-5, 1e-3)),
        ("run_and_compare seed 0 (2nd run, watch)",
         lambda: corr.run_and_compare(kf, case, config, "cuda", second_run=True, watch_inputs=True)),
        ("run_and_compare (plain)", lambda: corr.run_and_compare(kf, case, config, "cuda", watch_inputs=False)),
        ("check_correctness (3 seeds, no shapes)",
         lambda: corr.check_correctness(kf, shape, config, "cuda", other_shapes=False)),
    ]
    if hasattr(corr, "recheck"):
        rows.append(("recheck", lambda: corr.recheck(kf, case, config, "cuda")))
    if hasattr(case, "refresh"):
        rows.append(("refresh (one)", lambda: case.refresh(3)))
        rows.append(("time_callable + refresher",
                     lambda: time_callable(lambda: run_kernel(kf, case.inputs, config), "cuda",
                                           before_each=case.refresher())))
    rows.append(("time_callable (no refresh)",
                 lambda: time_callable(lambda: run_kernel(kf, case.inputs, config), "cuda")))
    try:
        from kernelpilot.measure.activity import device_activity

        rows.append(("device_activity (2 launches)",
                     lambda: device_activity(lambda: run_kernel(kf, case.inputs, config), declared=[],
                                             before_each=case.refresher(), n_launches=2)))
    except ImportError:
        pass
    print(f"== steps {example} {shape} {config}")
    for name, fn in rows:
        fn()  # warm: allocator, first-call imports
        med, lo, hi = _median_s(fn)
        print(f"  {name:45s} {med * 1e3:9.2f} ms  ({lo * 1e3:.2f}-{hi * 1e3:.2f})")


def _evaluate(example: str, config_json: str | None) -> Callable[[], Any]:
    from kernelpilot.search.worker_child import WorkerOptions, _child_evaluate

    kf, shape, config = _load(example, config_json)
    opts = WorkerOptions(kernel=f"examples/{example}.py", shape=shape, activity=False)
    try:  # trees since issue 28 pass the worker a Target, older ones its device string
        from kernelpilot.target import Target

        where: Any = Target.from_device("cuda:0")
    except ImportError:
        where = "cuda:0"
    return lambda: _child_evaluate(kf, opts, where, config, None)


def evals(example: str, config_json: str | None) -> None:
    """Whole evaluations as a search runs them (no per-evaluation profiler), in this process (s)."""
    run = _evaluate(example, config_json)
    ev = run()
    phases = []
    walls = []
    for _ in range(7):
        t = time.perf_counter()
        ev = run()
        walls.append(time.perf_counter() - t)
        phases.append(ev.phases_s)
    keys = sorted({k for p in phases for k in p})
    print(f"== evals {example}: status {ev.status}, {ev.duration_ns} ns; wall median {statistics.median(walls):.4f} s "
          f"({min(walls):.4f}-{max(walls):.4f}); "
          + "; ".join(f"{k} {statistics.median(p.get(k, 0.0) for p in phases):.4f}" for k in keys))


def profile(example: str, config_json: str | None) -> None:
    """cProfile of 5 evaluations, functions by own time (set CUDA_LAUNCH_BLOCKING=1 to charge GPU work to calls)."""
    run = _evaluate(example, config_json)
    run()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5):
        run()
    prof.disable()
    print(f"== cprofile {example} (5 evaluations)")
    pstats.Stats(prof).sort_stats("tottime").print_stats(28)


if __name__ == "__main__":
    mode, ex = sys.argv[1], sys.argv[2]
    cfg = sys.argv[3] if len(sys.argv) > 3 else None
    {"steps": steps, "evals": evals, "cprofile": profile}[mode](ex, cfg)
