"""The workload commands' Python API (``kernelpilot workload ranges|capture|buckets``; issue 26): write a workload
file from ranges or from a real PyTorch program's calls to the reference, and show how it buckets. ``tune
--workload FILE`` (:func:`kernelpilot.api.search.tune_workload`) then tunes for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["workload_buckets", "workload_capture", "workload_ranges"]


def _base(kernel: str | Path) -> tuple[Any, dict[str, Any]]:
    """The loaded kernel file (no GPU needed) and its ``SHAPE`` (the shape a workload's missing keys take)."""
    from kernelpilot.kernels.contract import load_kernel

    kf = load_kernel(kernel, interpreted=True)
    return kf, dict(kf.shape)


def _write(workload: Any, out: str | Path | None) -> dict[str, Any]:
    data = {"shapes": len(workload.entries), "total_weight": workload.total_weight, "source": workload.source,
            "workload": workload.to_json_list()}
    if out is not None:
        workload.dump(out)
        data["file"] = str(out)
    return data


def workload_ranges(kernel: str | Path, ranges: list[str], *, points: str = "pow2-mid",
                    out: str | Path | None = None) -> dict[str, Any]:
    """A workload of every combination of the ranges' points, weight 1 each, other keys from the kernel's SHAPE.

    Args:
        kernel: the kernel file (its SHAPE). ranges: ``["M=1:16384", ...]``. points: ``pow2-mid`` (powers of two,
            their midpoints and both ends), ``pow2`` or ``all`` (:func:`kernelpilot.workload.range_points`).
        out: write the workload JSON here (``[{"shape": {...}, "weight": w}, ...]``).

    Returns:
        ``{"shapes", "total_weight", "source", "workload", "file"}``.

    Raises:
        WorkloadError: a malformed range or a key SHAPE lacks. ContractError: the kernel file breaks the contract.
    """
    from kernelpilot.workload import workload_from_ranges

    _kf, base = _base(kernel)
    return _write(workload_from_ranges(ranges, base, points=points), out)


def workload_capture(kernel: str | Path, program: str | Path, *, function: str = "main", op: str | None = None,
                     mapping: str | None = None, out: str | Path | None = None) -> dict[str, Any]:
    """Run ``program``'s ``function()`` once in eager mode under the torch profiler and keep the shapes (and call
    counts, as weights) of its calls to the op the kernel replaces.

    Args:
        kernel: the kernel file; its ``setup``/``reference`` are run once on the CPU to observe the op and how SHAPE
            reads off its arguments (:func:`kernelpilot.workload.infer.infer_mapping`) unless ``op`` and ``mapping``
            are given. program: a Python file defining ``function`` (run as is: the caller's model, serving step or
            test loop). op: the op as the profiler records it (``aten::mm``). mapping: ``"M=0.0,N=1.1"`` (the
            command-line form of :func:`kernelpilot.workload.parse_mapping_text`). out: write the workload JSON here.

    Returns:
        :func:`workload_ranges`'s keys plus ``op``, ``mapping``, ``calls`` (counted calls), ``patterns`` (stride
        patterns seen per shape) and ``unmapped``.

    Raises:
        WorkloadError: the program made no call of the op, or a call the mapping does not fit, or has no
        ``function``. RunFolderError: the program file is missing. ContractError: the program failed at import.
        Whatever ``function`` raises propagates unchanged.
    """
    from kernelpilot.errors import RunFolderError
    from kernelpilot.kernels.contract import import_module_file
    from kernelpilot.workload import WorkloadError, capture_workload, parse_mapping_text
    from kernelpilot.workload.infer import infer_mapping

    kf, base = _base(kernel)
    path = Path(program)
    if not path.is_file():
        raise RunFolderError(f"no program file {path}", "give the Python file whose function runs your model")
    if mapping is not None:
        spec: Any = parse_mapping_text(mapping, base)
        name = op
        if name is None:
            name, _ = infer_mapping(kf.setup, kf.reference, base)
    else:
        name, spec = infer_mapping(kf.setup, kf.reference, base, op=op)
    fn = getattr(import_module_file(path, "program"), function, None)
    if not callable(fn):
        raise WorkloadError(f"{path} defines no function `{function}`",
                            "name the function that runs your model with --function")
    cap = capture_workload(fn, name, spec, base)
    data = _write(cap.workload, out)
    data.update(op=cap.op, mapping=spec if isinstance(spec, dict) else str(spec), calls=cap.calls,
                patterns=cap.patterns, unmapped=cap.unmapped)
    return data


def workload_buckets(kernel: str | Path, workload: str | Path, *, keys: list[str] | None = None,
                     rule: str = "pow2") -> dict[str, Any]:
    """How ``tune --workload`` would bucket a workload file (nothing runs).

    Args:
        kernel: the kernel file (its SHAPE fills missing keys). workload: the workload JSON file.
        keys: the keys to bucket on (default: every key whose value varies). rule: ``pow2`` or ``exact``.

    Returns:
        ``{"keys", "rule", "buckets": [{"name", "ranges", "weight", "shapes", "representative"}]}``.

    Raises:
        WorkloadError: a bad workload file or rule.
    """
    from kernelpilot.workload import bucket_workload, load_workload, varying_keys

    _kf, base = _base(kernel)
    wl = load_workload(workload, base)
    shapes = wl.shapes()
    keys = keys or varying_keys(shapes)
    buckets = bucket_workload(wl, keys, rule)
    return {"keys": keys, "rule": rule,
            "buckets": [{"name": b.name, "ranges": {k: list(v) for k, v in b.ranges.items() if k in keys},
                         "weight": b.weight, "shapes": b.shapes(), "representative": b.representative()}
                        for b in buckets]}
