"""Comparing one output with its reference: per element and per segment, never per tensor alone.

The rule (docs/measuring.md, "Correctness"), for an output ``out`` and its float64 reference ``ref``:

- a **segment** is a row along the last dimension (a tensor of two or more dimensions), else a run of
  :data:`SEGMENT_ELEMENTS` consecutive elements; ``scale(s)`` is the RMS of the reference over segment ``s``,
  never below :data:`SCALE_FLOOR_REL` × the RMS of the whole reference (1 when the reference is all zero);
- **every element**: ``|out − ref| ≤ atol · scale(its segment) + rtol · |ref|``. The absolute allowance follows
  the magnitude of the element's own row, so a row whose values are far below the tensor's RMS cannot be
  written as zeros (with a whole-tensor scale it could: issue 11's cheat);
- **every segment**: relative L2 error ``‖out_s − ref_s‖ / ‖ref_s‖ ≤ rtol`` (segments whose reference is all
  zero are held to the element rule alone);
- the whole tensor: relative L2 error ``≤ rtol``; NaN or Inf where the reference is finite always fails, and
  where the reference is NaN or Inf the output must hold the same: the same infinity, or NaN.

Tolerances come from the output's dtype (:data:`TOLERANCES`); a kernel file may loosen them only visibly
(:func:`tolerance_for` says so) and never past :data:`MAX_ATOL` / :data:`MAX_RTOL`.

Large references (float64 bytes of at least :data:`kernelpilot.measure.memory.LARGE_BYTES`) are compared chunk by
chunk, wherever output and reference are (the reference may be in host memory), without a float64 temporary of the
whole output on the device: two passes over the segments, each in pieces of about
:data:`~kernelpilot.measure.memory.CHUNK_ELEMENTS` elements moved to the computing device; the first sums each
segment's squared reference and squared error (finite pairs only) and counts the non-finite elements; the second,
with every segment's scale known, counts the elements outside the allowance and finds the first one. A row longer
than a chunk is summed in pieces into its own slot. Verdict, counts and indices are those of the whole-tensor
comparison; the norms differ from it only by the order of summation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator

from pydantic import BaseModel

from kernelpilot.records.checks import pass_reason

if TYPE_CHECKING:
    import torch

__all__ = ["MAX_ATOL", "MAX_RTOL", "OutputCheck", "SCALE_FLOOR_REL", "SEGMENT_ELEMENTS", "TOLERANCES", "Tolerance",
           "compare", "compare_chunked", "tolerance_for", "verdict"]

# (atol, rtol) by output dtype; docs/measuring.md "Correctness" (fp32 1e-5/1e-3, fp16/bf16 1e-2/1e-2).
# fp8: rtol is one unit in the last place at 1.0 (``torch.finfo(dtype).eps``), from the mantissa widths of the
# OCP 8-bit Floating Point Specification (OFP8) rev. 1.0, 2023, table 1: E4M3 has 3 mantissa bits (2⁻³), E5M2
# has 2 (2⁻²); the fnuz variants (Graphcore/AMD, "8-bit Numerical Formats for Deep Neural Networks", 2022) have
# the same widths. Rounding to nearest errs by at most half of that; a kernel whose float32 value differs from
# the float64 reference by a hair can round to the neighbouring fp8 value, a full unit: so one unit, not half.
# atol is half the unit (row-RMS-relative: elements near zero). float8_e8m0fnu (exponents only, MX scales)
# rounds to powers of two: a neighbouring power is 2x, so only a file's own tolerance could accept it.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-8, 1e-6),
    "float32": (1e-5, 1e-3),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
    "float8_e4m3fn": (2.0 ** -4, 2.0 ** -3),
    "float8_e4m3fnuz": (2.0 ** -4, 2.0 ** -3),
    "float8_e5m2": (2.0 ** -3, 2.0 ** -2),
    "float8_e5m2fnuz": (2.0 ** -3, 2.0 ** -2),
    "complex64": (1e-5, 1e-3),
    "complex128": (1e-8, 1e-6),
}
#: The loosest tolerance a kernel file may declare: an error of 10 % of the row's RMS, or 10 % relative, or the
#: output dtype's own (fp8's table entries exceed 10 %). Beyond it the file is refused, not trusted.
MAX_ATOL, MAX_RTOL = 0.1, 0.1
#: Elements per segment of a one-dimensional output.
SEGMENT_ELEMENTS = 1024
#: A segment's scale never drops below this fraction of the whole reference's RMS, so an all-zero row is held
#: to (almost) exact zeros rather than to nothing.
SCALE_FLOOR_REL = 1e-3


class Tolerance(BaseModel):
    """The tolerance applied to one output: values, the dtype's defaults, and whether the file loosened them.

    ``loosened`` is True when the file's ``atol``/``rtol`` exceed the dtype's; ``over_cap`` when they exceed
    :data:`MAX_ATOL`/:data:`MAX_RTOL` (always refused)."""

    atol: float
    rtol: float
    default_atol: float
    default_rtol: float
    source: str
    loosened: bool = False
    over_cap: bool = False


def tolerance_for(dtype: Any, kf: Any = None) -> Tolerance:
    """The tolerance for an output dtype (a ``torch.dtype`` or its name); the kernel/ref file's ``atol``/``rtol``
    (``kf.atol``/``kf.rtol``) override the table, visibly. Integer and bool outputs must match exactly (0, 0)
    unless the file loosens them. ``over_cap`` when a value exceeds both the caps and the dtype's own."""
    name = str(dtype).removeprefix("torch.")
    floating = name.startswith(("float", "bfloat", "complex"))
    atol, rtol = TOLERANCES.get(name, (1e-1, 1e-1) if floating else (0.0, 0.0))
    d_atol, d_rtol = atol, rtol
    file_atol = getattr(kf, "atol", None) if kf is not None else None
    file_rtol = getattr(kf, "rtol", None) if kf is not None else None
    atol = float(file_atol) if file_atol is not None else atol
    rtol = float(file_rtol) if file_rtol is not None else rtol
    source = "dtype table" if file_atol is None and file_rtol is None else \
        f"kernel file (atol={file_atol}, rtol={file_rtol}; dtype table {d_atol:g}/{d_rtol:g})"
    return Tolerance(atol=atol, rtol=rtol, default_atol=d_atol, default_rtol=d_rtol, source=source,
                     loosened=atol > d_atol or rtol > d_rtol,
                     over_cap=atol > max(MAX_ATOL, d_atol) or rtol > max(MAX_RTOL, d_rtol))


