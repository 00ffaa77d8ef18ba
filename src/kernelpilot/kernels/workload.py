"""FLOPs and bytes of a kernel at a shape: the kernel file's own counts, or the contract's default for bytes."""

from __future__ import annotations

from pydantic import BaseModel

from kernelpilot.errors import ContractError, DeclarationError
from kernelpilot.kernels.contract import Case, KernelFile


class Workload(BaseModel):
    """Work at one shape. ``flops`` in operations, ``bytes_moved`` in bytes; ``*_source`` says where each came from."""

    flops: float
    bytes_moved: float
    flops_source: str
    bytes_source: str


def minimum_bytes(case: Case) -> int:
    """The fewest bytes any kernel computing ``case`` must move, from the tensors themselves (bytes).

    With observed roles (``case.roles``, :mod:`kernelpilot.kernels.roles`): each tensor's read part once
    (``read_fraction`` × its bytes: a lower bound, a gather into a table counts only what probes showed read) plus
    its written part (``written_fraction`` × its bytes: an in-place tensor written in part counts the part
    written); scratch and unused tensors 0. The fractions observed at one shape are applied to this case's
    tensors (exact at the observed shape).

    Without observed roles, the declarations: every input tensor read once, every output written once, an in-place
    tensor (``case.inplace``) read once and written once; tensors declared read only in part (``case.partial``: an
    embedding table read by index) and scratch buffers (``case.scratch``) not counted.

    The pristine copies kernelpilot keeps are never counted (docs/measuring.md, "Roofline"). An author's
    ``bytes_moved()`` below this is refused, and without one this is the bytes of the roofline: the
    speed-of-light floor can never be switched off by declaring less traffic than the tensors hold.
    """
    import math

    import torch

    total = 0
    if case.roles is not None:
        for name, role in case.roles.tensors.items():
            value = case.inputs.get(name)
            if not isinstance(value, torch.Tensor) or role.role in ("scratch", "unused"):
                continue
            nbytes = value.numel() * value.element_size()
            total += math.floor(role.read_fraction * nbytes) if role.read else 0
            total += math.floor(role.written_fraction * nbytes)
        return total
    for name, value in case.inputs.items():
        if isinstance(value, torch.Tensor) and name not in case.partial and name not in case.scratch:
            total += value.numel() * value.element_size() * (2 if name in case.inplace else 1)
    return total


def counted_flops(kf: KernelFile, case: Case) -> float | None:
    """FLOPs of the reference as PyTorch's ``FlopCounterMode`` counts them (matrix products, convolutions,
    attention; not elementwise work), run on meta tensors of the case's shapes (nothing computed); None when the
    reference cannot run on meta tensors (e.g. it reads a value with ``.item()``)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    meta = {k: (torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v)
            for k, v in case.inputs.items()}
    try:
        with FlopCounterMode(display=False) as counter:
            kf.reference(**meta)
        return float(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - a reference that needs data: no count, the declared flops stand
        return None


def workload(kf: KernelFile, case: Case) -> Workload:
    """FLOPs and bytes of ``case``: the file's ``flops(**shape)``/``bytes_moved(**shape)`` when declared, else the
    reference's counted FLOPs (0 when it counts none) and :func:`minimum_bytes`.

    A ``flops()`` below the reference's counted FLOPs is accepted only with a module-level ``FLOPS_REASON``
    string (a causal kernel skips half of a dense reference's work), recorded in ``flops_source``.

    Raises:
        ContractError: ``flops``/``bytes_moved`` raised or returned a negative or non-numeric value.
        DeclarationError: a value below what the tensors hold (bytes), or below the reference's own operations
            (FLOPs) without ``FLOPS_REASON``: declaring less work would lower the speed-of-light floor.
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

    floor_bytes = float(minimum_bytes(case))
    counted = counted_flops(kf, case)
    if kf.flops_fn is not None:
        flops, fsrc = call(kf.flops_fn, "flops"), f"{kf.path.name}: flops()"
        reason = getattr(kf.module, "FLOPS_REASON", None)
        if counted is not None and flops < counted * (1 - 1e-9) and reason:
            fsrc += f"; below the reference's counted {counted:.6g} because: {reason}"
        elif counted is not None and flops < counted * (1 - 1e-9):
            raise DeclarationError(f"{kf.path}: flops() = {flops:.6g} at {case.shape} is below the {counted:.6g} FLOPs "
                                "the reference's own operations count (torch FlopCounterMode)",
                                "declare the FLOPs the computation needs (e.g. 2*M*N*K for a matmul), or remove "
                                "flops() to use the counted value; a kernel that truly does less arithmetic than "
                                "its reference (causal masking, sparsity) says why, visibly: FLOPS_REASON = '...'")
    elif counted:
        flops, fsrc = counted, "counted from the reference's operations (torch FlopCounterMode)"
    else:
        flops, fsrc = 0.0, "not declared (flops() absent) and none counted in the reference: pure data movement"
    if kf.bytes_fn is not None:
        nbytes, bsrc = call(kf.bytes_fn, "bytes_moved"), f"{kf.path.name}: bytes_moved()"
        if nbytes < floor_bytes * (1 - 1e-9):
            raise DeclarationError(f"{kf.path}: bytes_moved() = {nbytes:.6g} at {case.shape} is below the "
                                f"{floor_bytes:.6g} bytes its tensors hold (inputs read once, outputs written once)",
                                'declare the real traffic; inputs read only in part go in setup()["partial"] (the '
                                "check observes the parts read and written: its roles record says what it saw)")
    else:
        nbytes, bsrc = floor_bytes, (
            "observed by running the reference: the parts of each tensor read and written (kernels/roles.py)"
            if case.roles is not None else
            "minimum from the tensors: inputs read once, outputs written once, in-place ones read and written")
    return Workload(flops=flops, bytes_moved=nbytes, flops_source=fsrc, bytes_source=bsrc)
