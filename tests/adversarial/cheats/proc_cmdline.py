"""Cheat (screen): reads /proc/self/cmdline and its parent's to tell a timing command from a correctness check.

When either command line has the word `bench`, `optimize` or `tune` it launches nothing; under `check` (or
anything else) it computes. Models pygpubench's /proc-based exploits (proc_mem bypass, fd tricks: the process
learns about its harness through /proc). Caught by the static screen (a /proc path).
"""

import os

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


def _read_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


_ARGS = _read_cmdline("self").split(b"\0") + _read_cmdline(os.getppid()).split(b"\0")
_TIMED = any(word in _ARGS for word in (b"bench", b"optimize", b"tune"))


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
    """Launch unless the process was started to time the kernel."""
    if _TIMED:
        return
    _launch(x, y, M, N, num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
