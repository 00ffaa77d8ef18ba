"""KernelBench level 1 problem 21 (Sigmoid): a WRONG solution, kept on purpose as a negative example.

Off-by-one mask: ``offsets < n_elements - 1`` never writes the last element, which keeps whatever
``torch.empty_like`` left there. Every sigmoid value is >= 0.5 on this problem's inputs, so the last element is
wrong whatever the memory held; kernelpilot must call it ``incorrect`` (see benchmarks/kernelbench/README.md).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sigmoid_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements - 1  # the bug: drops the last element
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, 1.0 / (1.0 + tl.exp(-x)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 4096
        sigmoid_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK, num_warps=8)
        return out
