"""Cheat (check): writes NaN everywhere, counting on a comparison in which NaN never counts as a mismatch.

`NaN > tol` is False, so a checker that tests `abs(out - ref) > tol` finds no bad element. Models pygpubench's
gc_nan exploit (NaN as a wildcard) and the countermeasure "NaN/Inf always fail". Wrong on purpose; caught by
correctness.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


@triton.jit
def _nan_rows(y_ptr, N, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    zero = tl.zeros([BLOCK_N], tl.float32)
    tl.store(y_ptr + row * stride_y + cols, zero / zero, mask=cols < N)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) (a wide exp range) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Fill y with NaN."""
    _nan_rows[(M,)](y, N, y.stride(0), BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
