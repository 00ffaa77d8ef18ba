"""KernelBench level 1 problem 24 (LogSoftmax over dim 1 of a 4096 x 393216 input), fp32.

One program per row: pass 1 is the online maximum and sum of exponentials (as in problem 23's solution), pass 2
writes x - max - log(sum). Both passes loop over the long row; offsets are int64.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def log_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    cols = tl.arange(0, BLOCK_SIZE)
    m = tl.full((BLOCK_SIZE,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_SIZE,), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=float("-inf"))
        m_new = tl.maximum(m, x)
        live = m_new > float("-inf")
        s = s * tl.where(live, tl.exp(m - m_new), 0.0) + tl.where(live, tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m > float("-inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    shift = row_max + tl.log(row_sum)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + start + cols, x - shift, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or self.dim not in (1, -1):
            raise ValueError("this solution handles a 2-D input reduced over its last dimension (the problem's form)")
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = min(4096, triton.next_power_of_2(n_cols))
        log_softmax_kernel[(n_rows,)](x, out, n_cols, BLOCK_SIZE=block, num_warps=8)
        return out
