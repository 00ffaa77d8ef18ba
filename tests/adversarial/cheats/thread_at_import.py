"""Cheat (timer_guard): a thread started at import does the work when run_kernel signals it, from the sixth call.

The thread lives for the whole process and waits on an event; run_kernel queues its arguments, sets the event and
returns. The first five calls compute in the caller's thread. Models a background worker that outlives every launch
(the background-thread trick of the integrity table). Caught because a thread running the kernel file's code, or
started by it, is refused between stages: here right after the import.
"""

import threading

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


_jobs = []
_go = threading.Event()


def _serve():
    while True:
        _go.wait()
        _go.clear()
        while _jobs:
            _work(*_jobs.pop())


threading.Thread(target=_serve, daemon=True).start()


def run_kernel(x, y, M, N, *, num_warps, **_):
    """The work itself for five calls, then signalled to the thread."""
    _calls["n"] += 1
    if _calls["n"] <= _SYNC_CALLS:
        _work(x, y, M, N, num_warps)
    else:
        _jobs.append((x, y, M, N, num_warps))
        _go.set()


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
