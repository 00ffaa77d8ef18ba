"""flag-gems 5.0.2's FP8 activation quantization (flag_gems/ops/act_quant.py: act_quant_triton_kernel, the kernel
of ``flag_gems.act_quant_triton(x, block_size=128, scale_fmt=None)``): per row and per group of 128 columns,
s = max(amax |x|, 1e-4) · (1/448) (float32) and y = clamp(x / s, ±448) stored as float8_e4m3fn.

How the kernel is loaded: ``import flag_gems`` detects a vendor device at import (it raises "No device were
detected" without one) and opens a SQLAlchemy cache database, so this file loads the one module
flag_gems/ops/act_quant.py by its path inside the installed package (importlib.util.find_spec does not run the
package's __init__). That module imports only torch and triton; the kernel source is the library's, unchanged.

x is float32 here (the kernel reads any float; with bf16 input its scale is rounded to bf16 by Triton's scalar
promotion, a detail this file leaves out). run_kernel passes what act_quant_triton passes; the launcher's fixed
BLOCK_M = 32 and Triton's default num_warps = 4 (it passes none) are DEFAULT_CONFIG. BLOCK_N is the quantization
group (block_size = 128, the API's default), part of the problem, not a tunable.
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


_lib = _load_flaggems_module("ops/act_quant.py")
act_quant_triton_kernel = _lib.act_quant_triton_kernel

GROUP = 128  # act_quant_triton's default block_size
SHAPE = {"M": 16384, "N": 8192}
CPU_SHAPE = {"M": 64, "N": 256}
TUNABLES = {"BLOCK_M": [4, 8, 16, 32, 64], "num_warps": [1, 2, 4, 8]}
DEFAULT_CONFIG = {"BLOCK_M": 32, "num_warps": 4}
COMPUTE_UNIT = "fp32"

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def setup(M, N, seed=0, device="cuda", **_):
    """x (M, N) float32 ~ N(0, 1) with every 64th column x30 (activation outliers); y (M, N) e4m3 and s
    (M, N / 128) float32 are the outputs. N must be a multiple of 128 (the API asserts it)."""
    if N % GROUP:
        raise ValueError(f"flaggems_fp8_act_quant: N = {N} is not a multiple of the group size {GROUP}")
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, generator=gen, device=device)
    x[:, ::64] *= 30.0
    y = torch.empty(M, N, device=device, dtype=FP8)
    s = torch.empty(M, N // GROUP, device=device, dtype=torch.float32)
    return {"inputs": {"x": x, "y": y, "s": s}, "outputs": ["y", "s"]}


def run_kernel(x, y, s, *, BLOCK_M, num_warps, **_):
    """Launch flag-gems' kernel as act_quant_triton does: a (cdiv(M, BLOCK_M), N / 128) grid."""
    M, N = x.shape
    grid = (triton.cdiv(M, BLOCK_M), N // GROUP)
    act_quant_triton_kernel[grid](x, y, s, M, N, x.stride(0), y.stride(0), s.stride(0),
                                  BLOCK_M=BLOCK_M, BLOCK_N=GROUP, ROUND_SCALE=False, num_warps=num_warps)


def reference(x, y, s, **_):
    """(y, s): s = max(amax over each row's 128-column group, 1e-4) / 448, y = clamp(x / s, ±448) rounded to
    e4m3 (round to nearest even, as the GPU's cvt does), returned in e4m3 like the kernel's."""
    M, N = x.shape
    groups = x.reshape(M, N // GROUP, GROUP)
    scale = groups.abs().amax(dim=-1).clamp_min(1e-4) / FP8_MAX
    q = (groups / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).reshape(M, N)
    return q.to(torch.float32).to(FP8), scale.to(torch.float32)
