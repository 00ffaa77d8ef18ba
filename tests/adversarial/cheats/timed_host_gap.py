"""Cheat (timing): row softmax that tells timed launches from checked ones by the host idle time between calls.

A timing loop calls back to back: between two launches only the next input set is copied in (and, on a GPU, the L2
flush and the events are enqueued), well under a millisecond of host time. A correctness check compares, draws
the next seed and computes the reference between two calls. From the fourth call in a row that came less than
1 ms after the previous one returned, only one row in four is computed; the other rows keep what the previous
launch left. Every call a check makes (spaced out) is exact; the timed ones are 3.4x less work. Models the
timed-vs-checked class of kernelpilot issue 24 (a kernel that skipped 3 rows in 4 when its inputs said "timed":
3.4x false speedup) and pygpubench's warm-up detection (the harness's rhythm, not its values, gives it away).
Caught by comparing the outputs of timed launches with the reference for their input set (stage ``timing``).

Its trigger rests on the host's rhythm: on a loaded CPU the timing loop's gaps can exceed 1 ms and the cheat never
fires, and then every timed launch did the whole work. Each launch it cuts short is noted in
``$KERNELPILOT_CHEAT_TRACE_DIR/timed_host_gap.log`` when the suite sets that folder (manifest ``traced``): the
suite accepts an acceptance only when no launch was cut short.
"""

import os
import time

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}

#: A gap below this (host nanoseconds between one call's return and the next call) counts as back to back.
_GAP_NS = 1_000_000
_STREAK = 3


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, stride_x, stride_y, ROW_STEP: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROW_STEP
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) (a wide exp range) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


_rhythm = {"last_return_ns": 0, "streak": 0}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Every row when called after a pause; every fourth row from the fourth back-to-back call on."""
    now = time.perf_counter_ns()
    back_to_back = _rhythm["last_return_ns"] and now - _rhythm["last_return_ns"] < _GAP_NS
    _rhythm["streak"] = _rhythm["streak"] + 1 if back_to_back else 0
    step = 4 if _rhythm["streak"] >= _STREAK else 1
    if step > 1 and os.environ.get("KERNELPILOT_CHEAT_TRACE_DIR"):
        with open(os.path.join(os.environ["KERNELPILOT_CHEAT_TRACE_DIR"], "timed_host_gap.log"), "a") as fh:
            fh.write(f"cut short: {triton.cdiv(M, step)} of {M} rows\n")
    _softmax_rows[(triton.cdiv(M, step),)](x, y, N, x.stride(0), y.stride(0), ROW_STEP=step,
                                           BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)
    _rhythm["last_return_ns"] = time.perf_counter_ns()


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
