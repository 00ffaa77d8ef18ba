"""The order of a bottleneck card's suggested changes, and the change record that names what suggested it.

Fired patterns come first: defects (pattern priority <= :data:`DEFECT_PRIORITY_AT_MOST`: spills, FP64, FFMA-only
math, uncoalesced loads ...), then the patterns that explain the card's class (:data:`CLASS_LEADS`), then the
rest, each group by pattern priority; then the class's default moves (the playbook of
:mod:`kernelpilot.search.guided`). A change suggested twice is listed once, naming every pattern behind it.
Used by :mod:`kernelpilot.profile.card`, which re-exports :class:`CardChange`.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from kernelpilot.profile.patterns import PATTERNS, PatternResult, SuggestedChange, TunableStep

__all__ = ["CardChange", "DEFECT_PRIORITY_AT_MOST", "CLASS_LEADS", "DRAM_CEILING_PCT", "fired_in_order", "merged_suggestions"]

#: Patterns that are defects in the code or its resources: their changes come first whatever the class.
DEFECT_PRIORITY_AT_MOST = 8
#: Per class, the fired patterns that explain it: their changes come right after the defects'.
CLASS_LEADS: dict[str, tuple[str, ...]] = {
    "memory": ("overall_memory_bound", "uncoalesced_loads", "sparse_writes"),
    "small-grid": ("small_grid", "tail_effect"),
    "occupancy": ("long_scoreboard", "low_achieved_occupancy", "register_spill"),
    "latency": ("long_scoreboard", "low_achieved_occupancy", "sync_overhead"),
    "compute": ("no_tensor_cores", "unintended_fp64"),
    "balanced": (),
    "unknown": (),
}
#: Light profile: kernelpilot's own class rule reuses the verdict's thresholds (below 60 % of the roofline is
#: The DRAM throughput at which the memory playbook calls a kernel "at the DRAM ceiling" (kernelpilot.search.guided).
DRAM_CEILING_PCT = 80.0


class CardChange(SuggestedChange):
    """A suggested change on the card, with what suggested it.

    Attributes:
        patterns: ids of the fired patterns behind it, and ``class:<class>`` for the class's default moves.
        (other fields: see :class:`~kernelpilot.profile.patterns.SuggestedChange`)
    """

    patterns: list[str] = Field(default_factory=list)



def _class_defaults(class_: str, memory_unit: Optional[str], limiter: Optional[str],
                    dram_pct: Optional[float]) -> list[tuple[str, str, str]]:
    """The class's default moves as (role, direction, why), after kernelpilot.search.guided's playbook."""
    if class_ == "small-grid":
        return [("tile", "down", "more, smaller blocks fill idle SMs"), ("warps", "down", "smaller blocks")]
    if class_ == "occupancy":
        if limiter == "registers":
            return [("tile", "down", "smaller tiles need fewer registers per thread"),
                    ("stages", "down", "fewer stages hold fewer live registers"),
                    ("warps", "down", "a lower threads-per-block lets ptxas allot more registers per thread")]
        if limiter == "shared_mem":
            return [("stages", "down", "each stage costs a tile of shared memory"),
                    ("tile", "down", "smaller tiles use less shared memory"),
                    ("tile_k", "down", "smaller BLOCK_K uses less shared memory per stage")]
        if limiter == "blocks":
            return [("tile", "up", "larger blocks fill an SM within the 32-block limit"),
                    ("warps", "up", "more warps per block")]
        return [("warps", "up", "more resident warps hide latency"), ("tile", "down", "more, smaller blocks")]
    if class_ == "memory":
        if memory_unit in ("L1", "L2"):
            return [("tile", "up", f"{memory_unit} is busiest: larger tiles re-read less from cache"),
                    ("group", "up", "L2 grouping shares operands between neighbouring blocks"),
                    ("tile_k", "up", "larger BLOCK_K moves more per request"),
                    ("stages", "up", "more loads in flight")]
        why = "at the DRAM ceiling: fewer bytes per output" if dram_pct is not None and dram_pct >= DRAM_CEILING_PCT \
            else "DRAM below its ceiling: more bytes in flight per SM"
        return [("tile", "up", why), ("warps", "up", "more loads in flight"), ("stages", "up", "more loads in flight")]
    if class_ == "latency":
        return [("warps", "up", "more parallel work hides latency"), ("tile", "up", "more work per block"),
                ("stages", "up", "more loads in flight")]
    if class_ == "compute":
        return [("tile", "up", "more reuse per loaded byte"), ("warps", "up", "better issue"),
                ("stages", "up", "overlap loads with math"), ("tile_k", "up", "fewer loop iterations")]
    if class_ == "balanced":
        return [("stages", "up", "overlap loads with math"), ("group", "up", "better L2 reuse"),
                ("tile", "up", "more reuse"), ("warps", "up", "better issue"), ("tile_k", "up", "fewer iterations")]
    return []


def _rank(result: PatternResult, class_: str) -> tuple[int, int]:
    """Sort key of a fired pattern: (group, priority): defects, then patterns leading the class, then the rest."""
    pattern = next(p for p in PATTERNS if p.id == result.id)
    if pattern.priority <= DEFECT_PRIORITY_AT_MOST:
        group = 0
    elif result.id in CLASS_LEADS.get(class_, ()):
        group = 1
    else:
        group = 2
    return group, pattern.priority


def merged_suggestions(patterns: list[PatternResult], class_: str, memory_unit: Optional[str], limiter: Optional[str],
                 dram_pct: Optional[float]) -> list[CardChange]:
    """Ordered, merged suggestions from fired patterns and the class's default moves.

    Args:
        patterns: every pattern result of the card (only fired ones contribute).
        class_: the card's class (``memory``, ``compute``, ``latency``, ``occupancy``, ``small-grid``, ...).
        memory_unit: the busiest memory unit (``DRAM``, ``L1``, ``L2``) or None; picks the memory class's moves.
        limiter: the occupancy limiter (``registers``, ``shared_mem``, ``blocks``, ``warps``) or None.
        dram_pct: DRAM throughput, % of peak, or None; at or above :data:`DRAM_CEILING_PCT` the memory class
            aims at fewer bytes per output rather than more bytes in flight.

    Returns:
        One :class:`CardChange` per distinct change (a code change by its action, a tunable change by its
        steps), naming every pattern behind it (``class:<class>`` for default moves). Raises nothing.
    """
    changes: list[CardChange] = []
    index: dict[Any, CardChange] = {}

    def add(change: SuggestedChange, by: str) -> None:
        key: Any = ("code", change.action) if change.code_change else tuple((s.role, s.direction) for s in change.tunables)
        if key in index:
            if by not in index[key].patterns:
                index[key].patterns.append(by)
            return
        card_change = CardChange(**change.model_dump(), patterns=[by])
        index[key] = card_change
        changes.append(card_change)

    for result in sorted((p for p in patterns if p.fired), key=lambda r: _rank(r, class_)):
        for change in result.suggested_changes:
            add(change, result.id)
    for role, direction, why in _class_defaults(class_, memory_unit, limiter, dram_pct):
        add(SuggestedChange(action=f"{role} {direction} (default move of the {class_} class)", why=why,
                            tunables=[TunableStep(role=role, direction=direction)]),  # type: ignore[arg-type]
            f"class:{class_}")
    return changes


def fired_in_order(patterns: list[PatternResult], class_: str) -> list[str]:
    """Ids of the fired patterns among ``patterns``, in suggestion order (defects, class leads, rest; by priority).

    ``class_`` is the card's class (a key of :data:`CLASS_LEADS`; others rank no pattern as a lead). Raises nothing.
    """
    return [r.id for r in sorted((p for p in patterns if p.fired), key=lambda r: _rank(r, class_))]


#: Triton words in suggested changes -> the CUDA C++ words for the same change (kernelpilot's own table), applied by
#: :func:`for_backend` to the cards of ``.cu`` kernels: the patterns and class moves are language-neutral in what
#: they measure, not in how they say the fix.
CUDA_WORDS: tuple[tuple[str, str], ...] = (
    ("use tl.dot with bf16/fp16 (or tf32) inputs and tile dims >= 16",
     "use tensor-core MMA (wmma / mma.sync, or a cuBLAS/CUTLASS call) with bf16/fp16 (or tf32) inputs"),
    ("tl.dot", "tensor-core MMA (wmma / mma.sync)"), ("tl.where", "predicated selects"),
    ("tl.atomic_add", "atomicAdd"), ("tl.sum", "a block reduction"), ("tl.debug_barrier", "__syncthreads()"),
    ("tl.float64", "double"), ("larger BLOCK_K", "larger K tile (BK)"),
    ("more pipeline stages", "deeper software pipeline (more shared-memory buffers)"),
    ("fewer pipeline stages", "shallower software pipeline (fewer shared-memory buffers)"),
    ("larger L2 grouping", "swizzle the block order for L2 reuse"),
    ("more warps per block", "more threads per block"), ("fewer warps per block", "fewer threads per block"),
    ("larger tiles", "larger block tiles (BM/BN)"), ("smaller tiles", "smaller block tiles (BM/BN)"),
    ("stages up", "deeper software pipeline"), ("stages down", "shallower software pipeline"),
    ("warps up", "more threads per block"), ("warps down", "fewer threads per block"),
    ("group up", "block-order swizzle up"), ("tile up", "block tile up"), ("tile down", "block tile down"),
)


def for_backend(card_json: dict[str, Any], backend: str) -> dict[str, Any]:
    """A card (JSON dict, as stored) with its suggested changes worded for ``backend``: unchanged for ``triton``;
    for ``cuda`` each action and why rewritten with :data:`CUDA_WORDS` (a code change in CUDA either way: a
    tunable step there is a ``-D`` define the file must expose). Raises nothing."""
    if backend != "cuda":
        return card_json
    out = dict(card_json)
    changes = []
    for change in card_json.get("suggested_changes", []):
        c = dict(change)
        for key in ("action", "why"):
            text = str(c.get(key, ""))
            for old, new in CUDA_WORDS:
                text = text.replace(old, new)
            c[key] = text
        changes.append(c)
    out["suggested_changes"] = changes
    return out
