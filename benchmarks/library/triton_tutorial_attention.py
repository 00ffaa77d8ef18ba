"""Triton's fused-attention tutorial (python/tutorials/06-fused-attention.py), forward pass, Hopper TMA variant.

O = softmax(Q K^T * sm_scale, causal mask) V per (batch, head), fp16 in and out, fp32 accumulation (Flash
Attention v2 in Triton); M[b, h, i] = log2(sum_j exp(s_ij)) with s = Q K^T * sm_scale (the log-sum-exp in base 2,
saved for the backward pass). Both O and M are checked.

The kernel is the tutorial's @triton.autotune kernel that reads Q, K, V and writes O through host-side TMA
TensorDescriptors (``_attn_fwd_tma`` in older tutorials, ``_attn_fwd`` with ``desc_q`` in newer ones, e.g. commit
5c846f015 placed for Triton 3.6). Its configs carry a ``pre_hook`` that sets each descriptor's block shape from the
config's BLOCK_M/BLOCK_N: the descriptors are built here with a dummy [1, 1] block, as the tutorial's launcher
does, so a config that loses its pre_hook fails the check instead of passing silently. No TUNABLES: kernelpilot
searches the autotune configs (21 on an H100 with commit 5c846f015). The launch is the tutorial's Hopper path
with ``warp_specialize=False`` (host descriptors; its tests' setting off Blackwell); a config that the tutorial's
``early_config_prune`` drops for the launch's arguments is refused with a ValueError (see ``_refuse_pruned``).

The tutorial is third-party code, not part of kernelpilot and not committed here: it is read from
third_party/triton_tutorials/06-fused-attention.py (see the README there), or from the path in the environment
variable KP_TRITON_TUTORIAL_ATTENTION. It queries the GPU at import, so this file loads only on a CUDA GPU.
"""

import importlib.util
import math
import os
import sys
from pathlib import Path

import torch
import triton

_DEFAULT = Path(__file__).resolve().parents[2] / "third_party" / "triton_tutorials" / "06-fused-attention.py"
_PATH = Path(os.environ.get("KP_TRITON_TUTORIAL_ATTENTION", _DEFAULT))

# One prefill: 32 heads of dimension 128 (Llama-2-7B), 4096 tokens, causal (the float64 reference of the check then
# needs about 20 GB: S=8192 would need four times that). Z=1 as in issue 24's H100 runs. The tutorial placed from
# commit 5c846f015 offsets TMA rows by off_z * (N_CTX * H) + off_h * N_CTX, right for any Z (commit 003da478 had
# off_z + off_h * N_CTX, right only for Z=1: check --shape Z=2 fails on such a file, as it should).
SHAPE = {"Z": 1, "H": 32, "S": 4096, "D": 128, "causal": 1}
CPU_SHAPE = {"Z": 1, "H": 2, "S": 128, "D": 64, "causal": 1}
# no masks in the tutorial kernel: the sequence is whole BLOCK_M tiles (128 at most), the head dimension a power of
# two (16..256, a tl.arange length) and at least BLOCK_N (the kernel's tl.static_assert(BLOCK_N <= HEAD_DIM): on two
# H200s the drawn head dimension 64 refused the BLOCK_N 128 config, right at D 128, as wrong at that shape)
SHAPE_RULES = {"S": 128, "D": "power_of_two >= BLOCK_N"}
COMPUTE_UNIT = "fp16_tensor"
RCP_LN2 = 1.0 / math.log(2.0)


