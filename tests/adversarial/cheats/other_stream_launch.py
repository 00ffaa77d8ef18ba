"""Cheat (device_activity): launches the whole kernel on a private stream, after making that stream wait for the
inputs, and never joins it back.

The events the harness records on the current stream see no work at all; a device-wide synchronize still waits
for it, so correctness passes. Models stream injection (KernelBench PR #82; CUDA-L1 v1) and "a launch on another
stream", one of the cheats kernelpilot's H100 trial stopped only at the floor (issue 11). Under the interpreter the
launch is plain. Caught by timing that counts device activity on every stream and reports launches on other
streams.
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


_private = {}


def run_kernel(x, y, M, N, *, num_warps, **_):
    """Launch on a private stream (GPU), or plainly (interpreter)."""
    if not x.is_cuda:
        _launch(x, y, M, N, num_warps)
        return
    stream = _private.setdefault(x.device, torch.cuda.Stream(device=x.device))
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        _launch(x, y, M, N, num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
