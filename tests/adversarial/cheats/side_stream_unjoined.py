"""Cheat (device_activity): launches the second half of the rows on a side stream that the current stream never
waits for.

Events recorded on the current stream bracket only the first half; a device-wide synchronize (as in a
correctness check) still waits for both, so outputs are right. Models the stream-injection cheat (KernelBench PR
#82; CUDA-L1 v1's timing, fixed by joining every stream) measured at a 1.86x false speedup in kernelpilot's H100
trial (issue 11). Under the interpreter both halves run plainly. Caught by timing that counts device activity on
every stream.
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


_side = {}


def _launch_rows(x, y, first, count, N, num_warps):
    xs, ys = x[first:first + count], y[first:first + count]
    _softmax_rows[(count,)](xs, ys, N, x.stride(0), y.stride(0), BLOCK_N=triton.next_power_of_2(N),
                            num_warps=num_warps)


def run_kernel(x, y, M, N, *, num_warps, **_):
    """First half on the current stream, second half on a side stream left unjoined (GPU)."""
    half = M // 2
    _launch_rows(x, y, 0, half, N, num_warps)
    if not x.is_cuda:
        _launch_rows(x, y, half, M - half, N, num_warps)
        return
    side = _side.setdefault(x.device, torch.cuda.Stream(device=x.device))
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _launch_rows(x, y, half, M - half, N, num_warps)


def reference(x, y, M, N, **_):
    """torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
