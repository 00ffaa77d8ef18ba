"""Where `kernelpilot bench --baselines` spends its seconds, step by step, in one process (no worker), printed as a
table: interpreter start to imports, CUDA init, inputs, kernel timing, eager timing, torch.compile's first call and
its timing. Run it twice on a GPU machine to see what Inductor's on-disk cache saves on the second run.

    python3 scripts/bench_baselines_breakdown.py [examples/softmax.py]
"""

from __future__ import annotations

import sys
import time

T0 = time.perf_counter()
rows: list[tuple[str, float]] = []


def step(name: str, t: float) -> float:
    now = time.perf_counter()
    rows.append((name, now - t))
    return now


def main(path: str) -> None:
    t = T0
    import torch  # noqa: F401

    t = step("import torch", t)
    from kernelpilot.kernels.contract import load_kernel, make_case, resolve_config, resolve_shape, run_kernel
    from kernelpilot.measure.timing import time_callable

    t = step("import kernelpilot", t)
    torch.cuda.init()
    t = step("CUDA init", t)
    kf = load_kernel(path)
    shape, config = resolve_shape(kf), resolve_config(kf)
    case = make_case(kf, shape, 0, "cuda")
    torch.cuda.synchronize()
    t = step("load kernel file + inputs", t)
    kernel = time_callable(lambda: run_kernel(kf, case.inputs, config), "cuda")
    t = step(f"kernel timing ({kernel.n_samples} samples, first launch compiles)", t)
    eager = time_callable(lambda: kf.reference(**case.inputs), "cuda")
    t = step(f"eager timing ({eager.n_samples} samples)", t)
    compiled = torch.compile(kf.reference)
    compiled(**case.inputs)
    torch.cuda.synchronize()
    t = step("torch.compile first call (trace + compile or cache load)", t)
    comp = time_callable(lambda: compiled(**case.inputs), "cuda")
    t = step(f"torch.compile timing ({comp.n_samples} samples)", t)
    print("| step | seconds |\n|---|---|")
    for name, s in rows:
        print(f"| {name} | {s:.2f} |")
    print(f"| total (from interpreter start) | {time.perf_counter() - T0:.2f} |")
    print(f"medians µs: kernel {kernel.median_ns / 1e3:.2f}, eager {eager.median_ns / 1e3:.2f}, "
          f"torch.compile {comp.median_ns / 1e3:.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "examples/softmax.py")
