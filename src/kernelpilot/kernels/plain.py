"""The harness's own tensor objects: plain ``torch.Tensor`` aliases of what ``setup`` built, and fresh ones for each
launch (docs/contract.md, "What the harness reads").

A tensor is a Python object the kernel file can change without touching its data: a subclass whose
``__torch_function__`` computes the result when the harness reads the output (the lazy-output trick of the
integrity table: deferral into the checker, reference-kernels #161 and SOL-ExecBench's sample hack), or a
``y.__class__ = Lazy`` / ``y.set_(other)`` applied by ``run_kernel`` to the object it was given, or by ``setup`` to
objects it kept. So the harness never reads through an object kernel code holds: :func:`make_case
<kernelpilot.kernels.case.make_case>` replaces each tensor ``setup`` returned by a plain alias (same storage, shape,
strides, dtype, ``requires_grad``; exactly ``torch.Tensor``, made with every subclass's ``__torch_function__``
disabled), and :func:`kernelpilot.kernels.contract.run_kernel` hands the kernel a fresh alias of each per launch.
Writes through any alias land in the shared storage, which is all the harness reads; what the kernel does to the
objects it was handed stays with them. Cost: one alias per tensor per launch, about 1 µs each on a 2-core CPU host
(``Tensor.as_subclass``), host time that the timers' opening spin keeps out of GPU times.
"""

from __future__ import annotations

from typing import Any

__all__ = ["plain_alias", "plain_aliases"]


def plain_alias(value: Any) -> Any:
    """``value`` with every tensor in it (at the top, or in a list or tuple) replaced by a new ``torch.Tensor``
    object sharing its storage and view (a subclass's behaviour stripped); anything else returned unchanged.
    Raises nothing of its own (a tensor whose alias cannot be made is returned as it is)."""
    import torch

    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            try:
                return torch.Tensor.as_subclass(value, torch.Tensor)
            except (RuntimeError, TypeError):  # a wrapper subclass without storage of its own
                return value
    if isinstance(value, (list, tuple)):
        return type(value)(plain_alias(v) for v in value) if type(value) in (list, tuple) else value
    return value


def plain_aliases(inputs: dict[str, Any]) -> dict[str, Any]:
    """:func:`plain_alias` of each value of ``inputs`` (name -> tensor, scalar or list), in a new dict."""
    return {name: plain_alias(v) for name, v in inputs.items()}
