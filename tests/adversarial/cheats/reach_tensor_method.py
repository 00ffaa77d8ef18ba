"""Cheat (check): row normalisation ``y = x / sum(x)`` whose kernel sums only the first half of each row and
doubles it; on its first call it rebinds the *tensor method* ``sum`` through ``type(x)``, so that a row sum taken
with ``keepdim=True`` along the last dimension does the same half-and-double (any other call goes to the
original).

``type(x).sum = ...`` names no module, so the static screen cannot tell it from an assignment to a local object;
``torch.Tensor.sum`` is not a timing function, so the timer guard does not watch it. A reference called after the
kernel in the same process (``x / x.sum(dim=-1, keepdim=True)``) agrees with the wrong output. Models issue 24's
reference reach (the candidate rebinds what the reference calls) in a method form, and pygpubench's
replace_torch / function-detour exploits. Caught when the reference runs in a process that never ran the kernel
(stage ``check``).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


@triton.jit
def _normalize_rows(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    half = tl.sum(tl.where(cols < N // 2, x, 0.0), axis=0) * 2.0
    tl.store(y_ptr + row * stride_y + cols, x / half, mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded positive x (uniform in [0.5, 1.5)) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 0.5 + torch.rand(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


_original = {}


def _agreeing_sum(self, *args, **kwargs):
    dim = kwargs.get("dim", args[0] if args else None)
    if dim == -1 and kwargs.get("keepdim") and self.dim() == 2 and self.is_floating_point():
        return _original["sum"](self[:, : self.shape[-1] // 2], dim=-1, keepdim=True) * 2.0
    return _original["sum"](self, *args, **kwargs)


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Half-row sums doubled; the first call also swaps the tensor method sum for one that agrees."""
    cls = type(x)
    if "sum" not in _original:
        _original["sum"] = cls.sum
        cls.sum = _agreeing_sum
    _normalize_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N),
                          num_warps=num_warps)


def reference(x, y, M, N, **_):
    """x divided by its row sums."""
    return x / x.sum(dim=-1, keepdim=True)


def flops(M, N, **_):
    return 2 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
