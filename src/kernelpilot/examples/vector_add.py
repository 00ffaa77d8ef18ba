"""Elementwise vector addition: out[i] = x[i] + y[i].

Inputs x, y and output out are contiguous 1-D tensors of length N, all of one dtype
(float32 by default; bfloat16 and float16 also work). The sum is computed in fp32 and
rounded to the output dtype. Each program handles BLOCK_SIZE consecutive elements; the
tail is masked, so any N works with any BLOCK_SIZE. Purely memory-bound.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"N": 2**26, "dtype": "float32"}
CPU_SHAPE = {"N": 4096, "dtype": "float32"}
TUNABLES = {
    "BLOCK_SIZE": [128, 256, 512, 1024, 2048, 4096],
    "num_warps": [1, 2, 4, 8],
}
DEFAULT_CONFIG = {"BLOCK_SIZE": 128, "num_warps": 4}
COMPUTE_UNIT = "fp32"

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _torch_dtype(dtype: str) -> torch.dtype:
    if dtype not in _DTYPES:
        raise ValueError(f"vector_add: dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[dtype]


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < N
    # Upcast right after the load: low-precision arithmetic stays out of the kernel.
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


def setup(N, dtype="float32", seed=0, device="cuda", **_):
    """Fresh standard-normal x, y (seeded) and an uninitialized output."""
    tdt = _torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, generator=gen, device=device, dtype=torch.float32).to(tdt)
    y = torch.randn(N, generator=gen, device=device, dtype=torch.float32).to(tdt)
    out = torch.empty(N, device=device, dtype=tdt)
    return {"inputs": {"x": x, "y": y, "out": out, "N": N}, "outputs": ["out"]}


def run_kernel(x, y, out, N, *, BLOCK_SIZE, num_warps, **_):
    """Launch one program per BLOCK_SIZE elements; writes `out` in place."""
    if x.numel() < N or y.numel() < N or out.numel() < N:
        raise ValueError(f"vector_add: tensors must hold at least N={N} elements")
    grid = (triton.cdiv(N, BLOCK_SIZE),)
    _add_kernel[grid](x, y, out, N, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)


def reference(x, y, out, N, **_):
    """x + y in the inputs' dtype (float64 when given upcast copies)."""
    return x + y


def flops(N, **_):
    # One add per element.
    return N


def bytes_moved(N, dtype="float32", **_):
    # Read x and y once, write out once.
    return 3 * N * _torch_dtype(dtype).itemsize