class OutputCheck(BaseModel):
    """The comparison of one output tensor with the reference, for one seed.

    Errors are in the output's units. ``scale`` is the whole reference's RMS; ``worst_segment`` the index of the
    segment (row) with the largest relative L2 error and ``worst_segment_rel_error`` that error.
    """

    name: str
    dtype: str
    shape: list[int]
    n_elements: int
    n_nonfinite: int
    n_mismatched: int
    rel_l2_error: float | None
    max_abs_error: float | None
    atol: float
    rtol: float
    scale: float
    n_segments: int = 0
    worst_segment: int | None = None
    worst_segment_rel_error: float | None = None
    first_bad_index: list[int] | None = None
    first_bad_values: tuple[float | None, float | None] | None = None  # None: NaN/Inf (JSON has neither)
    passed: bool
    reason: str


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
            device: Any = None) -> OutputCheck:
    """Compare one output with its reference (the module docstring's rule).

    Args:
        out: the kernel's output, any dtype and device.
        ref: the reference, same number of elements (compared in float64 on ``out``'s device; on the host when
            the device runs out of memory). A large one (float64 bytes of at least
            :data:`~kernelpilot.measure.memory.LARGE_BYTES`) is compared chunk by chunk
            (the module docstring's last paragraph: the same rule, no float64 temporary of
            the whole output).
        device: where a chunked comparison computes (default: a GPU among ``out``'s and ``ref``'s devices, else the
            host).
    """
    import torch

    from kernelpilot.measure.memory import is_large

    base = dict(name=name, dtype=str(out.dtype).removeprefix("torch."), shape=list(out.shape),
                n_elements=out.numel(), atol=atol, rtol=rtol)
    if ref.numel() != out.numel():
        return OutputCheck(**base, n_nonfinite=0, n_mismatched=out.numel(), rel_l2_error=None, max_abs_error=None,
                           scale=0.0, passed=False,
                           reason=f"shape mismatch: kernel {list(out.shape)} vs reference {list(ref.shape)}")
    if out.dtype.is_complex:  # (re, im) pairs side by side along the last dimension: rows stay rows
        flat = (lambda t: t.flatten(-2)) if out.dim() else (lambda t: t)
        ref = flat(torch.view_as_real(ref.detach().reshape(out.shape).to(torch.complex128).resolve_conj()))
        out = flat(torch.view_as_real(out.detach().resolve_conj()))
        base = {**base, "shape": list(out.shape), "n_elements": out.numel()}
    exact = atol == 0 and rtol == 0 and not (out.dtype.is_floating_point or out.dtype.is_complex)
    if not exact and is_large(ref.numel() * 8):
        where = device if device is not None else next(
            (t.device for t in (out, ref) if t.device.type != "cpu"), torch.device("cpu"))
        return compare_chunked(base, out, ref, atol, rtol, torch.device(where))
    try:  # on the output's device: a 64 M-element comparison on the host costs seconds per seed
        if exact:
            return _compare_exact(base, out, ref, out.device)
        return _compare(base, out, ref, atol, rtol, out.device)
    except torch.OutOfMemoryError:
        if exact:
            return _compare_exact(base, out, ref, torch.device("cpu"))
        return _compare(base, out, ref, atol, rtol, torch.device("cpu"))


