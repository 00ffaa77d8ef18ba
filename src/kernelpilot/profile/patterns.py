"""The numeric patterns of docs/measuring.md ("Numeric patterns"), each mapped to candidate changes.

Every pattern is one declarative :class:`Pattern` entry in :data:`PATTERNS`: an id, a title, the rule in words
with its threshold and where the threshold comes from, the metric names it reads, a function that evaluates it
on :class:`~kernelpilot.profile.metrics.KernelMetrics` (and, for the few that compile metadata or the roofline
can answer, one for the light profile), and the changes it suggests.

Evaluation is three-valued. A pattern is ``fired`` or ``not_fired`` when its inputs decide it, and
``not_evaluated`` (with ``missing`` naming the metrics) when they do not: a missing input never fires a
pattern. Clauses combine the way logic does: in "A and B", a present and false A decides "not fired" even when
B is missing; in "A or B", a present and true A decides "fired".

Thresholds (docs/measuring.md table unless marked):

| id | fires when |
|---|---|
| small_grid | waves per SM < 0.5, or grid < SM count |
| tail_effect | waves > 1 and idle share of the last wave (1 - frac(waves)) > 15 % |
| uncoalesced_loads | global load sectors per request > 5 (ideal 4), confirmed by wasted sectors (see below) |
| sparse_writes | bytes used per global store sector < 16 of 32 |
| long_scoreboard | long-scoreboard stall ratio > 3 |
| no_tensor_cores | FMA pipe > 50 % and tensor pipe < 1 % |
| atomics_contention | atomic sectors > 0 and LG-throttle stall ratio > 1 |
| shared_bank_conflicts | short-scoreboard stall ratio > 2, confirmed by bank conflicts > 10 % of shared wavefronts |
| sync_overhead | barrier stall ratio > 2 |
| low_achieved_occupancy | theoretical > 50 % and achieved < 1/2 theoretical |
| register_spill | local loads + stores > 0; registers/thread > 128 only when local counts are missing |
| unintended_fp64 | FP64 pipe > 1 % |
| warp_divergence | active threads per warp instruction < 24 |
| overall_memory_bound | memory SOL % > 1.5 x compute SOL % and > 30 % |

Confirmations that are kernelpilot's own (the real H200 fixtures showed the bare rule misfiring):

- uncoalesced loads: "> 5 sectors per request, ideal 4" assumes 4 bytes per thread; 16-byte vector loads
  (LDG.128, LDGSTS.128) ideally touch 16 sectors per request, and every fixture here does, fully used. So the
  rule also needs a sign of waste at the same 5:4 ratio: bytes used per global-load sector < 25.6 of 32 (when
  SASS global loads ran) or ncu's L2 global sectors / ideal sectors > 1.25.
- shared bank conflicts: the table says "confirm with bank-conflict counters"; the short-scoreboard stall also
  counts MUFU and other variable-latency results (the streaming add has ratio 12.9 and no shared memory at all),
  so the conflicts must be > 10 % of the shared load/store data wavefronts.
- tail effect: when waves per SM is missing, Nsight Compute's own LaunchConfiguration "Tail Effect" rule
  decides; when waves is present, ncu's rule is shown as evidence only (it flags any partial wave).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal, Optional

from pydantic import BaseModel, Field

from kernelpilot.profile import metrics as ncu
from kernelpilot.profile.metrics import KernelMetrics
from kernelpilot.profile.pattern_rules import (  # thresholds: re-exported so old imports keep working
    PATTERN_SMALL_GRID_WAVES_BELOW,
    SMALL_GRID_WAVES,
    TAIL_WAVES_ABOVE,
    TAIL_IDLE_SHARE_ABOVE_PCT,
    UNCOALESCED_SECTORS_PER_REQUEST_ABOVE,
    UNCOALESCED_BYTES_PER_SECTOR_BELOW,
    UNCOALESCED_EXCESS_RATIO_ABOVE,
    SPARSE_WRITE_BYTES_PER_SECTOR_BELOW,
    LONG_SCOREBOARD_RATIO_ABOVE,
    NO_TENSOR_FMA_PIPE_ABOVE_PCT,
    NO_TENSOR_TENSOR_PIPE_BELOW_PCT,
    ATOMIC_SECTORS_ABOVE,
    ATOMIC_LG_THROTTLE_RATIO_ABOVE,
    BANK_SHORT_SCOREBOARD_RATIO_ABOVE,
    BANK_CONFLICT_SHARE_ABOVE_PCT,
    SYNC_BARRIER_RATIO_ABOVE,
    SPILL_LOCAL_INST_ABOVE,
    SPILL_REGISTERS_ABOVE,
    FP64_PIPE_ABOVE_PCT,
    DIVERGENCE_ACTIVE_THREADS_BELOW,
    MEMORY_BOUND_RATIO_ABOVE,
    MEMORY_BOUND_MEMORY_ABOVE_PCT,
)
from kernelpilot.profile.pattern_rules import LightInputs, Outcome
from kernelpilot.profile import pattern_rules as _r
from kernelpilot.profile.verdict import LOW_ACHIEVED_FRACTION, LOW_ACHIEVED_THEORETICAL_ABOVE_PCT, Evidence

__all__ = [
    "PATTERNS",
    "PATTERN_IDS",
    "Pattern",
    "PatternResult",
    "SuggestedChange",
    "TunableStep",
    "LightInputs",
    "evaluate_patterns",
    "evaluate_light_patterns",
    "get_pattern",
]

Status = Literal["fired", "not_fired", "not_evaluated"]
Role = Literal["tile", "tile_k", "warps", "stages", "group"]
Direction = Literal["up", "down"]

_SOURCE = "docs/measuring.md, Numeric patterns"
_OWN = "kernelpilot (confirmation added after the H200 fixtures; see kernelpilot.profile.patterns)"


class TunableStep(BaseModel):
    """One tunable role moved one step in one direction.

    Attributes:
        role: the role a kernel tunable plays (:func:`kernelpilot.search.guided.tunable_role`): ``tile``
            (BLOCK_M/N, BLOCK_SIZE ...), ``tile_k`` (BLOCK_K), ``warps`` (num_warps), ``stages`` (num_stages),
            ``group`` (GROUP_M).
        direction: ``up`` (next larger value) or ``down`` (next smaller value).
    """

    role: Role
    direction: Direction


class SuggestedChange(BaseModel):
    """A candidate change a pattern (or a bottleneck class) suggests.

    Attributes:
        action: what to do, in words.
        tunables: tunable moves that implement it, in the order to try them (each alone: one variable per
            version); empty for a code change.
        code_change: True when no tunable implements it and the kernel's source must change.
        why: the mechanism: why this change relieves the bottleneck.
    """

    action: str
    tunables: list[TunableStep] = Field(default_factory=list)
    code_change: bool = False
    why: str


class PatternResult(BaseModel):
    """One pattern evaluated on one kernel.

    Attributes:
        id: the pattern's id (see :data:`PATTERN_IDS`).
        title: human title.
        status: ``fired``, ``not_fired`` or ``not_evaluated`` (inputs missing).
        fired: ``status == "fired"``.
        rule: the rule in words with its thresholds.
        source: where the rule and its thresholds come from.
        metrics: the metric names the pattern reads (ncu names, or ``static.<key>`` / ``roofline.<field>`` in a
            light profile).
        evidence: every comparison made, with values and thresholds.
        missing: the metrics that were needed and absent (only when not evaluated or partly evaluated).
        note: one sentence: what decided the status (e.g. "not evaluated (missing metric X)").
        suggested_changes: the pattern's candidate changes when fired; empty otherwise.
    """

    id: str
    title: str
    status: Status
    fired: bool
    rule: str
    source: str
    metrics: list[str]
    evidence: list[Evidence] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    note: str = ""
    suggested_changes: list[SuggestedChange] = Field(default_factory=list)


# --- the catalogue ------------------------------------------------------------------------------------------

def _c(action: str, why: str, *steps: tuple[str, str]) -> SuggestedChange:
    """A SuggestedChange: tunable steps given as (role, direction); no steps means a code change."""
    return SuggestedChange(action=action, why=why, code_change=not steps,
                           tunables=[TunableStep(role=r, direction=d) for r, d in steps])  # type: ignore[arg-type]


@dataclass(frozen=True)
class Pattern:
    """One numeric pattern: its rule, the metrics it reads, how to evaluate it and what it suggests.

    Attributes:
        id: stable identifier (snake_case).
        title: human title (the wording of docs/measuring.md).
        rule: the rule in words with its thresholds.
        source: where the rule and thresholds come from.
        metrics: ncu metric names the rule reads.
        priority: order among fired patterns when the card lists suggestions (smaller first).
        evaluate: decides the pattern on :class:`KernelMetrics`.
        changes: candidate changes, in the order to try them.
        evaluate_light: decides it from compile metadata / roofline / timing, or None when it needs counters.
        light_metrics: what ``evaluate_light`` reads.
    """

    id: str
    title: str
    rule: str
    source: str
    metrics: tuple[str, ...]
    priority: int
    evaluate: Callable[[KernelMetrics], Outcome]
    changes: tuple[SuggestedChange, ...]
    evaluate_light: Optional[Callable[[LightInputs], Outcome]] = None
    light_metrics: tuple[str, ...] = field(default_factory=tuple)

    def _result(self, outcome: Outcome, metrics: tuple[str, ...], prefix: str = "") -> PatternResult:
        """Build the PatternResult of an evaluation outcome; ``prefix`` starts the note (e.g. "light profile: ")."""
        decision, e, note = outcome
        if decision is None:
            missing = e.missing or list(metrics)
            status: Status = "not_evaluated"
            note = f"not evaluated (missing metric {', '.join(missing)})" + (f"; {note}" if note else "")
        else:
            status = "fired" if decision else "not_fired"
            missing = e.missing
            note = note or status.replace("_", " ")
        return PatternResult(
            id=self.id, title=self.title, status=status, fired=status == "fired", rule=self.rule,
            source=self.source, metrics=list(metrics), evidence=e.evidence, missing=missing, note=prefix + note,
            suggested_changes=list(self.changes) if status == "fired" else [],
        )

    def run(self, m: KernelMetrics) -> PatternResult:
        """Evaluate on ncu metrics. Raises nothing: missing inputs give ``not_evaluated``."""
        return self._result(self.evaluate(m), self.metrics)

    def run_light(self, x: LightInputs, reason: str = "") -> PatternResult:
        """Evaluate from a light profile; ``not_evaluated`` when the pattern needs ncu counters. Raises nothing."""
        if self.evaluate_light is None:
            e = _r._Eval()
            e.missing.extend(self.metrics)
            return self._result((None, e, "needs ncu counters"), self.metrics,
                                f"light profile ({reason}): " if reason else "light profile: ")
        return self._result(self.evaluate_light(x), self.light_metrics, "light profile: ")


_S = ncu.STALL_TEMPLATE.format

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        id="register_spill", title="register spill", priority=1, source=_SOURCE,
        rule=(f"local loads + stores > {SPILL_LOCAL_INST_ABOVE:g}; registers/thread > {SPILL_REGISTERS_ABOVE} decides only "
              "when local counts are missing (H200 fixture: a compute-bound tensor-core GEMM at 196 registers had no "
              "local traffic)"),
        metrics=(ncu.LOCAL_LOADS, ncu.LOCAL_STORES, ncu.REGISTERS), evaluate=_r._register_spill,
        evaluate_light=_r._light_register_spill,
        light_metrics=("static.spills", "static.instruction_mix", "static.registers_per_thread"),
        changes=(
            _c("smaller tiles", "a smaller tile holds fewer accumulator and operand registers per thread",
               ("tile", "down")),
            _c("fewer pipeline stages", "each stage in flight keeps its addresses and loaded operands live",
               ("stages", "down")),
            _c("fewer warps per block", "ptxas caps registers per thread at 65536 / threads per block (128 at 512 "
               "threads), so fewer warps raise the cap (below 256 threads the cap is the 255 maximum)",
               ("warps", "down")),
        ),
    ),
    Pattern(
        id="unintended_fp64", title="unintended FP64", priority=2, source=_SOURCE,
        rule=f"FP64 pipe > {FP64_PIPE_ABOVE_PCT:g} % of peak", metrics=ncu.FP64_PIPE[:1], evaluate=_r._fp64,
        changes=(_c("keep the math in fp32 (code change)", "float64 constants, tl.float64 casts or float64 inputs "
                    "run on the FP64 pipe at a fraction of the FP32 rate; cast them to float32"),),
    ),
    Pattern(
        id="no_tensor_cores", title="no tensor cores", priority=3, source=_SOURCE,
        rule=f"FMA pipe > {NO_TENSOR_FMA_PIPE_ABOVE_PCT:g} % and tensor pipe < {NO_TENSOR_TENSOR_PIPE_BELOW_PCT:g} % "
             "of peak",
        metrics=(ncu.FMA_PIPE[0], ncu.TENSOR_PIPE[0]), evaluate=_r._no_tensor_cores,
        evaluate_light=_r._light_no_tensor_cores, light_metrics=("static.instruction_mix", "roofline.compute_unit"),
        changes=(_c("use tl.dot with bf16/fp16 (or tf32) inputs and tile dims >= 16 (code change)",
                    "the matrix math runs as FFMA on the FMA pipe; tl.dot on bf16/fp16 operands (tf32 for fp32 via "
                    "input_precision) with BLOCK_M/N/K >= 16 compiles to HGMMA/HMMA on the tensor cores"),),
    ),
    Pattern(
        id="uncoalesced_loads", title="uncoalesced loads", priority=4, source=f"{_SOURCE}; confirmation: {_OWN}",
        rule=f"global load sectors per request > {UNCOALESCED_SECTORS_PER_REQUEST_ABOVE:g} (ideal 4 at 4 B/thread), "
             f"confirmed by waste at the same 5:4 ratio: bytes used per load sector < "
             f"{UNCOALESCED_BYTES_PER_SECTOR_BELOW:g} of 32 or L2 global sectors / ideal > "
             f"{UNCOALESCED_EXCESS_RATIO_ABOVE:g}",
        metrics=(ncu.GLOBAL_LOAD_SECTORS, ncu.GLOBAL_LOAD_REQUESTS, ncu.GLOBAL_LOAD_BYTES_PER_SECTOR[0],
                 ncu.GLOBAL_LOAD_INST, ncu.GLOBAL_SECTORS_THEORETICAL, ncu.GLOBAL_SECTORS_IDEAL),
        evaluate=_r._uncoalesced_loads,
        changes=(_c("make the loads' fastest-varying index the contiguous (stride-1) dimension (code change)",
                    "neighbouring threads then read neighbouring addresses and each 32-byte sector is used in full; "
                    "transpose the layout or load the transposed tile"),),
    ),
    Pattern(
        id="sparse_writes", title="sparse writes", priority=5, source=_SOURCE,
        rule=f"bytes used per global store sector < {SPARSE_WRITE_BYTES_PER_SECTOR_BELOW:g} of 32 (with stores executed)",
        metrics=(ncu.GLOBAL_STORE_BYTES_PER_SECTOR[0], ncu.GLOBAL_STORE_INST), evaluate=_r._sparse_writes,
        changes=(_c("write contiguous runs: stride-1 inner dimension for the stores (code change)",
                    "a store that uses a few bytes of each 32-byte sector moves whole sectors to L2/DRAM; store "
                    "full rows, or stage the tile and write it contiguously"),),
    ),
    Pattern(
        id="atomics_contention", title="atomics contention", priority=6, source=_SOURCE,
        rule=f"atomic sectors > {ATOMIC_SECTORS_ABOVE:g} and LG-throttle stall ratio > {ATOMIC_LG_THROTTLE_RATIO_ABOVE:g}",
        metrics=(*ncu.GLOBAL_ATOMIC_SECTORS, _S("lg_throttle")), evaluate=_r._atomics,
        changes=(
            _c("reduce within the block first, one atomic per block (code change)",
               "tl.sum over the tile then a single tl.atomic_add cuts the atomics queued at L1TEX"),
            _c("larger tiles", "fewer blocks issue fewer atomics to the same addresses", ("tile", "up")),
        ),
    ),
    Pattern(
        id="shared_bank_conflicts", title="shared bank conflicts", priority=7, source=f"{_SOURCE}; confirmation: {_OWN}",
        rule=f"short-scoreboard stall ratio > {BANK_SHORT_SCOREBOARD_RATIO_ABOVE:g}, confirmed by bank conflicts > "
             f"{BANK_CONFLICT_SHARE_ABOVE_PCT:g} % of shared load/store wavefronts",
        metrics=(_S("short_scoreboard"), ncu.SHARED_LOAD_BANK_CONFLICTS, ncu.SHARED_STORE_BANK_CONFLICTS,
                 ncu.SHARED_LOAD_WAVEFRONTS, ncu.SHARED_STORE_WAVEFRONTS),
        evaluate=_r._bank_conflicts,
        changes=(_c("pad or swizzle the shared-memory layout (code change)",
                    "threads of a warp hitting the same bank serialize; padding a row by one word or an XOR "
                    "swizzle spreads them over the 32 banks"),),
    ),
    Pattern(
        id="warp_divergence", title="warp divergence", priority=8, source=_SOURCE,
        rule=f"active threads per warp instruction < {DIVERGENCE_ACTIVE_THREADS_BELOW:g} of 32",
        metrics=(ncu.ACTIVE_THREADS_PER_INST,), evaluate=_r._divergence,
        changes=(_c("make branches uniform per warp (code change)",
                    "divergent branches run both paths with part of the warp idle; use tl.where on masks, or "
                    "assign work so a warp's threads take the same path"),),
    ),
    Pattern(
        id="small_grid", title="small grid", priority=9, source=_SOURCE,
        rule=f"waves per SM < {PATTERN_SMALL_GRID_WAVES_BELOW:g}, or grid < SM count",
        metrics=(ncu.WAVES, ncu.GRID_SIZE, ncu.SM_COUNT[0]), evaluate=_r._small_grid,
        changes=(
            _c("smaller tiles", "more, smaller blocks put work on the idle SMs", ("tile", "down")),
            _c("split-K or a persistent (stream-K) kernel (code change, not a tunable)",
               "splitting the reduction dimension across blocks adds blocks without shrinking the output tile"),
        ),
    ),
    Pattern(
        id="low_achieved_occupancy", title="low achieved occupancy", priority=10,
        source=f"{_SOURCE} (same rule as kernelpilot.profile.verdict)",
        rule=f"theoretical occupancy > {LOW_ACHIEVED_THEORETICAL_ABOVE_PCT:g} % and achieved < "
             f"{LOW_ACHIEVED_FRACTION:g} x theoretical",
        metrics=(ncu.THEORETICAL_OCCUPANCY, ncu.ACHIEVED_OCCUPANCY), evaluate=_r._low_achieved_occupancy,
        changes=(
            _c("more warps per block", "more resident warps per block fill the slots that short or uneven blocks "
               "leave empty", ("warps", "up")),
            _c("smaller tiles", "more, shorter blocks balance the load across SMs", ("tile", "down")),
        ),
    ),
    Pattern(
        id="long_scoreboard", title="long-scoreboard latency", priority=11, source=_SOURCE,
        rule=f"long-scoreboard stall ratio > {LONG_SCOREBOARD_RATIO_ABOVE:g} cycles per issued instruction",
        metrics=(_S("long_scoreboard"),), evaluate=_r._long_scoreboard,
        changes=(
            _c("more pipeline stages", "warps wait on global memory; deeper software pipelining keeps more loads "
               "in flight without more warps", ("stages", "up")),
            _c("larger BLOCK_K", "each load brings more work per wait", ("tile_k", "up")),
        ),
    ),
    Pattern(
        id="overall_memory_bound", title="overall memory-bound", priority=12, source=_SOURCE,
        rule=f"memory SOL % > {MEMORY_BOUND_RATIO_ABOVE:g} x compute SOL % and > {MEMORY_BOUND_MEMORY_ABOVE_PCT:g} %",
        metrics=(ncu.MEMORY_SOL, ncu.COMPUTE_SOL), evaluate=_r._memory_bound,
        evaluate_light=_r._light_memory_bound,
        light_metrics=("roofline.memory_time_ns", "roofline.compute_time_ns", "timing_ns"),
        changes=(
            _c("larger tiles", "each loaded byte is reused by more outputs", ("tile", "up")),
            _c("larger L2 grouping", "blocks that share operands run together and hit in L2", ("group", "up")),
        ),
    ),
    Pattern(
        id="sync_overhead", title="sync overhead", priority=13, source=_SOURCE,
        rule=f"barrier stall ratio > {SYNC_BARRIER_RATIO_ABOVE:g} cycles per issued instruction",
        metrics=(_S("barrier"),), evaluate=_r._sync_overhead,
        changes=(
            _c("fewer warps per block", "fewer warps wait at each block-wide barrier", ("warps", "down")),
            _c("remove or merge barriers (code change)", "uneven work before a barrier makes warps wait; balance "
               "the work per warp or drop unneeded tl.debug_barrier calls"),
        ),
    ),
    Pattern(
        id="tail_effect", title="tail effect", priority=14, source=f"{_SOURCE}; fallback: Nsight Compute LaunchConfiguration rule",
        rule=f"waves per SM > {TAIL_WAVES_ABOVE:g} and idle share of the last wave (1 - frac(waves)) > "
             f"{TAIL_IDLE_SHARE_ABOVE_PCT:g} %",
        metrics=(ncu.WAVES,), evaluate=_r._tail_effect,
        changes=(
            _c("smaller tiles", "more, smaller blocks make the partial last wave a smaller share of the run",
               ("tile", "down")),
            _c("larger tiles", "a different block count can fill the last wave", ("tile", "up")),
        ),
    ),
)

PATTERN_IDS: tuple[str, ...] = tuple(p.id for p in PATTERNS)


def get_pattern(pattern_id: str) -> Pattern:
    """The :class:`Pattern` with this id.

    Raises:
        KeyError: no pattern has that id (the message lists the ids).
    """
    for p in PATTERNS:
        if p.id == pattern_id:
            return p
    raise KeyError(f"unknown pattern {pattern_id!r}; known: {', '.join(PATTERN_IDS)}")


def evaluate_patterns(m: KernelMetrics) -> list[PatternResult]:
    """Evaluate all 14 patterns on one kernel's ncu metrics, in :data:`PATTERNS` order.

    Returns one :class:`PatternResult` per pattern (fired, not fired, or not evaluated with the missing
    metric names). Raises nothing.
    """
    return [p.run(m) for p in PATTERNS]


def evaluate_light_patterns(x: LightInputs, reason: str = "") -> list[PatternResult]:
    """Evaluate all 14 patterns from a light profile (no ncu counters), in :data:`PATTERNS` order.

    Register spill, no tensor cores and overall memory-bound are answered from compile metadata and the
    roofline; the rest report ``not_evaluated`` naming the ncu metrics they need. Raises nothing.
    """
    return [p.run_light(x, reason) for p in PATTERNS]
