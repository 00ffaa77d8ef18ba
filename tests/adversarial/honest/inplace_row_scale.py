"""Honest control (in place): x[i, :] *= s[i], declared with "inplace": ["x"].

The kernel reads and rewrites x; setup declares it, so kernelpilot restores x before each launch and gives the
reference the original values. Mutation and aliasing checks must accept a declared in-place output.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 2048, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 96, "dtype": "float32"}
TUNABLES = {"BLOCK_N": [128, 512], "num_warps": [4]}


@triton.jit
def _scale_rows_inplace(x_ptr, s_ptr, N, stride_x, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s = tl.load(s_ptr + row)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask)
    tl.store(x_ptr + row * stride_x + cols, x * s, mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x ~ N(0, 1) and per-row scales s ~ U(0.5, 2)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    s = 0.5 + 1.5 * torch.rand(M, generator=gen, device=device)
    return {"inputs": {"x": x, "s": s, "M": M, "N": N}, "outputs": ["x"], "inplace": ["x"]}


def run_kernel(x, s, M, N, *, BLOCK_N, num_warps, **_):
    """One program per (row, column tile); rewrites x in place."""
    _scale_rows_inplace[(M, triton.cdiv(N, BLOCK_N))](x, s, N, x.stride(0), BLOCK_N=BLOCK_N, num_warps=num_warps)


def reference(x, s, M, N, **_):
    """x * s[:, None] (on the original x)."""
    return x * s[:, None]


def flops(M, N, **_):
    return M * N


def bytes_moved(M, N, **_):
    return (2 * M * N + M) * 4
