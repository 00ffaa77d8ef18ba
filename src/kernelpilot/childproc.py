"""The environment for kernelpilot's own child processes (ncu targets, report readers)."""

from __future__ import annotations

import os
from pathlib import Path


def child_env(*, compiled_triton: bool = False) -> dict[str, str]:
    """A copy of this process's environment with the folder holding the ``kernelpilot`` package first on
    ``PYTHONPATH``, so ``python -m kernelpilot....`` finds the same code whether installed or run from ``src/``.

    Args:
        compiled_triton: drop ``TRITON_INTERPRET`` so the child compiles kernels for the GPU.
    """
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if compiled_triton:
        env.pop("TRITON_INTERPRET", None)
    return env


def usable_cpus(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """CPUs this process may run on: the CPU affinity mask (``taskset``, a container's ``--cpuset-cpus``), capped
    by the cgroup v2 CPU quota (``cpu.max``: ``quota period``, a container's ``--cpus``), at least 1. The
    compile-ahead, static inspection and the workload checks size their process pools with it: ``os.cpu_count()``
    counts the host's cores, so a container given 4 of a 64-core host's CPUs started 64 compiles, each a Python
    with torch and Triton imported, on 4 CPUs (and a machine split into one lane per GPU, as the device scripts
    do with ``taskset``, got every lane sized for the whole host). Raises nothing.

    Args:
        cgroup_root: where this process's cgroup v2 files are (the container's view: ``/sys/fs/cgroup``).
    """
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        n = os.cpu_count() or 1
    try:
        quota, period = (cgroup_root / "cpu.max").read_text().split()[:2]
        if quota != "max" and int(period) > 0:
            n = min(n, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):  # no cgroup v2 file, or one this does not read: the affinity stands
        pass
    return max(1, n)
