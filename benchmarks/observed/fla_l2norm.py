"""fla-core 0.6.0's fused L2 norm forward (fla/modules/norm/l2norm.py: l2norm_fwd_kernel, the kernel of
``fla.modules.l2norm.l2norm_fwd(x, eps=1e-6)`` for a last dimension D <= 512): per row of x (T, D),
rstd = 1 / sqrt(sum_j x[t, j]^2 + eps) and y[t, :] = x[t, :] * rstd, statistics in fp32, y stored in x's
dtype, rstd in fp32. Linear-attention layers (GatedDeltaNet and its kin) normalize q and k per head with it:
x is q or k flattened to (tokens x heads, head dim).

How the kernel is loaded: ``from fla.modules.norm.l2norm import l2norm_fwd_kernel``, the installed package's
own kernel, unchanged (fla-core and its one dependency, einops, must be importable: ``fla/modules/__init__.py``
and ``fla/ops/__init__.py`` import einops); the import needs no GPU and rebinds nothing in torch.

The kernel is decorated with fla's ``fla_cache_autotune`` (``CachedAutotuner``, a subclass of Triton's
``Autotuner``): its 25 configs (BT in {8, 16, 32, 64, 128} rows per program x num_warps in {1, 2, 4, 8, 16})
are the search space and kernelpilot pins the autotuner to the config under test, so there is no TUNABLES here.
With one config pinned, Triton's ``Autotuner.run`` launches it directly and fla's config-file cache
(FLA_CACHE_MODE, off unless set) is never consulted. run_kernel passes what ``l2norm_fwd`` passes: the grid
cdiv(T, BT), BD = next_power_of_2(D) (at most 65536 / element size) and the bucket NB = cdiv(T, 65536).

Bounds: rows are masked against T and columns against D, so any T and any D <= BD are right; no SHAPE_RULES.
For D > 512 the library's launcher picks another kernel (l2norm_fwd_kernel_row, one row per program); that is a
launch choice, the tiled kernel masks D and is right there too. This file always launches the tiled kernel.
"""

import torch
import triton

try:
    from fla.modules.norm.l2norm import l2norm_fwd_kernel
except ImportError as exc:  # fla-core absent, or its dependency einops
    raise ImportError(f"fla_l2norm needs fla-core 0.6.0 and einops ({exc}); install the wheel: "
                      "pip install fla-core==0.6.0 einops (fla_core-0.6.0-py3-none-any.whl)") from exc

# q (or k) of a linear-attention layer: 4 sequences of 4096 tokens, 16 heads of dimension 128, bf16.
SHAPE = {"T": 4 * 4096 * 16, "D": 128, "dtype": "bfloat16"}
CPU_SHAPE = {"T": 48, "D": 64, "dtype": "bfloat16"}
COMPUTE_UNIT = "fp32"

EPS = 1e-6  # l2norm_fwd's default eps
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def setup(T, D, dtype="bfloat16", seed=0, device="cuda", **_):
    """x (T, D) in ``dtype``: N(0, 1) rows each scaled by exp(N(0, 1)) (row norms spread over about two orders
    of magnitude, as q/k projections' are); y (T, D) in ``dtype`` and rstd (T,) float32 are the outputs;
    eps is a float."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(T, D, generator=gen, device=device)
    x = x * torch.exp(torch.randn(T, 1, generator=gen, device=device))
    tdt = _DTYPES[dtype]
    inputs = {"x": x.to(tdt), "y": torch.empty(T, D, device=device, dtype=tdt),
              "rstd": torch.empty(T, device=device, dtype=torch.float32), "eps": EPS}
    return {"inputs": inputs, "outputs": ["y", "rstd"]}


def run_kernel(x, y, rstd, eps=EPS, **_):
    """Launch fla's l2norm_fwd_kernel as l2norm_fwd does (grid cdiv(T, BT) from the pinned config's BT);
    writes y and rstd. Raises ValueError when D exceeds the largest block l2norm_fwd allows (its RuntimeError)."""
    T, D = x.shape
    BD = min(65536 // x.element_size(), triton.next_power_of_2(D))
    if D > BD:
        raise ValueError(f"fla_l2norm: D = {D} > {BD}, the feature size l2norm_fwd supports")
    NB = triton.cdiv(T, 2048 * 32)
    l2norm_fwd_kernel[lambda meta: (triton.cdiv(T, meta["BT"]),)](x=x, y=y, rstd=rstd, eps=eps, T=T, D=D,
                                                                    BD=BD, NB=NB)


def reference(x, y, rstd, eps=EPS, **_):
    """(y, rstd) by the definition: rstd = 1 / sqrt(sum of squares of the row + eps), y = x * rstd. In fp32 for
    a 16-bit x (the kernel's arithmetic, y then rounded to x's dtype); on the float64 copies the checker passes,
    every step is float64 and the kernel's fp32 sum and final rounding are its error."""
    xf = x if x.dtype == torch.float64 else x.to(torch.float32)
    r = 1.0 / torch.sqrt((xf * xf).sum(dim=-1) + eps)
    return (xf * r.unsqueeze(-1)).to(x.dtype), r


def flops(T, D, **_):
    """FLOPs: per element 1 multiply + 1 add (sum of squares) and 1 multiply (scale) = 3; the per-row sqrt and
    reciprocal are left out."""
    return 3 * T * D


def bytes_moved(T, D, dtype="bfloat16", **_):
    """Bytes: read x once, write y once (both ``dtype``), write rstd (fp32) once."""
    return 2 * T * D * _DTYPES[dtype].itemsize + 4 * T
