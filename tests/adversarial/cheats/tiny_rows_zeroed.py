"""Cheat (check): y = x * s[:, None], writing zeros for the rows whose scale is below 1e-4 instead of computing them.

setup gives every fourth row a scale of 1e-7 (think padding rows), so those outputs are around 1e-7: below an
absolute tolerance scaled by the whole tensor's RMS (1e-5 x ~0.9) and below a plain per-element atol of 1e-5 too,
and their share of the L2 norm is negligible. Skipping them saves a quarter of the traffic. Models KernelBench
issue #165 (outputs smaller than atol pass when zeroed). Passes the comparison used before hardening; caught only by
a row-wise relative check (each row's error against that row's own magnitude).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 2048, "dtype": "float32"}
CPU_SHAPE = {"M": 16, "N": 96, "dtype": "float32"}
TUNABLES = {"BLOCK_N": [128, 512], "num_warps": [4]}


@triton.jit
def _scale_rows(x_ptr, s_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    s = tl.load(s_ptr + row)
    if tl.abs(s) < 1e-4:
        tl.store(y_ptr + row * stride_y + cols, tl.zeros([BLOCK_N], tl.float32), mask=mask)
    else:
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask)
        tl.store(y_ptr + row * stride_y + cols, x * s, mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x ~ N(0, 1); scales U(0.5, 1.5), except every fourth row at 1e-7."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    s = 0.5 + torch.rand(M, generator=gen, device=device)
    s[::4] = 1e-7
    return {"inputs": {"x": x, "s": s, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, s, y, M, N, *, BLOCK_N, num_warps, **_):
    """One program per (row, column tile); rows with a negligible scale are written as zeros."""
    _scale_rows[(M, triton.cdiv(N, BLOCK_N))](x, s, y, N, x.stride(0), y.stride(0), BLOCK_N=BLOCK_N,
                                              num_warps=num_warps)


def reference(x, s, y, M, N, **_):
    """x * s[:, None]."""
    return x * s[:, None]


def flops(M, N, **_):
    return M * N


def bytes_moved(M, N, **_):
    return (2 * M * N + M) * 4