def _compare_exact(base: dict[str, Any], out: torch.Tensor, ref: torch.Tensor, device: torch.device) -> OutputCheck:
    """Integer and bool outputs held to exact equality (tolerance 0/0), without a float64 detour that would round
    int64 values past 2⁵³: an integer reference is compared in int64 (uint64 wraps to the same bits), a floating
    one in float64 (a NaN or a fraction in the reference never equals an integer). ``rel_l2_error`` is the
    fraction of elements that differ."""
    import torch

    o = out.detach().reshape(-1).to(device=device)
    r = ref.detach().reshape(-1).to(device=device)
    if r.dtype.is_floating_point or r.dtype.is_complex:
        o, r = o.to(torch.float64), (r.real if r.dtype.is_complex else r).to(torch.float64)
    else:
        o, r = o.to(torch.int64), r.to(torch.int64)
    mismatch = o.ne(r)
    n, bad = base["n_elements"], int(mismatch.sum())
    first_idx, first_vals, max_abs = None, None, 0.0
    if bad:
        flat = int(torch.nonzero(mismatch)[0])
        shape = base["shape"]
        first_idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))] if shape else []
        first_vals = tuple(v if math.isfinite(v) else None for v in (float(o[flat]), float(r[flat])))
        max_abs = float((o[mismatch].to(torch.float64) - r[mismatch].to(torch.float64)).abs().max())
    frac = bad / n if n else 0.0
    reason = (f"{bad} of {n} elements differ (integer/bool outputs must match exactly)" if bad else
              "every element equal (integer/bool outputs match exactly)")
    return OutputCheck(**base, n_nonfinite=0, n_mismatched=bad, rel_l2_error=frac, max_abs_error=max_abs,
                       scale=0.0, first_bad_index=first_idx, first_bad_values=first_vals, passed=not bad,
                       reason=reason)


def _NATIVE_FLOATS(torch: Any) -> set[Any]:  # noqa: N802 - a constant that needs torch
    """Output dtypes the comparison uses as they are: every elementwise op it applies has a kernel for them."""
    return {torch.float16, torch.bfloat16, torch.float32, torch.float64}


