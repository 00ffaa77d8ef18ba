"""Cheat (shapes): ``out = alpha * x + y`` launched on ``N // BLOCK`` programs with no bounds mask, and a
``CHECK_SHAPES`` that lists only multiples of every BLOCK in ``TUNABLES``.

Without a mask the kernel is a little faster and simpler; the last ``N % BLOCK`` elements are never written.
Every shape the author lets the check see is a multiple of the largest block (the declared shapes and the
``CHECK_SHAPES``; halving 4096 or 2**24 keeps a multiple too), so the tail never exists there. Models "hard-code
shapes ... valid only for benchmark inputs" (robust-kbench: the average speedup fell from 3.13x to 1.49x once
such tasks were filtered; AgentKernelArena's correctness drop on unseen configurations) and issue 24's finding
that a declared CHECK_SHAPES replaced kernelpilot's own derived shape. Caught at a shape kernelpilot picks
itself, not a multiple of any block (stage ``shapes``).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"N": 1 << 24, "dtype": "float32"}
CPU_SHAPE = {"N": 4096, "dtype": "float32"}
TUNABLES = {"BLOCK": [1024, 4096], "num_warps": [4, 8]}
CHECK_SHAPES = [{"N": 8192}, {"N": 12288}]  # multiples of every BLOCK above: the tail never shows


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def setup(N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x, y ~ N(0, 1), alpha = 1.5 and an uninitialized out."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, generator=gen, device=device)
    y = torch.randn(N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "alpha": 1.5, "N": N}, "outputs": ["out"]}


def run_kernel(x, y, out, alpha, N, *, BLOCK, num_warps, **_):
    """N // BLOCK programs, no mask: the tail past the last full block stays unwritten."""
    _axpy[(N // BLOCK,)](x, y, out, alpha, BLOCK=BLOCK, num_warps=num_warps)


def reference(x, y, out, alpha, N, **_):
    """alpha * x + y."""
    return alpha * x + y


def flops(N, **_):
    return 2 * N


def bytes_moved(N, **_):
    return 3 * N * 4
