"""The numeric patterns' thresholds and evaluators: each pattern of :mod:`kernelpilot.profile.patterns` as code.

An evaluator takes :class:`~kernelpilot.profile.metrics.KernelMetrics` (ncu counters) or :class:`LightInputs`
(compile metadata + roofline + timing) and returns an :data:`Outcome`: the three-valued decision (True fired,
False not fired, None undecided because an input is missing), the evidence collected and a note. The
catalogue that names, cites and orders these evaluators, and the rules in words, are in
:mod:`kernelpilot.profile.patterns` (which re-exports :class:`LightInputs`). Thresholds and their sources:
docs/measuring.md, "Numeric patterns".
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from pydantic import BaseModel, Field

from kernelpilot.profile import metrics as ncu
from kernelpilot.profile.metrics import KernelMetrics
from kernelpilot.profile.verdict import LOW_ACHIEVED_FRACTION, LOW_ACHIEVED_THEORETICAL_ABOVE_PCT, Evidence

# --- thresholds (docs/measuring.md, "Numeric patterns", unless marked) -------------------------------------------
#: small_grid fires below this many waves per SM (the numeric-pattern rule; Nsight Compute's own SOL rule in
#: kernelpilot.profile.verdict uses :data:`~kernelpilot.profile.verdict.SOL_SMALL_GRID_WAVES_BELOW` = 1.0).
PATTERN_SMALL_GRID_WAVES_BELOW = 0.5
#: Former name of :data:`PATTERN_SMALL_GRID_WAVES_BELOW`.
SMALL_GRID_WAVES = PATTERN_SMALL_GRID_WAVES_BELOW
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
    waves = e.check(_src(m, "waves_per_sm", ncu.WAVES), m.waves_per_sm, "<", PATTERN_SMALL_GRID_WAVES_BELOW, "waves")
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
    # without local counters, > 128 registers/thread is the sign of a spill in docs/measuring.md; fewer proves nothing
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

