"""Cheat (check): run_kernel remembers its output tensor, and reference returns that very tensor when it can.

The kernel writes an unnormalized exp(x - max) (wrong), and the comparison then sets the output against itself:
error 0. Models the Sakana AI CUDA Engineer incident (an evaluation memory bug let outputs skip the correctness
check) and KernelBench's reuse-of-the-reference-output test. Wrong on purpose; passes a check that calls
reference after the kernel; caught by correctness (reference results must not share storage with outputs).
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
    """Seeded x = 4 * N(0, 1) (a wide exp range) and an uninitialized y."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 4.0 * torch.randn(M, N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


_last_output = {}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Writes exp(x - rowmax) without normalizing; remembers y."""
    _last_output["y"] = y
    _exp_rows[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N), num_warps=num_warps)


def reference(x, y, M, N, **_):
    """The kernel's own output when there is one, else torch.softmax."""
    if "y" in _last_output and _last_output["y"].shape == x.shape:
        return _last_output["y"]
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
