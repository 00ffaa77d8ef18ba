"""The GPU-specs part of kernelpilot's Python API (``kernelpilot specs list|show|cite|measure``).

Re-exported by :mod:`kernelpilot.api`; the implementations (:mod:`kernelpilot.hardware.specs`,
:mod:`kernelpilot.hardware.derived`, :mod:`kernelpilot.hardware.ceilings`) are imported when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelpilot.hardware.derived import Citation

__all__ = ["specs_list", "specs_show", "specs_cite", "specs_measure"]


def specs_list() -> dict[str, Any]:
    """Every known GPU spec (packaged and the user's, measured ceilings merged in), sorted by name.

    Returns:
        ``{"specs": [{"name", "aliases", "values" (metric names), "measured" (metric names),
        "devices_per_package", "per_device" (one device's spec name, None for a one-device package)}, ...]}``.

    Raises:
        SpecError: a spec file is malformed (the message gives ``path:line``).
    """
    from kernelpilot.hardware.specs import list_specs, per_device_name

    return {"specs": [{"name": s.name, "aliases": s.aliases, "values": sorted(s.values),
                       "measured": sorted(s.measured), "devices_per_package": s.devices_per_package,
                       "per_device": per_device_name(s) if s.devices_per_package > 1 else None}
                      for s in list_specs()]}


def specs_show(name: str) -> dict[str, Any]:
    """One GPU's spec with every value's citation, the metrics whose sources disagree, the measured ceilings beside
    their datasheet values, and the derived ridge points and 90 % targets.

    Args:
        name: a GPU name or alias (``H100-SXM``, ``h200``, ``MI250X-GCD``).

    Returns:
        ``{"spec": GpuSpec, "conflicts": [metric, ...], "measured_vs_datasheet": [CeilingComparison, ...],
        "derived": [DerivedPoint, ...]}`` (:mod:`kernelpilot.hardware.derived`).

    Raises:
        SpecError: unknown GPU (the message lists the closest names) or a malformed spec file.
    """
    from kernelpilot.hardware.derived import compare_ceilings, derived_points
    from kernelpilot.hardware.specs import find_spec

    spec = find_spec(name)
    return {"spec": spec, "conflicts": [v.metric for v in spec.conflicts()],
            "measured_vs_datasheet": compare_ceilings(spec), "derived": derived_points(spec)}


def specs_cite(metric: str, gpu: str) -> "Citation":
    """Where one number of one GPU comes from: every source's citation, whether they conflict, and the measured
    value the roofline uses instead (:func:`kernelpilot.hardware.derived.cite_metric`).

    Raises:
        SpecError: unknown GPU, or a metric its files do not give (the message lists its metrics).
    """
    from kernelpilot.hardware.derived import cite_metric

    return cite_metric(metric, gpu)


def specs_measure(*, copy_gib: float = 2.0, gemm_n: int = 8192, folder: str | Path | None = None) -> dict[str, Any]:
    """Measure this GPU's copy bandwidth and a bf16 cuBLAS GEMM and store them as its measured ceilings
    (:mod:`kernelpilot.hardware.ceilings`).

    Args:
        copy_gib: bytes copied per sample, in GiB. gemm_n: the GEMM size n (an n×n×n bf16 product).
        folder: where to write ``<GPU name>.md`` (default :func:`kernelpilot.hardware.specs.measured_dir`).

    Returns:
        ``{"gpu": spec name, "file": path written, "measurements": [Measurement as a dict, ...]}``.

    Raises:
        ToolMissingError: no CUDA GPU is visible. SpecError: this GPU has no spec file to attach the values to.
    """
    import torch

    from kernelpilot.hardware import ceilings
    from kernelpilot.hardware.specs import match_device, measured_dir

    if not torch.cuda.is_available():
        from kernelpilot.errors import ToolMissingError

        raise ToolMissingError("specs measure needs a CUDA GPU; none is visible", "run it on the GPU machine")
    spec = match_device(torch.cuda.get_device_name(0))
    ms = [ceilings.measure_copy_bandwidth(size_bytes=int(copy_gib * 2**30)), ceilings.measure_bf16_gemm(n=gemm_n)]
    path = ceilings.write_measured(spec.name, ms, folder or measured_dir())
    return {"gpu": spec.name, "file": str(path), "measurements": [m.model_dump() for m in ms]}
