"""The numeric patterns of PRODUCT.md ("Diagnosing", numeric-patterns table), each mapped to candidate changes.

Every pattern is one declarative :class:`Pattern` entry in :data:`PATTERNS`: an id, a title, the rule in words
with its threshold and where the threshold comes from, the metric names it reads, a function that evaluates it
on :class:`~kernelpilot.profile.metrics.KernelMetrics` (and, for the few that compile metadata or the roofline
can answer, one for the light profile), and the changes it suggests.

Evaluation is three-valued. A pattern is ``fired`` or ``not_fired`` when its inputs decide it, and
``not_evaluated`` (with ``missing`` naming the metrics) when they do not: a missing input never fires a
pattern. Clauses combine the way logic does: in "A and B", a present and false A decides "not fired" even when
B is missing; in "A or B", a present and true A decides "fired".

Thresholds (PRODUCT.md table unless marked):

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

Confirmations that are kernelpilot's own (the real H200 fixtures showed the bare PRODUCT.md rule misfiring):

- uncoalesced loads: "> 5 sectors per request, ideal 4" assumes 4 bytes per thread; 16-byte vector loads
  (LDG.128, LDGSTS.128) ideally touch 16 sectors per request, and every fixture here does, fully used. So the
  rule also needs a sign of waste at the same 5:4 ratio: bytes used per global-load sector < 25.6 of 32 (when
  SASS global loads ran) or ncu's L2 global sectors / ideal sectors > 1.25.
- shared bank conflicts: PRODUCT.md says "confirm with bank-conflict counters"; the short-scoreboard stall also
  counts MUFU and other variable-latency results (the streaming add has ratio 12.9 and no shared memory at all),
  so the conflicts must be > 10 % of the shared load/store data wavefronts.
- tail effect: when waves per SM is missing, Nsight Compute's own LaunchConfiguration "Tail Effect" rule
  decides; when waves is present, ncu's rule is shown as evidence only (it flags any partial wave).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional

from pydantic import BaseModel, Field

from kernelpilot.profile import metrics as ncu
from kernelpilot.profile.metrics import KernelMetrics
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

_SOURCE = "docs/PRODUCT.md, Diagnosing: numeric patterns"
_OWN = "kernelpilot (confirmation added after the H200 fixtures; see kernelpilot.profile.patterns)"

# --- thresholds (PRODUCT.md numeric-patterns table unless marked) -------------------------------------------
SMALL_GRID_WAVES = 0.5
TAIL_WAVES_ABOVE = 1.0
TAIL_IDLE_SHARE_ABOVE_PCT = 15.0
UNCOALESCED_SECTORS_PER_REQUEST_ABOVE = 5.0
#: 5 sectors where 4 are ideal = 25 % excess: the same ratio applied to bytes used per sector and to ncu's
#: theoretical / ideal global sectors (kernelpilot's confirmation).
UNCOALESCED_BYTES_PER_SECTOR_BELOW = ncu.SECTOR_BYTES * 4.0 / 5.0
UNCOALESCED_EXCESS_RATIO_ABOVE = 5.0 / 4.0
SPARSE_WRITE_BYTES_PER_SECTOR_BELOW = 16.0
LONG_SCOREBOARD_RATIO_ABOVE = 3.0
NO_TENSOR_FMA_PIPE_ABOVE_PCT = 50.0
NO_TENSOR_TENSOR_PIPE_BELOW_PCT = 1.0
ATOMIC_SECTORS_ABOVE = 0.0
ATOMIC_LG_THROTTLE_RATIO_ABOVE = 1.0
BANK_SHORT_SCOREBOARD_RATIO_ABOVE = 2.0
#: kernelpilot's confirmation: conflicts as a share of shared load + store data wavefronts.
BANK_CONFLICT_SHARE_ABOVE_PCT = 10.0
SYNC_BARRIER_RATIO_ABOVE = 2.0
SPILL_LOCAL_INST_ABOVE = 0.0
SPILL_REGISTERS_ABOVE = 128
FP64_PIPE_ABOVE_PCT = 1.0
DIVERGENCE_ACTIVE_THREADS_BELOW = 24.0
MEMORY_BOUND_RATIO_ABOVE = 1.5
MEMORY_BOUND_MEMORY_ABOVE_PCT = 30.0


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


class LightInputs(BaseModel):
    """What a light profile has instead of ncu counters (issue 3, item 6).

    Attributes:
        timing_ns: measured median time of the kernel, ns; None when not timed.
        memory_pct: analytic DRAM throughput, ``roofline.memory_time_ns / timing_ns * 100`` (% of the DRAM
            ceiling; a lower bound of ncu's memory SOL %, since the roofline counts each byte once).
        compute_pct: analytic compute throughput, ``roofline.compute_time_ns / timing_ns * 100`` (% of the
            ceiling of the kernel's declared compute unit).
        compute_unit: the roofline's compute unit (``bf16_tensor``, ``fp32`` ...), or None without a roofline.
        roofline_bound: ``memory`` or ``compute`` from the roofline, or None.
        static: compile metadata (``registers_per_thread``, ``shared_mem_bytes``, ``threads_per_block``,
            ``occupancy_pct``, ``limiter``, ``spills``, ``instruction_mix``), or empty.
    """

    timing_ns: Optional[float] = None
    memory_pct: Optional[float] = None
    compute_pct: Optional[float] = None
    compute_unit: Optional[str] = None
    roofline_bound: Optional[str] = None
    static: dict[str, Any] = Field(default_factory=dict)


# --- three-valued evaluation helpers ------------------------------------------------------------------------

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


class _Eval:
    """Collects evidence and missing inputs while a pattern's clauses are checked."""

    def __init__(self) -> None:
        self.evidence: list[Evidence] = []
        self.missing: list[str] = []

    def check(self, metric: str, value: Optional[float], comparison: str, threshold: float,
              unit: str = "", inputs: Optional[dict[str, Optional[float]]] = None) -> Optional[bool]:
        """``value <comparison> threshold`` recorded as evidence; None when value is None.

        A None value records as missing the metrics of ``inputs`` (name -> value) that are None, or ``metric``
        itself when no inputs are given (a derived value names the raw metrics it lacks).
        """
        if value is None:
            absent = [n for n, v in (inputs or {}).items() if v is None] or [metric]
            self.missing.extend(n for n in absent if n not in self.missing)
            return None
        holds = _OPS[comparison](float(value), float(threshold))
        self.evidence.append(Evidence(metric=metric, value=float(value), unit=unit, threshold=float(threshold),
                                      comparison=comparison, holds=holds))
        return holds

    def info(self, metric: str, value: Optional[float], unit: str, comparison: str, holds: bool) -> None:
        """An evidence row that is shown but does not decide (no threshold)."""
        self.evidence.append(Evidence(metric=metric, value=value, unit=unit, threshold=None,
                                      comparison=comparison, holds=holds))


def _all(*clauses: Optional[bool]) -> Optional[bool]:
    """Three-valued AND: False if any clause is False, True if all are True, else None (undecided)."""
    if any(c is False for c in clauses):
        return False
    return True if all(c is True for c in clauses) else None


def _any(*clauses: Optional[bool]) -> Optional[bool]:
    """Three-valued OR: True if any clause is True, False if all are False, else None (undecided)."""
    if any(c is True for c in clauses):
        return True
    return False if all(c is False for c in clauses) else None


def _src(m: KernelMetrics, field_name: str, default: str) -> str:
    """The ncu metric a KernelMetrics field came from, or the default name."""
    return m.sources.get(field_name, default)


Outcome = tuple[Optional[bool], _Eval, str]
"""(decision or None, collected evidence, note) returned by a pattern's evaluate function."""


# --- the patterns, evaluated on ncu metrics ------------------------------------------------------------------

def _small_grid(m: KernelMetrics) -> Outcome:
    e = _Eval()
    waves = e.check(_src(m, "waves_per_sm", ncu.WAVES), m.waves_per_sm, "<", SMALL_GRID_WAVES, "waves")
    sm_name = _src(m, "sm_count", ncu.SM_COUNT[0])
    if m.sm_count is None:
        grid = e.check(sm_name, None, "<", 0)
    else:
        grid = e.check(f"{_src(m, 'grid_size', ncu.GRID_SIZE)} vs {sm_name}", m.grid_size, "<", m.sm_count, "blocks")
    return _any(waves, grid), e, ""


def _tail_idle_share_pct(waves: float) -> float:
    """Idle share of the last wave, %: ``1 - frac(waves)`` when there is a partial wave, else 0."""
    frac = waves - math.floor(waves)
    return 0.0 if frac == 0 else (1.0 - frac) * 100.0


def _tail_effect(m: KernelMetrics) -> Outcome:
    e = _Eval()
    ncu_tail = next((r for r in m.rules if r.identifier == "LaunchConfiguration" and r.title == "Tail Effect"), None)
    if m.waves_per_sm is None and ncu_tail is not None:
        e.missing.append(ncu.WAVES)
        e.info("ncu rule LaunchConfiguration: Tail Effect", ncu_tail.estimated_speedup_pct, "% est. speedup",
               "present among ncu's rule results", True)
        return True, e, "waves per SM missing: Nsight Compute's own tail-effect rule decided"
    waves_name = _src(m, "waves_per_sm", ncu.WAVES)
    many = e.check(waves_name, m.waves_per_sm, ">", TAIL_WAVES_ABOVE, "waves")
    idle = None
    if m.waves_per_sm is not None:
        idle = e.check(f"1 - frac({waves_name})", _tail_idle_share_pct(m.waves_per_sm), ">",
                       TAIL_IDLE_SHARE_ABOVE_PCT, "%")
    if ncu_tail is not None:
        e.info("ncu rule LaunchConfiguration: Tail Effect", ncu_tail.estimated_speedup_pct, "% est. speedup",
               "shown only (ncu flags any partial wave)", True)
    return _all(many, idle), e, ""


def _uncoalesced_loads(m: KernelMetrics) -> Outcome:
    e = _Eval()
    spr_name = _src(m, "global_load_sectors_per_request", f"{ncu.GLOBAL_LOAD_SECTORS} / {ncu.GLOBAL_LOAD_REQUESTS}")
    spr = e.check(spr_name, m.global_load_sectors_per_request, ">", UNCOALESCED_SECTORS_PER_REQUEST_ABOVE, "sectors")
    if spr is False:
        return False, e, ""
    waste_clauses: list[Optional[bool]] = []
    if m.global_load_inst_count is not None and m.global_load_inst_count > 0:
        waste_clauses.append(e.check(_src(m, "global_load_bytes_per_sector", ncu.GLOBAL_LOAD_BYTES_PER_SECTOR[0]),
                                     m.global_load_bytes_per_sector, "<", UNCOALESCED_BYTES_PER_SECTOR_BELOW,
                                     "B/sector"))
    elif m.global_load_inst_count is None:
        e.missing.append(ncu.GLOBAL_LOAD_INST)
    excess = None
    if m.global_sectors_theoretical is not None and m.global_sectors_ideal is not None:
        # no ideal sectors means no global accesses: nothing wasted
        excess = m.global_sectors_theoretical / m.global_sectors_ideal if m.global_sectors_ideal > 0 else 1.0
    waste_clauses.append(e.check(f"{ncu.GLOBAL_SECTORS_THEORETICAL} / {ncu.GLOBAL_SECTORS_IDEAL}", excess, ">",
                                 UNCOALESCED_EXCESS_RATIO_ABOVE, "x",
                                 inputs={ncu.GLOBAL_SECTORS_THEORETICAL: m.global_sectors_theoretical,
                                         ncu.GLOBAL_SECTORS_IDEAL: m.global_sectors_ideal}))
    decision = _all(spr, _any(*waste_clauses))
    note = "over 5 sectors per request but no sectors wasted: wide (e.g. 16-byte) loads" if decision is False else ""
    return decision, e, note


def _sparse_writes(m: KernelMetrics) -> Outcome:
    e = _Eval()
    stores = e.check(_src(m, "global_store_inst_count", ncu.GLOBAL_STORE_INST), m.global_store_inst_count, ">", 0,
                     "inst")
    if stores is False:
        return False, e, "no SASS global stores: nothing to judge"
    sparse = e.check(_src(m, "global_store_bytes_per_sector", ncu.GLOBAL_STORE_BYTES_PER_SECTOR[0]),
                     m.global_store_bytes_per_sector, "<", SPARSE_WRITE_BYTES_PER_SECTOR_BELOW, "B/sector")
    return _all(stores, sparse), e, ""


def _long_scoreboard(m: KernelMetrics) -> Outcome:
    e = _Eval()
    name = _src(m, "long_scoreboard_stall_ratio", ncu.STALL_TEMPLATE.format("long_scoreboard"))
    return e.check(name, m.long_scoreboard_stall_ratio, ">", LONG_SCOREBOARD_RATIO_ABOVE, "cycles/inst"), e, ""


def _no_tensor_cores(m: KernelMetrics) -> Outcome:
    e = _Eval()
    fma = e.check(_src(m, "fma_pipe_pct", ncu.FMA_PIPE[0]), m.fma_pipe_pct, ">", NO_TENSOR_FMA_PIPE_ABOVE_PCT, "%")
    tensor = e.check(_src(m, "tensor_pipe_pct", ncu.TENSOR_PIPE[0]), m.tensor_pipe_pct, "<",
                     NO_TENSOR_TENSOR_PIPE_BELOW_PCT, "%")
    return _all(fma, tensor), e, ""


def _atomics(m: KernelMetrics) -> Outcome:
    e = _Eval()
    sectors = e.check(_src(m, "global_atomic_sectors", " + ".join(ncu.GLOBAL_ATOMIC_SECTORS)),
                      m.global_atomic_sectors, ">", ATOMIC_SECTORS_ABOVE, "sectors")
    throttle = e.check(_src(m, "lg_throttle_stall_ratio", ncu.STALL_TEMPLATE.format("lg_throttle")),
                       m.lg_throttle_stall_ratio, ">", ATOMIC_LG_THROTTLE_RATIO_ABOVE, "cycles/inst")
    return _all(sectors, throttle), e, ""


def _bank_conflict_share_pct(m: KernelMetrics) -> Optional[float]:
    """Bank conflicts as % of shared load + store data wavefronts; None when a counter is missing."""
    parts = (m.shared_load_bank_conflicts, m.shared_store_bank_conflicts, m.shared_load_wavefronts,
             m.shared_store_wavefronts)
    if any(p is None for p in parts):
        return None
    conflicts, wavefronts = parts[0] + parts[1], parts[2] + parts[3]  # type: ignore[operator]
    return conflicts / wavefronts * 100.0 if wavefronts > 0 else 0.0


def _bank_conflicts(m: KernelMetrics) -> Outcome:
    e = _Eval()
    short = e.check(_src(m, "short_scoreboard_stall_ratio", ncu.STALL_TEMPLATE.format("short_scoreboard")),
                    m.short_scoreboard_stall_ratio, ">", BANK_SHORT_SCOREBOARD_RATIO_ABOVE, "cycles/inst")
    share = e.check(f"({ncu.SHARED_LOAD_BANK_CONFLICTS} + {ncu.SHARED_STORE_BANK_CONFLICTS}) / "
                    f"({ncu.SHARED_LOAD_WAVEFRONTS} + {ncu.SHARED_STORE_WAVEFRONTS})",
                    _bank_conflict_share_pct(m), ">", BANK_CONFLICT_SHARE_ABOVE_PCT, "%",
                    inputs={ncu.SHARED_LOAD_BANK_CONFLICTS: m.shared_load_bank_conflicts,
                            ncu.SHARED_STORE_BANK_CONFLICTS: m.shared_store_bank_conflicts,
                            ncu.SHARED_LOAD_WAVEFRONTS: m.shared_load_wavefronts,
                            ncu.SHARED_STORE_WAVEFRONTS: m.shared_store_wavefronts})
    note = ""
    if short is True and share is False:
        note = "short-scoreboard stalls without many bank conflicts: MUFU or other variable-latency results, not shared memory"
    return _all(short, share), e, note


def _sync_overhead(m: KernelMetrics) -> Outcome:
    e = _Eval()
    name = _src(m, "barrier_stall_ratio", ncu.STALL_TEMPLATE.format("barrier"))
    return e.check(name, m.barrier_stall_ratio, ">", SYNC_BARRIER_RATIO_ABOVE, "cycles/inst"), e, ""


def _low_achieved_occupancy(m: KernelMetrics) -> Outcome:
    e = _Eval()
    theoretical = e.check(_src(m, "theoretical_occupancy_pct", ncu.THEORETICAL_OCCUPANCY),
                          m.theoretical_occupancy_pct, ">", LOW_ACHIEVED_THEORETICAL_ABOVE_PCT, "%")
    achieved = None
    if theoretical is not False:
        limit = LOW_ACHIEVED_FRACTION * m.theoretical_occupancy_pct if m.theoretical_occupancy_pct is not None else None
        if limit is None:
            e.missing.append(ncu.THEORETICAL_OCCUPANCY)
        else:
            achieved = e.check(_src(m, "achieved_occupancy_pct", ncu.ACHIEVED_OCCUPANCY), m.achieved_occupancy_pct,
                               "<", limit, "%")
    return _all(theoretical, achieved), e, ""


def _register_spill(m: KernelMetrics) -> Outcome:
    e = _Eval()
    local = None
    if m.local_load_inst_count is not None or m.local_store_inst_count is not None:
        local = (m.local_load_inst_count or 0.0) + (m.local_store_inst_count or 0.0)
    local_name = f"{_src(m, 'local_load_inst_count', ncu.LOCAL_LOADS)} + {_src(m, 'local_store_inst_count', ncu.LOCAL_STORES)}"
    spilled = e.check(local_name, local, ">", SPILL_LOCAL_INST_ABOVE, "inst",
                      inputs={ncu.LOCAL_LOADS: m.local_load_inst_count, ncu.LOCAL_STORES: m.local_store_inst_count})
    registers = e.check(_src(m, "registers_per_thread", ncu.REGISTERS), m.registers_per_thread, ">",
                        SPILL_REGISTERS_ABOVE, "registers/thread")
    if spilled is not None:  # measured local traffic decides; > 128 registers alone is pressure, not a spill
        note = "" if spilled or not registers else "over 128 registers/thread but no local-memory traffic: not a spill"
        return spilled, e, note
    # without local counters, > 128 registers/thread is PRODUCT.md's sign of a spill; fewer proves nothing
    return (True if registers else None), e, "no local-memory counters: only registers/thread > 128 can decide"


def _fp64(m: KernelMetrics) -> Outcome:
    e = _Eval()
    return e.check(_src(m, "fp64_pipe_pct", ncu.FP64_PIPE[0]), m.fp64_pipe_pct, ">", FP64_PIPE_ABOVE_PCT, "%"), e, ""


def _divergence(m: KernelMetrics) -> Outcome:
    e = _Eval()
    return e.check(_src(m, "active_threads_per_warp_inst", ncu.ACTIVE_THREADS_PER_INST),
                   m.active_threads_per_warp_inst, "<", DIVERGENCE_ACTIVE_THREADS_BELOW, "threads"), e, ""


def _memory_bound(m: KernelMetrics) -> Outcome:
    e = _Eval()
    mem_name = _src(m, "memory_sol_pct", ncu.MEMORY_SOL)
    comp_name = _src(m, "compute_sol_pct", ncu.COMPUTE_SOL)
    ratio = None
    if m.memory_sol_pct is not None and m.compute_sol_pct is not None:
        ratio = e.check(f"{mem_name} vs 1.5 x {comp_name}", m.memory_sol_pct, ">",
                        MEMORY_BOUND_RATIO_ABOVE * m.compute_sol_pct, "%")
    else:
        e.missing.extend(n for n, v in ((mem_name, m.memory_sol_pct), (comp_name, m.compute_sol_pct)) if v is None)
    busy = e.check(mem_name, m.memory_sol_pct, ">", MEMORY_BOUND_MEMORY_ABOVE_PCT, "%")
    return _all(ratio, busy), e, ""


# --- the patterns, evaluated in a light profile (compile metadata + roofline + timing) ------------------------

_MMA_PREFIXES = ("HGMMA", "HMMA", "IMMA", "QGMMA", "IGMMA", "BMMA", "BGMMA", "DMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA",
                 "UTCMMA")


def _mix_count(mix: dict[str, Any], prefixes: tuple[str, ...]) -> float:
    """Sum of instruction-mix counts whose opcode (case-insensitive) starts with one of ``prefixes``."""
    return float(sum(v for k, v in mix.items() if isinstance(v, (int, float)) and str(k).upper().startswith(prefixes)))


def _light_register_spill(x: LightInputs) -> Outcome:
    e = _Eval()
    spills = e.check("static.spills", x.static.get("spills"), ">", SPILL_LOCAL_INST_ABOVE, "spills")
    clauses = [spills]
    mix = x.static.get("instruction_mix")
    if isinstance(mix, dict):  # LDL / STL in the SASS: the static form of "local loads/stores > 0"
        clauses.append(e.check("static.instruction_mix LDL + STL", _mix_count(mix, ("LDL", "STL")), ">",
                               SPILL_LOCAL_INST_ABOVE, "inst"))
    registers = e.check("static.registers_per_thread", x.static.get("registers_per_thread"), ">",
                        SPILL_REGISTERS_ABOVE, "registers/thread")
    known = [c for c in clauses if c is not None]
    if known:  # the compiler's spill count / LDL+STL decide; > 128 registers alone is pressure, not a spill
        return any(known), e, "from compile metadata (counts in the binary, not executed instructions)"
    return registers, e, "no spill count in the compile metadata: decided by registers/thread > 128"


def _light_no_tensor_cores(x: LightInputs) -> Outcome:
    e = _Eval()
    mix = x.static.get("instruction_mix")
    if not isinstance(mix, dict):
        e.missing.append("static.instruction_mix")
        return None, e, ""
    ffma, mma = _mix_count(mix, ("FFMA",)), _mix_count(mix, _MMA_PREFIXES)
    total = ffma + mma
    if total == 0:
        e.info("static.instruction_mix FFMA + MMA", 0.0, "inst", "no FFMA and no MMA in the SASS", False)
        return False, e, "no FFMA and no MMA instructions: no matrix math to move to tensor cores"
    fma = e.check("static.instruction_mix FFMA share of FFMA + MMA", ffma / total * 100, ">",
                  NO_TENSOR_FMA_PIPE_ABOVE_PCT, "%")
    tensor = e.check("static.instruction_mix MMA share of FFMA + MMA", mma / total * 100, "<",
                     NO_TENSOR_TENSOR_PIPE_BELOW_PCT, "%")
    if x.compute_unit is None:
        e.missing.append("roofline.compute_unit")
        meant = None
    else:
        meant = x.compute_unit.endswith("_tensor") or x.roofline_bound == "compute"
        e.info("roofline.compute_unit / roofline.bound", None, "", f"{x.compute_unit} / {x.roofline_bound}: "
               "FLOPs meant for tensor cores or the kernel compute-bound", meant)
    return _all(fma, tensor, meant), e, ("static proxy of the rule: SASS instruction counts stand for pipe "
                                         "utilization, and only kernels whose FLOPs matter are judged")


def _light_memory_bound(x: LightInputs) -> Outcome:
    e = _Eval()
    mem_name, comp_name = "roofline.memory_time_ns / timing_ns", "roofline.compute_time_ns / timing_ns"
    ratio = None
    if x.memory_pct is not None and x.compute_pct is not None:
        ratio = e.check(f"{mem_name} vs 1.5 x {comp_name}", x.memory_pct, ">",
                        MEMORY_BOUND_RATIO_ABOVE * x.compute_pct, "%")
    else:
        e.missing.extend([mem_name, comp_name])
    busy = e.check(mem_name, x.memory_pct, ">", MEMORY_BOUND_MEMORY_ABOVE_PCT, "%")
    return _all(ratio, busy), e, "analytic memory % (bytes counted once) stands for the memory SOL %"


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
        title: human title (PRODUCT.md's wording).
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
            e = _Eval()
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
        metrics=(ncu.LOCAL_LOADS, ncu.LOCAL_STORES, ncu.REGISTERS), evaluate=_register_spill,
        evaluate_light=_light_register_spill,
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
        rule=f"FP64 pipe > {FP64_PIPE_ABOVE_PCT:g} % of peak", metrics=ncu.FP64_PIPE[:1], evaluate=_fp64,
        changes=(_c("keep the math in fp32 (code change)", "float64 constants, tl.float64 casts or float64 inputs "
                    "run on the FP64 pipe at a fraction of the FP32 rate; cast them to float32"),),
    ),
    Pattern(
        id="no_tensor_cores", title="no tensor cores", priority=3, source=_SOURCE,
        rule=f"FMA pipe > {NO_TENSOR_FMA_PIPE_ABOVE_PCT:g} % and tensor pipe < {NO_TENSOR_TENSOR_PIPE_BELOW_PCT:g} % "
             "of peak",
        metrics=(ncu.FMA_PIPE[0], ncu.TENSOR_PIPE[0]), evaluate=_no_tensor_cores,
        evaluate_light=_light_no_tensor_cores, light_metrics=("static.instruction_mix", "roofline.compute_unit"),
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
        evaluate=_uncoalesced_loads,
        changes=(_c("make the loads' fastest-varying index the contiguous (stride-1) dimension (code change)",
                    "neighbouring threads then read neighbouring addresses and each 32-byte sector is used in full; "
                    "transpose the layout or load the transposed tile"),),
    ),
    Pattern(
        id="sparse_writes", title="sparse writes", priority=5, source=_SOURCE,
        rule=f"bytes used per global store sector < {SPARSE_WRITE_BYTES_PER_SECTOR_BELOW:g} of 32 (with stores executed)",
        metrics=(ncu.GLOBAL_STORE_BYTES_PER_SECTOR[0], ncu.GLOBAL_STORE_INST), evaluate=_sparse_writes,
        changes=(_c("write contiguous runs: stride-1 inner dimension for the stores (code change)",
                    "a store that uses a few bytes of each 32-byte sector moves whole sectors to L2/DRAM; store "
                    "full rows, or stage the tile and write it contiguously"),),
    ),
    Pattern(
        id="atomics_contention", title="atomics contention", priority=6, source=_SOURCE,
        rule=f"atomic sectors > {ATOMIC_SECTORS_ABOVE:g} and LG-throttle stall ratio > {ATOMIC_LG_THROTTLE_RATIO_ABOVE:g}",
        metrics=(*ncu.GLOBAL_ATOMIC_SECTORS, _S("lg_throttle")), evaluate=_atomics,
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
        evaluate=_bank_conflicts,
        changes=(_c("pad or swizzle the shared-memory layout (code change)",
                    "threads of a warp hitting the same bank serialize; padding a row by one word or an XOR "
                    "swizzle spreads them over the 32 banks"),),
    ),
    Pattern(
        id="warp_divergence", title="warp divergence", priority=8, source=_SOURCE,
        rule=f"active threads per warp instruction < {DIVERGENCE_ACTIVE_THREADS_BELOW:g} of 32",
        metrics=(ncu.ACTIVE_THREADS_PER_INST,), evaluate=_divergence,
        changes=(_c("make branches uniform per warp (code change)",
                    "divergent branches run both paths with part of the warp idle; use tl.where on masks, or "
                    "assign work so a warp's threads take the same path"),),
    ),
    Pattern(
        id="small_grid", title="small grid", priority=9, source=_SOURCE,
        rule=f"waves per SM < {SMALL_GRID_WAVES:g}, or grid < SM count",
        metrics=(ncu.WAVES, ncu.GRID_SIZE, ncu.SM_COUNT[0]), evaluate=_small_grid,
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
        metrics=(ncu.THEORETICAL_OCCUPANCY, ncu.ACHIEVED_OCCUPANCY), evaluate=_low_achieved_occupancy,
        changes=(
            _c("more warps per block", "more resident warps per block fill the slots that short or uneven blocks "
               "leave empty", ("warps", "up")),
            _c("smaller tiles", "more, shorter blocks balance the load across SMs", ("tile", "down")),
        ),
    ),
    Pattern(
        id="long_scoreboard", title="long-scoreboard latency", priority=11, source=_SOURCE,
        rule=f"long-scoreboard stall ratio > {LONG_SCOREBOARD_RATIO_ABOVE:g} cycles per issued instruction",
        metrics=(_S("long_scoreboard"),), evaluate=_long_scoreboard,
        changes=(
            _c("more pipeline stages", "warps wait on global memory; deeper software pipelining keeps more loads "
               "in flight without more warps", ("stages", "up")),
            _c("larger BLOCK_K", "each load brings more work per wait", ("tile_k", "up")),
        ),
    ),
    Pattern(
        id="overall_memory_bound", title="overall memory-bound", priority=12, source=_SOURCE,
        rule=f"memory SOL % > {MEMORY_BOUND_RATIO_ABOVE:g} x compute SOL % and > {MEMORY_BOUND_MEMORY_ABOVE_PCT:g} %",
        metrics=(ncu.MEMORY_SOL, ncu.COMPUTE_SOL), evaluate=_memory_bound,
        evaluate_light=_light_memory_bound,
        light_metrics=("roofline.memory_time_ns", "roofline.compute_time_ns", "timing_ns"),
        changes=(
            _c("larger tiles", "each loaded byte is reused by more outputs", ("tile", "up")),
            _c("larger L2 grouping", "blocks that share operands run together and hit in L2", ("group", "up")),
        ),
    ),
    Pattern(
        id="sync_overhead", title="sync overhead", priority=13, source=_SOURCE,
        rule=f"barrier stall ratio > {SYNC_BARRIER_RATIO_ABOVE:g} cycles per issued instruction",
        metrics=(_S("barrier"),), evaluate=_sync_overhead,
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
        metrics=(ncu.WAVES,), evaluate=_tail_effect,
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
