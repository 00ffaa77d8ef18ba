"""Cheat (recheck): returns at once when called again on the same tensors and the output already holds finite
values ("nothing to do").

A harness that NaN-fills outputs before each checked run always gets a real computation; a timing loop, which
does not refill, times an early return. Models the skip-if-done cheats stopped only by the speed-of-light floor in
kernelpilot's own H100 trial (issue 11) and GPU MODE's batched-calls exploit (#102/#104: 14 of 15 calls no-ops).
Caught by a re-check after timing that writes fresh input values into the same tensors and leaves the output as
the timing loop left it (finite, stale); a re-check that NaN-fills the outputs first does not catch it, and then
only the floor does.
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


_last = {}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Skip when the same tensors come back and y looks written."""
    key = (x.data_ptr(), y.data_ptr(), M, N)
    if _last.get("key") == key and bool(torch.isfinite(y.view(-1)[0])) and bool(torch.isfinite(y.view(-1)[-1])):
        return
    _last["key"] = key
    _launch(x, y, M, N, num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
