"""Software-pipelining arithmetic for a BM x BN x BK tile (pure functions; the rules of docs/measuring.md,
"Software pipelining"): the compute/load ratio and its class, shared memory per stage, the stage sweep with the
occupancy each depth gives, the occupancy cliffs and the recommended ``num_stages``.

:mod:`kernelpilot.profile.pipeline` applies them to a compiled kernel and re-exports every public name here.
"""

from __future__ import annotations

import itertools
from typing import Any, Optional

from pydantic import BaseModel

from kernelpilot.backends.binary.occupancy import limits_for, theoretical_occupancy

__all__ = ["RATIO_LOW", "RATIO_HIGH", "StageRow", "compute_load_ratio", "stage_bytes", "classify_ratio",
           "stage_sweep", "occupancy_cliffs", "recommend"]

#: docs/measuring.md, "Software pipelining" (the pipeline seed): below this FLOP/byte ratio a tile is load-bound enough
#: that async copies / more stages help; above ``RATIO_HIGH`` pipelining gains little; between: measure both.
RATIO_LOW = 5.0
RATIO_HIGH = 20.0


class StageRow(BaseModel):
    """Occupancy of the same kernel at ``stages`` pipeline stages (shared memory from the model or the compiled
    buffer offset; registers from the compiled config).

    Attributes:
        stages: S.
        shared_mem_bytes: shared memory per block at S stages, bytes.
        fits: shared memory within the per-block limit.
        blocks_per_sm, occupancy_pct, limiter: from the occupancy model (0 / None when it does not fit).
    """

    stages: int
    shared_mem_bytes: int
    fits: bool
    blocks_per_sm: int = 0
    occupancy_pct: float = 0.0
    limiter: Optional[str] = None



# --------------------------------------------------------------------------------------------------------------------
# arithmetic (pure)


def compute_load_ratio(block_m: int, block_n: int, block_k: int, bytes_per_element: int) -> float:
    """FLOP per byte loaded for one K step of a BM x BN x BK tile: 2·BM·BN·BK / ((BM·BK + BK·BN)·b).

    Source: docs/measuring.md, "Software pipelining" (the pipeline seed). Example: 64x64x32 bf16 ->
    2·64·64·32 / ((2048 + 2048)·2) = 262144 / 8192 = 32.

    Raises:
        ValueError: a tile size or the element size is not positive.
    """
    if min(block_m, block_n, block_k, bytes_per_element) <= 0:
        raise ValueError(f"tile {block_m}x{block_n}x{block_k} and {bytes_per_element} B/element must be positive")
    return 2 * block_m * block_n * block_k / (stage_bytes(block_m, block_n, block_k, bytes_per_element))


def stage_bytes(block_m: int, block_n: int, block_k: int, bytes_per_element: int) -> int:
    """Shared memory of one pipeline stage, bytes: (BM·BK + BK·BN)·b (one A tile and one B tile)."""
    return (block_m * block_k + block_k * block_n) * bytes_per_element


def classify_ratio(ratio: float) -> tuple[str, str]:
    """(band, what the band says) of the software-pipelining rule: < 5 ``"low"``, 5–20 ``"middle"``, > 20 ``"high"``."""
    if ratio < RATIO_LOW:
        return "low", (f"compute/load ratio {ratio:.3g} < {RATIO_LOW:g} FLOP/B: loads dominate the tile; use async "
                       f"copies (cp.async / TMA; in Triton more num_stages)")
    if ratio <= RATIO_HIGH:
        return "middle", (f"compute/load ratio {ratio:.3g} is within {RATIO_LOW:g}–{RATIO_HIGH:g} FLOP/B: measure "
                          f"both the current depth and a deeper pipeline")
    return "high", f"compute/load ratio {ratio:.3g} > {RATIO_HIGH:g} FLOP/B: pipelining gains little"


def stage_sweep(stage_bytes_: int, registers_per_thread: int, threads_per_block: int, cc: tuple[int, int] = (9, 0),
                *, buffer_offset: int = 0, extra_bytes: int = 0, max_stages: int = 64) -> list[StageRow]:
    """Occupancy at S = 1, 2, ... stages until shared memory no longer fits (that S included, marked not fitting).

    Shared memory at S = max(0, S + buffer_offset)·stage_bytes + extra_bytes (offset and extra from the compiled
    kernel: see the module docstring). Occupancy by the CUDA occupancy-calculator rules (docs/measuring.md, "Occupancy").

    Raises:
        ValueError: unknown ``cc`` or invalid registers/threads (from :func:`theoretical_occupancy`).
    """
    limit = limits_for(cc).shared_mem_per_block_max_bytes
    rows: list[StageRow] = []
    for s in range(1, max_stages + 1):
        shared = max(0, s + buffer_offset) * stage_bytes_ + extra_bytes
        if shared > limit:
            rows.append(StageRow(stages=s, shared_mem_bytes=shared, fits=False))
            break
        occ = theoretical_occupancy(registers_per_thread, shared, threads_per_block, cc)
        rows.append(StageRow(stages=s, shared_mem_bytes=shared, fits=True, blocks_per_sm=occ.blocks_per_sm,
                             occupancy_pct=occ.occupancy_pct, limiter=occ.limiter))
    return rows


