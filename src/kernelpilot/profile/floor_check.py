"""Confirm or refute the floor's bytes with the DRAM bytes Nsight Compute measured: :func:`confirm_floor_bytes`.

The roofline's memory floor is ``bytes / bandwidth`` where ``bytes`` is a count made from the tensors
(:func:`kernelpilot.kernels.workload.minimum_bytes`) or declared by the kernel file (``bytes_moved()``). Both are
claims; the profiler's ``dram__bytes_read.sum + dram__bytes_write.sum`` of the launches of one ``run_kernel`` call
(the report of :func:`kernelpilot.profile.ncu_run.profile_kernel` holds exactly the launches inside its NVTX range)
is a measurement of what the kernel moved. This module compares the two (issue 23, "Work observed").

The rule (:func:`confirm_floor_bytes`):

- ``confirmed``: the measured DRAM bytes are at or above ``floor_bytes - tolerance_bytes``;
- ``over_counted``: they are below it: the floor's bytes are more than this kernel had to move, so the floor is
  too high (a declaration to fix, e.g. an input declared in place that is only written in part). It never refuses
  the kernel: the kernel ran correctly and moved fewer bytes than the count said;
- ``unknown``: no floor bytes, a launch without the DRAM metrics, or a shortfall past 5 % in a report without the
  device's L2 size (nothing bounds what write-back may still hold).

``tolerance_bytes = max(FLOOR_TOLERANCE_FRACTION × floor_bytes, L2_DIRTY_FRACTION × L2 size)``. Why: L2 is a
write-back cache, and writes still sitting dirty in L2 when the kernel ends reach DRAM after ncu stopped counting.
Measured on the saved H200 report ``h200_add_fp32_memory_bound`` (out = x + y, n = 2^24 fp32): reads 134.2 MB for
the 134.2 MB of x and y, writes 47.4 MB for the 67.1 MB of ``out`` — 19.7 MB (31 % of the H200's 60 MiB L2) never
counted; on an H100 (50 MiB L2) the Liger cross-entropy kernel's writes measured ~2 % under its source's count.
At most the whole L2 can hold dirty lines, so ``L2_DIRTY_FRACTION`` is 1.0: the allowance that never calls an
honest count over-counted. 5 % covers counter and allocation slack (partial sectors at tensor edges) on kernels
much larger than L2. The cost: an over-count smaller than the allowance cannot be refuted (a floor of 40 MB on an
H100 is confirmed even when the kernel needed 20 MB); the message says when the allowance is what confirmed it.

Caveat, reads from L2: a kernel whose inputs are smaller than L2 and re-used across launches reads them from L2 in
a timing loop, so it can move fewer DRAM bytes per launch than the floor says. Nsight Compute does not see that:
its cache control (``ncu --cache-control all``, the default, which kernelpilot keeps) flushes all GPU caches before
each replay pass so every pass starts cold (NVIDIA Nsight Compute, Kernel Profiling Guide, "Cache Control",
https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#cache-control; Nsight Compute CLI ``--cache-control``,
default ``all``; Nsight Python's NCU collector documents the same default, ``cache_control='all'``,
https://docs.nvidia.com/nsight-python/collection/ncu.html). The measured reads are therefore cold-cache reads: what
the kernel moves when its inputs are not in L2, which is what the floor's bytes claim. Also not seen here: launches
past ncu's ``--launch-count`` (16 in ``ncu_command``) and memory compression (off for ``cudaMalloc`` memory, which
PyTorch's allocator uses).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, Optional

from pydantic import BaseModel

from kernelpilot.profile.kernel_metrics import KernelMetrics

__all__ = ["FLOOR_TOLERANCE_FRACTION", "L2_DIRTY_FRACTION", "FloorBytesCheck", "FloorVerdict", "confirm_floor_bytes"]

#: Shortfall always tolerated, as a fraction of the floor's bytes (counter and allocation slack).
FLOOR_TOLERANCE_FRACTION = 0.05
#: Fraction of the L2 size that may still hold dirty (unwritten) lines when the kernel ends: all of it.
L2_DIRTY_FRACTION = 1.0

FloorVerdict = Literal["confirmed", "over_counted", "unknown"]


class FloorBytesCheck(BaseModel):
    """The floor's bytes held against the DRAM bytes ncu measured for one ``run_kernel`` call.

    Attributes:
        floor_bytes: the roofline's bytes (``Roofline.bytes_moved``), bytes; None when there is no roofline.
        dram_bytes: measured DRAM bytes read + written over every profiled launch, bytes; None when not reported.
        dram_bytes_read / dram_bytes_write: the two parts, bytes (None when not reported).
        launches: kernel launches summed (the report's launches).
        l2_cache_bytes: the device's L2 size used for the allowance, bytes; None when the report lacks it.
        tolerance_bytes: the shortfall tolerated, bytes (module docstring); None when it could not be formed.
        ratio: ``floor_bytes / dram_bytes`` (above 1: the floor counts more than was moved); None without both.
        verdict: ``confirmed``, ``over_counted`` or ``unknown`` (module docstring).
        reason: why the verdict, without the numbers of ``message``'s head (what reports print after their own).
        message: one sentence: the numbers (floor, DRAM read + written, launches), the verdict's words, ``reason``.
    """

    floor_bytes: Optional[float] = None
    dram_bytes: Optional[float] = None
    dram_bytes_read: Optional[float] = None
    dram_bytes_write: Optional[float] = None
    launches: int = 0
    l2_cache_bytes: Optional[float] = None
    tolerance_bytes: Optional[float] = None
    ratio: Optional[float] = None
    verdict: FloorVerdict
    reason: str = ""
    message: str


def _mb(n: float) -> str:
    """Bytes as decimal MB (``201.3 MB``) or GB from 1 GB (``2.10 GB``)."""
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def confirm_floor_bytes(floor_bytes: float | None, metrics: KernelMetrics | Sequence[KernelMetrics], *,
                        l2_cache_bytes: float | None = None) -> FloorBytesCheck:
    """Whether the DRAM bytes the profiler measured confirm the floor's bytes (rule: module docstring).

    Args:
        floor_bytes: the bytes the roofline's floor counts (``Roofline.bytes_moved``), bytes; None, zero, negative
            or not finite gives ``unknown``.
        metrics: the profiled launches of one ``run_kernel`` call (all of them: a kernel of several launches moves
            its bytes in each), or one launch; their ``dram_bytes_read`` / ``dram_bytes_write`` are summed.
        l2_cache_bytes: the device's L2 size, bytes; None: the largest ``l2_cache_bytes`` of ``metrics``.

    Returns:
        The check; raises nothing (an input it cannot judge gives ``unknown`` with the reason).
    """
    launches = [metrics] if isinstance(metrics, KernelMetrics) else list(metrics)
    floor = float(floor_bytes) if floor_bytes is not None and math.isfinite(floor_bytes) and floor_bytes > 0 else None
    reads = [m.dram_bytes_read for m in launches]
    writes = [m.dram_bytes_write for m in launches]
    complete = bool(launches) and None not in reads and None not in writes
    read = sum(reads) if complete else None  # type: ignore[arg-type]
    write = sum(writes) if complete else None  # type: ignore[arg-type]
    dram = read + write if read is not None and write is not None else None
    if l2_cache_bytes is None:
        sizes = [m.l2_cache_bytes for m in launches if m.l2_cache_bytes]
        l2_cache_bytes = float(max(sizes)) if sizes else None
    base = dict(floor_bytes=floor, dram_bytes=dram, dram_bytes_read=read, dram_bytes_write=write,
                launches=len(launches), l2_cache_bytes=l2_cache_bytes)
    if floor is None:
        return FloorBytesCheck(**base, verdict="unknown", reason="no floor bytes to check (no roofline)",
                               message="no floor bytes to check (no roofline)")
    if dram is None:
        missing = [m.kernel_name for m in launches if m.dram_bytes_read is None or m.dram_bytes_write is None]
        why = ("the report has no DRAM bytes (dram__bytes_read.sum / dram__bytes_write.sum) for "
               + (", ".join(missing) if missing else "any launch") + ": profile with `ncu --set full`")
        return FloorBytesCheck(**base, verdict="unknown", reason=why, message=why)
    ratio = floor / dram if dram > 0 else None
    base["ratio"] = ratio
    five = FLOOR_TOLERANCE_FRACTION * floor
    tolerance = max(five, L2_DIRTY_FRACTION * l2_cache_bytes) if l2_cache_bytes else five
    base["tolerance_bytes"] = tolerance
    head = f"floor bytes {_mb(floor)} vs DRAM {_mb(dram)} (read {_mb(read)} + written {_mb(write)}, " \
           f"{len(launches)} launch{'es' if len(launches) != 1 else ''})"

    def check(verdict: FloorVerdict, reason: str) -> FloorBytesCheck:
        label = "" if verdict != "over_counted" else (f"over-counted ×{ratio:.1f}: " if ratio is not None else
                                                      "over-counted (no DRAM bytes measured): ")
        return FloorBytesCheck(**base, verdict=verdict, reason=reason, message=f"{head}: {label}{reason}")

    if dram >= floor:
        return check("confirmed", "the kernel moved at least the floor's bytes")
    shortfall = floor - dram
    if shortfall <= five:
        return check("confirmed", f"{shortfall / floor * 100:.1f} % under, within the "
                                  f"{FLOOR_TOLERANCE_FRACTION * 100:.0f} % tolerance")
    if l2_cache_bytes is None:
        return check("unknown", f"{shortfall / floor * 100:.1f} % under, and the report has no L2 size "
                                "(device__attribute_l2_cache_size) to bound the writes L2's write-back may still hold")
    if shortfall <= tolerance:
        return check("confirmed", f"{_mb(shortfall)} under, within the L2 write-back allowance of {_mb(tolerance)} "
                                  f"(the {_mb(l2_cache_bytes)} L2 may still hold dirty lines when the kernel ends); an "
                                  "over-count smaller than that cannot be refuted")
    return check("over_counted", f"{_mb(shortfall)} more than the kernel moved, past the tolerance of "
                                 f"{_mb(tolerance)}; the floor is too high: fix the declared bytes or buffer roles "
                                 "(in place, partial, scratch) so they count what the kernel reads and writes")
