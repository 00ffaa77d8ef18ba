"""The harness's own tensor objects: plain ``torch.Tensor`` aliases of what ``setup`` built, and fresh ones for each
launch (docs/contract.md, "What the harness reads").

A tensor is a Python object the kernel file can change without touching its data: a subclass whose
``__torch_function__`` computes the result when the harness reads the output (the lazy-output trick of the
integrity table: deferral into the checker, reference-kernels #161 and SOL-ExecBench's sample hack), or a
``y.__class__ = Lazy`` / ``y.set_(other)`` applied by ``run_kernel`` to the object it was given, or by ``setup`` to
objects it kept. So the harness never reads through an object kernel code holds: :func:`make_case
<kernelpilot.kernels.case.make_case>` replaces each tensor ``setup`` returned by a plain alias (same storage,
offset, shape, strides and dtype; exactly ``torch.Tensor``; detached, so it requires no grad: a leaf that did would
refuse the in-place writes a kernel makes), and
:func:`kernelpilot.kernels.contract.run_kernel` hands the kernel a fresh alias of each per launch. Writes through
any alias land in the shared storage, which is all the harness reads; what the kernel does to the objects it was
handed stays with them.

An alias is ``Tensor.detach`` called unbound with every subclass's ``__torch_function__`` switched off: a plain
tensor with no ``_base`` and no autograd edge back to the object it came from (``as_subclass`` keeps both:
``alias._base`` *is* the harness's object, so a kernel could reach it). A subclass with ``__torch_dispatch__``
(a wrapper tensor) keeps its class through it; :func:`plain_aliases` refuses those with ``strict``. Cost: about
0.6 µs per tensor per launch on a 2-core CPU host, host time that the timers' opening spin keeps out of GPU times.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.errors import ContractError

__all__ = ["plain_alias", "plain_aliases", "storage_span"]


def plain_alias(value: Any) -> Any:
    """``value`` with every tensor in it (at the top, or in a list or tuple) replaced by a new ``torch.Tensor``
    object sharing its storage and view, with no reference back to it; anything else returned unchanged. A tensor
    subclass with ``__torch_dispatch__`` comes back as that subclass (see the module docstring). Raises nothing."""
    import torch

    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            return torch.Tensor.detach(value)
    if type(value) in (list, tuple):
        return type(value)(plain_alias(v) for v in value)
    return value


def plain_aliases(inputs: dict[str, Any], *, strict: str | None = None) -> dict[str, Any]:
    """:func:`plain_alias` of each value of ``inputs`` (name -> tensor, scalar or list), in a new dict.

    Args:
        strict: the kernel file's path, to refuse a tensor that stays a subclass (``make_case`` on what ``setup``
            returned); None (each launch) returns whatever the aliases are.

    Raises:
        ContractError: with ``strict``, a tensor whose alias is not exactly ``torch.Tensor``.
    """
    import torch

    out = {name: plain_alias(v) for name, v in inputs.items()}
    if strict is not None:
        for name, v in out.items():
            for t in (v if type(v) in (list, tuple) else (v,)):
                if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor:
                    raise ContractError(
                        f"{strict}: setup returned {name!r} as {type(t).__name__}, a tensor subclass with its own "
                        "dispatch: kernelpilot reads inputs and outputs only as plain tensors, and cannot see what "
                        "such a subclass computes when it is read",
                        "return plain torch.Tensor objects from setup (the subclass's inner tensors, e.g. the data "
                        "and the scales of a quantized tensor, as separate inputs)")
    return out


def storage_span(t: Any) -> Any:
    """The 1-D run of storage elements that a tensor with internal overlap (a stride-0 ``expand``: every row the
    same memory) is made of, from its first element to its last; ``t`` itself otherwise (no overlap, or empty).

    The harness writes a broadcast input's new values through it (:func:`kernelpilot.kernels.case.draw_values`):
    ``copy_`` into the overlapping view is refused by torch, and the values the view shows are its storage's. An
    honest kernel fed ``x.expand(M, N)`` failed the timing stage with "more than one element of the written-to
    tensor refers to a single memory location" before. Raises nothing."""
    import torch

    if t.numel() == 0 or torch._debug_has_internal_overlap(t) != 1:
        return t
    n = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.as_strided((n,), (1,), t.storage_offset())
