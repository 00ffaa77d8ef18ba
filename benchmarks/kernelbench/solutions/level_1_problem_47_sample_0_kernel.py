"""KernelBench level 1 problem 47 (Sum reduction over a dimension (keepdim=True)), fp32.

The input is viewed as (outer, R, inner) around the reduced dimension (R = x.shape[dim]); one program owns BLOCK_J
contiguous positions of the inner dimension of one outer index and walks R in blocks of BLOCK_R rows, so every
load is a contiguous row segment (for the problem's (128, 4096, 4095) input reduced over dim 1: 4096 programs of
128 columns). The result is multiplied by ``scale`` (1 for a sum, 1 / R for a mean). Offsets are int64.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def reduce_dim_kernel(x_ptr, out_ptr, n_reduce, n_inner, scale, BLOCK_R: tl.constexpr, BLOCK_J: tl.constexpr):
    o = tl.program_id(1).to(tl.int64)
    j = tl.program_id(0).to(tl.int64) * BLOCK_J + tl.arange(0, BLOCK_J)
    r = tl.arange(0, BLOCK_R).to(tl.int64)
    base = o * n_reduce * n_inner
    acc = tl.zeros((BLOCK_R, BLOCK_J), tl.float32)
    for start in range(0, n_reduce, BLOCK_R):
        rr = start + r
        mask = (rr[:, None] < n_reduce) & (j[None, :] < n_inner)
        acc += tl.load(x_ptr + base + rr[:, None] * n_inner + j[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + o * n_inner + j, tl.sum(acc, axis=0) * scale, mask=j < n_inner)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        r = x.shape[dim]
        outer = 1
        for s in x.shape[:dim]:
            outer *= s
        inner = 1
        for s in x.shape[dim + 1:]:
            inner *= s
        out_shape = list(x.shape)
        out_shape[dim] = 1  # keepdim=True
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        BLOCK_R, BLOCK_J = 32, 128
        grid = (triton.cdiv(inner, BLOCK_J), outer)
        reduce_dim_kernel[grid](x, out, r, inner, 1.0, BLOCK_R=BLOCK_R, BLOCK_J=BLOCK_J, num_warps=4)
        return out
