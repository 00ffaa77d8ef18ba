"""The errors of the Inductor import (:mod:`kernelpilot.inductor`): typed, each with a message and a hint."""

from __future__ import annotations

from kernelpilot.errors import KernelpilotError, ToolMissingError

__all__ = ["InductorCaptureError", "InductorConvertError", "InductorNoGpu", "NoTritonKernel"]


class InductorNoGpu(ToolMissingError):
    """No CUDA GPU where the capture ran: Inductor writes Triton kernels only for CUDA tensors (on the CPU it writes
    C++), so there is nothing to capture."""


class InductorCaptureError(KernelpilotError):
    """torch.compile of the reference failed, or its output could not be read (the message holds the cause)."""


class NoTritonKernel(KernelpilotError):
    """torch.compile generated no Triton kernel for the reference: the work went to library calls (``extern_kernels.mm``:
    cuBLAS; ``aten`` fallbacks). Nothing to import; the message names the calls seen (attribute ``extern_calls``).

    Args:
        message / hint: as every KernelpilotError. extern_calls: the extern calls of the output code, in order.
    """

    def __init__(self, message: str, hint: str = "", extern_calls: list[str] | None = None) -> None:
        super().__init__(message, hint)
        self.extern_calls = list(extern_calls or [])

    def to_dict(self) -> dict:  # type: ignore[override]
        """``{"error", "message", "hint", "extern_calls"}``."""
        return {**super().to_dict(), "extern_calls": self.extern_calls}


class InductorConvertError(KernelpilotError):
    """Inductor's output code holds something the converter does not support (a grid type, a kernel kind, a launch
    it cannot read); the message names it, so no file half-right is written."""
