"""kernelpilot's measurement as a library for your own harness (docs/measuring.md).

Lazy exports (nothing here imports torch until used):

- ``compare(name, out, ref, atol, rtol)`` / ``tolerance_for(dtype)``: the per-element and per-row comparison;
- ``check_correctness(kf, shape, config, device)`` / ``recheck(kf, case, config, device)``: the whole check;
- ``time_cuda(fn, before_each=...)`` / ``time_interleaved(a, b, n, target)``: the timing protocol;
- ``TimerGuard.snapshot()`` then ``.check()``: detect replaced timing functions;
- ``device_activity(fn, declared=[...])``: what ran on the GPU, on every stream, and whether it stayed timed;
- ``screen_file(path)``: the static screen;
- ``minimum_bytes(case)`` / ``counted_flops(kf, case)``: the floor's inputs from the tensors themselves.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "compare": "kernelpilot.measure.compare", "tolerance_for": "kernelpilot.measure.compare",
    "check_correctness": "kernelpilot.measure.correctness", "recheck": "kernelpilot.measure.correctness",
    "time_cuda": "kernelpilot.measure.timing", "time_interleaved": "kernelpilot.measure.timing",
    "time_callable": "kernelpilot.measure.timing", "TimerGuard": "kernelpilot.measure.guard",
    "device_activity": "kernelpilot.measure.activity", "screen_file": "kernelpilot.measure.screen",
    "minimum_bytes": "kernelpilot.kernels.workload", "counted_flops": "kernelpilot.kernels.workload",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import an export on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kernelpilot.measure' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
