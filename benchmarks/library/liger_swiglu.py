"""Liger-Kernel's SwiGLU forward (liger_kernel.ops.swiglu._swiglu_forward_kernel): c = silu(a) * b.

silu is computed in fp32 (a is upcast), cast to b's dtype, then multiplied by b in that dtype (bf16 here).
a and b are the gate and up projections of a Llama MLP, M tokens x N intermediate features.

run_kernel launches the library's @triton.jit kernel with the arguments of its launcher
(liger_kernel.ops.swiglu.swiglu_forward, non-tiled path used on Hopper, gate_multiplier 1.0); BLOCK_SIZE and
num_warps, derived by the launcher with calculate_settings, are the tunables and the launcher's choice is
DEFAULT_CONFIG. One program per row; BLOCK_SIZE must cover the row.
"""

import torch
from liger_kernel.ops.swiglu import _swiglu_forward_kernel
from liger_kernel.ops.utils import calculate_settings

# Llama-2-7B MLP: intermediate size 11008, 4 x 2048 tokens.
SHAPE = {"M": 8192, "N": 11008, "dtype": "bfloat16"}
CPU_SHAPE = {"M": 4, "N": 344, "dtype": "bfloat16"}
TUNABLES = {"BLOCK_SIZE": [16384, 32768], "num_warps": [4, 8, 16, 32]}
_block, _warps = calculate_settings(SHAPE["N"])
DEFAULT_CONFIG = {"BLOCK_SIZE": _block, "num_warps": _warps}
COMPUTE_UNIT = "fp32"

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def setup(M, N, dtype="bfloat16", seed=0, device="cuda", **_):
    """Gate and up projections ~ N(0, 1.5^2) (silu's curved region around 0 and its linear tail both occur)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    tdt = _DTYPES[dtype]
    a = (1.5 * torch.randn(M, N, generator=gen, device=device)).to(tdt)
    b = (1.5 * torch.randn(M, N, generator=gen, device=device)).to(tdt)
    return {"inputs": {"a": a, "b": b, "c": torch.empty(M, N, device=device, dtype=tdt)}, "outputs": ["c"]}


def run_kernel(a, b, c, *, BLOCK_SIZE, num_warps, **_):
    """Launch Liger's forward kernel, one program per row; writes c."""
    n_rows, n_cols = a.shape
    if BLOCK_SIZE < n_cols:
        raise ValueError(f"liger_swiglu: BLOCK_SIZE {BLOCK_SIZE} < N {n_cols}; the kernel reads a row in one block")
    _swiglu_forward_kernel[(n_rows,)](a, b, c, c.stride(-2), 1.0, n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                      num_warps=num_warps)


def reference(a, b, c, **_):
    """silu(a) * b in the higher precision the checker passes (float64 copies)."""
    return torch.nn.functional.silu(a) * b


def flops(M, N, **_):
    """FLOPs: per element silu = x * sigmoid(x) (1 exp, 1 add, 1 divide, 1 multiply) + 1 multiply by b = 5."""
    return 5 * M * N


def bytes_moved(M, N, dtype="bfloat16", **_):
    """Bytes: read a and b once, write c once."""
    return 3 * M * N * _DTYPES[dtype].itemsize
