"""The search space of an imported Inductor kernel: its launch parameters as TUNABLES around Inductor's own choice.

Per kernel ``i`` (in the output code's order): ``XBLOCK_i`` (and ``YBLOCK_i``, ``R0_BLOCK_i`` ... for each block
parameter of its signature) and ``num_warps_i`` take powers of two within a factor ``2**spread`` of the config
Inductor's autotuner launched (the default; warps 1 to 32), ``num_stages_i`` takes 1, 2 and Inductor's; blocks are
bounded by the numel along that axis (rounded up to a
power of two) and by Inductor's own block limits (``torch._inductor.runtime.hints.TRITON_MAX_BLOCK``: X 4096,
Y and Z 1024, R0 65536, R1 32768), plus every value of Inductor's own config list within that window. A persistent
reduction's R0 block is fixed in its body and is no tunable; so are a template's tile sizes (its grid, computed by
Inductor's host code, depends on them): a template tunes ``num_warps_i`` (the same window) and ``num_stages_i``
(Inductor's and its neighbours), from the warps and stages max-autotune chose. A persistent template
(:attr:`~kernelpilot.inductor.parse.InductorKernel.persistent_sms`: its grid does not depend on its tiles) also tunes
its tiles ``BLOCK_M_i``, ``BLOCK_N_i``, ``BLOCK_K_i``: powers of two within ``2**spread`` of Inductor's, from 16 to
256 (Inductor's own GEMM configs stay within that range: torch/_inductor/template_heuristics/triton.py), with no
tile constraint (a tile too large for shared memory or registers is pruned when compiled), and ``FLATTEN_i`` over 0
(Inductor's nested loops, the default), 1 and, where the converter could give the epilogue its own counter, 2
(:data:`~kernelpilot.inductor.parse.FLATTEN_PARAM`). For a kernel of two or more block sizes (the fixed ones
included) a constraint keeps its tile (their product) at most four times the default's and at most 2**20 elements (Triton's
largest tensor, ``TRITON_MAX_TENSOR_NUMEL``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelpilot.inductor.parse import FLATTEN_PARAM, InductorKernel

__all__ = ["KernelSpace", "kernel_space"]

_AXIS = {"XBLOCK": "x", "YBLOCK": "y", "ZBLOCK": "z", "R0_BLOCK": "r0_", "R1_BLOCK": "r1_"}
_MAX_BLOCK = {"XBLOCK": 4096, "YBLOCK": 1024, "ZBLOCK": 1024, "R0_BLOCK": 4096 * 16, "R1_BLOCK": 2048 * 16}
_MAX_TILE = 1 << 20


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


@dataclass
class KernelSpace:
    """One kernel's part of the space: ``tunables`` (suffixed names), the ``default`` (suffixed), where the default
    came from (``source``: ``autotuner``, ``first config`` or ``converter fallback``), and ``constraints``."""

    tunables: dict[str, list[int]]
    default: dict[str, int]
    source: str
    constraints: list[str] = field(default_factory=list)
    blocks: dict[str, str] = field(default_factory=dict)  # block parameter -> its tunable name


def _fallback(k: InductorKernel) -> dict[str, Any]:
    """A config when neither the autotuner's choice nor its list is known: Inductor's usual first guesses."""
    kw = {b: (1024 if k.kind == "pointwise" else 1) if b == "XBLOCK" else 2048 if b.startswith("R") else 32
          for b in k.blocks}
    return {"kwargs": kw, "num_warps": 4 if k.kind == "pointwise" else 8, "num_stages": 1}


def _window(value: int, spread: int, lo: int, hi: int) -> list[int]:
    vals = {value}
    for s in range(1, spread + 1):
        vals |= {value >> s, value << s}
    return sorted(v for v in vals if (lo <= v <= hi) or v == value)


def kernel_space(k: InductorKernel, i: int, chosen: dict[str, Any] | None, listed: list[dict[str, Any]],
                 spread: int = 1) -> KernelSpace:
    """The TUNABLES, default and constraints of kernel ``k`` (index ``i``), as the module docstring says.

    Args:
        chosen: the config Inductor's autotuner launched (``{"kwargs", "num_warps", "num_stages"}``) or None.
        listed: the configs Inductor gave its autotuner (may be empty). spread: powers of two each side (>= 0).
    """
    if chosen:
        cfg, source = chosen, "autotuner"
    elif k.launch is not None:  # a template: max-autotune chose it; its warps and stages are in its decorator
        cfg, source = k.launch, "max-autotune's template choice"
    else:
        cfg, source = (listed[0], "first config") if listed else (_fallback(k), "converter fallback")
    tunables: dict[str, list[int]] = {}
    default: dict[str, int] = {}
    blocks: dict[str, str] = {}
    tiles = (k.launch or {}).get("kwargs", {}) if k.persistent_sms is not None else {}
    for b in k.blocks:
        name = f"{b}_{i}"
        value = int(cfg["kwargs"].get(b, tiles.get(b, 1)))
        if b == FLATTEN_PARAM:  # the tile loop fused with the K loop or not (parse.FLATTEN_PARAM)
            tunables[name], default[name], blocks[b] = list(k.flatten_values), value, name
            continue
        if b in tiles:
            tunables[name], default[name], blocks[b] = _window(value, spread, 16, 256), value, name
            continue
        hi = min(_MAX_BLOCK[b], _pow2_at_least(k.size_hints.get(_AXIS[b], _MAX_BLOCK[b])))
        vals = set(_window(value, spread, 1, hi))
        vals |= {int(c["kwargs"][b]) for c in listed if b in c.get("kwargs", {})
                 and value >> spread <= int(c["kwargs"][b]) <= value << spread and int(c["kwargs"][b]) <= hi}
        tunables[name], default[name], blocks[b] = sorted(vals), value, name
    warps = int(cfg.get("num_warps", 4))
    tunables[f"num_warps_{i}"] = _window(warps, spread, 1, 32)
    default[f"num_warps_{i}"] = warps
    stages = int(cfg.get("num_stages", 1))
    # a template (a GEMM's software pipeline) keeps its neighbours; other kernels 1, 2 and Inductor's
    tunables[f"num_stages_{i}"] = (sorted({max(1, stages - 1), stages, stages + 1}) if k.kind == "template"
                                   else sorted({1, 2, stages}))
    default[f"num_stages_{i}"] = stages
    constraints: list[str] = []
    if len(blocks) + len(k.fixed_blocks) >= 2 and blocks and not tiles:  # one block alone: the window bounds it
        fixed = 1
        for v in k.fixed_blocks.values():
            fixed *= v
        tile = " * ".join(blocks.values()) + (f" * {fixed}" if fixed != 1 else "")
        default_tile = fixed
        for name in blocks.values():
            default_tile *= default[name]
        limit = max(default_tile, min(_MAX_TILE, 4 * default_tile))
        constraints.append(f"{tile} <= {limit}")
    return KernelSpace(tunables=tunables, default=default, source=source, constraints=constraints, blocks=blocks)
