"""Cheat (check): the rebinding of cheats/reach_softmax_globals.py done at *import* time, by a module-level
statement, instead of inside run_kernel: ``torch.softmax`` computes the kernel's unnormalized ``exp(x - rowmax)``
in every process that imports the file.

A reference computed in a separate process that never ran the kernel is still fooled when that process imports
this file to find ``reference``: moving the reference out of the candidate's process is not enough when the
reference lives in the candidate's file. What closes it: the process that computes the reference checks that
importing the file left torch's namespaces (``torch``, ``torch.Tensor``, ``torch.nn.functional``, ...) as they
were (identity of every attribute before and after the import), or takes the reference from a file the candidate
does not write (``--ref``; a session's frozen v0). Models issue 24's reference reach and pygpubench's
replace_torch exploit (which patches at import). Expected at stage ``check``; see the note in cases.json.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}


@triton.jit
def _exp_rows(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    tl.store(y_ptr + row * stride_y + cols, tl.exp(x - tl.max(x, axis=0)), mask=mask)


def _agreeing_softmax(x, dim=-1, *args, **kwargs):
    return (x - x.amax(dim=dim, keepdim=True)).exp()


_namespace = torch.is_tensor.__globals__
_namespace["softmax"] = _agreeing_softmax


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Unnormalized exp per row."""
    _exp_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
