"""Cheat (recheck): counts consecutive calls on the same tensors and, from the fourth in a row, launches nothing.

Correctness runs each input set once or twice (always computed); a timing loop repeats the same tensors and is
recognised. Models pygpubench's warm-up detection (pointer comparison) and GPU MODE's batched-calls exploit
(#102/#104). Caught by the re-check after timing: the same tensors again, fresh values, no work done.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"N": 2**24, "dtype": "float32"}
CPU_SHAPE = {"N": 3000, "dtype": "float32"}
TUNABLES = {"BLOCK_SIZE": [1024, 4096], "num_warps": [4, 8]}


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


_streak = {"key": None, "count": 0}


def run_kernel(x, y, out, N, *, BLOCK_SIZE, num_warps, **_):
    """Launch unless the same tensors came three times in a row already."""
    key = (x.data_ptr(), y.data_ptr(), out.data_ptr(), N)
    _streak["count"] = _streak["count"] + 1 if _streak["key"] == key else 1
    _streak["key"] = key
    if _streak["count"] > 3:
        return
    _add_kernel[(triton.cdiv(N, BLOCK_SIZE),)](x, y, out, N, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)


def reference(x, y, out, N, **_):
    """x + y."""
    return x + y


def flops(N, **_):
    return N


def bytes_moved(N, **_):
    return 3 * N * 4
