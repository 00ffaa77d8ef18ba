"""Cheat (screen): replaces triton.testing.do_bench with a stub that runs the function once and reports 1 µs.

A harness that times through Triton's own benchmarking helper gets a constant; the vector add is honest. Models
the timing-patch family (GPU MODE reference-kernels #162, KernelBench `timing_event_patch`). Caught by the static
screen.
"""

import torch
import triton
import triton.language as tl
import triton.testing

SHAPE = {"N": 2**24, "dtype": "float32"}
CPU_SHAPE = {"N": 3000, "dtype": "float32"}
TUNABLES = {"BLOCK_SIZE": [1024, 4096], "num_warps": [4, 8]}


def _instant_bench(fn, *args, **kwargs):
    fn()
    return 0.001  # milliseconds


triton.testing.do_bench = _instant_bench


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def setup(N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded standard-normal x and y, an uninitialized out."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, generator=gen, device=device)
    y = torch.randn(N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}


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
