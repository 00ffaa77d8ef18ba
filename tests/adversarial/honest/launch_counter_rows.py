"""Honest control (the twin of cheats/timed_host_gap.py): a wrapper that keeps a host-side launch counter and the
host time of each call, and uses them for nothing but a legitimate choice between two complete launches.

Even launches walk the rows in order, odd ones in reverse (one way to spread the tail of a grid over the SMs
differently from one launch to the next); both write every row. The counter and the timestamps are module state
read on every call, like the cheat's, but no call ever does less than the whole problem: every check, the
comparison of timed launches included, must accept it (module state and timer reads are flagged, not refused).
"""

import time

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


@triton.jit
def _softmax_rows(x_ptr, y_ptr, M, N, stride_x, stride_y, REVERSE: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = M - 1 - pid if REVERSE else pid
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


#: launches so far and the host time of the last one (ns): statistics a wrapper may keep, e.g. for its own logs.
launch_log = {"launches": 0, "last_call_ns": 0}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Every row, in an order that alternates with the launch counter."""
    launch_log["last_call_ns"] = time.perf_counter_ns()
    reverse = launch_log["launches"] % 2 == 1
    launch_log["launches"] += 1
    _softmax_rows[(M,)](x, y, M, N, x.stride(0), y.stride(0), REVERSE=reverse,
                        BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
