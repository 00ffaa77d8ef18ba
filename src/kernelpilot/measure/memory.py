"""Device memory of the check at large problem sizes: which copies the worker keeps, where, and in what pieces.

A problem whose tensors are gigabytes each (KernelBench's newest level-1 problems: 1.6e9 floats, 6 GiB per tensor)
must fit the check beside itself on one GPU (docs/kernelbench.md, "Memory at large sizes" counts the copies). The
rule is one threshold, :data:`LARGE_BYTES`: a copy of at least that many bytes is *large*, and

- the float64 reference results of a call that large come back in one buffer the worker keeps for them, as views,
  never cloned, on the GPU while it has room for it four times over, else in host memory
  (:mod:`kernelpilot.measure.refproc`, :func:`kernelpilot.measure.staging.big_results_place`);
- the check's copies of large outputs (the first run's result for the determinism test, the re-check's previous
  result, the outputs of timed launches kept in secret) are kept in host memory (:func:`keep_copy`);
- a large comparison goes chunk by chunk (:func:`kernelpilot.measure.compare.compare`): no float64 temporary of the
  whole output on the device;
- a large case gives the device memory it freed back to the driver after its role observation, and before each
  reference call (:func:`release_cached`, :meth:`kernelpilot.measure.refproc.ReferenceProcess.outputs`), so the
  reference process's float64 work finds it.

At every size: pure outputs are never copied to the reference (it gets zeros made where it runs), and the
pristine copy of the inputs is made straight into the reference process's staging buffer
(:func:`kernelpilot.measure.refproc.pristine_copies`).

Below the threshold nothing changes (the copies stay on the device, comparisons are whole-tensor): a search's
evaluations of problems of a few hundred megabytes keep their speed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["CHUNK_ELEMENTS", "LARGE_BYTES", "bits_equal", "bitwise_equal", "case_is_large", "is_large", "keep_copy",
           "nbytes", "release_cached"]

#: Bytes from which a copy is large (1 GiB: a float64 result of 128 M elements; a search's 64 M-element float32
#: problems stay below it, their results' float64 copies included).
LARGE_BYTES = 1 << 30
#: Elements per chunk of a chunked comparison or copy (2**25: 256 MiB of float64 per temporary).
CHUNK_ELEMENTS = 1 << 25


def nbytes(t: Any) -> int:
    """Bytes of a tensor's elements (0 for anything else)."""
    import torch

    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def is_large(n_bytes: int) -> bool:
    """True when ``n_bytes`` reaches :data:`LARGE_BYTES` (read at call time, so tests may lower it)."""
    return n_bytes >= LARGE_BYTES


def keep_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` kept for a later comparison: ``t.clone()``, or, for a large GPU tensor, a copy in host memory
    (the comparison reads it chunk by chunk). Same dtype, shape and values; never shares memory with ``t``."""
    t = t.detach()
    if t.device.type != "cpu" and is_large(nbytes(t)):
        return t.to("cpu", copy=True)
    return t.clone()


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors of one dtype and shape hold the same bits, wherever each is (one on the host, one on the
    device): compared in chunks of :data:`CHUNK_ELEMENTS` on ``b``'s device
    (:func:`bitwise_equal` per chunk)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device == b.device and not is_large(nbytes(a)):
        return bitwise_equal(a, b)
    fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
    for start in range(0, fa.numel(), CHUNK_ELEMENTS):
        part = fa[start:start + CHUNK_ELEMENTS].to(fb.device)
        if not bitwise_equal(part, fb[start:start + CHUNK_ELEMENTS]):
            return False
    return True


def case_is_large(case: Any) -> bool:
    """True when the tensors of a case (:class:`~kernelpilot.kernels.case.Case`) add up to :data:`LARGE_BYTES` or
    more."""
    import torch

    return is_large(sum(nbytes(v) for v in case.inputs.values() if isinstance(v, torch.Tensor)))


def release_cached(case: Any) -> None:
    """After a large case's role observation (copies of every tensor, the reference run in this process): the
    device memory it freed goes back to the driver (``torch.cuda.empty_cache``), where the reference process's
    float64 work finds it; below :data:`~kernelpilot.measure.memory.LARGE_BYTES` nothing is done."""
    import torch

    if any(isinstance(v, torch.Tensor) and v.is_cuda for v in case.inputs.values()) and case_is_large(case):
        torch.cuda.empty_cache()


#: Integer dtypes of each element size, for comparing tensors bit for bit (NaN payloads included).
_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors of one dtype and shape hold the same bits (so NaN equals the same NaN, and -0.0 differs
    from 0.0): one pass over both, through integer views of the same element size; dtypes without one (complex128)
    compare their real and imaginary parts the same way."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_complex:
        return bitwise_equal(torch.view_as_real(a), torch.view_as_real(b))
    bits = _BITS.get(a.element_size())
    if bits is None or a.dtype == torch.bool:
        return torch.equal(a, b)
    return torch.equal(a.view(getattr(torch, bits)), b.view(getattr(torch, bits)))
