"""KernelBench level 2 problem 86 (Matmul, divide, GELU), fp32.

The GEMM stays torch's (``torch.mm``, fp32); the bias add, the division and the exact (erf) GELU are one Triton
epilogue in place over its result.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_div_gelu_kernel(y_ptr, bias_ptr, n_cols, n_elements, divisor, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offsets % n_cols, mask=mask, other=0.0)
    z = (y + b) / divisor
    tl.store(y_ptr + offsets, 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        y = torch.mm(x.contiguous(), self.linear.weight.t())
        n = y.numel()
        BLOCK = 2048
        bias_div_gelu_kernel[(triton.cdiv(n, BLOCK),)](y, self.linear.bias, y.shape[1], n, float(self.divisor),
                                                       BLOCK_SIZE=BLOCK, num_warps=8)
        return y
