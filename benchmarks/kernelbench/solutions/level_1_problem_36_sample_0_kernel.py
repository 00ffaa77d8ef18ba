"""KernelBench level 1 problem 36 (RMSNorm over dim 1 of a (112, 64, 512, 512) input), fp32.

The reference makes five passes (x**2, mean, + eps, sqrt, divide); this is one read and one write. The input is
viewed as (batch, features, spatial); one program takes a tile of all features x BLOCK_S contiguous spatial
positions of one batch item, sums the squares over the features, and writes x / sqrt(mean + eps). Offsets are int64
(1.9e9 elements).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, out_ptr, n_features, n_spatial, eps,
                   BLOCK_F: tl.constexpr, BLOCK_S: tl.constexpr):
    pid_s = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    s = pid_s.to(tl.int64) * BLOCK_S + tl.arange(0, BLOCK_S)
    f = tl.arange(0, BLOCK_F).to(tl.int64)
    mask = (f[:, None] < n_features) & (s[None, :] < n_spatial)
    offs = b * n_features * n_spatial + f[:, None] * n_spatial + s[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    mean_sq = tl.sum(x * x, axis=0) / n_features
    inv = 1.0 / tl.sqrt(mean_sq + eps)
    tl.store(out_ptr + offs, x * inv[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_batch, n_features = x.shape[0], x.shape[1]
        n_spatial = x.numel() // max(1, n_batch * n_features)
        block_f = triton.next_power_of_2(n_features)
        block_s = max(16, min(256, 8192 // block_f))
        grid = (triton.cdiv(n_spatial, block_s), n_batch)
        rmsnorm_kernel[grid](x, out, n_features, n_spatial, self.eps, BLOCK_F=block_f, BLOCK_S=block_s,
                             num_warps=8)
        return out
