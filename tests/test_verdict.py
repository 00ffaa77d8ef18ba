"""Verdicts: Nsight Compute's SOL rule and the occupancy rules (kernelpilot.profile.verdict)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernelpilot.profile.metrics import KernelMetrics, RuleResult, read_report
from kernelpilot.profile.verdict import Evidence, Verdict, judge

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
WAVES = "launch__waves_per_multiprocessor"


def km(compute: float | None, memory: float | None, **fields: Any) -> KernelMetrics:
    """Synthetic metrics: plenty of waves and healthy occupancy unless a test says otherwise."""
    values: dict[str, Any] = dict(
        kernel_name="k", compute_sol_pct=compute, memory_sol_pct=memory, waves_per_sm=8.0,
        theoretical_occupancy_pct=100.0, achieved_occupancy_pct=90.0, occupancy_limiter="warps",
    )
    values.update(fields)
    return KernelMetrics(**values)


def find(verdict: Verdict, metric: str, comparison: str) -> Evidence:
    """The one evidence row for ``metric`` compared with ``comparison``."""
    rows = [e for e in verdict.evidence if e.metric == metric and e.comparison == comparison]
    assert len(rows) == 1, (metric, comparison, verdict.evidence)
    return rows[0]


# --- the real reports ---------------------------------------------------------------------------------------


def test_matmul_fixture_is_balanced_like_ncu() -> None:
    m = read_report(FIXTURES / "h200_matmul_bf16_4096.ncu-rep")[0]
    v = judge(m)
    assert v.bound == "balanced" and v.rule == "ncu-sol:balanced"
    assert v.memory_unit is None
    assert v.ncu_rules[0].identifier == "SOLBottleneck" and v.ncu_rules[0].title == "Balanced Throughput"
    # theoretical 25 % is not > 50 %, and the SOL rule did not say latency: not occupancy-bound.
    assert v.occupancy_bound is False and v.occupancy_limiter is None
    gap = find(v, f"|{COMPUTE} - {MEMORY}|", ">=")
    assert gap.value == pytest.approx(78.69 - 74.80, abs=0.01) and gap.holds is False
    assert "78.7 %" in v.summary and "74.8 %" in v.summary


def test_add_fixture_is_memory_bound_on_dram() -> None:
    m = read_report(FIXTURES / "h200_add_fp32_memory_bound.ncu-rep")[0]
    v = judge(m)
    assert v.bound == "memory" and v.rule == "ncu-sol:high-throughput"
    assert v.memory_unit == "DRAM"
    assert find(v, MEMORY, ">=").holds is True
    assert find(v, COMPUTE, ">=").holds is False
    assert v.occupancy_bound is False
    assert "DRAM" in v.summary and "81.9 %" in v.summary
    # ncu's own rule names DRAM too.
    assert "DRAM" in next(r for r in v.ncu_rules if r.identifier == "SOLBottleneck").message


# --- each branch of the SOL rule ------------------------------------------------------------------------


def test_latency() -> None:
    v = judge(km(20.0, 30.0))
    assert (v.bound, v.rule) == ("latency", "ncu-sol:latency")
    assert find(v, COMPUTE, "<").holds and find(v, MEMORY, "<").holds
    assert find(v, WAVES, "<").holds is False
    assert v.occupancy_bound is False


def test_small_grid() -> None:
    v = judge(km(10.0, 5.0, waves_per_sm=0.5))
    assert (v.bound, v.rule) == ("small-grid", "ncu-sol:small-grid")
    waves = find(v, WAVES, "<")
    assert (waves.value, waves.threshold, waves.unit, waves.holds) == (0.5, 1.0, "waves", True)
    assert "0.50 waves" in v.summary


def test_compute_bound_at_80() -> None:
    v = judge(km(85.0, 40.0))
    assert (v.bound, v.rule, v.memory_unit) == ("compute", "ncu-sol:high-throughput", None)
    assert find(v, COMPUTE, ">=").holds and not find(v, MEMORY, ">=").holds


def test_both_high_takes_the_higher_and_names_memory_unit() -> None:
    v = judge(km(82.0, 90.0, dram_pct=50.0, l1_throughput_pct=30.0, l2_throughput_pct=90.0))
    assert (v.bound, v.rule) == ("memory", "ncu-sol:high-throughput")
    assert v.memory_unit == "L2"  # no breakdown: busiest of the SOL-section DRAM/L1/L2 values
    v = judge(km(91.0, 90.0))
    assert v.bound == "compute"


def test_memory_heavy_by_gap_names_unit_from_breakdown() -> None:
    v = judge(km(40.0, 65.0, memory_units_pct={"DRAM": 20.0, "L1": 65.0, "L2": 50.0}, dram_pct=20.0,
                 l2_throughput_pct=70.0))
    assert (v.bound, v.rule) == ("memory", "ncu-sol:memory-heavy")
    assert v.memory_unit == "L1"  # the breakdown wins over the SOL-section values
    busiest = [e for e in v.evidence if e.comparison.endswith("busiest of DRAM/L1/L2")]
    assert [e.holds for e in busiest] == [False, True, False]


def test_compute_heavy_by_gap() -> None:
    v = judge(km(75.0, 55.0))
    assert (v.bound, v.rule) == ("compute", "ncu-sol:compute-heavy")
    assert v.memory_unit is None


def test_balanced() -> None:
    v = judge(km(70.0, 65.0))
    assert (v.bound, v.rule) == ("balanced", "ncu-sol:balanced")
    # Every SOL comparison is listed and none held.
    sol_rows = [e for e in v.evidence if e.metric in (COMPUTE, MEMORY) or e.metric.startswith("|")]
    assert len(sol_rows) == 5 and not any(e.holds for e in sol_rows)


def test_missing_sol_metrics() -> None:
    v = judge(km(None, 40.0))
    assert (v.bound, v.rule) == ("unknown", "ncu-sol:missing-metrics")


# --- boundaries -------------------------------------------------------------------------------------------


def test_exactly_60_is_not_latency() -> None:
    v = judge(km(60.0, 59.9))
    assert v.bound == "balanced"  # 60 is not < 60; gap 0.1 < 10
    assert find(v, COMPUTE, "<").holds is False and find(v, MEMORY, "<").holds is True
    assert judge(km(59.99, 59.99)).bound == "latency"


def test_exactly_80_is_high_throughput() -> None:
    v = judge(km(80.0, 75.0))
    assert (v.bound, v.rule) == ("compute", "ncu-sol:high-throughput")
    assert judge(km(79.99, 75.0)).bound == "balanced"


def test_gap_exactly_10_is_heavy() -> None:
    assert judge(km(70.0, 60.0)).rule == "ncu-sol:compute-heavy"
    assert judge(km(60.0, 70.0)).rule == "ncu-sol:memory-heavy"
    assert judge(km(69.99, 60.0)).rule == "ncu-sol:balanced"


def test_waves_exactly_1_is_not_small_grid() -> None:
    assert judge(km(10.0, 10.0, waves_per_sm=1.0)).bound == "latency"


# --- occupancy --------------------------------------------------------------------------------------------


def test_occupancy_bound_by_few_warps_with_limiter() -> None:
    v = judge(km(20.0, 30.0, theoretical_occupancy_pct=25.0, achieved_occupancy_pct=24.0,
                 occupancy_limiter="registers"))
    assert v.bound == "occupancy" and v.occupancy_bound is True
    assert v.occupancy_limiter == "registers"
    assert v.rule == "ncu-sol:latency+kernelpilot:few-warps"
    few = find(v, THEORETICAL, "<=")
    assert (few.threshold, few.holds) == (25.0, True)
    assert "registers" in v.summary


def test_occupancy_bound_by_low_achieved() -> None:
    v = judge(km(20.0, 30.0, theoretical_occupancy_pct=100.0, achieved_occupancy_pct=40.0))
    assert v.bound == "occupancy" and v.rule == "ncu-sol:latency+product:low-achieved-occupancy"
    achieved = find(v, ACHIEVED, "<")
    assert (achieved.value, achieved.threshold, achieved.holds) == (40.0, 50.0, True)


def test_low_achieved_occupancy_does_not_override_a_throughput_verdict() -> None:
    v = judge(km(20.0, 85.0, theoretical_occupancy_pct=100.0, achieved_occupancy_pct=30.0,
                 occupancy_limiter="shared_mem"))
    assert v.bound == "memory" and v.occupancy_bound is True and v.occupancy_limiter == "shared_mem"


def test_occupancy_boundaries() -> None:
    # theoretical exactly 50 % is not > 50 %: the low-achieved rule needs more than half the SM's warps.
    v = judge(km(20.0, 30.0, theoretical_occupancy_pct=50.0, achieved_occupancy_pct=10.0))
    assert v.bound == "latency" and v.occupancy_bound is False
    # achieved exactly half of theoretical does not count as low.
    v = judge(km(20.0, 30.0, theoretical_occupancy_pct=80.0, achieved_occupancy_pct=40.0))
    assert v.bound == "latency" and v.occupancy_bound is False
    # theoretical 25.01 % is above the few-warps limit.
    assert judge(km(20.0, 30.0, theoretical_occupancy_pct=25.01, achieved_occupancy_pct=25.0)).bound == "latency"


def test_few_warps_needs_a_latency_verdict() -> None:
    v = judge(km(70.0, 65.0, theoretical_occupancy_pct=18.75, achieved_occupancy_pct=18.0))
    assert v.bound == "balanced" and v.occupancy_bound is False


def test_ncu_rules_order_and_markdown() -> None:
    rules = [
        RuleResult(identifier="CPIStall", section="WarpStateStats", title="Barrier Stalls", message="m",
                   type="optimization", estimated_speedup_pct=10.0),
        RuleResult(identifier="LaunchConfiguration", section="LaunchStats", title="Tail Effect", message="m",
                   type="optimization", estimated_speedup_pct=25.0),
        RuleResult(identifier="SOLBottleneck", section="SpeedOfLight", title="Latency Issue", message="m",
                   type="warning"),
    ]
    v = judge(km(20.0, 30.0, rules=rules))
    assert [r.identifier for r in v.ncu_rules] == ["SOLBottleneck", "LaunchConfiguration", "CPIStall"]
    text = v.to_markdown()
    assert text.startswith("**latency** (ncu-sol:latency)")
    assert f"| `{COMPUTE}` | 20 % | < 60 % | yes |" in text
    assert "Tail Effect (est. speedup 25.0 %)" in text
