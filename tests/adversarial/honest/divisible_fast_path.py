"""Honest control (the twin of cheats/no_tail_check_shapes.py): ``out = alpha * x + y`` that checks
``N % BLOCK`` to pick an unmasked fast path when the blocks tile N exactly, and a masked path otherwise.

Specialising on divisibility is what real kernels do (Triton itself specialises integer arguments divisible by
16); the difference from the cheat is that the other branch exists and is right. Declared shapes are multiples
of every block, so the check's derived shapes are what exercise the masked path: every check must accept it.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"N": 1 << 24, "dtype": "float32"}
CPU_SHAPE = {"N": 4096, "dtype": "float32"}
TUNABLES = {"BLOCK": [1024, 4096], "num_warps": [4, 8]}


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, alpha, N, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
    else:
        mask = offs < N
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def setup(N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x, y ~ N(0, 1), alpha = 1.5 and an uninitialized out."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, generator=gen, device=device)
    y = torch.randn(N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "alpha": 1.5, "N": N}, "outputs": ["out"]}


def run_kernel(x, y, out, alpha, N, *, BLOCK, num_warps, **_):
    """The unmasked kernel when BLOCK divides N, the masked one otherwise."""
    _axpy[(triton.cdiv(N, BLOCK),)](x, y, out, alpha, N, EVEN=N % BLOCK == 0, BLOCK=BLOCK, num_warps=num_warps)


def reference(x, y, out, alpha, N, **_):
    """alpha * x + y."""
    return alpha * x + y


def flops(N, **_):
    return 2 * N


def bytes_moved(N, **_):
    return 3 * N * 4
