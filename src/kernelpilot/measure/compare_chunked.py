"""The comparison rule of :mod:`kernelpilot.measure.compare`, chunk by chunk: for outputs whose float64 reference is
large (:data:`kernelpilot.measure.memory.LARGE_BYTES`), wherever output and reference are (the reference may be in
host memory), without a float64 temporary of the whole output on the device.

Two passes over the segments (rows of the last dimension, else runs of
:data:`~kernelpilot.measure.compare.SEGMENT_ELEMENTS`), each in pieces of about
:data:`~kernelpilot.measure.memory.CHUNK_ELEMENTS` elements moved to ``device``: the first sums each segment's
squared reference and squared error (finite pairs only) and counts the non-finite elements; the second, with every
segment's scale known, counts the elements outside ``atol·scale(segment) + rtol·|ref|`` and finds the first one.
A row longer than a chunk is summed in pieces into its own slot. The verdict, counts and indices are those of the
whole-tensor comparison; the norms differ from it only by the order of summation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    import torch

__all__ = ["compare_chunked"]


def _pieces(n: int, width: int, chunk: int) -> Iterator[tuple[int, int, int, int]]:
    """``(first segment, segments, first element, end element)`` of each piece: whole segments (as many as fit in
    ``chunk`` elements, at least one), or, for a segment wider than ``chunk``, parts of one segment (segments 0:
    the piece adds to the first segment's slot)."""
    n_seg = -(-n // width) if n else 0
    if width <= chunk:
        per = max(1, chunk // width)
        for s in range(0, n_seg, per):
            k = min(per, n_seg - s)
            yield s, k, s * width, min((s + k) * width, n)
        return
    for s in range(n_seg):
        end = min((s + 1) * width, n)
        for a in range(s * width, end, chunk):
            yield s, 0, a, min(a + chunk, end)


def _load(out: torch.Tensor, ref: torch.Tensor, a: int, b: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Elements ``[a, b)`` of the flat output and reference on ``device``: the reference in float64, the output in
    its own floating dtype where the rule's ops have kernels for it, else float64."""
    import torch

    from kernelpilot.measure.compare import _NATIVE_FLOATS

    o = out[a:b].to(device=device)
    if o.dtype not in _NATIVE_FLOATS(torch):
        o = o.to(torch.float64)
    return o, ref[a:b].to(device=device, dtype=torch.float64)


def _rows(t: torch.Tensor, k: int, width: int) -> torch.Tensor:
    """A piece of ``k`` whole segments as a (k × width) view, the last padded with zeros when short."""
    import torch

    pad = k * width - t.numel()
    return (torch.nn.functional.pad(t, (0, pad)) if pad else t).reshape(k, width)


def compare_chunked(base: dict[str, Any], out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
                    device: Any) -> Any:
    """:func:`kernelpilot.measure.compare.compare`'s rule on ``out`` and ``ref`` (same element count, any devices),
    computed in pieces on ``device``; ``base`` holds the :class:`~kernelpilot.measure.compare.OutputCheck` fields
    already known (name, dtype, shape, n_elements, atol, rtol). Returns the OutputCheck."""
    import torch

    from kernelpilot.measure.compare import SCALE_FLOOR_REL, SEGMENT_ELEMENTS, OutputCheck, verdict
    from kernelpilot.measure.memory import CHUNK_ELEMENTS

    flat_o, flat_r = out.detach().reshape(-1), ref.detach().reshape(-1)
    n, shape = flat_r.numel(), base["shape"]
    width = shape[-1] if len(shape) >= 2 and shape[-1] > 0 else min(SEGMENT_ELEMENTS, max(n, 1))
    n_seg = -(-n // width) if n else 0
    ref_sq = torch.zeros(n_seg, dtype=torch.float64, device=device)
    err_sq = torch.zeros(n_seg, dtype=torch.float64, device=device)
    n_nonfinite, any_finite_pair, special_seen = 0, False, False
    pieces = list(_pieces(n, width, CHUNK_ELEMENTS))
    for s, k, a, b in pieces:  # pass 1: the segments' squared norms, the non-finite counts
        o, r = _load(flat_o, flat_r, a, b, device)
        finite_r, finite_o = torch.isfinite(r), torch.isfinite(o)
        both = finite_r & finite_o
        n_nonfinite += int((~finite_o & finite_r).sum())
        any_finite_pair = any_finite_pair or bool(both.any())
        special_seen = special_seen or not bool(both.all())
        r0 = torch.where(finite_r, r, 0.0)
        d = torch.where(both, torch.sub(o, r), 0.0)
        del finite_r, finite_o, both, o, r
        if k:
            ref_sq[s:s + k] = _rows(r0, k, width).square().sum(dim=1)
            err_sq[s:s + k] = _rows(d, k, width).square().sum(dim=1)
        else:
            ref_sq[s] += r0.square().sum()
            err_sq[s] += d.square().sum()
        del r0, d
    seg_ref_norm, seg_err = ref_sq.sqrt_(), err_sq.sqrt_()
    ref_norm = float(torch.linalg.vector_norm(seg_ref_norm))
    err_norm = float(torch.linalg.vector_norm(seg_err))
    whole = ref_norm / math.sqrt(n) if n else 0.0
    whole = whole if whole > 0 else 1.0
    seg_scale = (seg_ref_norm / math.sqrt(width)).clamp_min(SCALE_FLOOR_REL * whole)
    n_mismatched, first_flat, max_abs = 0, None, 0.0
    for s, k, a, b in pieces:  # pass 2: elements outside the tolerance, the first of them, the largest error
        o, r = _load(flat_o, flat_r, a, b, device)
        finite_r, finite_o = torch.isfinite(r), torch.isfinite(o)
        both = finite_r & finite_o
        diff = torch.where(both, torch.sub(o, r), 0.0).abs_()
        allowed = torch.where(finite_r, r, 0.0).abs_().mul_(rtol)
        scale = seg_scale[s:s + k].repeat_interleave(width)[: b - a] if k else seg_scale[s]
        allowed.add_(scale * atol)
        mismatch = diff > allowed
        del allowed, scale
        if special_seen:
            mismatch |= ~both & ~(o.eq(r) | (o.isnan() & r.isnan()))
        max_abs = max(max_abs, float(diff.max())) if diff.numel() else max_abs
        bad = int(mismatch.sum())
        if bad and first_flat is None:
            first_flat = a + int(torch.nonzero(mismatch)[0])
        n_mismatched += bad
        del o, r, finite_r, finite_o, both, diff, mismatch
    rel_l2 = err_norm / ref_norm if ref_norm > 0 else err_norm
    seg_rel = torch.where(seg_ref_norm > 0, seg_err / seg_ref_norm.clamp_min(1e-300), 0.0)
    worst = int(torch.argmax(seg_rel)) if seg_rel.numel() else None
    worst_rel = float(seg_rel[worst]) if worst is not None else None
    first_idx, first_vals = None, None
    if first_flat is not None:
        first_idx = [int(i) for i in torch.unravel_index(torch.tensor(first_flat), tuple(shape))] if shape else []
        o1, r1 = float(flat_o[first_flat].to(torch.float64)), float(flat_r[first_flat].to(torch.float64))
        first_vals = tuple(v if math.isfinite(v) else None for v in (o1, r1))
    passed, reason = verdict(n, n_nonfinite, n_mismatched, worst, worst_rel, rel_l2, rtol)
    return OutputCheck(**base, n_nonfinite=n_nonfinite, n_mismatched=n_mismatched, rel_l2_error=rel_l2,
                       max_abs_error=max_abs if any_finite_pair else None, scale=whole, n_segments=n_seg,
                       worst_segment=worst, worst_segment_rel_error=worst_rel, first_bad_index=first_idx,
                       first_bad_values=first_vals, passed=passed, reason=reason)
