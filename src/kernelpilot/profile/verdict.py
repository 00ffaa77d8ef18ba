"""The bottleneck card: Nsight Compute's SOL rule and two occupancy rules applied to :class:`KernelMetrics`.

Rules (docs/measuring.md, "Diagnosing"):

- Nsight Compute's SOL rule (the SOLBottleneck rule of the GPU Speed Of Light section): compute and memory
  SOL both < 60 % -> latency ("small grid" when waves per SM < 1); either >= 80 % -> high throughput on that
  unit; otherwise a gap >= 10 points -> compute- or memory-heavy; else balanced.
- "low achieved occupancy" (docs/measuring.md, "Numeric patterns"): theoretical > 50 % and achieved < 1/2 theoretical.
- kernelpilot's own rule: a latency verdict with theoretical occupancy <= 25 % means too few warps to hide
  latency, so the launch is occupancy-bound.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, Field

from kernelpilot.profile import metrics as ncu_names
from kernelpilot.profile.metrics import KernelMetrics, RuleResult

#: Nsight Compute SOL rule thresholds (docs/measuring.md, "Nsight Compute's SOL rule"), in percent of peak / waves.
LATENCY_BELOW_PCT = 60.0
HIGH_THROUGHPUT_PCT = 80.0
HEAVY_GAP_PCT = 10.0
#: Below this many waves per SM the SOL rule calls a latency-bound kernel's grid too small (Nsight Compute's
#: rule; the numeric pattern ``small_grid`` uses 0.5:
#: :data:`kernelpilot.profile.pattern_rules.PATTERN_SMALL_GRID_WAVES_BELOW`).
SOL_SMALL_GRID_WAVES_BELOW = 1.0
#: Former name of :data:`SOL_SMALL_GRID_WAVES_BELOW`.
SMALL_GRID_WAVES = SOL_SMALL_GRID_WAVES_BELOW
#: docs/measuring.md pattern "low achieved occupancy": theoretical > 50 % and achieved < 0.5 x theoretical.
LOW_ACHIEVED_THEORETICAL_ABOVE_PCT = 50.0
LOW_ACHIEVED_FRACTION = 0.5
#: kernelpilot's own rule: latency-bound with theoretical occupancy <= 25 % (16 of 64 warps on sm_90).
FEW_WARPS_THEORETICAL_AT_MOST_PCT = 25.0

_SOL_RULE = "Nsight Compute SOL rule"


class Evidence(BaseModel):
    """One comparison a verdict rests on.

    Attributes:
        metric: the ncu metric (or a derived quantity named from ncu metrics).
        value: its value (None when the report lacks it).
        unit: unit of ``value`` and ``threshold`` ("%", "waves").
        threshold: what it was compared with (None for a ranking, e.g. the busiest memory unit).
        comparison: the operator or relation ("<", ">=", "busiest of DRAM/L1/L2").
        holds: whether the comparison was true.
    """

    metric: str
    value: Optional[float]
    unit: str
    threshold: Optional[float]
    comparison: str
    holds: bool


class Verdict(BaseModel):
    """The bottleneck card of one kernel launch.

    Attributes:
        rule: which rule decided ``bound``: ``ncu-sol:<branch>`` (latency, small-grid, high-throughput,
            compute-heavy, memory-heavy, balanced, missing-metrics); an occupancy verdict appends the
            occupancy rule: ``ncu-sol:latency+kernelpilot:few-warps`` or
            ``ncu-sol:latency+product:low-achieved-occupancy``.
        bound: latency, small-grid, occupancy, compute, memory, balanced, or unknown (SOL metrics missing).
        memory_unit: for memory verdicts, the busiest of DRAM, L1, L2; else None.
        summary: one sentence stating the bottleneck and the numbers behind it.
        evidence: every comparison made, in the order evaluated.
        occupancy_bound: whether an occupancy rule held (see module docstring).
        occupancy_limiter: what limits theoretical occupancy (registers, shared_mem, warps, blocks), when
            ``occupancy_bound``.
        ncu_rules: Nsight Compute's own rule results: SOLBottleneck first, then by estimated speedup.
    """

    rule: str
    bound: str
    memory_unit: Optional[str] = None
    summary: str
    evidence: list[Evidence] = Field(default_factory=list)
    occupancy_bound: bool = False
    occupancy_limiter: Optional[str] = None
    ncu_rules: list[RuleResult] = Field(default_factory=list)

    def to_markdown(self) -> str:
        """The card as Markdown: summary, rule, evidence table and ncu's titled rules."""
        lines = [f"**{self.bound}** ({self.rule}): {self.summary}", "", "| metric | value | comparison | holds |",
                 "|---|---|---|---|"]
        for e in self.evidence:
            value = "n/a" if e.value is None else f"{e.value:.4g} {e.unit}".strip()
            threshold = "" if e.threshold is None else f" {e.threshold:.4g} {e.unit}".rstrip()
            lines.append(f"| `{e.metric}` | {value} | {e.comparison}{threshold} | {'yes' if e.holds else 'no'} |")
        titled = [r for r in self.ncu_rules if r.title]
        if titled:
            lines += ["", "Nsight Compute rules:"]
            for r in titled:
                speedup = "" if r.estimated_speedup_pct is None else f" (est. speedup {r.estimated_speedup_pct:.1f} %)"
                lines.append(f"- {r.identifier}: {r.title}{speedup}")
        return "\n".join(lines)


