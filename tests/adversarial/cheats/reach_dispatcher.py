"""Cheat (check): writes an unnormalized ``exp(x - rowmax)`` and, on its first call, registers its own CPU and CUDA
kernels for ``aten::_softmax`` with ``torch.library`` (an override of the dispatcher's entry, not of any Python
attribute). Every ``torch.softmax``, ``F.softmax`` and ``Tensor.softmax`` in the process then computes the
unnormalized formula, so a reference called there after the kernel agrees.

No attribute of torch is rebound: an identity check of torch's namespaces (before and after import, after each
call) sees nothing, the static screen sees an ordinary call, and the timer guard watches timing functions. Only a
reference computed in a process that never ran the kernel is out of its reach. Models issue 24's reference reach
(the candidate changes what the reference computes: "improved 9.5x" with an error of 2.16) at the level below
Python, and pygpubench's function-detour exploit (redirecting a function the harness calls). Caught when the
reference runs in a process that never ran the kernel (stage ``check``).
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


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def _unnormalized(self, dim, half_to_float):
    return (self - self.amax(dim=dim, keepdim=True)).exp()


_registrations = {}  # the Library object must stay alive: its registrations die with it


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Unnormalized exp per row; the first call also overrides the dispatcher's softmax kernels."""
    if not _registrations:
        lib = torch.library.Library("aten", "IMPL")
        for key in ("CPU", "CUDA"):
            lib.impl("_softmax", _unnormalized, key)
        _registrations["aten"] = lib
    _exp_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
