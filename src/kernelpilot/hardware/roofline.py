"""Speed of light for one kernel at one shape on one GPU: the roofline floor, its target and its citations.

Rule (docs/measuring.md, "Roofline")::

    floor = max(bytes / peak bandwidth, FLOPs / peak FLOP rate of the unit that does them)

with measured ceilings preferred over datasheet values (:meth:`GpuSpec.ceiling`). A measured time under
the floor is impossible and must be rejected (:meth:`Roofline.is_impossible`, :func:`impossible_reason`: the one
rule ``optimize``, ``tune``, ``bench`` and the light card all apply). Every ceiling used is
cited as ``<metric>: <value> <unit> <- <path>:<line>``.

Units: FLOPs (or integer ops for ``int8_tensor``) and bytes are plain counts; bandwidth in GB/s
(10^9 B/s, so 1 GB/s moves 1 byte per ns); compute peaks in TFLOP/s or TOP/s (10^12 per s, i.e. 1000
per ns); times in ns.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from kernelpilot.errors import ContractError, SpecError
from kernelpilot.hardware.specs import GpuSpec, SpecValue, format_number

__all__ = [
    "COMPUTE_UNITS",
    "BANDWIDTH_METRICS",
    "DEFAULT_TARGET_FRACTION",
    "Roofline",
    "SOL_TOLERANCE_MEASURED",
    "compute_roofline",
    "impossible_reason",
    "render_roofline_md",
]

#: A kernel's declared ``COMPUTE_UNIT`` -> (datasheet peak metric, measured peak metric or None).
#: The measured bf16 GEMM rate (a large cuBLAS GEMM, docs/measuring.md, "Roofline") stands for fp16 too:
#: both run on the same tensor-core path at the same datasheet rate.
COMPUTE_UNITS: dict[str, tuple[str, str | None]] = {
    "fp32": ("peak_fp32_tflops", None),
    "fp64": ("peak_fp64_tflops", None),
    "fp64_tensor": ("peak_fp64_tensor_tflops", None),
    "tf32_tensor": ("peak_tf32_tensor_dense_tflops", None),
    "bf16_tensor": ("peak_bf16_tensor_dense_tflops", "measured_bf16_gemm_tflops"),
    "fp16_tensor": ("peak_fp16_tensor_dense_tflops", "measured_bf16_gemm_tflops"),
    "fp8_tensor": ("peak_fp8_tensor_dense_tflops", None),
    "int8_tensor": ("peak_int8_tensor_dense_tops", None),
}

#: (datasheet DRAM bandwidth metric, measured copy bandwidth metric).
BANDWIDTH_METRICS: tuple[str, str] = ("dram_bandwidth_gbps", "measured_copy_bandwidth_gbps")

#: Fraction of the roofline a kernel is asked to reach (target_ns = floor_ns / 0.9); kernelpilot's default.
DEFAULT_TARGET_FRACTION = 0.9

#: The least a time may fall under a floor set by a *measured* ceiling before it is impossible (a fraction). A measured
#: ceiling is what torch's copy or cuBLAS reached at one shape, not a physical limit: on the H200, cuBLAS ran a 4096³
#: bf16 GEMM 3.7 % under the floor of the 8192³ measured GEMM rate (docs/device-runs/2026-11-22-h200/matmul), and a
#: correct persistent TMA GEMM of the matmul example 5.1 % under it (177.39 vs 186.92 µs, issue 25's H200 run,
#: docs/device-runs/2026-11-27-issue25): the limit is the datasheet's floor (:attr:`Roofline.physical_floor_ns`), and
#: this fraction is the tolerance only where the datasheet's floor is not lower. A floor set by a datasheet peak is
#: physical: tolerance 0.
SOL_TOLERANCE_MEASURED = 0.05


def impossible_reason(median_ns: float, floor_ns: float | None, tolerance: float) -> str | None:
    """Why a time is impossible, or None: a median under ``floor_ns * (1 - tolerance)``.

    Args:
        median_ns: the measured median, ns.
        floor_ns: the speed-of-light floor, ns (None or 0: no floor, nothing is impossible).
        tolerance: the fraction a time may sit under the floor (:attr:`Roofline.sol_tolerance`).

    Returns:
        The reason for rejecting the time as impossible, or None when it is possible. Raises nothing.
    """
    if not floor_ns or median_ns >= floor_ns * (1 - tolerance):
        return None
    under = (f"by more than {tolerance:.0%} (under {floor_ns * (1 - tolerance):.0f} ns)" if tolerance
             else "(a datasheet peak: a physical limit)")
    return (f"median {median_ns:.0f} ns is under the speed-of-light floor {floor_ns:.0f} ns {under}: a timing bug, "
            f"wrong FLOP/byte counts, or a kernel skipping work")


_PEAK_UNITS = ("TFLOP/s", "TOP/s")  # both 10^12 per second
_NS_PER_S = 1e9


class Roofline(BaseModel):
    """The roofline of one kernel at one shape on one GPU.

    Attributes:
        gpu: the spec's name (``H200``).
        flops: floating-point operations (integer ops for ``int8_tensor``) at the shape, count.
        bytes_moved: bytes read plus written from/to DRAM at the shape, bytes.
        arithmetic_intensity_flop_per_byte: ``flops / bytes_moved``.
        compute_unit: the kernel's declared ``COMPUTE_UNIT`` (a key of :data:`COMPUTE_UNITS`).
        peak: the compute ceiling used (measured when available), TFLOP/s or TOP/s, with its citation.
        bandwidth: the DRAM ceiling used (measured copy when available), GB/s, with its citation.
        ridge_point_flop_per_byte: peak / bandwidth, FLOP per byte; below it a kernel is memory-bound.
        bound: ``"memory"`` or ``"compute"``: which time sets the floor (ties and zero FLOPs: memory).
        memory_time_ns: ``bytes_moved / bandwidth``, ns.
        compute_time_ns: ``flops / peak``, ns.
        floor_ns: ``max(memory_time_ns, compute_time_ns)``, ns: no correct run can be faster.
        target_fraction: fraction of the roofline asked for (default 0.9).
        target_ns: ``floor_ns / target_fraction``, ns.
        citations: ``peak.cite()`` and ``bandwidth.cite()``.
        physical_floor_ns: the same floor from the datasheet's peak and bandwidth, ns (None: the spec has no
            datasheet value, or a record written before it existed): no correct run is faster than this one; where
            measured ceilings set ``floor_ns`` it is lower, and a time between the two is possible.
    """

    gpu: str
    flops: float
    bytes_moved: float
    arithmetic_intensity_flop_per_byte: float
    compute_unit: str
    peak: SpecValue
    bandwidth: SpecValue
    ridge_point_flop_per_byte: float
    bound: Literal["memory", "compute"]
    memory_time_ns: float
    compute_time_ns: float
    floor_ns: float
    target_fraction: float = DEFAULT_TARGET_FRACTION
    target_ns: float
    citations: list[str]
    physical_floor_ns: float | None = None

    def pct_of_roofline(self, measured_ns: float) -> float:
        """How close a measured time is to the floor: ``floor_ns / measured_ns * 100`` (percent).

        Above 100 means the time is under the floor (see :meth:`is_impossible`).

        Raises:
            ValueError: ``measured_ns`` is not a positive finite number of nanoseconds.
        """
        _check_time(measured_ns)
        return self.floor_ns / measured_ns * 100.0

    @property
    def floor_is_measured(self) -> bool:
        """True when the ceiling that sets the floor (the peak when compute-bound, else the bandwidth) is measured."""
        ceiling = self.peak if self.bound == "compute" else self.bandwidth
        return ceiling.metric.startswith("measured_")

    @property
    def sol_tolerance(self) -> float:
        """How far under ``floor_ns`` a time may fall before it is impossible (a fraction): 0 for a datasheet floor;
        for a floor set by a measured ceiling, down to :attr:`physical_floor_ns` (``1 - physical / floor``), and at
        least :data:`SOL_TOLERANCE_MEASURED`."""
        if not self.floor_is_measured:
            return 0.0
        if self.physical_floor_ns and 0 < self.physical_floor_ns < self.floor_ns:
            return max(SOL_TOLERANCE_MEASURED, 1.0 - self.physical_floor_ns / self.floor_ns)
        return SOL_TOLERANCE_MEASURED

    def impossible_reason(self, measured_ns: float) -> str | None:
        """Why ``measured_ns`` is impossible on this roofline (:func:`impossible_reason` with
        :attr:`sol_tolerance`), or None.

        Raises:
            ValueError: ``measured_ns`` is not a positive finite number of nanoseconds.
        """
        _check_time(measured_ns)
        return impossible_reason(measured_ns, self.floor_ns, self.sol_tolerance)

    def floor_inputs(self) -> str:
        """The floor's inputs in one line, for an error that refuses a time under it: bytes, FLOPs, the compute unit
        and its peak, the bandwidth, both times and the floor, e.g. ``floor 1.00 ms = max(bytes 3.35e+09 / 3350 GB/s
        dram_bandwidth_gbps = 1.00 ms, FLOPs 0 on fp32 at 67 TFLOP/s peak_fp32_tflops = 0 ns; memory-bound)``.
        Raises nothing."""
        from kernelpilot.fmt import format_duration_ns

        return (f"floor {format_duration_ns(self.floor_ns)} = max(bytes {self.bytes_moved:.6g} / "
                f"{self.bandwidth.value:g} {self.bandwidth.unit} {self.bandwidth.metric} = "
                f"{format_duration_ns(self.memory_time_ns)}, FLOPs {self.flops:.6g} on {self.compute_unit} at "
                f"{self.peak.value:g} {self.peak.unit} {self.peak.metric} = {format_duration_ns(self.compute_time_ns)}"
                f"; {self.bound}-bound, tolerance {self.sol_tolerance:.0%})")

    def is_impossible(self, measured_ns: float) -> bool:
        """True when ``measured_ns`` is under the floor beyond :attr:`sol_tolerance`: the timing (or the FLOP/byte
        count, or the ceiling) is wrong.

        docs/measuring.md ("Roofline"): a measured time under the floor is impossible; reject it and say so.

        Raises:
            ValueError: ``measured_ns`` is not a positive finite number of nanoseconds.
        """
        return self.impossible_reason(measured_ns) is not None


def _check_time(measured_ns: float) -> None:
    if not (isinstance(measured_ns, (int, float)) and math.isfinite(measured_ns) and measured_ns > 0):
        raise ValueError(f"measured_ns must be a positive finite number of nanoseconds, got {measured_ns!r}")


def _check_count(name: str, value: float, *, allow_zero: bool) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ContractError(f"{name} must be a number, got {value!r}",
                            hint=f"make the kernel's {name}() return a count (int or float)")
    if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        need = "zero or more" if allow_zero else "more than zero"
        raise ContractError(f"{name} must be a finite count, {need}; got {value!r}",
                            hint=f"check the kernel's {name}() at this shape")
    return number


def compute_roofline(
    flops: float,
    bytes_moved: float,
    compute_unit: str,
    spec: GpuSpec,
    target_fraction: float = DEFAULT_TARGET_FRACTION,
) -> Roofline:
    """The roofline floor and target of a kernel on ``spec``'s GPU.

    Args:
        flops: operations at the shape (count, ≥ 0; 0 for pure data movement, which is memory-bound with
            arithmetic intensity 0).
        bytes_moved: DRAM bytes read plus written at the shape (count, > 0).
        compute_unit: the kernel's ``COMPUTE_UNIT``, a key of :data:`COMPUTE_UNITS`.
        spec: the GPU (:func:`~kernelpilot.hardware.specs.find_spec` / ``match_device``); its measured
            ceilings are used when present.
        target_fraction: fraction of the roofline to aim for, in (0, 1]; target_ns = floor_ns / fraction.

    Raises:
        ContractError: unknown ``compute_unit`` (hint lists the known ones), or ``flops`` / ``bytes_moved``
            not a finite count in range.
        SpecError: the spec lacks the peak or bandwidth metric (names metric and file), or a ceiling has
            the wrong unit.
        ValueError: ``target_fraction`` outside (0, 1].
    """
    if compute_unit not in COMPUTE_UNITS:
        raise ContractError(
            f"unknown COMPUTE_UNIT '{compute_unit}'",
            hint=f"declare one of: {', '.join(COMPUTE_UNITS)}",
        )
    flops_f = _check_count("flops", flops, allow_zero=True)
    bytes_f = _check_count("bytes_moved", bytes_moved, allow_zero=False)
    if not (isinstance(target_fraction, (int, float)) and 0 < target_fraction <= 1):
        raise ValueError(f"target_fraction must be in (0, 1], got {target_fraction!r}")

    peak_metric, peak_measured = COMPUTE_UNITS[compute_unit]
    peak = spec.ceiling(peak_metric, peak_measured)
    bandwidth = spec.ceiling(*BANDWIDTH_METRICS)
    if peak.unit not in _PEAK_UNITS:
        raise SpecError(f"{peak.path}:{peak.line}: peak '{peak.metric}' is in {peak.unit}, expected TFLOP/s or TOP/s",
                        hint="fix the unit in the spec file")
    if bandwidth.unit != "GB/s":
        raise SpecError(f"{bandwidth.path}:{bandwidth.line}: bandwidth '{bandwidth.metric}' is in {bandwidth.unit}, "
                        "expected GB/s", hint="fix the unit in the spec file")

    peak_per_ns = peak.value * 1e12 / _NS_PER_S  # operations per ns
    bytes_per_ns = bandwidth.value * 1e9 / _NS_PER_S  # bytes per ns
    memory_time_ns = bytes_f / bytes_per_ns
    compute_time_ns = flops_f / peak_per_ns
    floor_ns = max(memory_time_ns, compute_time_ns)
    try:
        peak_ds, bandwidth_ds = spec.get(peak_metric), spec.get(BANDWIDTH_METRICS[0])
        physical: float | None = max(bytes_f / (bandwidth_ds.value * 1e9 / _NS_PER_S),
                                     flops_f / (peak_ds.value * 1e12 / _NS_PER_S))
    except (SpecError, ZeroDivisionError):
        physical = None
    return Roofline(
        gpu=spec.name,
        flops=flops_f,
        bytes_moved=bytes_f,
        arithmetic_intensity_flop_per_byte=flops_f / bytes_f,
        compute_unit=compute_unit,
        peak=peak,
        bandwidth=bandwidth,
        ridge_point_flop_per_byte=peak_per_ns / bytes_per_ns,
        bound="compute" if compute_time_ns > memory_time_ns else "memory",
        memory_time_ns=memory_time_ns,
        compute_time_ns=compute_time_ns,
        floor_ns=floor_ns,
        target_fraction=float(target_fraction),
        target_ns=floor_ns / target_fraction,
        citations=[peak.cite(), bandwidth.cite()],
        physical_floor_ns=physical,
    )


def _count(value: float) -> str:
    if value == int(value) and abs(value) < 1e18:
        return f"{int(value):,}"
    return f"{value:,.6g}"


def _ns(value: float) -> str:
    if value >= 1e6:
        return f"{value:,.1f} ns ({value / 1e6:.4g} ms)"
    if value >= 1e3:
        return f"{value:,.1f} ns ({value / 1e3:.4g} µs)"
    return f"{value:.4g} ns"


def _kind(value: SpecValue) -> str:
    if value.is_measured:
        return "measured"
    return "datasheet, derived" if value.derived else "datasheet"


def render_roofline_md(r: Roofline) -> str:
    """The roofline as Markdown (the ``roofline.md`` of a run folder).

    Lists FLOPs and bytes at the shape, arithmetic intensity, ridge point, bound, floor and target, and
    cites every spec value used as ``metric: value unit <- path:line`` with its source. Raises nothing.
    """
    peak_rate = "TOP/s" if r.peak.unit == "TOP/s" else "TFLOP/s"
    pct = round(r.target_fraction * 100, 4)
    lines = [
        f"# Roofline: {r.compute_unit} on {r.gpu}",
        "",
        "floor = max(bytes / bandwidth, FLOPs / peak); target = floor / target fraction.",
        "",
        "| quantity | value |",
        "| --- | --- |",
        f"| FLOPs at this shape | {_count(r.flops)} |",
        f"| bytes moved at this shape | {_count(r.bytes_moved)} B |",
        f"| arithmetic intensity | {r.arithmetic_intensity_flop_per_byte:.4g} FLOP/B |",
        f"| peak ({r.compute_unit}, {_kind(r.peak)}) | {format_number(r.peak.value)} {peak_rate} |",
        f"| bandwidth ({_kind(r.bandwidth)}) | {format_number(r.bandwidth.value)} GB/s |",
        f"| ridge point | {r.ridge_point_flop_per_byte:.4g} FLOP/B |",
        f"| bound | {r.bound} |",
        f"| memory time (bytes / bandwidth) | {_ns(r.memory_time_ns)} |",
        f"| compute time (FLOPs / peak) | {_ns(r.compute_time_ns)} |",
        f"| floor | {_ns(r.floor_ns)} |",
        f"| target ({pct:g} % of roofline) | {_ns(r.target_ns)} |",
        "",
        "A measured time below the floor is impossible: the timing, the FLOP or byte count, or the ceiling is wrong.",
        "",
        "## Specs cited",
        "",
    ]
    for value in (r.peak, r.bandwidth):
        note = f" ({value.note})" if value.note else ""
        lines.append(f"- `{value.cite()}`{note}")
        lines.append(f"  - source [{value.source_key}]: {value.source}")
    return "\n".join(lines) + "\n"