def _metric(m: KernelMetrics, field: str, default: str) -> str:
    """The ncu metric name a field came from (``m.sources``), or ``default``."""
    return m.sources.get(field, default)


def _check(evidence: list[Evidence], metric: str, value: Optional[float], comparison: str,
           threshold: Optional[float], unit: str = "%") -> bool:
    """Evaluate ``value <comparison> threshold``, record it, and return the result (False if value is None)."""
    holds = False
    if value is not None and threshold is not None:
        holds = {"<": value < threshold, "<=": value <= threshold, ">": value > threshold,
                 ">=": value >= threshold}[comparison]
    evidence.append(Evidence(metric=metric, value=value, unit=unit, threshold=threshold,
                             comparison=comparison, holds=holds))
    return holds


def _memory_unit(m: KernelMetrics, evidence: list[Evidence]) -> Optional[str]:
    """The busiest of DRAM, L1, L2, from the memory-SOL breakdown if present, else the SOL-section metrics."""
    if m.memory_units_pct:
        units = dict(m.memory_units_pct)
        sources = {u: m.sources.get(f"memory_units_pct.{u}", f"memory_units_pct.{u}") for u in units}
    else:
        candidates = {"DRAM": ("dram_pct", m.dram_pct, ncu_names.DRAM_PCT),
                      "L1": ("l1_throughput_pct", m.l1_throughput_pct, ncu_names.L1_THROUGHPUT[0]),
                      "L2": ("l2_throughput_pct", m.l2_throughput_pct, ncu_names.L2_THROUGHPUT[0])}
        units = {u: v for u, (_, v, _) in candidates.items() if v is not None}
        sources = {u: _metric(m, f, d) for u, (f, _, d) in candidates.items()}
    if not units:
        return None
    busiest = max(units, key=lambda u: units[u])
    for unit, value in units.items():
        evidence.append(Evidence(metric=sources[unit], value=value, unit="%", threshold=None,
                                 comparison=f"{unit}: busiest of DRAM/L1/L2", holds=unit == busiest))
    return busiest


