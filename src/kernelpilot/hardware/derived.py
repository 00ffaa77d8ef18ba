"""Values derived from a GPU's cited specs: ridge points, memory-bound thresholds, 90 % targets, measured/datasheet ratios.

Nothing here is a new hardware number: every derived value is arithmetic on cited values (their citations are
carried along), so ``kernelpilot specs show`` can print the roofline's corner points per precision and how
far measured ceilings sit below the datasheet's, and ``kernelpilot specs cite`` can answer where one number
came from.

Rules (docs/measuring.md, "Roofline"): the ridge point is peak rate / peak bandwidth (FLOP per byte); a kernel
whose arithmetic intensity is below it is memory-bound; the target is 90 % of the roofline; measured ceilings
take the datasheet's place when present.
"""

from __future__ import annotations

from pydantic import BaseModel

from kernelpilot.errors import SpecError
from kernelpilot.hardware.roofline import (
    BANDWIDTH_METRICS,
    COMPUTE_UNITS,
    DEFAULT_TARGET_FRACTION,
)
from kernelpilot.hardware.specs import GpuSpec, SpecValue, find_spec

__all__ = ["CeilingComparison", "Citation", "DerivedPoint", "cite_metric", "compare_ceilings", "derived_points"]

_TERA_PER_GIGA = 1e3  # TFLOP/s over GB/s -> FLOP per byte


class CeilingComparison(BaseModel):
    """A measured ceiling beside the datasheet value it replaces.

    Attributes:
        datasheet: the datasheet value (e.g. ``dram_bandwidth_gbps``) with its citation.
        measured: the measured value (e.g. ``measured_copy_bandwidth_gbps``) with its provenance.
        ratio: ``measured.value / datasheet.value`` (0.63 = the measured ceiling is 63 % of the datasheet's).
    """

    datasheet: SpecValue
    measured: SpecValue
    ratio: float


class DerivedPoint(BaseModel):
    """The roofline's corner for one compute unit on one GPU.

    Attributes:
        compute_unit: a key of :data:`kernelpilot.hardware.roofline.COMPUTE_UNITS` (``bf16_tensor``).
        peak: the compute ceiling used (measured when present), TFLOP/s or TOP/s.
        bandwidth: the DRAM ceiling used (measured copy when present), GB/s.
        ridge_point_flop_per_byte: ``peak / bandwidth`` in FLOP (or OP) per byte: a kernel with a lower
            arithmetic intensity is memory-bound.
        target_fraction: the fraction of the roofline asked for (0.9).
        target_peak: ``target_fraction × peak`` (TFLOP/s or TOP/s): a compute-bound kernel meets its target above it.
        target_bandwidth_gbps: ``target_fraction × bandwidth`` (GB/s): the same for a memory-bound kernel.
        source: ``measured`` when either ceiling is measured, else ``datasheet``.
        citations: the two inputs' citations.
    """

    compute_unit: str
    peak: SpecValue
    bandwidth: SpecValue
    ridge_point_flop_per_byte: float
    target_fraction: float
    target_peak: float
    target_bandwidth_gbps: float
    source: str
    citations: list[str]


class Citation(BaseModel):
    """Where one metric of one GPU comes from: every source in the file, and the measured value if any.

    Attributes:
        gpu: the spec's name.
        metric: the metric asked for.
        value: the value kernelpilot uses (the first line; the measured value when ``metric`` is ``measured_*``).
        citations: ``metric: value unit <- path:line`` for the value used, then for each other source.
        sources: the source text of each (same order).
        conflict: True when the sources disagree by more than 1 % (never averaged; the first is used).
        measured: for a datasheet ceiling that a measured one replaces in the roofline, that measured value.
    """

    gpu: str
    metric: str
    value: SpecValue
    citations: list[str]
    sources: list[str]
    conflict: bool
    measured: SpecValue | None = None


