"""Does this process's Triton interpreter round fp32 -> fp8 as ``torch`` does? Observed, not assumed.

Measured on Triton 3.9 under ``TRITON_INTERPRET=1`` (issue 23): a cast of fp32 to ``float8_e4m3fn`` or
``float8_e5m2`` (``x.to(tl.float8e4nv)``, or ``tl.store`` into an fp8 tensor) that rounds up across a power of two
loses the carry into the exponent, so the result is half the correctly rounded value (``-31.13`` gives ``-16``
instead of ``-32``; 85 of 4096 values drawn from N(0, 50²) in e4m3fn, 165 in e5m2; the fnuz variants likewise);
every other value matches ``torch``'s ``.to(dtype)`` bit for bit. Compiled Triton on a GPU converts with the
hardware's ``cvt`` instructions, which round to nearest even. A kernel writing fp8 therefore fails the check under
the interpreter with errors of 50 % on a few elements, which says nothing about the kernel.

:func:`fp8_cast_mismatch` launches one small interpreted kernel per fp8 dtype (once per process, cached) and
reports the first value that differs, so the failure's summary names the interpreter instead of the kernel; a
Triton that rounds correctly gets no note.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["fp8_cast_mismatch"]

_KERNEL: Any = None


def _kernel() -> Any:
    """The probe: ``y[i] = x[i].to(y's element type)`` (built on first use: importing triton costs seconds)."""
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def _cast(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(y_ptr.dtype.element_ty), mask=mask)

        _KERNEL = _cast
    return _KERNEL


@functools.lru_cache(maxsize=None)
def fp8_cast_mismatch(dtype_name: str) -> str | None:
    """How the interpreter's fp32 -> ``dtype_name`` cast differs from ``torch``'s, or None when it does not.

    Args:
        dtype_name: an fp8 dtype of torch, e.g. ``"float8_e4m3fn"``.

    Returns:
        e.g. ``"fp32 -> float8_e4m3fn casts in the Triton interpreter differ from torch on 7 of 64 probe values
        (31.5 gives 16, torch gives 32: a rounding carry into the exponent is lost)"``; None when all match or
        the probe cannot run (no such dtype, no interpreter). Raises nothing.
    """
    try:
        import torch

        dtype = getattr(torch, dtype_name)
        # values just below each power of two round up across it; plus values that round down, and their negatives
        ks = torch.arange(-4, 8, dtype=torch.float32)
        edge = torch.exp2(ks) * (1 - 2.0 ** -7)
        x = torch.cat([edge, -edge, torch.exp2(ks) * 1.3, -torch.exp2(ks) * 1.3])
        x = x[x.abs() <= torch.finfo(dtype).max]
        y = torch.empty(x.numel(), dtype=dtype)
        block = 1 << max(x.numel() - 1, 1).bit_length()
        _kernel()[(1,)](x, y, x.numel(), BLOCK=block)
        want = x.to(dtype)
        diff = y.view(torch.uint8) != want.view(torch.uint8)
    except Exception:  # noqa: BLE001 - a probe that cannot run makes no claim
        return None
    if not bool(diff.any()):
        return None
    i = int(diff.nonzero()[0])
    got, exp = float(y[i].float()), float(want[i].float())
    how = ": a rounding carry into the exponent is lost" if exp != 0 and got == exp / 2 else ""
    return (f"fp32 -> {dtype_name} casts in the Triton interpreter differ from torch on {int(diff.sum())} of "
            f"{x.numel()} probe values ({float(x[i]):.6g} gives {got:g}, torch gives {exp:g}{how})")
