"""FLOPs and bytes of a kernel at a shape: the kernel file's own counts, or the contract's default for bytes."""

from __future__ import annotations

from pydantic import BaseModel

from kernelpilot.errors import ContractError
from kernelpilot.kernels.contract import Case, KernelFile


class Workload(BaseModel):
    """Work at one shape. ``flops`` in operations, ``bytes_moved`` in bytes; ``*_source`` says where each came from."""

    flops: float
    bytes_moved: float
    flops_source: str
    bytes_source: str


def default_bytes(case: Case) -> int:
    """Bytes of every tensor in ``case.inputs``, each counted once (outputs are among the inputs), in bytes.

    This is the contract's default (docs/contract.md) (inputs read once + outputs written once). An in-place tensor
    (``case.inplace``) is both read and written yet counted once, and the pristine copies kernelpilot keeps to
    restore it (``case.pristine``) are never counted: the count errs low, never high, so the speed-of-light floor
    derived from it can only be too lenient and never rejects a real kernel as impossibly fast.
    """
    import torch

    total = 0
    for name, value in case.inputs.items():
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
    return total


def workload(kf: KernelFile, case: Case) -> Workload:
    """FLOPs (``flops(**shape)`` or 0 when the file declares none) and bytes (``bytes_moved(**shape)`` or the default).

    Raises:
        ContractError: ``flops``/``bytes_moved`` raised or returned a negative or non-numeric value.
    """
    def call(fn, what: str) -> float:
        try:
            value = float(fn(**case.shape))
        except Exception as exc:
            raise ContractError(f"{kf.path}: {what}(**shape) raised {type(exc).__name__}: {exc}",
                                f"{what} must accept the shape's names as keywords (add **_)") from exc
        if not value >= 0:
            raise ContractError(f"{kf.path}: {what} returned {value}", f"{what} must return a count >= 0")
        return value

    if kf.flops_fn is not None:
        flops, fsrc = call(kf.flops_fn, "flops"), f"{kf.path.name}: flops()"
    else:
        flops, fsrc = 0.0, "not declared (flops() absent): treated as 0, pure data movement"
    if kf.bytes_fn is not None:
        nbytes, bsrc = call(kf.bytes_fn, "bytes_moved"), f"{kf.path.name}: bytes_moved()"
    else:
        nbytes, bsrc = float(default_bytes(case)), "default: every tensor among the inputs (outputs included) counted once"
    return Workload(flops=flops, bytes_moved=nbytes, flops_source=fsrc, bytes_source=bsrc)
