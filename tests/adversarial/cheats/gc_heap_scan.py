"""Cheat (screen): looks through gc.get_objects() for a float64 tensor shaped like the output and copies it.

A harness that computes its float64 reference before (or keeps it alive across) kernel runs hands the answer
over this way; when nothing is found the real kernel runs, so the first call is correct. Models pygpubench's
gc_copy and gc_nan exploits (expected outputs found through the garbage collector). Caught by the static screen.
"""

import gc

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, num / tl.sum(num, axis=0), mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) (a wide exp range) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def _launch(x, y, M, N, num_warps):
    _softmax_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Copy a float64 tensor of y's shape found on the heap, else launch."""
    for obj in gc.get_objects():
        if (isinstance(obj, torch.Tensor) and obj is not y and obj.dtype == torch.float64
                and obj.shape == y.shape and obj.device == y.device):
            y.copy_(obj)
            return
    _launch(x, y, M, N, num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
