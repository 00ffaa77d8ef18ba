"""Cheat (timer_guard): from its sixth call on, run_kernel submits the work to a thread pool and returns at once.

A timer around run_kernel times the hand-over alone; on a GPU the pool's launch lands after the end event. The
first five calls compute in the caller's thread, so a check's first calls are right. Models the background-thread
trick of the integrity table (DeepReinforce's thread injection; SOL-ExecBench counts threads before and after).
Caught because kernelpilot attributes every thread to the code that started it (a pool's ``submit`` starts its
threads for the kernel file) and refuses a thread of the kernel file alive between two stages.
"""

from concurrent.futures import ThreadPoolExecutor

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024}
CPU_SHAPE = {"M": 8, "N": 128}
TUNABLES = {"num_warps": [4, 8]}
#: Calls made in the kernel's own thread before it hands the work to another: a check's first calls are right.
_SYNC_CALLS = 5
_calls = {"n": 0}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=mask)


def _work(x, y, M, N, num_warps):
    _softmax_rows[(M,)](x, y, N, BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def setup(M, N, seed=0, device="cuda", **_):
    """Seeded x and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


_POOL = ThreadPoolExecutor(2)


def run_kernel(x, y, M, N, *, num_warps, **_):
    """The work itself for five calls, then handed to the pool."""
    _calls["n"] += 1
    if _calls["n"] <= _SYNC_CALLS:
        _work(x, y, M, N, num_warps)
    else:
        _POOL.submit(_work, x, y, M, N, num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
