"""KernelBench level 2 problem 29 (Matmul, Mish, Mish), fp32.

The GEMM stays torch's (``torch.mm``, fp32); the bias add and both Mish activations are one Triton epilogue in
place over its result. mish(x) = x * tanh(softplus(x)) is written without tanh or log: with n = exp(x),
tanh(log(1 + n)) = n (n + 2) / (n (n + 2) + 2); for x > 20 mish(x) = x in fp32 (torch's softplus threshold).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mish(x):
    n = tl.exp(tl.minimum(x, 20.0))
    t = n * (n + 2.0)
    return tl.where(x > 20.0, x, x * t / (t + 2.0))


@triton.jit
def bias_mish_mish_kernel(y_ptr, bias_ptr, n_cols, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offsets % n_cols, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, _mish(_mish(y + b)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.mm(x.contiguous(), self.linear.weight.t())
        n = y.numel()
        BLOCK = 2048
        bias_mish_mish_kernel[(triton.cdiv(n, BLOCK),)](y, self.linear.bias, y.shape[1], n, BLOCK_SIZE=BLOCK,
                                                        num_warps=8)
        return y
