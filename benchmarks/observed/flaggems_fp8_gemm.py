"""flag-gems 5.0.2's FP8 GEMM (flag_gems/ops/fp8_matmul.py: _fp8_matmul_kernel, the kernel of the public op
``flag_gems.fp8_matmul(a, a_s, b, b_s)``): C = (A·a_s) @ (B·b_s)ᵀ in bf16, A and B float8_e4m3fn, with the
scales its API takes: a_s per row and per group of 128 along K (a per-token-group scale, float32 (M, K/128)),
b_s per 128 x 128 block of B (float32 (N/128, K/128)). The kernel accumulates each BLOCK_K slice's fp8 tensor-core
dot in fp32, multiplies it by a_s[m, k/128]·b_s[n/128, k/128] and stores bf16.

How the kernel is loaded: ``import flag_gems`` detects a vendor device at import (it raises "No device were
detected" on a machine without one) and opens a SQLAlchemy cache database, so this file loads the one module
flag_gems/ops/fp8_matmul.py by its path inside the installed package (found with importlib.util.find_spec, which
does not run the package's __init__). That module imports only torch and triton; the kernel source is the
library's, unchanged, on the CPU (interpreter) and on the GPU alike.

run_kernel passes what ``fp8_matmul`` passes, except the tile config: the library's fixed config (BLOCK_M=64,
BLOCK_N=64, BLOCK_K=128, GROUP_SIZE_M=4, num_stages=3, num_warps=4, the module's constants) is DEFAULT_CONFIG and
the tunables lie around it. BLOCK_K must not exceed the scale group (128): one a_s/b_s value is applied per
BLOCK_K slice.
"""

import importlib.util
import itertools
import sys
from pathlib import Path

import torch
import triton

_count = itertools.count()


def _load_flaggems_module(relative: str):
    """Load flag_gems/<relative> by path, without running flag_gems/__init__.py (see the module docstring)."""
    spec = importlib.util.find_spec("flag_gems")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("flag-gems is not installed (pip install flag-gems==5.0.2)")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    name = f"_kp_flaggems_{Path(relative).stem}_{next(_count)}"
    mod_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module
    mod_spec.loader.exec_module(module)
    return module


_lib = _load_flaggems_module("ops/fp8_matmul.py")
_fp8_matmul_kernel = _lib._fp8_matmul_kernel
GROUP = _lib.GROUP_SIZE  # 128: the scale group along K (and the B block)

SHAPE = {"M": 4096, "N": 4096, "K": 4096}
CPU_SHAPE = {"M": 64, "N": 256, "K": 256}
TUNABLES = {"BLOCK_M": [32, 64, 128], "BLOCK_N": [32, 64, 128, 256], "BLOCK_K": [64, 128],
            "GROUP_SIZE_M": [4, 8], "num_stages": [2, 3, 4], "num_warps": [4, 8]}
DEFAULT_CONFIG = {"BLOCK_M": _lib.BLOCK_M, "BLOCK_N": _lib.BLOCK_N, "BLOCK_K": _lib.BLOCK_K,
                  "GROUP_SIZE_M": _lib.GROUP_SIZE_M, "num_stages": _lib.NUM_STAGES, "num_warps": _lib.NUM_WARPS}
CONSTRAINTS = [f"BLOCK_K <= {GROUP}",
               "(BLOCK_M + BLOCK_N) * BLOCK_K * num_stages <= max_shared_mem_per_block_bytes"]
# Block-scaled FP8 (one a_s per 128 columns, one b_s per 128 x 128 block of B, as DeepSeek-V3's quantization): K and
# N are whole scale blocks. At a drawn K=1979, N=1471 (partial blocks) 911 of 1,651,933 elements were out of
# tolerance on the H100 (issue 24's run): outside the op's domain, which this declares.
SHAPE_RULES = {"K": GROUP, "N": GROUP}
COMPUTE_UNIT = "fp8_tensor"

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def _group_scale(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """amax/448 over blocks of ``rows`` x ``cols`` of a 2-D float32 tensor -> (ceil(R/rows), ceil(C/cols))."""
    r, c = t.shape
    padded = torch.zeros(triton.cdiv(r, rows) * rows, triton.cdiv(c, cols) * cols, device=t.device)
    padded[:r, :c] = t.abs()
    blocks = padded.view(padded.shape[0] // rows, rows, padded.shape[1] // cols, cols)
    return blocks.amax(dim=(1, 3)).clamp_min(1e-4) / FP8_MAX


def _expand(scale: torch.Tensor, rows: int, cols: int, shape) -> torch.Tensor:
    """Each scale repeated over its block, cut to ``shape``."""
    return scale.repeat_interleave(rows, 0).repeat_interleave(cols, 1)[: shape[0], : shape[1]]


def setup(M, N, K, seed=0, device="cuda", **_):
    """A (M, K) and B (N, K) ~ N(0, 1) quantized to e4m3 with their scales (a_s per row and 128 columns, b_s per
    128 x 128 block, amax / 448); C (M, N) bf16 is the output."""
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device)
    b = torch.randn(N, K, generator=gen, device=device)
    a_s = _group_scale(a, 1, GROUP)
    b_s = _group_scale(b, GROUP, GROUP)
    a_q = (a / _expand(a_s, 1, GROUP, a.shape)).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    b_q = (b / _expand(b_s, GROUP, GROUP, b.shape)).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    c = torch.empty(M, N, device=device, dtype=torch.bfloat16)
    return {"inputs": {"a": a_q, "a_s": a_s.contiguous(), "b": b_q, "b_s": b_s.contiguous(), "c": c},
            "outputs": ["c"]}


def run_kernel(a, a_s, b, b_s, c, *, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M, num_stages, num_warps, **_):
    """Launch flag-gems' kernel as fp8_matmul does (one program per C tile, grouped along M)."""
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _fp8_matmul_kernel[grid](
        a, b, c, a_s, b_s, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        a_s.stride(0), a_s.stride(1), b_s.stride(0), b_s.stride(1),
        GROUP_K=GROUP, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_SIZE_M=GROUP_SIZE_M,
        num_stages=num_stages, num_warps=num_warps,
    )


def reference(a, a_s, b, b_s, c, **_):
    """C = (A ⊙ a_s) @ (B ⊙ b_s)ᵀ with each scale expanded over its group/block, in the inputs' precision (the
    checker passes float64 copies; the fp8 values convert exactly), as bf16 like the kernel's store."""
    a_deq = a.to(a_s.dtype) * _expand(a_s, 1, GROUP, a.shape)
    b_deq = b.to(b_s.dtype) * _expand(b_s, GROUP, GROUP, b.shape)
    return (a_deq @ b_deq.T).to(torch.bfloat16)
