"""KernelBench level 1 problem 23 (Softmax over dim 1 of a 4096 x 393216 input), fp32.

One program per row. Pass 1 reads the row once, keeping a running maximum and a running sum of exponentials per
lane (the online softmax: the sum is rescaled whenever the maximum grows); the lanes are then combined. Pass 2
reads the row again and writes exp(x - max) / sum. Rows are long (393216), so both passes loop over the row in
blocks; offsets are int64 (row * n_cols reaches 1.6e9).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
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
        alpha = tl.where(live, tl.exp(m - m_new), 0.0)
        p = tl.where(live, tl.exp(x - m_new), 0.0)
        s = s * alpha + p
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m > float("-inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    inv = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + start + cols, tl.exp(x - row_max) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = min(4096, triton.next_power_of_2(n_cols))
        softmax_kernel[(n_rows,)](x, out, n_cols, BLOCK_SIZE=block, num_warps=8)
        return out
