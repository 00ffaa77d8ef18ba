"""Print what the GPU ran for one launch of a kernel file, stream by stream (measure/activity.py's records).

    python3 scripts/activity_probe.py KERNEL.py [N_LAUNCHES]

Loads the kernel in this process (no isolation: for looking at your own kernels), builds the default shape's case
and prints the activity report with every launch's kernels (name, stream, start and end in µs from the opening
marker) and the unjoined ones.
"""

from __future__ import annotations

import sys


def main(path: str, n: int = 2) -> None:
    from kernelpilot.kernels.contract import load_kernel, make_case, resolve_config, resolve_shape, run_kernel
    from kernelpilot.measure.activity import device_activity

    kf = load_kernel(path)
    case = make_case(kf, resolve_shape(kf), 0, "cuda")
    cfg = resolve_config(kf)
    report = device_activity(lambda: run_kernel(kf, case.inputs, cfg), n_launches=n,
                             declared=kf.backend.kernel_names(kf), before_each=case.refresher())
    print(f"{path}: problem={report.problem!r} declared={report.declared} launched={report.declared_launched}")
    for i, la in enumerate(report.launches):
        print(f"  launch {i}: timed {la.timed_ns / 1e3:.2f} µs, span {la.span_ns / 1e3:.2f} µs, timed stream "
              f"{la.timed_stream}, unjoined {la.unjoined}")
        for name, stream, a, b in la.kernels:
            print(f"    stream {stream:>3}  {a / 1e3:8.2f} → {b / 1e3:8.2f} µs  {name[:90]}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)
