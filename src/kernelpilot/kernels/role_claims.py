"""Declared buffer roles checked against observed ones (issue 23; docs/contract.md, "Buffer roles").

``setup()``'s ``outputs``, ``inplace``, ``partial``, ``scratch`` and the seed ABI's non-const pointers are claims;
:func:`check_claims` compares each with the :class:`~kernelpilot.kernels.roles.TensorRole` observed by
:func:`~kernelpilot.kernels.roles.observe_roles`: a contradiction that would hide a read from the checks or the
floor is a :class:`~kernelpilot.errors.RoleMismatch`; benign ones follow the observation with a note.
:func:`record_kernel_writes` records what the kernel itself wrote in the check's first launch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelpilot.errors import RoleMismatch
from kernelpilot.kernels.case import poison_tensor
from kernelpilot.kernels.roles import RoleReport, TensorRole

if TYPE_CHECKING:
    import torch

    from kernelpilot.kernels.case import Case

__all__ = ["PARTIAL_SHARE", "check_claims", "record_kernel_writes", "same_bits"]

#: The largest share of the observed bytes a ``partial`` claim may take out of the floor against an observed dense
#: read (benchmarks/library/liger_rope.py: cos and sin, under 1 %, whose halves are equal); above it the claim is a
#: :class:`~kernelpilot.errors.RoleMismatch`.
PARTIAL_SHARE = 0.1


def check_claims(report: RoleReport, path: Any = "", *, judge_partial: bool = True) -> list[str]:
    """Check the declarations recorded in ``report`` (each tensor's ``declared``) against what was observed.

    Returns:
        Notes for benign disagreements (a non-const pointer only read, an output declared in-place that is a pure
        output, an in-place output written only in part, an input never read): the observation is followed. A
        ``partial`` claim on a tensor read in full holding at most :data:`PARTIAL_SHARE` of the observed bytes is
        honoured (its read bytes set to 0 in ``report``) and noted; ``judge_partial`` False (a derived shape, where
        a small tensor's share is larger than at the run's shape) honours every such claim.

    Raises:
        RoleMismatch: an input declared ``scratch`` that the reference reads; a declared output (not a seed
            ``may-write`` pointer) the reference never writes; a declared input the reference writes; ``partial``
            declared on a tensor whose every chunk and every probe is read and that holds more than
            :data:`PARTIAL_SHARE` of the observed bytes (the message names the tensor, the claim and what was
            observed).
    """
    notes: list[str] = []
    for t in report.tensors.values():
        claim, seen = t.declared, _seen(t)
        base = claim.split("+partial")[0]
        where = f"{path}: " if path else ""
        if base == "scratch" and t.read:
            raise RoleMismatch(f"{where}{t.name!r} is declared scratch, but the reference reads it ({seen})",
                               f'remove {t.name!r} from setup()["scratch"]: scratch is for workspaces the '
                               "reference never reads (they leave the refresh, the re-check and the floor)",
                               tensor=t.name, claim="scratch", observed=seen)
        if base in ("output", "output+inplace") and t.written_fraction == 0.0:
            raise RoleMismatch(f"{where}{t.name!r} is declared an output, but the reference never writes it nor "
                               f"returns it ({seen})",
                               "list in outputs only what the reference writes or returns; an input the kernel "
                               "only reads stays out of outputs", tensor=t.name, claim=base, observed=seen)
        if base == "input" and t.written_fraction > 0.0:
            raise RoleMismatch(f"{where}{t.name!r} is declared an input (not an output), but the reference writes "
                               f"{t.written_fraction:.1%} of it ({seen})",
                               f"declare {t.name!r} in outputs (with inplace, if its prior values matter) when the "
                               "kernel must write it too, or make the reference work on a copy",
                               tensor=t.name, claim="input", observed=seen)
        if claim.endswith("+partial") and t.read and t.read_fraction >= 1.0:
            if judge_partial and t.bytes_read > PARTIAL_SHARE * report.bytes_total:
                raise RoleMismatch(f"{where}{t.name!r} is declared partial (read in part), but every one of its "
                                   f"chunks and probed elements is read ({seen}), and it holds "
                                   f"{t.bytes_read / max(report.bytes_total, 1):.0%} of the bytes observed",
                                   f'remove {t.name!r} from setup()["partial"]', tensor=t.name, claim="partial",
                                   observed=seen)
            t.note = (f"declared partial, observed read in full ({t.bytes_read} bytes, under "
                      f"{PARTIAL_SHARE:.0%} of the total): not counted, as declared")
            notes.append(f"{t.name}: {t.note} (a kernel may exploit structure in the values, as Liger's RoPE reads "
                         "one half of cos whose halves are equal)")
            t.bytes_read, t.read_fraction = 0, 0.0
        if base == "may-write" and t.role in ("input", "unused"):
            notes.append(f"{t.name}: a non-const pointer the reference only reads: treated as an input (watched, "
                         "refreshed, never poisoned)")
        elif base == "output+inplace" and t.role == "output":
            notes.append(f"{t.name}: declared in-place, observed a pure output (written in full, prior values "
                         "unused): poisoned before each launch")
        elif base in ("output", "output+inplace", "may-write") and t.role == "partial-write":
            notes.append(f"{t.name}: declared {claim}, observed written in part ({t.written_fraction:.1%}): "
                         "restored before each launch, its unwritten part compared too")
        elif base == "output" and t.role == "inplace":
            notes.append(f"{t.name}: declared a pure output, but the reference reads its prior values: restored "
                         "before each launch instead of poisoned")
        elif base == "input" and t.role == "unused":
            notes.append(f"{t.name}: never read by the reference: not counted in the floor's bytes")
    return notes


def _seen(t: TensorRole) -> str:
    read = "not read" if not t.read else (
        f"read ({t.read_chunks}/{t.chunks} chunks, {t.probes_read}/{t.probes} probes)" if t.chunks > 1 else "read")
    prior = ", its prior values used" if t.depends_on_prior and t.written_fraction else ""
    return f"observed {t.role}: {read}, {t.written_fraction:.1%} written{prior}"


def same_bits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise bit equality of two tensors of one dtype and shape (NaN equals the same NaN): a flat bool
    tensor of their element count (integer views of the element size; bool and complex by value)."""
    import torch

    bits = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}.get(a.element_size())
    if bits is None or a.dtype == torch.bool or a.dtype.is_complex:
        return (a == b).reshape(-1)
    return (a.view(getattr(torch, bits)) == b.view(getattr(torch, bits))).reshape(-1)


def record_kernel_writes(case: Case, pristine: dict[str, Any]) -> None:
    """Record in ``case.roles`` the fraction of each written tensor the kernel's launch changed: a poisoned output's
    elements that no longer hold the poison, a restored tensor's elements that differ from their pristine value."""
    import torch

    if case.roles is None:
        return
    for name in case.outputs:
        t, role = case.inputs[name], case.roles.tensors.get(name)
        if role is None or t.numel() == 0:
            continue
        if name in case.inplace:
            changed = ~same_bits(pristine[name].to(t.device), t)
        else:  # the poison of one element, broadcast: no tensor of the output's size
            probe = torch.empty(1, dtype=t.dtype, device=t.device)
            poison_tensor(probe)
            changed = ~same_bits(probe.expand(t.shape), t)
        role.kernel_written_fraction = int(changed.sum()) / changed.numel()
