"""Honest control (slow): row softmax in three passes over narrow column tiles (max, sum, normalize).

x is read three times with a 32-wide tile, so it is several times slower than a single-pass kernel; still
correct at every shape, and every check must accept it.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 6, "N": 100, "dtype": "float32"}
TUNABLES = {"BLOCK_N": [32, 64], "num_warps": [1, 2]}


@triton.jit
def _softmax_three_pass(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    x_row = x_ptr + row * stride_x
    run_max = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), axis=0)
    for start in range(0, N, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf"))
        run_max = tl.maximum(run_max, tl.max(x, axis=0))
    total = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
    for start in range(0, N, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf"))
        total += tl.sum(tl.exp(x - run_max), axis=0)
    for start in range(0, N, BLOCK_N):
        mask = start + cols < N
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
        tl.store(y_ptr + row * stride_y + start + cols, tl.exp(x - run_max) / total, mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) (a wide exp range) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, BLOCK_N, num_warps, **_):
    """One program per row; writes y."""
    _softmax_three_pass[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=BLOCK_N, num_warps=num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
