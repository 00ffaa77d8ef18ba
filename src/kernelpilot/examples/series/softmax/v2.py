"""Softmax series, v2: the whole row in one tile. When the row fits (N <= 16384), BLOCK_N is N rounded up to a
power of two and the row stays in registers: x is read once and y written once, the minimum traffic. Warps grow
with the tile (16 for 8192 fp32 columns) so no thread holds more than 16 values. Longer rows keep v1's path."""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 8192, "N": 8192, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 256, "dtype": "float32"}
COMPUTE_UNIT = "fp32"
TUNABLES = {"MAX_TILE": [16384]}


@triton.jit
def _softmax_v2_tile(x_ptr, y_ptr, N, stride_xm, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * stride_xm + c, mask=c < N, other=float("-inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    out = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride_ym + c, out.to(y_ptr.dtype.element_ty), mask=c < N)


@triton.jit
def _softmax_v2_online(x_ptr, y_ptr, N, stride_xm, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_N)
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, N, BLOCK_N):
        c = start + cols
        x = tl.load(x_row + c, mask=c < N, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, x)
        s = tl.where(new_m == float("-inf"), 0.0, s * tl.exp(m - new_m) + tl.exp(x - new_m))
        m = new_m
    row_max = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    for start in range(0, N, BLOCK_N):
        c = start + cols
        x = tl.load(x_row + c, mask=c < N, other=float("-inf")).to(tl.float32)
        tl.store(y_row + c, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=c < N)


def run_kernel(x, y, M, N, *, MAX_TILE, **_):
    """One program per row; the single-tile kernel when the row fits in MAX_TILE columns."""
    if N <= MAX_TILE:
        block = triton.next_power_of_2(N)
        warps = max(1, min(16, block // 512))
        _softmax_v2_tile[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=block, num_warps=warps)
    else:
        _softmax_v2_online[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=1024, num_warps=8)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Standard-normal x scaled by 4 (exp spans a wide range) and an uninitialized y (every version: the same)."""
    tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    gen = torch.Generator(device=device).manual_seed(seed)
    x = (4.0 * torch.randn(M, N, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    y = torch.empty(M, N, device=device, dtype=tdt)
    return {"inputs": {"x": x, "y": y, "M": M, "N": N}, "outputs": ["y"]}


def reference(x, y, M, N, **_):
    """torch.softmax over the last dim."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    # max, subtract, exp, add, multiply per element.
    return 5 * M * N


def bytes_moved(M, N, dtype="float32", **_):
    # x read once, y written once (what an ideal kernel moves).
    return 2 * M * N * (4 if dtype == "float32" else 2)

