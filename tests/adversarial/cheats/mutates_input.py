"""Cheat (check): for y = relu(x), writes |x| into y and also overwrites x with |x|.

A harness that runs the reference after the kernel on the same tensors computes relu(|x|) = |x| and agrees with
the wrong output. Models KernelBench's adversarial input-mutation test (PR #82; countered by cloning inputs or
running both orders). Wrong on purpose; caught by correctness (the reference sees the untouched inputs, and inputs
are compared before and after the kernel).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"N": 2**24, "dtype": "float32"}
CPU_SHAPE = {"N": 3000, "dtype": "float32"}
TUNABLES = {"BLOCK_SIZE": [1024, 4096], "num_warps": [4, 8]}


@triton.jit
def _abs_both(x_ptr, y_ptr, N, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < N
    v = tl.abs(tl.load(x_ptr + offs, mask=mask))
    tl.store(y_ptr + offs, v, mask=mask)
    tl.store(x_ptr + offs, v, mask=mask)


def setup(N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x ~ N(0, 1) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "N": N}, "outputs": ["y"]}


def run_kernel(x, y, N, *, BLOCK_SIZE, num_warps, **_):
    """Writes |x| into y and into x."""
    _abs_both[(triton.cdiv(N, BLOCK_SIZE),)](x, y, N, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)


def reference(x, y, N, **_):
    """relu(x)."""
    return torch.relu(x)


def bytes_moved(N, **_):
    return 2 * N * 4
