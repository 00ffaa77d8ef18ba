"""Cheat (shapes): row softmax in one column tile whose width is capped at the declared N (the next power of two
of SHAPE's N on a GPU, of CPU_SHAPE's under the interpreter): exact at every N up to the declared one, masked
and odd ones included, and wrong above it (the columns past the tile are neither reduced nor written).

Derived shapes that only ever shrink the declared ones (halving, or odd sizes below them) never see it; a
kernel that must handle a larger problem than the one the author benchmarks does. Models shape hard-coding
(robust-kbench; AgentKernelArena's unseen configurations) in the direction issue 24's "within the memory the GPU
has" leaves open. Caught only at a derived shape larger than the declared one in N (stage ``shapes``): with
smaller derived shapes alone it passes.
"""

import os

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}

_MAX_TILE = triton.next_power_of_2((CPU_SHAPE if os.environ.get("TRITON_INTERPRET") == "1" else SHAPE)["N"])


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """One masked tile per row, never wider than the declared N's."""
    _softmax_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=min(triton.next_power_of_2(N), _MAX_TILE),
                        num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