def _load_tutorial():
    if not _PATH.is_file():
        raise ImportError(f"triton_tutorial_attention: {_PATH} is not there; put the tutorial file there "
                          "(third_party/triton_tutorials/README.md says which) or set KP_TRITON_TUTORIAL_ATTENTION")
    if not torch.cuda.is_available():
        raise ImportError("triton_tutorial_attention: the tutorial queries the GPU at import (its TMA configs are "
                          "filtered by the device's compute capability) and needs TMA (sm_90+): run on a GPU")
    name = "kp_triton_tutorial_fused_attention"
    spec = importlib.util.spec_from_file_location(name, _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _tma_kernel(module):
    """The tutorial's autotuned kernel that takes TMA descriptors (its arguments include desc_q)."""
    from triton.runtime.autotuner import Autotuner

    found = [v for v in vars(module).values() if isinstance(v, Autotuner) and "desc_q" in v.arg_names]
    if len(found) != 1:
        raise ImportError(f"triton_tutorial_attention: expected one autotuned kernel taking desc_q in {_PATH}, "
                          f"found {len(found)}")
    return found[0]


_tutorial = _load_tutorial()
attn_fwd = _tma_kernel(_tutorial)  # the only @triton.autotune kernel bound in this module: kernelpilot tunes it
TensorDescriptor = _tutorial.TensorDescriptor


def setup(Z, H, S, D, causal=1, seed=0, device="cuda", **_):
    """q, k, v ~ N(0, 0.5^2) in fp16 (the tutorial's test distribution), (Z, H, S, D) contiguous."""
    gen = torch.Generator(device=device).manual_seed(seed)
    q, k, v = ((0.5 * torch.randn(Z, H, S, D, generator=gen, device=device)).half() for _ in range(3))
    inputs = {"q": q, "k": k, "v": v, "o": torch.empty_like(q),
              "M": torch.empty(Z, H, S, device=device, dtype=torch.float32),
              "sm_scale": 1.0 / math.sqrt(D), "causal": int(causal)}
    return {"inputs": inputs, "outputs": ["o", "M"]}


def run_kernel(q, k, v, o, M, sm_scale, causal, **_):
    """Launch the tutorial's TMA forward kernel the way its launcher does (dummy descriptor blocks, grid from
    BLOCK_M); writes o and M. Keyword arguments are matched to the kernel's own parameter names."""
    Z, H, S, D = q.shape
    rows = Z * H * S
    desc = {name: TensorDescriptor(t, shape=[rows, D], strides=[D, 1], block_shape=[1, 1])
            for name, t in (("desc_q", q), ("desc_k", k), ("desc_v", v), ("desc_o", o))}
    available = {"sm_scale": sm_scale, "M": M, "Z": Z, "H": H, **desc, "N_CTX": S, "HEAD_DIM": D,
                 "FP8_OUTPUT": False, "STAGE": 3 if causal else 1, "warp_specialize": False,
                 "IS_HOPPER": torch.cuda.get_device_capability()[0] == 9}
    tuned = {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"}
    missing = [n for n in attn_fwd.arg_names if n not in available and n not in tuned]
    if missing:
        raise ValueError(f"triton_tutorial_attention: the tutorial kernel takes {missing}, which this wrapper "
                         "does not know how to set")
    args = {n: available[n] for n in attn_fwd.arg_names if n in available}
    _refuse_pruned(args)
    grid = lambda meta: (triton.cdiv(S, meta["BLOCK_M"]), Z * H, 1)  # noqa: E731
    attn_fwd[grid](**args)


def _refuse_pruned(args):
    """Raise ValueError when the tutorial's own ``early_config_prune`` would drop the config pinned for this
    launch. Triton's Autotuner skips pruning when it holds one config (kernelpilot pins one), so a config the
    tutorial never launches for these arguments (causal with BLOCK_M < BLOCK_N: wrong results, commit 5c846f015's
    fix; BLOCK_M > N_CTX) would run; the library's rule is applied here instead, with the launch's arguments."""
    prune = getattr(attn_fwd, "early_config_prune", None)
    if prune is None or len(attn_fwd.configs) != 1:
        return  # no pruner in the placed tutorial, or the autotuner itself chooses (and prunes) among several
    if not prune(attn_fwd.configs, {}, **args):
        raise ValueError(f"triton_tutorial_attention: the tutorial's early_config_prune drops "
                         f"{attn_fwd.configs[0]} at N_CTX={args.get('N_CTX')}, STAGE={args.get('STAGE')}: "
                         "the tutorial never launches it for these arguments")


def reference(q, k, v, o, M, sm_scale, causal, **_):
    """softmax(q k^T * sm_scale) v with a causal mask, and M = logsumexp(scores) / ln 2."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * sm_scale
    if causal:
        S = q.shape[-2]
        keep = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v), torch.logsumexp(scores, dim=-1) * RCP_LN2


#: The causal kernel skips the masked upper triangle of QK^T and PV that the dense reference computes.
FLOPS_REASON = "causal: the kernel computes only the unmasked half of the score matrix; the reference masks a dense one"

def flops(Z, H, S, D, causal=1, **_):
    """FLOPs: two matmuls of 2*S*S*D each per (batch, head); half of them under a causal mask."""
    total = 4 * Z * H * S * S * D
    return total // 2 if causal else total


def bytes_moved(Z, H, S, D, **_):
    """Bytes: q, k, v read once and o written once (fp16), M written once (fp32)."""
    return 4 * Z * H * S * D * 2 + Z * H * S * 4
