"""The reference run itself: float64 copies of the inputs (native ones when float64 fails), the reference called on
them, and its results collected whether it returns them, writes them in place, or both. The reference process
(:mod:`kernelpilot.measure.refproc`) runs it; :func:`kernelpilot.measure.correctness.reference_outputs` runs it in the
worker when no reference process serves the kernel file (the Python API without a worker, tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelpilot.kernels.roles import reference_results

if TYPE_CHECKING:
    import torch

__all__ = ["reference_outputs_local"]


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _upcast(value: Any) -> Any:
    """A float64 copy of a floating tensor (one pass: ``to(copy=True)``), a copy of any other tensor, else the value."""
    import torch

    if _is_tensor(value) and value.dtype.is_floating_point:
        return value.detach().to(torch.float64, copy=True)
    return value.detach().clone() if _is_tensor(value) else value


def _collect_reference(result: Any, ref_inputs: dict[str, Any], outputs: list[str],
                       prior: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
    """The reference's result for each of ``outputs``: returned (a tensor, a tuple in order, a dict), written in
    place, or both (a returned tensor sharing storage with an argument is that argument's result;
    :func:`kernelpilot.kernels.roles.reference_results`)."""
    if isinstance(result, dict):
        missing = [n for n in outputs if n not in result and n not in ref_inputs]
        if missing:
            raise ValueError(f"reference returned a dict without {missing}")
    results = reference_results(result, ref_inputs, outputs, prior)
    return {n: results[n] for n in outputs}


def _clone(value: Any) -> Any:
    return value.detach().clone() if _is_tensor(value) else value


def _upcast_on_cpu(value: Any) -> Any:
    """:func:`_upcast` into host memory (a GPU tensor's float64 copy made on the CPU)."""
    import torch

    if _is_tensor(value) and value.dtype.is_floating_point:
        return value.detach().to("cpu", torch.float64, copy=True)
    return value.detach().to("cpu", copy=True) if _is_tensor(value) else value


def _is_oom(exc: BaseException) -> bool:
    """True for a CUDA out-of-memory error (``torch.OutOfMemoryError``, or a RuntimeError saying so)."""
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(exc, oom) or "out of memory" in str(exc).lower()


def reference_outputs_local(reference: Any, inputs: dict[str, Any], outputs: list[str],
                            blank: tuple[str, ...] | list[str] = ()) -> tuple[dict[str, torch.Tensor], str]:
    """:func:`kernelpilot.measure.correctness.reference_outputs` in this process, with the function ``reference`` (the reference process's own
    computation; :mod:`kernelpilot.measure.refproc`).

    Args:
        blank: pure outputs among ``inputs`` (whose tensors only give dtype and shape: they may be on the ``meta``
            device): each passed as zeros made here in the precision of the run (float64 for a floating dtype when
            upcast) on the other inputs' device; their prior value, zeros, is a broadcast view (no second copy).
    """
    device = next((v.device for k, v in inputs.items() if _is_tensor(v) and k not in blank), None)

    def run(prepare: Any) -> dict[str, torch.Tensor]:
        ref_inputs, prior = {}, {}
        for k, v in inputs.items():
            if k in blank and _is_tensor(v):
                zero = prepare(_zeros(v.dtype, device))
                ref_inputs[k] = zero.expand(v.shape).clone()
                if k in outputs:
                    prior[k] = zero.expand(v.shape)
            else:
                ref_inputs[k] = prepare(v)
                if k in outputs and _is_tensor(ref_inputs[k]):
                    prior[k] = _clone(ref_inputs[k])
        return _collect_reference(reference(**ref_inputs), ref_inputs, outputs, prior)

    try:
        return run(_upcast), "float64"
    except Exception as exc:  # some ops have no float64 kernel; fall back and say so
        if _is_gpu(inputs) and _is_oom(exc):
            # float64 copies of a problem of several GiB do not fit beside the worker's tensors (KernelBench's
            # level-1 sizes: 1.6e9 floats, 6 GiB each): the same float64 reference in host memory, its results
            # handed back for copying to the device (an honest kernel is never failed for the checker's memory)
            import gc

            import torch

            gc.collect()
            torch.cuda.empty_cache()
            try:
                return run(_upcast_on_cpu), f"float64 (on the CPU: the GPU ran out of memory: {str(exc)[:120]})"
            except Exception as again:  # noqa: BLE001 - the native fallback below says why
                exc = again
        note = f"native (float64 failed: {type(exc).__name__}: {exc})"
    return run(_clone), note


def _zeros(dtype: Any, device: Any) -> Any:
    """A zero of ``dtype`` (a 0-d tensor) on ``device`` (the host when None)."""
    import torch

    return torch.zeros((), dtype=dtype, device=device if device is not None else "cpu")


def _is_gpu(inputs: dict[str, Any]) -> bool:
    return any(_is_tensor(v) and v.is_cuda for v in inputs.values())
