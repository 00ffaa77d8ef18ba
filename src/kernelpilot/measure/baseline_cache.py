"""A cache of torch.compile baseline timings, so that ``bench --baselines`` does not trace and load Inductor's
code every time (7–12 s of a 21 s command on an H100, docs/device-runs/2026-11-24-h100/bench-baselines-breakdown.md).

What is cached is a *measurement*, not code: the torch.compile timing of one reference on one input signature on
one GPU, together with the PyTorch eager timing taken in the same moment. It is reused only when all of these
hold (docs/measuring.md, "Baselines"):

- the key matches: the reference's code (its bytecode, constants and the same-module functions it calls,
  :func:`code_fingerprint`), every input's shape, stride and dtype (scalars by value), the in-place names, and
  the GPU (name and UUID), driver, CUDA, torch and Triton versions;
- the entry is younger than :data:`MAX_AGE_S`;
- the **canary** holds: eager is re-timed now (cheap: no compile) and its median is within
  :data:`CANARY_REL` of the cached eager median. A GPU that runs at other clocks, is shared, or is another card
  with the same name moves eager too, and the cache entry is then measured afresh.

A reused row says so (``cached_at``, and the eager drift in its note); ``--fresh-baselines`` never reads the
cache. The folder is ``$KERNELPILOT_CACHE_DIR/baselines`` (default ``$XDG_CACHE_HOME/kernelpilot``, else
``~/.cache/kernelpilot``); a corrupt entry is ignored and overwritten.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import types
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kernelpilot.facts import nvml_driver_version, utc_now, utc_now_iso
from kernelpilot.measure.timing import TimingResult

__all__ = ["CANARY_REL", "MAX_AGE_S", "CachedBaseline", "baseline_key", "cache_dir", "code_fingerprint", "lookup",
           "store"]

#: Seconds a cached torch.compile timing stays usable (one working day).
MAX_AGE_S = 24 * 3600.0
#: The re-timed eager median must lie within this relative distance of the cached one (3 %: the margin the
#: optimize stop rule grants a baseline, so a cached number never moves a decision more than that margin).
CANARY_REL = 0.03


class CachedBaseline(BaseModel):
    """One cache entry: the key it was stored under, when (UTC, ISO 8601), and both timings of that moment."""

    key: dict[str, Any]
    measured_at: str
    eager: TimingResult
    compiled: TimingResult


def cache_dir() -> Path:
    """The folder of cached baselines (see the module docstring); not created here."""
    root = os.environ.get("KERNELPILOT_CACHE_DIR")
    if root:
        return Path(root) / "baselines"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kernelpilot" / "baselines"


def code_fingerprint(fn: Any) -> str:
    """sha256 (hex) of a Python function's code and of everything in its own module it reaches by name.

    Covers the bytecode, constants (nested code objects too), names, defaults, and, for every global name the
    code uses: a function of the same module (recursively), a module (its name), or a plain constant (its repr).
    Editing the kernel in the same file leaves the reference's fingerprint unchanged; editing the reference or a
    helper it calls changes it. Objects it cannot describe (e.g. a tensor held in a global) count by type name.
    """
    h = hashlib.sha256()
    seen: set[int] = set()

    def add_code(code: types.CodeType, globs: dict[str, Any], module: str) -> None:
        h.update(code.co_code)
        h.update(repr(code.co_names).encode())
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                add_code(const, globs, module)
            else:
                h.update(repr(const).encode())
        for name in code.co_names:
            if name in globs:
                add_value(name, globs[name], module)

    def add_value(name: str, value: Any, module: str) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        h.update(name.encode())
        if isinstance(value, types.FunctionType) and value.__module__ == module:
            add_function(value)
        elif isinstance(value, types.ModuleType):
            h.update(value.__name__.encode())
        elif isinstance(value, (int, float, str, bool, bytes, tuple, type(None))):
            h.update(repr(value).encode())
        else:
            h.update(type(value).__qualname__.encode())

    def add_function(f: types.FunctionType) -> None:
        h.update(repr(f.__defaults__).encode() + repr(f.__kwdefaults__).encode())
        add_code(f.__code__, f.__globals__, f.__module__)

    target = getattr(fn, "__wrapped__", fn)
    if isinstance(target, types.FunctionType):
        seen.add(id(target))
        add_function(target)
    else:
        h.update(repr(type(target)).encode())
    return h.hexdigest()


def _inputs_signature(inputs: dict[str, Any]) -> list[list[Any]]:
    import torch

    sig: list[list[Any]] = []
    for name in sorted(inputs):
        v = inputs[name]
        if isinstance(v, torch.Tensor):
            sig.append([name, list(v.shape), list(v.stride()), str(v.dtype), v.device.type])
        else:
            sig.append([name, repr(v)])
    return sig


def _gpu_identity() -> dict[str, Any]:
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    ident: dict[str, Any] = {"gpu": props.name, "gpu_uuid": str(getattr(props, "uuid", "")),
                             "cuda": torch.version.cuda, "torch": torch.__version__}
    try:
        import triton

        ident["triton"] = triton.__version__
    except ImportError:  # pragma: no cover - the Triton backend always has it
        ident["triton"] = None
    ident["driver"] = nvml_driver_version()  # None without NVML: the other fields still separate GPUs and stacks
    return ident


def baseline_key(reference: Any, inputs: dict[str, Any], inplace: list[str], mode: str = "default") -> dict[str, Any]:
    """The cache key of a torch.compile baseline (see the module docstring); needs a CUDA device."""
    return {"reference": code_fingerprint(reference), "inputs": _inputs_signature(inputs),
            "inplace": sorted(inplace), "compile_mode": mode, **_gpu_identity()}


def _path(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return cache_dir() / f"{digest[:32]}.json"


def _age_s(entry: CachedBaseline, now: _dt.datetime) -> float:
    try:
        return (now - _dt.datetime.fromisoformat(entry.measured_at)).total_seconds()
    except ValueError:
        return float("inf")


def lookup(key: dict[str, Any], eager_now: TimingResult, *, max_age_s: float = MAX_AGE_S,
           canary_rel: float = CANARY_REL) -> tuple[CachedBaseline | None, str]:
    """The usable entry for ``key`` given eager's median measured now, or None, and why (for the record).

    Never raises: a missing, unreadable or corrupt entry is a miss.
    """
    path = _path(key)
    try:
        entry = CachedBaseline.model_validate_json(path.read_text())
    except (OSError, ValidationError, ValueError):
        return None, "no cached torch.compile timing for this reference, inputs and GPU"
    if entry.key != key:
        return None, "cache entry for another key (hash collision or hand edit): measured afresh"
    age_s = _age_s(entry, utc_now())
    if not 0 <= age_s <= max_age_s:
        return None, f"cached torch.compile timing is {age_s / 3600:.1f} h old (limit {max_age_s / 3600:.0f} h)"
    drift = eager_now.median_ns / entry.eager.median_ns - 1.0 if entry.eager.median_ns > 0 else float("inf")
    if abs(drift) > canary_rel:
        return None, (f"eager moved {drift:+.1%} since the cached timing (limit ±{canary_rel:.0%}): the GPU's "
                      "state differs, torch.compile measured afresh")
    return entry, f"eager re-timed now is {drift:+.1%} from then (limit ±{canary_rel:.0%})"


def store(key: dict[str, Any], eager: TimingResult, compiled: TimingResult) -> Path | None:
    """Write the entry for ``key`` atomically; returns its path, or None when the folder is not writable."""
    entry = CachedBaseline(key=key, measured_at=utc_now_iso(),
                           eager=eager, compiled=compiled)
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(entry.model_dump_json())
        os.replace(tmp, path)
    except OSError:
        return None
    return path