def _measured_for(metric: str) -> str | None:
    """The measured metric that replaces a datasheet metric in the roofline, if any."""
    if metric == BANDWIDTH_METRICS[0]:
        return BANDWIDTH_METRICS[1]
    for peak_metric, measured_metric in COMPUTE_UNITS.values():
        if peak_metric == metric:
            return measured_metric
    return None


def compare_ceilings(spec: GpuSpec) -> list[CeilingComparison]:
    """Each measured ceiling of ``spec`` beside the datasheet value it replaces, with the ratio.

    Args:
        spec: a GPU from :func:`kernelpilot.hardware.specs.find_spec` (measured values merged in).

    Returns:
        One :class:`CeilingComparison` per (datasheet metric, measured metric) pair present in both, in the
        order bandwidth, then compute units; empty when nothing was measured. Raises nothing.
    """
    pairs = [BANDWIDTH_METRICS, *COMPUTE_UNITS.values()]
    seen: set[tuple[str, str]] = set()
    result = []
    for datasheet_metric, measured_metric in pairs:
        if not measured_metric or (datasheet_metric, measured_metric) in seen:
            continue
        seen.add((datasheet_metric, measured_metric))
        if datasheet_metric in spec.values and measured_metric in spec.measured:
            d, m = spec.values[datasheet_metric], spec.measured[measured_metric]
            result.append(CeilingComparison(datasheet=d, measured=m, ratio=m.value / d.value))
    return result


def derived_points(spec: GpuSpec, target_fraction: float = DEFAULT_TARGET_FRACTION) -> list[DerivedPoint]:
    """The ridge point and 90 % targets of every compute unit the spec has a peak for.

    Args:
        spec: a GPU spec.
        target_fraction: fraction of the roofline asked for, in (0, 1].

    Returns:
        One :class:`DerivedPoint` per compute unit whose peak the spec gives (measured ceilings used where
        present, :meth:`GpuSpec.ceiling`); empty when the spec has no DRAM bandwidth.

    Raises:
        ValueError: ``target_fraction`` outside (0, 1].
    """
    if not 0 < target_fraction <= 1:
        raise ValueError(f"target_fraction must be in (0, 1], got {target_fraction}")
    try:
        bandwidth = spec.ceiling(*BANDWIDTH_METRICS)
    except SpecError:
        return []
    points = []
    for unit, (peak_metric, measured_metric) in COMPUTE_UNITS.items():
        if peak_metric not in spec.values and not (measured_metric and measured_metric in spec.measured):
            continue
        peak = spec.ceiling(peak_metric, measured_metric)
        points.append(DerivedPoint(
            compute_unit=unit, peak=peak, bandwidth=bandwidth,
            ridge_point_flop_per_byte=peak.value * _TERA_PER_GIGA / bandwidth.value,
            target_fraction=target_fraction, target_peak=target_fraction * peak.value,
            target_bandwidth_gbps=target_fraction * bandwidth.value,
            source="measured" if (peak.is_measured or bandwidth.is_measured) else "datasheet",
            citations=[peak.cite(), bandwidth.cite()],
        ))
    return points


def cite_metric(metric: str, gpu: str) -> Citation:
    """Where ``metric`` of ``gpu`` comes from (``kernelpilot specs cite METRIC --gpu NAME``).

    Args:
        metric: a metric name (``dram_bandwidth_gbps``, ``peak_bf16_tensor_dense_tflops``, ``measured_*``).
        gpu: a GPU name or alias (:func:`kernelpilot.hardware.specs.find_spec`).

    Returns:
        A :class:`Citation` with every source's citation, the conflict flag and the measured replacement.

    Raises:
        SpecError: unknown GPU (the closest names and how to add one), or a metric the GPU's files do not
            give (its metrics listed, and the line to add).
    """
    spec = find_spec(gpu)
    value = spec.get(metric)
    entries = [value, *value.alternatives]
    replacement = _measured_for(metric)
    return Citation(
        gpu=spec.name, metric=metric, value=value, citations=[v.cite() for v in entries],
        sources=[v.source for v in entries], conflict=value.conflict,
        measured=spec.measured.get(replacement) if replacement else None,
    )

