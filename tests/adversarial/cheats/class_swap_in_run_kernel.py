"""Cheat (check): run_kernel turns the output object it was handed into a lazy subclass instead of writing it.

Setup is honest (plain tensors). ``run_kernel`` launches nothing that writes ``y``; it assigns ``y.__class__`` to a
subclass whose ``__torch_function__`` computes ``torch.softmax`` of the input when the harness later reads ``y``
(Python lets a tensor's class be reassigned). A harness that passes its own tensor objects to the kernel reads the
right values from an output that no launch wrote. Caught because each launch gets fresh plain aliases of the
harness's tensors: the class changes on the alias, and the harness reads its own object, whose storage holds the
NaN fill.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024}
CPU_SHAPE = {"M": 8, "N": 128}
TUNABLES = {"num_warps": [4, 8]}

_QUIET = {"fill_", "__get__", "__set__", "__repr__", "__format__", "size", "dim", "numel", "data_ptr", "stride"}


class BecomesSoftmax(torch.Tensor):
    """A tensor that becomes softmax(src) when a torch function reads it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            if getattr(func, "__name__", "") not in _QUIET:
                for a in (*args, *kwargs.values()):
                    if isinstance(a, BecomesSoftmax) and getattr(a, "src", None) is not None:
                        torch.Tensor.copy_(a, torch.softmax(a.src, dim=-1))
            return func(*args, **kwargs)


@triton.jit
def _touch(x_ptr):
    """Does nothing: a launch for the timer to see."""
    pass


def setup(M, N, seed=0, device="cuda", **_):
    """Seeded x and an uninitialized y, both plain tensors."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """One empty program; y's class changed so that a read computes the result."""
    _touch[(1,)](x, num_warps=num_warps)
    y.__class__ = BecomesSoftmax
    y.src = x


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
