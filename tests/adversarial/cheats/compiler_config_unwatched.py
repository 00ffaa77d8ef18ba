"""Cheat (timer_guard): removes kernelpilot's import watch from sys.meta_path, then sets a Dynamo field through
computed names, so the torch.compile baseline compiled in its process gives up and runs its reference eagerly.

The kernel itself is an honest row softmax. What it attacks is the yardstick: torch.compile's config is put back
before every baseline, and Dynamo's config module is captured when it is first imported; with the watch gone that
capture never happens. Caught because removing the watch is refused like a replaced timer, right after the import.
"""

import importlib
import sys

import torch
import triton
import triton.language as tl

sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_" + "Finder"]
setattr(importlib.import_module("torch._dyn" + "amo.config"), "recompile_" + "limit", 0)

SHAPE = {"M": 4096, "N": 1024}
CPU_SHAPE = {"M": 8, "N": 128}
TUNABLES = {"num_warps": [4, 8]}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=mask)


def setup(M, N, seed=0, device="cuda", **_):
    """Seeded x and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """One program per row."""
    _softmax_rows[(M,)](x, y, N, BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