def _segments(t: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """``t`` (flat) as a 2-D (segments × elements) view: rows of the last dimension, else runs of 1024 (the last
    run padded with zeros, a copy: zeros change no norm and never exceed a tolerance)."""
    import torch

    n = t.numel()
    if len(shape) >= 2 and shape[-1] > 0:
        return t.reshape(-1, shape[-1])
    width = min(SEGMENT_ELEMENTS, max(n, 1))
    pad = (-n) % width
    return torch.nn.functional.pad(t, (0, pad)).reshape(-1, width) if pad else t.reshape(-1, width)


def _compare(base: dict[str, Any], out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
             device: torch.device) -> OutputCheck:
    """The rule of the module docstring in float64, with as few full-size temporaries as the rule allows: a
    64 M-element output is compared once per seed, per re-check and per second run of every evaluation, so each
    pass over it is paid many times in a search. Where reference or output holds NaN/Inf, those elements are
    left out of the norms and fail unless both are the same infinity or both NaN."""
    import torch

    o = out.detach().reshape(-1).to(device=device)
    if o.dtype not in _NATIVE_FLOATS(torch):
        # bool, fp8 (no isfinite/abs/sub kernels) and integers under a loosened tolerance (uint16/32/64 have no
        # abs) compare as float64: exact for every fp8 value (complex arrives as its real view)
        o = o.to(torch.float64)
    r = ref.detach().reshape(-1).to(device=device, dtype=torch.float64)
    finite_r, finite_o = torch.isfinite(r), torch.isfinite(o)
    all_finite = bool(finite_r.all()) and bool(finite_o.all())
    special = None  # elements where either side is NaN/Inf and the two are not the same value
    if all_finite:
        n_nonfinite, any_finite_pair, r0, d = 0, o.numel() > 0, r, torch.sub(o, r)
    else:
        both = finite_r & finite_o
        n_nonfinite, any_finite_pair = int((~finite_o & finite_r).sum()), bool(both.any())
        r0 = torch.where(finite_r, r, 0.0)
        d = torch.where(both, torch.sub(o, r), 0.0)
        special = ~both & ~(o.eq(r) | (o.isnan() & r.isnan()))
    del finite_r, finite_o
    shape = base["shape"]
    seg_r, seg_d = _segments(r0, shape), _segments(d, shape)
    seg_ref_norm = torch.linalg.vector_norm(seg_r, dim=1)
    seg_err = torch.linalg.vector_norm(seg_d, dim=1)
    ref_norm = float(torch.linalg.vector_norm(seg_ref_norm))
    err_norm = float(torch.linalg.vector_norm(seg_err))
    whole = ref_norm / math.sqrt(r.numel()) if r.numel() else 0.0
    whole = whole if whole > 0 else 1.0
    seg_scale = (seg_ref_norm / math.sqrt(seg_r.shape[1])).clamp_min(SCALE_FLOOR_REL * whole)
    seg_d.abs_()  # |out - ref| from here on (seg_d is d, or d's padded copy)
    allowed = torch.abs(seg_r).mul_(rtol).add_(seg_scale[:, None] * atol)
    mismatch = (seg_d > allowed).reshape(-1)[: r.numel()]
    del allowed
    if special is not None:
        mismatch |= special
    n_mismatched = int(mismatch.sum())
    rel_l2 = err_norm / ref_norm if ref_norm > 0 else err_norm
    seg_rel = torch.where(seg_ref_norm > 0, seg_err / seg_ref_norm.clamp_min(1e-300), 0.0)
    worst = int(torch.argmax(seg_rel)) if seg_rel.numel() else None
    worst_rel = float(seg_rel[worst]) if worst is not None else None
    max_abs = float(seg_d.max()) if any_finite_pair else None
    first_idx, first_vals = None, None
    if n_mismatched:
        flat = int(torch.nonzero(mismatch)[0])
        first_idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))] if shape else []
        first_vals = tuple(v if math.isfinite(v) else None for v in (float(o[flat]), float(r[flat])))
    passed, reason = verdict(base["n_elements"], n_nonfinite, n_mismatched, worst, worst_rel, rel_l2, rtol)
    return OutputCheck(**base, n_nonfinite=n_nonfinite, n_mismatched=n_mismatched, rel_l2_error=rel_l2,
                       max_abs_error=max_abs, scale=whole, n_segments=int(seg_r.shape[0]), worst_segment=worst,
                       worst_segment_rel_error=worst_rel, first_bad_index=first_idx, first_bad_values=first_vals,
                       passed=passed, reason=reason)


def verdict(n: int, n_nonfinite: int, n_mismatched: int, worst: int | None, worst_rel: float | None, rel_l2: float,
            rtol: float) -> tuple[bool, str]:
    """(passed, reason) from the counts and errors of one comparison (the module docstring's rule, in the order its
    failures are told: non-finite elements, elements out of tolerance, the worst segment, the whole tensor)."""
    if n_nonfinite:
        return False, (f"{n_nonfinite} of {n} elements are NaN/Inf where the reference is finite (unwritten or "
                       "overflowed)")
    if n_mismatched:
        return False, f"{n_mismatched} of {n} elements outside atol*rms(row) + rtol*|ref|"
    if worst_rel is not None and worst_rel > rtol:
        return False, f"segment {worst} (a row) has relative L2 error {worst_rel:.3g} > rtol {rtol:g}"
    if rel_l2 > rtol:
        return False, f"relative L2 error {rel_l2:.3g} > rtol {rtol:g}"
    return True, pass_reason(rel_l2, rtol)  # records/checks.py writes it as "=" when its numbers give it back


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
    """:func:`compare`'s rule on ``out`` and ``ref`` (same element count, any devices), computed in pieces on
    ``device`` (the module docstring's last paragraph); ``base`` holds the :class:`OutputCheck` fields already known
    (name, dtype, shape, n_elements, atol, rtol). Returns the OutputCheck."""
    import torch

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
