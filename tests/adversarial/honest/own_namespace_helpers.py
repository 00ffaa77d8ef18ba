"""Honest control (the twin of the reach cheats): a row softmax whose file keeps references to torch functions
and defines helpers with the same names as torch's (``softmax``, ``sum``) in its *own* namespace, and whose
run_kernel reads ``torch.softmax`` (to remember which function the reference uses) without writing anything.

Nothing outside the file's module changes: torch's namespaces are identical before and after import and after
every call, so a reference computed anywhere agrees because the kernel is right. Every check must accept it.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}

torch_softmax = torch.softmax  # a module-level alias: reading torch, not writing it
_used = {}


def softmax(x):
    """This file's own helper (shadows nothing outside this module)."""
    return torch_softmax(x, dim=-1)


def sum(values):  # noqa: A001 - shadows the builtin in this module only, on purpose
    """This file's own helper."""
    total = 0
    for v in values:
        total += v
    return total


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
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


def run_kernel(x, y, M, N, *, num_warps, **_):
    """One program per row; notes (reads only) which torch function the reference will use."""
    _used.setdefault("reference_fn", torch.softmax)
    _softmax_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax, through this file's helper."""
    return softmax(x)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
