"""Honest control (the twin of the shapes cheats): a 2-D tiled ``y = x * scale[None, :] + bias[None, :]`` masked
in both dimensions, declared at odd shapes and with odd ``CHECK_SHAPES`` (a single row, a single column tile
short of full, a prime number of rows).

Every tile is masked, so any shape is right: kernelpilot's own shapes (odd, prime, not multiples of any block)
and the author's must all pass.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4099, "N": 1031, "dtype": "float32"}
CPU_SHAPE = {"M": 37, "N": 101, "dtype": "float32"}
TUNABLES = {"BLOCK_M": [16, 32], "BLOCK_N": [64, 128], "num_warps": [4]}
CHECK_SHAPES = [{"M": 1, "N": 7}, {"M": 13, "N": 257}]


@triton.jit
def _scale_bias(x_ptr, s_ptr, b_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    s = tl.load(s_ptr + rn, mask=rn < N)
    b = tl.load(b_ptr + rn, mask=rn < N)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], x * s[None, :] + b[None, :], mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x (M x N), scale and bias (N) ~ N(0, 1), and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    scale = torch.randn(N, generator=gen, device=device)
    bias = torch.randn(N, generator=gen, device=device)
    return {"inputs": {"x": x, "scale": scale, "bias": bias, "y": torch.empty_like(x), "M": M, "N": N},
            "outputs": ["y"]}


def run_kernel(x, scale, bias, y, M, N, *, BLOCK_M, BLOCK_N, num_warps, **_):
    """Masked 2-D tiles over the whole of y."""
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _scale_bias[grid](x, scale, bias, y, M, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps)


def reference(x, scale, bias, y, M, N, **_):
    """x * scale + bias, broadcast over rows."""
    return x * scale[None, :] + bias[None, :]


def flops(M, N, **_):
    return 2 * M * N


def bytes_moved(M, N, **_):
    return (2 * M * N + 2 * N) * 4
