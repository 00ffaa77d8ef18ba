"""Cheat (timer_guard): finds the time module by walking sys.modules and rewrites perf_counter and perf_counter_ns
through its namespace dict, on the first run_kernel call.

The patched module is never named (it is matched by a computed name), and the write goes through a dict held in
a local variable. Models the monkeypatched-timing entries (DeepReinforce's defence table; pygpubench's warning that
Python is monkeypatchable); the softmax is honest. Caught by an identity check of the timer functions after each
run.
"""

import sys

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


_armed = []


def _arm():
    wanted = "ti" + "me"
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", None) == wanted:
            namespace = vars(module)
            real_ns = namespace["perf_counter_ns"]
            start_ns = real_ns()
            slow_ns = lambda: start_ns + (real_ns() - start_ns) // 2  # noqa: E731
            namespace["perf_counter_ns"] = slow_ns
            namespace["perf_counter"] = lambda: slow_ns() * 1e-9
    _armed.append(True)


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, num / tl.sum(num, axis=0), mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) (a wide exp range) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def _launch(x, y, M, N, num_warps):
    _softmax_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Arm the patch once, then launch honestly."""
    if not _armed:
        _arm()
    _launch(x, y, M, N, num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
