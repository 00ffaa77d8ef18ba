"""Cheat (check): declares the output `out` as the very tensor `y` (out is y) without declaring it in place.

The kernel computes y += x in place: one buffer fewer to write, a byte count that still lists three tensors, and
each repeated call adds x again, so a timing loop runs on drifting data. Models the aliasing cases of KernelBench's
adversarial tests (an output sharing memory it should not). Correct on its first call against a reference taken
beforehand; caught by correctness (an output sharing storage with an input is an error; before hardening the NaN
fill of `out` also poisoned `y`, so it failed for another reason).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"N": 2**24, "dtype": "float32"}
CPU_SHAPE = {"N": 3000, "dtype": "float32"}
TUNABLES = {"BLOCK_SIZE": [1024, 4096], "num_warps": [4, 8]}


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def setup(N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x and y; the output is y itself."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, generator=gen, device=device)
    y = torch.randn(N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": y, "out": y, "N": N}, "outputs": ["out"]}


def run_kernel(x, y, out, N, *, BLOCK_SIZE, num_warps, **_):
    """One program per BLOCK_SIZE elements; writes out."""
    _add_kernel[(triton.cdiv(N, BLOCK_SIZE),)](x, y, out, N, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)


def reference(x, y, out, N, **_):
    """x + y."""
    return x + y


def flops(N, **_):
    return N


def bytes_moved(N, **_):
    return 3 * N * 4