def _sol(m: KernelMetrics, evidence: list[Evidence]) -> tuple[str, str]:
    """Nsight Compute's SOL rule: returns (branch, bound)."""
    compute, memory = m.compute_sol_pct, m.memory_sol_pct
    c_name = _metric(m, "compute_sol_pct", ncu_names.COMPUTE_SOL)
    m_name = _metric(m, "memory_sol_pct", ncu_names.MEMORY_SOL)
    if compute is None or memory is None:
        return "missing-metrics", "unknown"
    compute_low = _check(evidence, c_name, compute, "<", LATENCY_BELOW_PCT)
    memory_low = _check(evidence, m_name, memory, "<", LATENCY_BELOW_PCT)
    if compute_low and memory_low:
        waves_name = _metric(m, "waves_per_sm", ncu_names.WAVES)
        if _check(evidence, waves_name, m.waves_per_sm, "<", SOL_SMALL_GRID_WAVES_BELOW, unit="waves"):
            return "small-grid", "small-grid"
        return "latency", "latency"
    compute_high = _check(evidence, c_name, compute, ">=", HIGH_THROUGHPUT_PCT)
    memory_high = _check(evidence, m_name, memory, ">=", HIGH_THROUGHPUT_PCT)
    if compute_high or memory_high:
        if compute_high and memory_high:
            return "high-throughput", "compute" if compute >= memory else "memory"
        return "high-throughput", "compute" if compute_high else "memory"
    gap = abs(compute - memory)
    if _check(evidence, f"|{c_name} - {m_name}|", gap, ">=", HEAVY_GAP_PCT):
        bound = "compute" if compute > memory else "memory"
        return f"{bound}-heavy", bound
    return "balanced", "balanced"


def _occupancy(m: KernelMetrics, sol_bound: str, evidence: list[Evidence]) -> tuple[bool, Optional[str]]:
    """The two occupancy rules; returns (occupancy_bound, name of the rule that held first)."""
    t_name = _metric(m, "theoretical_occupancy_pct", ncu_names.THEORETICAL_OCCUPANCY)
    a_name = _metric(m, "achieved_occupancy_pct", ncu_names.ACHIEVED_OCCUPANCY)
    theoretical, achieved = m.theoretical_occupancy_pct, m.achieved_occupancy_pct
    fired: Optional[str] = None
    if theoretical is not None and achieved is not None:
        high_theoretical = _check(evidence, t_name, theoretical, ">", LOW_ACHIEVED_THEORETICAL_ABOVE_PCT)
        low_achieved = _check(evidence, a_name, achieved, "<", LOW_ACHIEVED_FRACTION * theoretical)
        if high_theoretical and low_achieved:
            fired = "low-achieved-occupancy"
    if sol_bound == "latency" and theoretical is not None:
        if _check(evidence, t_name, theoretical, "<=", FEW_WARPS_THEORETICAL_AT_MOST_PCT) and fired is None:
            fired = "few-warps"
    return fired is not None, fired


def _unit_pct(m: KernelMetrics, unit: str) -> Optional[float]:
    """Throughput % of a memory unit, from the breakdown if present, else from the SOL-section metrics."""
    if m.memory_units_pct:
        return m.memory_units_pct.get(unit)
    return {"DRAM": m.dram_pct, "L1": m.l1_throughput_pct, "L2": m.l2_throughput_pct}.get(unit)


def _fmt(value: Optional[float]) -> str:
    """A percent value for a sentence."""
    return "n/a" if value is None else f"{value:.1f} %"