def occupancy_cliffs(rows: list[StageRow]) -> list[int]:
    """Every S (among fitting rows) whose blocks per SM are fewer than at the previous S."""
    fitting = [r for r in rows if r.fits]
    return [b.stages for a, b in itertools.pairwise(fitting) if b.blocks_per_sm < a.blocks_per_sm]


def recommend(ratio: float, num_stages: int, rows: list[StageRow], candidates: Optional[list[int]] = None
              ) -> dict[str, Any]:
    """The num_stages advice of the software-pipelining rule, never past the occupancy cliff.

    Args:
        ratio: compute/load ratio (FLOP/B).
        num_stages: the config's S.
        rows: :func:`stage_sweep` output.
        candidates: the file's num_stages candidates (advice is restricted to them when given).

    Returns:
        ``{"rule", "recommendation", "recommended_num_stages", "stages_to_measure", "stages_safe",
        "next_cliff_stages", "past_cliff", "max_stages_under_limit", "cliffs", "band"}``. Past the cliff means
        fewer blocks per SM than a shallower pipeline of at least 2 stages.
    """
    band, rule = classify_ratio(ratio)
    fitting = [r for r in rows if r.fits]
    by_s = {r.stages: r for r in fitting}
    max_fit = max((r.stages for r in fitting), default=0)
    cliffs = occupancy_cliffs(rows)
    next_cliff = next((c for c in cliffs if c > num_stages), None)
    here = by_s.get(num_stages)
    # Past the cliff: fewer blocks/SM than some shallower pipeline (S >= 2; S = 1 is no pipelining at all).
    shallower = [r for r in fitting if 2 <= r.stages < num_stages]
    past = here is not None and any(r.blocks_per_sm > here.blocks_per_sm for r in shallower)
    # Largest S keeping the current blocks per SM (never past the next cliff), within the limit.
    safe = (next_cliff - 1) if next_cliff is not None else max_fit
    safe = max(1, min(safe, max_fit)) if max_fit else num_stages
    allowed = sorted(c for c in (candidates or []) if isinstance(c, int)) or list(range(1, max_fit + 1))

    def pick_at_most(limit_s: int) -> int:
        ok = [c for c in allowed if c <= limit_s and c in by_s]
        return max(ok) if ok else num_stages

    if here is None:
        chosen = pick_at_most(min(safe, max_fit))
        text = (f"num_stages={num_stages} does not fit the per-block shared memory limit; use at most "
                f"{max_fit} (recommended {chosen}).")
        measure = [chosen]
    elif band == "low":
        chosen = pick_at_most(safe)
        text = (f"Raise num_stages to {chosen}: the deepest pipeline that fits and keeps {here.blocks_per_sm} "
                f"blocks/SM" + (f" (the occupancy cliff is at {next_cliff})." if next_cliff else "."))
        measure = sorted({num_stages, chosen})
    elif band == "middle":
        chosen = pick_at_most(safe)
        text = (f"Measure num_stages={num_stages} against {chosen} (deepest without losing blocks/SM"
                + (f"; cliff at {next_cliff}" if next_cliff else "") + ").")
        measure = sorted({num_stages, chosen})
    else:
        chosen = num_stages
        text = f"Keep num_stages={num_stages}; by the seed rule deeper pipelines buy little at this ratio."
        measure = [num_stages]
        # The rule's thresholds were measured on a GA104 (pipeline seed). On an H200 the bf16 matmul at
        # 128x64x32 (ratio 42.7 FLOP/B) ran 1.144x faster at num_stages 3 than 2 (docs/device-runs/2026-11-22-h200):
        # so one more stage that keeps the blocks per SM is still worth a measurement.
        deeper = [c for c in allowed if num_stages < c <= safe and c in by_s]
        if deeper:
            measure = [num_stages, min(deeper)]
            text += (f" Still measure num_stages={min(deeper)} (same blocks/SM): on an H200 a bf16 matmul at ratio "
                     "42.7 FLOP/B ran 1.14x faster with 3 stages than 2.")
    if here is not None and past:
        best_blocks = max(r.blocks_per_sm for r in shallower)
        lower = max((r.stages for r in shallower if r.blocks_per_sm == best_blocks and r.stages in allowed),
                    default=None)
        text += (f" num_stages={num_stages} is past an occupancy cliff ({here.blocks_per_sm} blocks/SM vs "
                 f"{best_blocks} at fewer stages): keep it only if it measures faster")
        if lower is not None:
            text += f"; otherwise use {lower}."
            if band == "high":
                chosen = lower
            measure = sorted(set(measure) | {lower})
        else:
            text += "."
    return {"band": band, "rule": rule, "recommendation": text, "recommended_num_stages": chosen,
            "stages_to_measure": measure, "stages_safe": safe, "next_cliff_stages": next_cliff, "past_cliff": past,
            "max_stages_under_limit": max_fit, "cliffs": cliffs}
