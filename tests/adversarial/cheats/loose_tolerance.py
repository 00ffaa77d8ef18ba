"""Cheat (check): computes the softmax in float16 and rounds it to multiples of 1/256, then sets the file-level
tolerances to atol = rtol = 0.5 so the float32 output still passes.

The file's atol/rtol replace the dtype's (1e-5, 1e-3). Models precision downgrades passing a loose tolerance
(DeepReinforce's defence table; KernelBench's precision_downgrade rule; the CUDA-L1 critique of TF32 toggles).
Passes the comparison used before hardening (which honours the file's tolerances); caught by correctness under
--strict, and the loosened tolerance must be shown in every report otherwise.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 1024, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 128, "dtype": "float32"}
TUNABLES = {"num_warps": [4, 8]}

atol = 0.5
rtol = 0.5


@triton.jit
def _coarse_softmax_rows(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float16)
    num = tl.exp((x - tl.max(x, axis=0)).to(tl.float32)).to(tl.float16)
    p = num.to(tl.float32) / tl.sum(num.to(tl.float32), axis=0)
    tl.store(y_ptr + row * stride_y + cols, tl.floor(p * 256.0) / 256.0, mask=mask)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Seeded x = 4 * N(0, 1) (a wide exp range) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """One program per row; writes a coarse y."""
    _coarse_softmax_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N),
                               num_warps=num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
