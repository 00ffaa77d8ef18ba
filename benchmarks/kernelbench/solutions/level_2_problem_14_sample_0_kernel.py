"""KernelBench level 2 problem 14 (Gemm, divide, sum over the features, scaling), fp32.

sum_j (x W^T)_ij = sum_k x_ik * (sum_j W_jk): the sum over the GEMM's output features equals a matrix-vector
product with the column sums of W. So no GEMM is computed: one Triton kernel sums W's columns (each forward, from
the weight as it is then), a second takes each row's dot product with them and applies / 2 and * scaling_factor.
That reads W once (256 MiB) instead of a 1024 x 8192 x 8192 GEMM. Sums are in fp32 over at most 8192 terms.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def column_sum_kernel(w_ptr, out_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tl.arange(0, BLOCK_R).to(tl.int64)
    acc = tl.zeros((BLOCK_R, BLOCK_C), tl.float32)
    for start in range(0, n_rows, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(w_ptr + r[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


@triton.jit
def row_dot_kernel(x_ptr, v_ptr, out_ptr, n_cols, factor, BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_K,), tl.float32)
    for start in range(0, n_cols, BLOCK_K):
        mask = start + k < n_cols
        x = tl.load(x_ptr + row * n_cols + start + k, mask=mask, other=0.0)
        v = tl.load(v_ptr + start + k, mask=mask, other=0.0)
        acc += x * v
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * factor)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = x.contiguous()
        w = self.weight.contiguous()
        hidden, inp = w.shape
        wsum = torch.empty(inp, device=x.device, dtype=torch.float32)
        BLOCK_R, BLOCK_C = 128, 32  # 256 programs of 128-byte row segments for 8192 columns
        column_sum_kernel[(triton.cdiv(inp, BLOCK_C),)](w, wsum, hidden, inp, BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C,
                                                        num_warps=4)
        out = torch.empty((x.shape[0], 1), device=x.device, dtype=x.dtype)
        block_k = min(2048, triton.next_power_of_2(inp))
        row_dot_kernel[(x.shape[0],)](x, wsum, out, inp, float(self.scaling_factor) / 2.0, BLOCK_K=block_k,
                                      num_warps=4)
        return out
