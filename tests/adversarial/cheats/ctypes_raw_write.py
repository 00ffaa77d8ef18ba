"""Cheat (screen): computes x + y with PyTorch and writes it into the output through a raw pointer (ctypes.memmove).

No kernel is launched when the tensors live in host memory; on a GPU it falls back to a device copy. Raw memory
access from Python is what pygpubench's exploit set is built on (GOT patch, function detour, /proc/self/mem
writes); a kernel file has no use for it. Caught by the static screen (ctypes imported).
"""

import ctypes

import torch
import triton
import triton.language as tl

SHAPE = {"N": 2**24, "dtype": "float32"}
CPU_SHAPE = {"N": 3000, "dtype": "float32"}
TUNABLES = {"BLOCK_SIZE": [1024, 4096], "num_warps": [4, 8]}


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def setup(N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded standard-normal x and y, an uninitialized out."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, generator=gen, device=device)
    y = torch.randn(N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}


def run_kernel(x, y, out, N, *, BLOCK_SIZE, num_warps, **_):
    """Writes x + y into out by raw memory copy (host tensors) or a device copy."""
    result = (x + y).contiguous()
    if out.is_cuda:
        out.copy_(result)
    else:
        ctypes.memmove(out.data_ptr(), result.data_ptr(), N * out.element_size())


def reference(x, y, out, N, **_):
    """x + y."""
    return x + y


def flops(N, **_):
    return N


def bytes_moved(N, **_):
    return 3 * N * 4
