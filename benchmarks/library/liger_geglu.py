"""Liger-Kernel's GeGLU forward (liger_kernel.ops.geglu._geglu_tanh_forward_kernel): c = gelu_tanh(a) * b.

gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) in fp32, using libdevice's tanh; the result is
cast to b's dtype and multiplied by b in that dtype. a and b are the gate and up projections of a Gemma MLP.

run_kernel launches the library's @triton.jit kernel with the arguments of its launcher
(liger_kernel.ops.geglu.geglu_forward); BLOCK_SIZE and num_warps, derived by the launcher with
calculate_settings, are the tunables, and the launcher's choice is DEFAULT_CONFIG. One program per row.
"""

import torch
from liger_kernel.ops.geglu import _geglu_tanh_forward_kernel
from liger_kernel.ops.utils import calculate_settings

# Gemma-2B MLP: intermediate size 16384, 4 x 2048 tokens.
SHAPE = {"M": 8192, "N": 16384, "dtype": "bfloat16"}
CPU_SHAPE = {"M": 4, "N": 512, "dtype": "bfloat16"}
TUNABLES = {"BLOCK_SIZE": [16384, 32768], "num_warps": [4, 8, 16, 32]}
# the kernel reads a row in one block of BLOCK_SIZE columns (run_kernel refuses a longer row): its domain
SHAPE_RULES = {"N": "<= BLOCK_SIZE"}
_block, _warps = calculate_settings(SHAPE["N"])
DEFAULT_CONFIG = {"BLOCK_SIZE": _block, "num_warps": _warps}
COMPUTE_UNIT = "fp32"

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def setup(M, N, dtype="bfloat16", seed=0, device="cuda", **_):
    """Gate and up projections ~ N(0, 1.5^2): tanh's saturated tails and its linear middle both occur."""
    gen = torch.Generator(device=device).manual_seed(seed)
    tdt = _DTYPES[dtype]
    a = (1.5 * torch.randn(M, N, generator=gen, device=device)).to(tdt)
    b = (1.5 * torch.randn(M, N, generator=gen, device=device)).to(tdt)
    return {"inputs": {"a": a, "b": b, "c": torch.empty(M, N, device=device, dtype=tdt)}, "outputs": ["c"]}


def run_kernel(a, b, c, *, BLOCK_SIZE, num_warps, **_):
    """Launch Liger's forward kernel, one program per row; writes c."""
    n_rows, n_cols = a.shape
    if BLOCK_SIZE < n_cols:
        raise ValueError(f"liger_geglu: BLOCK_SIZE {BLOCK_SIZE} < N {n_cols}; the kernel reads a row in one block")
    _geglu_tanh_forward_kernel[(n_rows,)](a, b, c, c.stride(-2), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                          num_warps=num_warps)


def reference(a, b, c, **_):
    """gelu with the tanh approximation, times b."""
    return torch.nn.functional.gelu(a, approximate="tanh") * b


def flops(M, N, **_):
    """FLOPs: per element a^3 (2 multiplies), 1 multiply-add, 1 multiply, tanh (counted as 1), 1 add, 2 multiplies,
    1 multiply by b = 10."""
    return 10 * M * N


def bytes_moved(M, N, dtype="bfloat16", **_):
    """Bytes: read a and b once, write c once."""
    return 3 * M * N * _DTYPES[dtype].itemsize
