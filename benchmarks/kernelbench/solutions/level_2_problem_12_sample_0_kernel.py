"""KernelBench level 2 problem 12 (Gemm, multiply, LeakyReLU), fp32.

The GEMM stays torch's (``torch.mm`` with the nn.Linear's weight, created in Model's order so the same seed gives
the same parameters; fp32, no TF32). The bias add, the multiply and the LeakyReLU are one Triton epilogue, written
in place over the GEMM's result: one read and one write instead of the reference's two extra passes.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_mul_leaky_kernel(y_ptr, bias_ptr, n_cols, n_elements, multiplier, negative_slope,
                          BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offsets % n_cols, mask=mask, other=0.0)
    z = (y + b) * multiplier
    tl.store(y_ptr + offsets, tl.where(z >= 0.0, z, z * negative_slope), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = torch.mm(x.contiguous(), self.gemm.weight.t())
        n = y.numel()
        BLOCK = 2048
        bias_mul_leaky_kernel[(triton.cdiv(n, BLOCK),)](y, self.gemm.bias, y.shape[1], n, float(self.multiplier),
                                                        float(self.negative_slope), BLOCK_SIZE=BLOCK, num_warps=8)
        return y
