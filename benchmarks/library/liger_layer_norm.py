"""Liger-Kernel's LayerNorm forward (liger_kernel.ops.layer_norm._layer_norm_forward_kernel).

y[i, :] = (x[i, :] - mean_i) * rstd_i * w + b,  rstd_i = rsqrt(var_i + eps) (biased variance), computed in fp32
and stored in the input dtype; mean_i and rstd_i are stored in fp32 for the backward pass (all three checked).

run_kernel launches the library's @triton.jit kernel with the arguments of its launcher
(liger_kernel.ops.layer_norm.layer_norm_forward); BLOCK_SIZE and num_warps, which the launcher derives with
calculate_settings, are the tunables, and the launcher's choice is DEFAULT_CONFIG. One program per row.
"""

import torch
from liger_kernel.ops.layer_norm import _layer_norm_forward_kernel
from liger_kernel.ops.utils import calculate_settings

# A ViT-H / GPT-2-XL-like width (1280 is not a power of two: the last block is masked), 8192 tokens.
SHAPE = {"M": 8192, "N": 1280, "dtype": "bfloat16"}
CPU_SHAPE = {"M": 4, "N": 160, "dtype": "bfloat16"}
TUNABLES = {"BLOCK_SIZE": [2048, 4096, 8192], "num_warps": [1, 2, 4, 8, 16]}
_block, _warps = calculate_settings(SHAPE["N"])
DEFAULT_CONFIG = {"BLOCK_SIZE": _block, "num_warps": _warps}
COMPUTE_UNIT = "fp32"

EPS = 1e-5
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def setup(M, N, dtype="bfloat16", seed=0, device="cuda", **_):
    """x with mean 0.5 and std 2 (the centering matters), w around 1, b around 0."""
    gen = torch.Generator(device=device).manual_seed(seed)
    tdt = _DTYPES[dtype]
    x = (0.5 + 2.0 * torch.randn(M, N, generator=gen, device=device)).to(tdt)
    w = (1.0 + 0.1 * torch.randn(N, generator=gen, device=device)).to(tdt)
    b = (0.1 * torch.randn(N, generator=gen, device=device)).to(tdt)
    f32 = dict(device=device, dtype=torch.float32)
    inputs = {"x": x, "w": w, "b": b, "y": torch.empty(M, N, device=device, dtype=tdt),
              "mean": torch.empty(M, **f32), "rstd": torch.empty(M, **f32), "eps": EPS}
    return {"inputs": inputs, "outputs": ["y", "mean", "rstd"]}


def run_kernel(x, w, b, y, mean, rstd, eps=EPS, *, BLOCK_SIZE, num_warps, **_):
    """Launch Liger's forward kernel, one program per row; writes y, mean and rstd."""
    n_rows, n_cols = x.shape
    if BLOCK_SIZE < n_cols:
        raise ValueError(f"liger_layer_norm: BLOCK_SIZE {BLOCK_SIZE} < N {n_cols}; the kernel reads a row in one block")
    _layer_norm_forward_kernel[(n_rows,)](
        y, y.stride(0), x, x.stride(0), w, w.stride(0), b, b.stride(0), mean, mean.stride(0),
        rstd, rstd.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
    )


def reference(x, w, b, y, mean, rstd, eps=EPS, **_):
    """torch.nn.functional.layer_norm, and the per-row mean and 1/sqrt(biased variance + eps)."""
    n = x.shape[-1]
    out = torch.nn.functional.layer_norm(x, (n,), w, b, eps)
    return out, x.mean(-1), torch.rsqrt(x.var(-1, unbiased=False) + eps)


def flops(M, N, **_):
    """FLOPs: per element 1 add (mean), 1 subtract + 1 multiply + 1 add (variance), 1 multiply (rstd), 1 multiply
    (w), 1 add (b) = 7."""
    return 7 * M * N


def bytes_moved(M, N, dtype="bfloat16", **_):
    """Bytes: read x, w, b once, write y once, write mean and rstd (fp32) once."""
    return (2 * M * N + 2 * N) * _DTYPES[dtype].itemsize + 8 * M
