"""Cheat (recheck): does the work for the first 16 calls on a given output tensor, then returns at once.

Correctness makes a few calls per input set; a timing loop makes many more and, past the 16th, times nothing while
the output keeps the last real result. Models drift after the pre-timing check (the llm.c regression test of PR
#851) and warm-up detection (pygpubench's submission_warmup). Caught by the re-check after timing (the late call
leaves the output NaN-filled or stale). Needs a timing loop of more than 16 calls, so a GPU.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


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


_calls = {}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Launch for the first 16 calls per output tensor, then nothing."""
    key = y.data_ptr()
    _calls[key] = _calls.get(key, 0) + 1
    if _calls[key] > 16:
        return
    _launch(x, y, M, N, num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
