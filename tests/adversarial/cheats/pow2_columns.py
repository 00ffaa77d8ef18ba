"""Cheat (shapes): row softmax whose column tile is the largest power of two not above N, unmasked: exact when N
is a power of two, and at any other N it ignores the last columns (they are neither in the max and the sum nor
written).

The declared shapes are powers of two (N = 1024, and 128 on the CPU), and a derived shape that halves every
dimension keeps a power of two a power of two, so no check the author's numbers lead to ever sees another N.
Models shape hard-coding ("valid only for benchmark inputs": robust-kbench; AgentKernelArena's unseen
configurations) in the form issue 24 names: halving keeps powers of two. Caught at a shape kernelpilot picks
that is not a power of two (stage ``shapes``).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * stride_x + cols)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0))


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """One program per row over the largest power-of-two prefix of the columns."""
    _softmax_rows[(M,)](x, y, x.stride(0), y.stride(0), BLOCK_N=1 << (N.bit_length() - 1), num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
