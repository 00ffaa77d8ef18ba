"""Cheat (check): setup hands out the output as a tensor subclass that computes the softmax when it is read.

``run_kernel`` launches a kernel that does nothing; the output ``y`` is a ``torch.Tensor`` subclass whose
``__torch_function__`` fills it with ``torch.softmax`` of the input it was given, whenever any torch function reads
it (a clone, an upcast, a comparison). The work moves out of the timed launch into the harness's own read of the
result: lazy evaluation deferred into the checker. Right whenever a harness reads the object setup made; caught
because kernelpilot reads outputs only through plain ``torch.Tensor`` aliases of their storage, which the kernel
never wrote (the check sees the NaN fill).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024}
CPU_SHAPE = {"M": 8, "N": 128}
TUNABLES = {"num_warps": [4, 8]}

#: What a harness does to an output without computing: no softmax for these (the NaN fill, the object protocol).
_QUIET = {"fill_", "__get__", "__set__", "__repr__", "__format__", "size", "dim", "numel", "data_ptr", "stride"}


class LazySoftmax(torch.Tensor):
    """An output that becomes softmax(src) the first time a torch function reads it."""

    src = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            if getattr(func, "__name__", "") not in _QUIET:
                for a in (*args, *kwargs.values()):
                    if isinstance(a, LazySoftmax) and a.src is not None:
                        torch.Tensor.copy_(a, torch.softmax(a.src, dim=-1))
            return func(*args, **kwargs)


@triton.jit
def _touch(x_ptr):
    """Does nothing: a launch for the timer to see."""
    pass


def setup(M, N, seed=0, device="cuda", **_):
    """Seeded x; y is the lazy subclass, tied to x."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    y = torch.empty_like(x).as_subclass(LazySoftmax)
    y.src = x
    return {"inputs": {"x": x, "y": y, "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """One empty program."""
    _touch[(1,)](x, num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
