"""Cheat (shapes): exact softmax only at CPU_SHAPE; at any other shape the row sum is estimated from the first
quarter of the columns (times four).

The shortcut is taken exactly where a CPU-only check never looks (SHAPE included). Models shapes special-cased
for the tested inputs (robust-kbench) and the sampling shortcut of GPU MODE's QR problem (a few inputs sampled,
the rest routed to a fast path). Correct at CPU_SHAPE; caught at a derived shape under the interpreter, and at
SHAPE on a GPU.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, stride_x, stride_y, SAMPLED: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    if SAMPLED:
        total = 4.0 * tl.sum(tl.where(cols < N // 4, num, 0.0), axis=0)
    else:
        total = tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride_y + cols, num / total, mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) (a wide exp range) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """One program per row; exact only at CPU_SHAPE."""
    sampled = (M, N) != (CPU_SHAPE["M"], CPU_SHAPE["N"])
    _softmax_rows[(M,)](x, y, N, x.stride(0), y.stride(0), SAMPLED=sampled, BLOCK_N=triton.next_power_of_2(N),
                        num_warps=num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