def _summary(m: KernelMetrics, branch: str, bound: str, unit: Optional[str], occupancy_rule: Optional[str],
             limiter: Optional[str]) -> str:
    """One sentence a kernel engineer would write about this verdict."""
    c, mem = _fmt(m.compute_sol_pct), _fmt(m.memory_sol_pct)
    stall = f"; top stall {m.top_stalls[0].reason} ({m.top_stalls[0].share_pct:.0f} % of stall cycles)" if m.top_stalls else ""
    if bound == "unknown":
        return "No verdict: the report lacks compute or memory SOL % (profile with --section SpeedOfLight)."
    if bound == "occupancy":
        limited = f", limited by {limiter}" if limiter else ""
        if occupancy_rule == "few-warps":
            return (f"Occupancy-bound: compute {c} and memory {mem} of peak are both under 60 % and a theoretical "
                    f"occupancy of {_fmt(m.theoretical_occupancy_pct)}{limited} leaves too few warps to hide "
                    f"latency{stall} (kernelpilot rule).")
        set_by = f" (itself set by {limiter})" if limiter else ""
        return (f"Occupancy-bound: compute {c} and memory {mem} are both under 60 % and achieved occupancy "
                f"{_fmt(m.achieved_occupancy_pct)} is under half the theoretical "
                f"{_fmt(m.theoretical_occupancy_pct)}{set_by}{stall} (the low-achieved-occupancy rule).")
    if bound == "small-grid":
        return (f"Small grid: {m.waves_per_sm:.2f} waves per SM leave SMs idle, so compute {c} and memory {mem} "
                f"stay under 60 % of peak ({_SOL_RULE}).")
    if bound == "latency":
        return (f"Latency-bound: compute {c} and memory {mem} of peak are both under 60 %, so warps wait more "
                f"than they work{stall} ({_SOL_RULE}).")
    if bound == "balanced":
        return (f"Balanced: compute {c} and memory {mem} of peak are within 10 points and under 80 %, so both "
                f"the math and the memory traffic must shrink to go faster ({_SOL_RULE}).")
    busiest = f", {unit} busiest at {_fmt(_unit_pct(m, unit))}" if unit else ""
    if branch == "high-throughput":
        if bound == "compute":
            return f"Compute-bound: SM throughput is at {c} of peak (memory {mem}), at or above 80 % ({_SOL_RULE})."
        return f"Memory-bound: memory throughput is at {mem} of peak (compute {c}){busiest}, at or above 80 % ({_SOL_RULE})."
    if bound == "compute":
        return f"Compute-heavy: compute {c} leads memory {mem} by 10 points or more, below the 80 % mark ({_SOL_RULE})."
    return f"Memory-heavy: memory {mem} leads compute {c} by 10 points or more{busiest}, below the 80 % mark ({_SOL_RULE})."


def _ordered_rules(rules: list[RuleResult]) -> list[RuleResult]:
    """SOLBottleneck first, then by estimated speedup (largest first, None last), stable otherwise."""
    return sorted(rules, key=lambda r: (r.identifier != "SOLBottleneck",
                                        -(r.estimated_speedup_pct if r.estimated_speedup_pct is not None else -1.0)))


def judge(m: KernelMetrics) -> Verdict:
    """Apply Nsight Compute's SOL rule and the occupancy rules to one kernel's metrics.

    Args:
        m: normalized metrics (percents of peak; waves per SM).

    Returns:
        The :class:`Verdict`. When compute or memory SOL % is missing, ``bound`` is "unknown" and ``rule``
        "ncu-sol:missing-metrics"; no error is raised.

    Rules: see the module docstring (Nsight Compute SOL rule and "low achieved occupancy", docs/measuring.md
    "Diagnosing"; the few-warps rule is kernelpilot's own).
    """
    evidence: list[Evidence] = []
    branch, bound = _sol(m, evidence)
    unit = _memory_unit(m, evidence) if bound == "memory" else None
    occupancy_bound, occupancy_rule = _occupancy(m, bound, evidence)
    rule = f"ncu-sol:{branch}"
    limiter = m.occupancy_limiter if occupancy_bound else None
    if occupancy_bound and bound == "latency":
        bound = "occupancy"
        rule += "+kernelpilot:few-warps" if occupancy_rule == "few-warps" else "+product:low-achieved-occupancy"
    return Verdict(
        rule=rule,
        bound=bound,
        memory_unit=unit,
        summary=_summary(m, branch, bound, unit, occupancy_rule, limiter),
        evidence=evidence,
        occupancy_bound=occupancy_bound,
        occupancy_limiter=limiter,
        ncu_rules=_ordered_rules(m.rules),
    )
