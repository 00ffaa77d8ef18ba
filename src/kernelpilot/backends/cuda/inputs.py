"""Inputs for a ``.cu`` kernel without a sidecar ``setup()``: synthesized from the ``solve`` signature the way the
seed workflows do it (docs/cuda.md, "Inputs").

One element count for every buffer (:func:`element_count`): ``ptr_size`` when given (``--ptr-size`` /
``--shape ptr_size=N``), else 1,048,576 when ``solve`` has no integer parameter, else the single integer, else the
product of the two largest; capped at :data:`MAX_ELEMENTS`. Every buffer, ``const`` or not, is filled: floating
ones ``randn``, integer ones random in ``[0, min(100, count))`` (valid indices into any buffer). A non-const
pointer is one ``solve`` *may* write (the seed harness clones them all and runs the reference on the clones): the
check observes which it really writes (:mod:`kernelpilot.kernels.roles`), poisons only pure outputs and treats a
non-const buffer the reference only reads (the seed GEMM's ``float* A``) as an input. The generator is seeded with
``42 + seed`` (the seed workflows' 42 for the first check seed).
"""

from __future__ import annotations

from typing import Any, Callable

from kernelpilot.backends.cuda.signature import Signature
from kernelpilot.errors import ContractError

__all__ = ["DEFAULT_DIM", "DEFAULT_ELEMENTS", "MAX_ELEMENTS", "element_count", "synthesized_setup"]

#: Elements per buffer when ``solve`` has no integer parameter.
DEFAULT_ELEMENTS = 1 << 20
#: Elements per buffer at most (2^27: 512 MiB of float32 per buffer).
MAX_ELEMENTS = 1 << 27
#: A dimension's default when neither a sidecar nor a ``// kernelpilot: SHAPE`` gives one (override: --shape).
DEFAULT_DIM = 1024


def element_count(dims: dict[str, int], ptr_size: int = 0) -> int:
    """Elements of every synthesized buffer (rule in the module docstring).

    Args:
        dims: the integer parameters of ``solve`` and their values.
        ptr_size: an explicit count (> 0 wins).

    Raises:
        ContractError: a dimension or ``ptr_size`` that is negative, or a count of 0.
    """
    bad = {k: v for k, v in dims.items() if not isinstance(v, int) or v < 0}
    if bad or ptr_size < 0:
        raise ContractError(f"dimensions must be non-negative integers, got {bad or {'ptr_size': ptr_size}}",
                            "e.g. --shape N=4096")
    if ptr_size > 0:
        count = ptr_size
    elif not dims:
        count = DEFAULT_ELEMENTS
    elif len(dims) == 1:
        count = next(iter(dims.values()))
    else:
        a, b = sorted(dims.values())[-2:]
        count = a * b
    if count <= 0:
        raise ContractError(f"the synthesized buffers would have {count} elements (dims {dims})",
                            "give positive dimensions (--shape N=1024) or --ptr-size N")
    return min(count, MAX_ELEMENTS)


def synthesized_setup(sig: Signature, inplace: list[str] | None = None) -> Callable[..., dict[str, Any]]:
    """A contract ``setup(**dims, ptr_size=0, seed=0, device="cuda")`` building one tensor per buffer of ``sig``
    (dtype from its type, :func:`element_count` elements) and passing the dimensions through; float scalars
    cannot be synthesized. ``inplace``: outputs ``solve`` also reads (``// kernelpilot: INPLACE = ["C"]``, e.g. a
    GEMM computing ``alpha*A@B + beta*C``): returned as ``"inplace"``, so kernelpilot restores them (their synthesized values) before
    every launch instead of leaving the check's NaN poison in them (the check also observes this by running the
    reference: an output whose prior values the reference reads is restored without the directive).

    Raises (when called):
        ContractError: a float scalar parameter, a missing dimension, or an ``inplace`` name that is no output.
    """
    inplace = list(inplace or [])
    if any(n not in sig.outputs for n in inplace):
        raise ContractError(f"INPLACE {inplace} names something that is not an output buffer of solve "
                            f"({', '.join(sig.outputs)})", '// kernelpilot: INPLACE = ["C"]')
    floats = [p.name for p in sig.params if p.kind == "float"]

    def setup(seed: int = 0, device: str = "cuda", ptr_size: int = 0, **dims: Any) -> dict[str, Any]:
        import torch

        if floats:
            raise ContractError(f"solve takes float scalars ({', '.join(floats)}) that cannot be synthesized",
                                "write a sidecar KERNEL.py with setup() returning them among the inputs")
        missing = [d for d in sig.dims if d not in dims]
        if missing:
            raise ContractError(f"no value for the dimension(s) {', '.join(missing)}", f"--shape {missing[0]}=1024")
        count = element_count({d: dims[d] for d in sig.dims}, int(ptr_size or 0))
        g = torch.Generator(device="cpu").manual_seed(42 + int(seed))
        inputs: dict[str, Any] = {}
        for p in sig.params:
            if p.kind == "int":
                inputs[p.name] = int(dims[p.name])
                continue
            dtype = getattr(torch, p.dtype)
            if dtype.is_floating_point:
                t = torch.randn(count, generator=g).to(dtype)
            elif dtype == torch.bool:
                t = torch.randint(0, 2, (count,), generator=g).bool()
            else:
                t = torch.randint(0, min(100, count), (count,), generator=g).to(dtype)
            inputs[p.name] = t.to(device)
        return {"inputs": inputs, "outputs": list(sig.outputs), **({"inplace": inplace} if inplace else {})}

    return setup
