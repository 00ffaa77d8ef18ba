"""The values the role observation writes (:mod:`kernelpilot.kernels.roles`): other contents for a tensor, the probe
of a chunk or element, the lower bound on a read fraction, and bit equality of two tensors."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["CONFIDENCE", "lower_bound", "other_content", "probe_value", "same_bits"]

#: One-sided confidence of the lower bound on the read fraction when some probes did not matter.
CONFIDENCE = 0.8


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors of one dtype and shape hold the same bits (so -0.0 differs from 0.0)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
    if bits is None or a.dtype == torch.bool or a.dtype.is_complex:
        return bool(torch.equal(a, b))
    return bool(torch.equal(a.view(bits), b.view(bits)))


def other_content(t: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Values of ``t``'s dtype and shape that differ from ``t`` at (almost) every element: floats ×[1.25, 1.5)
    (zeros and non-finite values → 1, so signs and ranges stay), integers resampled from ``t``'s own values (an
    element that drew its own value draws again, up to 4 times, and may keep it: a constant tensor stays as it is),
    booleans flipped. Integers never leave the tensor's own set of values: an index out of range is a device-side
    assert on a GPU, which no later call in the process survives (Liger's ``ignore_index = -100`` + 1 = −99 was one,
    on an H100)."""
    import torch

    if t.dtype == torch.bool:
        return ~t
    flat = t.reshape(-1)
    dev = torch.Generator(device=t.device).manual_seed(int(torch.randint(0, 2 ** 31, (), generator=g)))
    if t.dtype.is_floating_point:  # in place on one temporary: the tensor may be gigabytes
        wide_dtype = torch.float64 if t.dtype == torch.float64 else torch.float32  # drawn on t's device
        wide = flat.to(wide_dtype)
        out = torch.rand(flat.shape, generator=dev, device=t.device, dtype=wide_dtype).mul_(0.25).add_(1.25)
        out = out.mul_(wide).to(t.dtype).to(wide_dtype)  # rounded to the dtype, compared widened (fp8 has no ==)
        fix = (out == wide) | ~torch.isfinite(out)
        one = wide == 1
        out.masked_fill_(fix & one, 2.0).masked_fill_(fix & ~one, 1.0)
        del fix, one, wide
        return out.to(t.dtype).reshape(t.shape)
    if t.dtype.is_complex:
        return (t * 1.3 + 1).reshape(t.shape)
    n = max(flat.numel(), 1)
    out = flat[torch.randint(0, n, flat.shape, generator=dev, device=t.device)].clone() if flat.numel() else flat.clone()
    for _ in range(4):  # an element that drew its own value draws again, still among the tensor's own values
        same = out == flat
        if not bool(same.any()):
            break
        out[same] = flat[torch.randint(0, n, (int(same.sum()),), generator=dev, device=t.device)]
    return out.reshape(t.shape)


def probe_value(t: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """What a chunk or single-element probe writes: NaN for floats (it reaches every dense consumer: sums, maxima,
    products), else ``other``'s values (integers from the tensor's own values, booleans flipped)."""
    import torch

    if t.dtype.is_floating_point:
        return torch.full(t.shape, float("nan"), device=t.device).to(t.dtype)
    return other


def lower_bound(k: int, n: int, confidence: float = CONFIDENCE) -> float:
    """One-sided Clopper-Pearson lower bound of a binomial proportion: the p at which P(X >= k | n, p) equals
    ``1 - confidence`` (0 for k = 0), by bisection."""
    if k <= 0:
        return 0.0

    def tail(p: float) -> float:
        return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) < 1 - confidence else (lo, mid)
    return lo
