"""KernelBench level 1 problem 88 (MinGPT's tanh GELU), fp32, the fused kernel of sample 0 under
``@triton.autotune``: its config list (block size, warps) is the space ``kernelpilot tune`` / ``optimize`` search,
each launch pinned to one config. The list starts from a deliberately small block (64 elements, one warp: about a
million programs for the 8192 x 8192 input), so version 0 of an ``optimize`` run is the slow end of the space and
the search has something to find (issue 27: "optimize on one of your solutions improves it").
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 64}, num_warps=1),
             triton.Config({"BLOCK_SIZE": 256}, num_warps=2),
             triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
             triton.Config({"BLOCK_SIZE": 2048}, num_warps=4),
             triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
             triton.Config({"BLOCK_SIZE": 8192}, num_warps=8),
             triton.Config({"BLOCK_SIZE": 8192}, num_warps=16)],
    key=["n_elements"])
@triton.jit
def new_gelu_tuned_kernel(x_ptr, out_ptr, n_elements, k, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    u = k * (x + 0.044715 * x * x * x)
    t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)  # tanh(u), saturating to +-1 where exp over/underflows
    tl.store(out_ptr + offsets, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
        new_gelu_tuned_kernel[grid](x, out, n, math.sqrt(2.0 / math.pi))
        return out
