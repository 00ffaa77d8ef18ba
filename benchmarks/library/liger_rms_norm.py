"""Liger-Kernel's RMSNorm forward (liger_kernel.ops.rms_norm._rms_norm_forward_kernel), Llama casting mode.

y[i, :] = (x[i, :] * rstd_i).to(bf16) * w,  rstd_i = rsqrt(mean_j x[i, j]^2 + eps), statistics in fp32
(Llama's casting: only rstd is fp32; the weight multiply happens in the input dtype). The kernel also stores
rstd_i (fp32) for the backward pass; both y and rstd are checked.

run_kernel launches the library's own @triton.jit kernel with the arguments its launcher
(liger_kernel.ops.rms_norm.rms_norm_forward) passes, except BLOCK_SIZE and num_warps, which that launcher
derives from the row length with liger_kernel.ops.utils.calculate_settings: here they are the tunables and the
launcher's choice is DEFAULT_CONFIG. One program per row; BLOCK_SIZE must cover the whole row.
"""

import torch
from liger_kernel.ops.rms_norm import _CASTING_MODE_LLAMA, _rms_norm_forward_kernel
from liger_kernel.ops.utils import calculate_settings

# Llama-2-7B hidden size, 4 sequences of 2048 tokens.
SHAPE = {"M": 8192, "N": 4096, "dtype": "bfloat16"}
CPU_SHAPE = {"M": 4, "N": 256, "dtype": "bfloat16"}
TUNABLES = {"BLOCK_SIZE": [4096, 8192, 16384], "num_warps": [1, 2, 4, 8, 16, 32]}
# the kernel reads a row in one block of BLOCK_SIZE columns (run_kernel refuses a longer row): its domain
SHAPE_RULES = {"N": "<= BLOCK_SIZE"}
_block, _warps = calculate_settings(SHAPE["N"])  # what rms_norm_forward would launch at SHAPE
DEFAULT_CONFIG = {"BLOCK_SIZE": _block, "num_warps": _warps}
COMPUTE_UNIT = "fp32"

EPS = 1e-6  # Llama's rms_norm_eps
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def setup(M, N, dtype="bfloat16", seed=0, device="cuda", **_):
    """Hidden states ~ N(0, 1) with a few 20x outlier channels (as LLM activations have), weight around 1."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    x[:, :: max(N // 8, 1)] *= 20.0
    w = 1.0 + 0.1 * torch.randn(N, generator=gen, device=device)
    tdt = _DTYPES[dtype]
    inputs = {"x": x.to(tdt), "w": w.to(tdt), "y": torch.empty(M, N, device=device, dtype=tdt),
              "rstd": torch.empty(M, device=device, dtype=torch.float32), "eps": EPS}
    return {"inputs": inputs, "outputs": ["y", "rstd"]}


def run_kernel(x, w, y, rstd, eps=EPS, *, BLOCK_SIZE, num_warps, **_):
    """Launch Liger's forward kernel, one program per row; writes y and rstd."""
    n_rows, n_cols = x.shape
    if BLOCK_SIZE < n_cols:
        raise ValueError(f"liger_rms_norm: BLOCK_SIZE {BLOCK_SIZE} < N {n_cols}; the kernel reads a row in one block")
    _rms_norm_forward_kernel[(n_rows,)](
        y, y.stride(0), x, x.stride(0), w, w.stride(0), rstd, rstd.stride(0), n_cols, eps, 0.0,
        _CASTING_MODE_LLAMA.value, elementwise_affine=True, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
    )


def reference(x, w, y, rstd, eps=EPS, **_):
    """HF LlamaRMSNorm: normalize in fp32, cast to the input dtype, multiply by w; and rstd per row. On the
    float64 copies the checker passes, every step is float64 (the kernel's two bf16 roundings are its error)."""
    x32 = x.to(torch.float32) if x.dtype != torch.float64 else x
    r = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (x32 * r).to(x.dtype) * w, r.squeeze(-1)


def flops(M, N, **_):
    """FLOPs: per element 1 multiply + 1 add (sum of squares), 1 multiply (rstd), 1 multiply (w) = 4."""
    return 4 * M * N


def bytes_moved(M, N, dtype="bfloat16", **_):
    """Bytes: read x and w once, write y once, write rstd (fp32) once."""
    size = _DTYPES[dtype].itemsize
    return (2 * M * N + N) * size + 4 * M
