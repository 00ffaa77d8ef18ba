"""KernelBench level 2 problem 45 (Gemm, Sigmoid, Gemm, LogSumExp over the features), fp32.

Both GEMMs stay torch's (``torch.mm``, fp32). Triton does the rest: the first bias add and the sigmoid in place
over the first GEMM's result, then per row of the second GEMM's result the bias add and the log-sum-exp (max, then
sum of exp(x - max), in one program per row looping over the 1024 features), so the second result is read once
and the (16384,) output written directly.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_sigmoid_kernel(y_ptr, bias_ptr, n_cols, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offsets % n_cols, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, 1.0 / (1.0 + tl.exp(-(y + b))), mask=mask)


@triton.jit
def bias_logsumexp_kernel(y_ptr, bias_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    m = tl.full((BLOCK_SIZE,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_SIZE,), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        y = tl.load(y_ptr + row * n_cols + start + cols, mask=mask, other=0.0)
        b = tl.load(bias_ptr + start + cols, mask=mask, other=0.0)
        z = tl.where(mask, y + b, float("-inf"))
        m_new = tl.maximum(m, z)
        live = m_new > float("-inf")
        s = s * tl.where(live, tl.exp(m - m_new), 0.0) + tl.where(live, tl.exp(z - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m > float("-inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    tl.store(out_ptr + row, row_max + tl.log(row_sum))


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        h = torch.mm(x.contiguous(), self.linear1.weight.t())
        n = h.numel()
        BLOCK = 2048
        bias_sigmoid_kernel[(triton.cdiv(n, BLOCK),)](h, self.linear1.bias, h.shape[1], n, BLOCK_SIZE=BLOCK,
                                                      num_warps=8)
        y = torch.mm(h, self.linear2.weight.t())
        out = torch.empty((y.shape[0],), device=y.device, dtype=y.dtype)
        n_cols = y.shape[1]
        block = min(1024, triton.next_power_of_2(n_cols))
        bias_logsumexp_kernel[(y.shape[0],)](y, self.linear2.bias, out, n_cols, BLOCK_SIZE=block, num_warps=4)
        return out
