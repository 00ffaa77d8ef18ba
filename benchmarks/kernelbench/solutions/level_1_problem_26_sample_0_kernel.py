"""KernelBench level 1 problem 26 (GELU, exact erf form as torch.nn.functional.gelu's default), fp32: one
elementwise Triton kernel, gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2))); int64 offsets (1.6e9 elements)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 4096
        gelu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK, num_warps=8)
        return out
