"""Cheat (floor): a ``setup`` that uses its seed for the first row of x only (every other row comes from one fixed
generator), and a row softmax that computes the first row each call and copies the other rows from the result it
cached for this shape, with the file's own Triton copy kernel.

Every input set ``setup`` makes at any seed, secret or not, differs from the others (a harness that refuses a
``setup`` returning identical sets lets it through) and every answer on such a set is right: the timed launches'
sets, the re-check's set if ``setup`` draws it, every check seed. Only values the harness changes itself expose the
stale rows (this suite's own re-check permutes the values and sees them), and on a GPU the time: a copy and one
row instead of the whole softmax, under the speed-of-light floor. Models the fixed-input replays (Sakana
post-mortem: kernels passing a single fixed input; GPU MODE's Princeton cross-entropy replay, fixed with
per-iteration SystemRandom seeds) in a form that survives a pool of sets drawn from the author's own ``setup``.
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
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """x = 4 * N(0, 1): row 0 from the seed, rows 1.. from a fixed generator; an uninitialized y."""
    fixed = torch.Generator(device=device).manual_seed(20241126)
    x = 4.0 * torch.randn(M, N, generator=fixed, device=device)
    x[0] = 4.0 * torch.randn(N, generator=torch.Generator(device=device).manual_seed(seed), device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


_rows = {}
#: calls answered from the cached rows (read by the suite's own self-test to show the cache works)
stats = {"hits": 0}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Row 0 computed; rows 1.. copied from the first result for this shape (computed in full once)."""
    block = triton.next_power_of_2(N)
    cached = _rows.get((M, N, x.stride(0), y.stride(0)))
    if cached is None or M < 2:
        _softmax_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=block, num_warps=num_warps)
        _rows[(M, N, x.stride(0), y.stride(0))] = y.clone()
        return
    stats["hits"] += 1
    rest = (M - 1) * N
    _copy[(triton.cdiv(rest, 4096),)](cached[1:], y[1:], rest, BLOCK=4096)
    _softmax_rows[(1,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=block, num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
