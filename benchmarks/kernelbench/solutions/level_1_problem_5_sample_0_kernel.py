"""KernelBench level 1 problem 5 (matrix-scalar multiplication C = A * s), fp32: one elementwise Triton kernel.

``s`` comes from ``get_inputs()`` as a Python float and is passed to the kernel as a scalar argument. A is
65536 x 16384 (1.07e9 elements): int64 offsets.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(a_ptr, out_ptr, s, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, a * s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        A = A.contiguous()
        out = torch.empty_like(A)
        n = A.numel()
        BLOCK = 4096
        scale_kernel[(triton.cdiv(n, BLOCK),)](A, out, float(s), n, BLOCK_SIZE=BLOCK, num_warps=8)
        return out
