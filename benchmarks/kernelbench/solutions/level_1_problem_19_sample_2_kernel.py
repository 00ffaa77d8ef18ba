"""KernelBench level 1 problem 19 (ReLU): a LIBRARY-CALLING solution, kept on purpose as a negative example.

The file defines a Triton kernel, but ModelNew.forward never launches it: the result is torch.relu's, the reference's
own op. kernelpilot must refuse it as ``kernel_not_launched`` (see benchmarks/kernelbench/README.md).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)  # the kernel above is never launched
