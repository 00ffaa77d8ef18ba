"""KernelBench level 2 problem 40 (Matmul, scaling, residual add), fp32.

y * s + y = y * (1 + s): the GEMM stays torch's (``torch.mm``, fp32); the bias add and the scaled residual are one
Triton epilogue in place over its result (the reference also clones the result and makes two more passes).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_scale_residual_kernel(y_ptr, bias_ptr, n_cols, n_elements, factor, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offsets % n_cols, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, (y + b) * factor, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = torch.mm(x.contiguous(), self.matmul.weight.t())
        n = y.numel()
        BLOCK = 2048
        bias_scale_residual_kernel[(triton.cdiv(n, BLOCK),)](y, self.matmul.bias, y.shape[1], n,
                                                             1.0 + float(self.scaling_factor), BLOCK_SIZE=BLOCK,
                                                             num_warps=8)
        return y
