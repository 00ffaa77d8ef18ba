"""KernelBench level 1 problem 88 (MinGPT's tanh GELU), fp32: the reference's chain of pow, mul, add, tanh, mul
fused into one elementwise Triton kernel (one read and one write of the 8192 x 8192 input instead of one per op).

tanh(u) is written 1 - 2 / (exp(2u) + 1): exp overflowing to inf gives 1, underflowing to 0 gives -1.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def new_gelu_kernel(x_ptr, out_ptr, n_elements, k, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    u = k * (x + 0.044715 * x * x * x)
    t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
    tl.store(out_ptr + offsets, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 4096
        new_gelu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, math.sqrt(2.0 / math.pi), BLOCK_SIZE=BLOCK,
                                                  num_warps=8)
        return out
