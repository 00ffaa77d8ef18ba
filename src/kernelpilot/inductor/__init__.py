"""Import torch.compile's (Inductor's) Triton kernels for a kernel file's reference as a kernel file of its own.

:mod:`.capture` compiles the reference on the GPU in an isolated worker and keeps Inductor's output code;
:mod:`.convert` (pure: no GPU, no torch import) turns that code into a kernel file in kernelpilot's contract, its
launch parameters as ``TUNABLES``. The API function is :func:`kernelpilot.inductor.importer.import_inductor` (``kernelpilot.api.import_inductor``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.inductor.capture import CapturedCode
from kernelpilot.inductor.errors import InductorCaptureError, InductorConvertError, InductorNoGpu, NoTritonKernel

__all__ = ["CapturedCode", "InductorCaptureError", "InductorConvertError", "InductorNoGpu", "NoTritonKernel",
           "capture_kernel"]


def capture_kernel(kernel: str | Path, *, ref: str | Path | None = None, shape: dict[str, Any] | None = None,
                   mode: str = "default", timeout_s: float = 600.0) -> CapturedCode:
    """Compile the kernel file's reference with torch.compile at ``mode`` on the GPU, in an isolated worker, and
    return Inductor's output code with what is needed to convert it (:class:`CapturedCode`).

    Args:
        kernel: the kernel file (its ``setup`` builds the inputs; its ``reference`` is compiled).
        ref: a file defining ``reference`` instead. shape: overrides of the file's SHAPE.
        mode: torch.compile's mode. timeout_s: seconds the worker may take (a max-autotune compile takes minutes).

    Raises:
        InductorNoGpu: the worker found no CUDA GPU. InductorCaptureError: torch.compile failed.
        ContractError / KernelFailed: the kernel file breaks the contract, or its code failed in the worker.
    """
    from kernelpilot.search.isolated import run_isolated

    got = run_isolated(kernel, "kernelpilot.inductor.capture:capture_in_worker", shape, mode, ref=ref,
                       interpreted=None, timeout_s=timeout_s)
    if got.get("problem") == "no_gpu":
        raise InductorNoGpu(f"{kernel}: {got['message']}",
                            "run on a machine with a CUDA GPU (or convert a capture taken there: --from-capture)")
    if "captured" not in got:
        raise InductorCaptureError(f"{kernel}: torch.compile (mode={mode}) of the reference failed: {got.get('message')}",
                                   "run the reference under torch.compile yourself to see the full error")
    return CapturedCode.model_validate_json(got["captured"])
