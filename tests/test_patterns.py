"""The numeric patterns of PRODUCT.md (kernelpilot.profile.patterns) and the KernelMetrics fields they read.

Fixtures: the five H200 `--set full` reports in tests/fixtures/ncu (see tests/test_device_fixtures.py and
/work/shared/fixtures/ncu/README.md for what each kernel is).
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import NCU_FIXTURE_NAMES
from kernelpilot.profile.metrics import KernelMetrics, RuleResult
from kernelpilot.profile.patterns import (
    PATTERN_IDS,
    PATTERNS,
    PatternResult,
    evaluate_patterns,
    get_pattern,
)

NAMES = NCU_FIXTURE_NAMES


@pytest.fixture(scope="module")
def reports(ncu_fixture_metrics) -> dict[str, KernelMetrics]:
    return ncu_fixture_metrics


def by_id(results: list[PatternResult]) -> dict[str, PatternResult]:
    return {r.id: r for r in results}


# --- the catalogue -----------------------------------------------------------------------------------------


def test_fourteen_patterns_each_declared_fully() -> None:
    assert len(PATTERNS) == 14 and len(set(PATTERN_IDS)) == 14
    assert set(PATTERN_IDS) == {
        "small_grid", "tail_effect", "uncoalesced_loads", "sparse_writes", "long_scoreboard", "no_tensor_cores",
        "atomics_contention", "shared_bank_conflicts", "sync_overhead", "low_achieved_occupancy",
        "register_spill", "unintended_fp64", "warp_divergence", "overall_memory_bound"}
    assert len({p.priority for p in PATTERNS}) == 14
    for p in PATTERNS:
        assert p.title and p.rule and "docs/measuring.md" in p.source and p.metrics, p.id
        assert p.changes, p.id
        for change in p.changes:
            assert change.why and change.action
            assert change.code_change == (not change.tunables), (p.id, change.action)
            if change.code_change:
                assert "code change" in change.action, (p.id, change.action)


def test_pattern_changes_match_the_brief() -> None:
    def steps(pid: str) -> list[tuple[str, str]]:
        return [(s.role, s.direction) for c in get_pattern(pid).changes for s in c.tunables]

    assert steps("small_grid") == [("tile", "down")]
    assert any(c.code_change and "split-K" in c.action for c in get_pattern("small_grid").changes)
    assert steps("register_spill") == [("tile", "down"), ("stages", "down"), ("warps", "down")]
    assert steps("long_scoreboard") == [("stages", "up"), ("tile_k", "up")]
    assert steps("low_achieved_occupancy") == [("warps", "up"), ("tile", "down")]
    assert steps("overall_memory_bound") == [("tile", "up"), ("group", "up")]
    assert set(steps("tail_effect")) == {("tile", "down"), ("tile", "up")}
    no_tc = get_pattern("no_tensor_cores").changes
    assert len(no_tc) == 1 and no_tc[0].code_change and "tl.dot" in no_tc[0].action and ">= 16" in no_tc[0].action
    assert all(c.code_change for c in get_pattern("uncoalesced_loads").changes)


def test_get_pattern_unknown_id() -> None:
    with pytest.raises(KeyError, match="unknown pattern"):
        get_pattern("slow")


# --- new KernelMetrics fields read from the real reports ---------------------------------------------------


def test_pattern_inputs_from_the_add_report(reports: dict[str, KernelMetrics]) -> None:
    m = reports["h200_add_fp32_memory_bound"]
    assert m.global_load_sectors_per_request == pytest.approx(16.0)  # 4194304 sectors / 262144 requests (LDG.128)
    assert m.global_load_bytes_per_sector == 32.0 and m.global_store_bytes_per_sector == 32.0
    assert m.global_load_inst_count == 262144 and m.global_store_inst_count == 131072
    assert m.global_sectors_theoretical == m.global_sectors_ideal == 6291456
    assert m.fma_pipe_pct == pytest.approx(2.09, abs=0.01) and m.tensor_pipe_pct == 0.0 and m.fp64_pipe_pct == 0.0
    assert m.global_atomic_sectors == 0 and m.global_atomic_requests == 0
    assert m.shared_load_bank_conflicts == 0 and m.shared_store_bank_conflicts == 0
    assert m.active_threads_per_warp_inst == 32.0
    assert m.long_scoreboard_stall_ratio == pytest.approx(154.97, abs=0.01)
    assert m.short_scoreboard_stall_ratio == pytest.approx(12.89, abs=0.01)
    assert m.lg_throttle_stall_ratio == pytest.approx(4.89, abs=0.01) and m.barrier_stall_ratio == 0.0
    assert m.stall_ratios["long_scoreboard"] == m.long_scoreboard_stall_ratio and "selected" not in m.stall_ratios
    assert m.sources["global_load_sectors_per_request"] == (
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    assert m.sources["global_store_bytes_per_sector"] == "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"
    assert m.sources["fma_pipe_pct"] == "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
    assert m.sources["tensor_pipe_pct"] == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
    assert m.sources["fp64_pipe_pct"] == "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"
    assert m.sources["global_atomic_sectors"] == (
        "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum + l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum")
    assert m.sources["active_threads_per_warp_inst"] == "smsp__thread_inst_executed_per_inst_executed.ratio"
    assert m.sources["barrier_stall_ratio"] == "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"


def test_tensor_core_gemm_uses_the_tensor_pipe(reports: dict[str, KernelMetrics]) -> None:
    m = reports["h200_matmul_bf16_4096"]
    assert m.tensor_pipe_pct == pytest.approx(81.26, abs=0.01)  # HGMMA counts in the tensor pipe on sm_90
    assert m.tensor_gmma_inst_pct is not None and m.tensor_gmma_inst_pct > 0
    assert m.fma_pipe_pct is not None and m.fma_pipe_pct < 10
    assert m.global_load_inst_count == 0  # all global loads are LDGSTS (cp.async): no LDG bytes/sector to judge
    assert m.global_load_sectors_per_request == pytest.approx(16.0)
    assert m.barrier_stall_ratio == pytest.approx(5.18, abs=0.01)


# --- each fixture: which patterns fire -----------------------------------------------------------------------

FIRED = {
    # streaming add: 82 % DRAM, warps wait on loads; 7.76 waves leave the last wave 24 % idle (> 15 %)
    "h200_add_fp32_memory_bound": {"overall_memory_bound", "long_scoreboard", "tail_effect"},
    # tensor-core GEMM: balanced; barrier stalls 5.2 per instruction; 3.88 waves -> last wave 12 % idle
    "h200_matmul_bf16_4096": {"sync_overhead"},
    "h200_softmax_fp32_8192_v0": {"overall_memory_bound", "long_scoreboard", "sync_overhead"},
    "h200_matmul_bf16_64x64x32_s2": {"overall_memory_bound", "long_scoreboard", "sync_overhead"},
    # 25 % theoretical occupancy (registers): low-achieved-occupancy needs theoretical > 50 %, so it stays quiet
    "h200_matmul_bf16_128x64x32_s2": {"long_scoreboard"},
}


@pytest.mark.parametrize("name", NAMES)
def test_fixture_fired_patterns(reports: dict[str, KernelMetrics], name: str) -> None:
    results = evaluate_patterns(reports[name])
    assert [r.id for r in results] == list(PATTERN_IDS)
    assert {r.id for r in results if r.fired} == FIRED[name]
    # full reports: every pattern could be decided
    assert all(r.status != "not_evaluated" for r in results), [r.note for r in results if r.status == "not_evaluated"]
    for r in results:
        assert r.evidence, r.id
        assert r.fired == (r.status == "fired")
        assert bool(r.suggested_changes) == r.fired


def test_vector_loads_are_not_uncoalesced(reports: dict[str, KernelMetrics]) -> None:
    """16 sectors per request (> 5) but every sector fully used: 16-byte loads, not a strided pattern."""
    for name in NAMES:
        r = by_id(evaluate_patterns(reports[name]))["uncoalesced_loads"]
        assert r.status == "not_fired"
        assert r.evidence[0].holds is True and r.evidence[0].value >= 8  # the PRODUCT.md sectors-per-request clause


def test_short_scoreboard_without_bank_conflicts_does_not_fire(reports: dict[str, KernelMetrics]) -> None:
    r = by_id(evaluate_patterns(reports["h200_add_fp32_memory_bound"]))["shared_bank_conflicts"]
    assert r.status == "not_fired" and r.evidence[0].holds is True  # ratio 12.9 > 2, but no shared memory at all
    assert "MUFU" in r.note


def test_ncu_tail_rule_is_shown_not_deciding(reports: dict[str, KernelMetrics]) -> None:
    r = by_id(evaluate_patterns(reports["h200_matmul_bf16_4096"]))["tail_effect"]
    assert r.status == "not_fired"
    idle = next(e for e in r.evidence if e.metric.startswith("1 - frac("))
    assert idle.value == pytest.approx((1 - (1024 / 264 - 3)) * 100)  # 232 of 264 slots busy in the last wave
    ncu_row = next(e for e in r.evidence if "LaunchConfiguration" in e.metric)
    assert ncu_row.value == pytest.approx(25.0) and ncu_row.threshold is None


# --- thresholds: fires just past the threshold, not at it ----------------------------------------------------


def healthy(**overrides: Any) -> KernelMetrics:
    """Synthetic metrics with every pattern input present and nothing firing."""
    values: dict[str, Any] = dict(
        kernel_name="k", compute_sol_pct=50.0, memory_sol_pct=50.0, waves_per_sm=8.0, grid_size=1056, sm_count=132,
        theoretical_occupancy_pct=100.0, achieved_occupancy_pct=90.0, registers_per_thread=64,
        local_load_inst_count=0.0, local_store_inst_count=0.0,
        global_load_sectors_per_request=4.0, global_load_inst_count=100.0, global_load_bytes_per_sector=32.0,
        global_store_inst_count=100.0, global_store_bytes_per_sector=32.0,
        global_sectors_theoretical=1000.0, global_sectors_ideal=1000.0,
        fma_pipe_pct=10.0, tensor_pipe_pct=50.0, fp64_pipe_pct=0.0,
        global_atomic_sectors=0.0, global_atomic_requests=0.0, lg_throttle_stall_ratio=0.1,
        short_scoreboard_stall_ratio=0.5, shared_load_bank_conflicts=0.0, shared_store_bank_conflicts=0.0,
        shared_load_wavefronts=500.0, shared_store_wavefronts=500.0,
        active_threads_per_warp_inst=32.0, long_scoreboard_stall_ratio=1.0, barrier_stall_ratio=0.5,
    )
    values.update(overrides)
    return KernelMetrics(**values)


def test_healthy_baseline_fires_nothing() -> None:
    results = evaluate_patterns(healthy())
    assert [r.id for r in results if r.status != "not_fired"] == []


BOUNDARIES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (pattern, at the threshold -> not fired, just past it -> fired)
    ("small_grid", dict(waves_per_sm=0.5), dict(waves_per_sm=0.49)),
    ("small_grid", dict(grid_size=132), dict(grid_size=131)),
    ("tail_effect", dict(waves_per_sm=1.0), dict(waves_per_sm=1.01)),
    ("tail_effect", dict(waves_per_sm=2.85), dict(waves_per_sm=2.849)),  # idle share 15 % vs 15.1 %
    ("uncoalesced_loads", dict(global_load_sectors_per_request=5.0, global_load_bytes_per_sector=4.0),
     dict(global_load_sectors_per_request=5.01, global_load_bytes_per_sector=4.0)),
    ("uncoalesced_loads", dict(global_load_sectors_per_request=32.0, global_load_bytes_per_sector=25.6),
     dict(global_load_sectors_per_request=32.0, global_load_bytes_per_sector=25.5)),
    ("uncoalesced_loads", dict(global_load_sectors_per_request=16.0, global_load_inst_count=0.0,
                               global_sectors_theoretical=1250.0),
     dict(global_load_sectors_per_request=16.0, global_load_inst_count=0.0, global_sectors_theoretical=1251.0)),
    ("sparse_writes", dict(global_store_bytes_per_sector=16.0), dict(global_store_bytes_per_sector=15.9)),
    ("long_scoreboard", dict(long_scoreboard_stall_ratio=3.0), dict(long_scoreboard_stall_ratio=3.01)),
    ("no_tensor_cores", dict(fma_pipe_pct=50.0, tensor_pipe_pct=0.0), dict(fma_pipe_pct=50.1, tensor_pipe_pct=0.0)),
    ("no_tensor_cores", dict(fma_pipe_pct=90.0, tensor_pipe_pct=1.0), dict(fma_pipe_pct=90.0, tensor_pipe_pct=0.99)),
    ("atomics_contention", dict(global_atomic_sectors=0.0, lg_throttle_stall_ratio=5.0),
     dict(global_atomic_sectors=1.0, lg_throttle_stall_ratio=5.0)),
    ("atomics_contention", dict(global_atomic_sectors=64.0, lg_throttle_stall_ratio=1.0),
     dict(global_atomic_sectors=64.0, lg_throttle_stall_ratio=1.01)),
    ("shared_bank_conflicts", dict(short_scoreboard_stall_ratio=2.0, shared_load_bank_conflicts=500.0),
     dict(short_scoreboard_stall_ratio=2.01, shared_load_bank_conflicts=500.0)),
    ("shared_bank_conflicts", dict(short_scoreboard_stall_ratio=6.0, shared_load_bank_conflicts=100.0),  # 10 %
     dict(short_scoreboard_stall_ratio=6.0, shared_load_bank_conflicts=101.0)),
    ("sync_overhead", dict(barrier_stall_ratio=2.0), dict(barrier_stall_ratio=2.01)),
    ("low_achieved_occupancy", dict(theoretical_occupancy_pct=50.0, achieved_occupancy_pct=10.0),
     dict(theoretical_occupancy_pct=50.1, achieved_occupancy_pct=10.0)),
    ("low_achieved_occupancy", dict(theoretical_occupancy_pct=60.0, achieved_occupancy_pct=30.0),
     dict(theoretical_occupancy_pct=60.0, achieved_occupancy_pct=29.9)),
    ("register_spill", dict(local_store_inst_count=0.0, registers_per_thread=200),
     dict(local_store_inst_count=1.0, registers_per_thread=200)),  # local traffic decides, not registers
    ("register_spill", dict(local_store_inst_count=0.0), dict(local_store_inst_count=1.0)),
    ("unintended_fp64", dict(fp64_pipe_pct=1.0), dict(fp64_pipe_pct=1.01)),
    ("warp_divergence", dict(active_threads_per_warp_inst=24.0), dict(active_threads_per_warp_inst=23.9)),
    ("overall_memory_bound", dict(memory_sol_pct=45.0, compute_sol_pct=30.0),
     dict(memory_sol_pct=45.1, compute_sol_pct=30.0)),
    ("overall_memory_bound", dict(memory_sol_pct=30.0, compute_sol_pct=10.0),
     dict(memory_sol_pct=30.1, compute_sol_pct=10.0)),
]


@pytest.mark.parametrize("pattern_id, at, past", BOUNDARIES,
                         ids=[f"{b[0]}-{i}" for i, b in enumerate(BOUNDARIES)])
def test_threshold_boundary(pattern_id: str, at: dict[str, Any], past: dict[str, Any]) -> None:
    pattern = get_pattern(pattern_id)
    at_result, past_result = pattern.run(healthy(**at)), pattern.run(healthy(**past))
    assert at_result.status == "not_fired", at_result.evidence
    assert past_result.status == "fired", past_result.evidence
    assert past_result.suggested_changes == list(pattern.changes)
    assert any(e.holds for e in past_result.evidence)


def test_every_pattern_has_a_boundary_test() -> None:
    assert {b[0] for b in BOUNDARIES} == set(PATTERN_IDS)


def test_sparse_writes_needs_stores() -> None:
    r = get_pattern("sparse_writes").run(healthy(global_store_inst_count=0.0, global_store_bytes_per_sector=0.0))
    assert r.status == "not_fired" and "no SASS global stores" in r.note


def test_bytes_per_sector_percent_variant_is_converted() -> None:
    from kernelpilot.profile.metrics import metrics_from_action

    class _M:
        def __init__(self, v: float, u: str) -> None:
            self.v, self.u = v, u

        def value(self) -> float:
            return self.v

        def unit(self) -> str:
            return self.u

    class _A:
        metrics = {"smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct": _M(25.0, "%")}

        def name(self) -> str:
            return "k"

        def metric_names(self) -> tuple[str, ...]:
            return tuple(self.metrics)

        def __getitem__(self, key: str) -> _M:
            return self.metrics[key]

    m = metrics_from_action(_A())
    assert m.global_store_bytes_per_sector == pytest.approx(8.0)  # 25 % of a 32-byte sector
    assert m.sources["global_store_bytes_per_sector"].endswith("_op_st.pct")


# --- missing inputs: not evaluated, never fired --------------------------------------------------------------


def test_no_metrics_nothing_evaluated() -> None:
    results = evaluate_patterns(KernelMetrics(kernel_name="k"))
    assert len(results) == 14
    for r in results:
        assert r.status == "not_evaluated" and not r.fired and r.suggested_changes == [], r.id
        assert r.note.startswith("not evaluated (missing metric ") and r.missing, r.id


@pytest.mark.parametrize("pattern_id, field, metric", [
    ("long_scoreboard", "long_scoreboard_stall_ratio", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"),
    ("sync_overhead", "barrier_stall_ratio", "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"),
    ("unintended_fp64", "fp64_pipe_pct", "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"),
    ("warp_divergence", "active_threads_per_warp_inst", "smsp__thread_inst_executed_per_inst_executed.ratio"),
    ("sparse_writes", "global_store_bytes_per_sector", "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"),
    ("shared_bank_conflicts", "shared_store_bank_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
])
def test_one_missing_input_is_named(pattern_id: str, field: str, metric: str) -> None:
    past = {"long_scoreboard": {}, "sync_overhead": {}, "unintended_fp64": {}, "warp_divergence": {},
            "sparse_writes": {}, "shared_bank_conflicts": {"short_scoreboard_stall_ratio": 9.0}}[pattern_id]
    r = get_pattern(pattern_id).run(healthy(**past, **{field: None}))
    assert r.status == "not_evaluated" and not r.fired
    assert metric in r.missing and metric in r.note


def test_three_valued_logic() -> None:
    # AND: a present, false clause decides even when the other input is missing.
    r = get_pattern("no_tensor_cores").run(healthy(tensor_pipe_pct=None))
    assert r.status == "not_fired" and r.missing
    # AND: a present, true clause with the other missing cannot decide.
    r = get_pattern("no_tensor_cores").run(healthy(fma_pipe_pct=90.0, tensor_pipe_pct=None))
    assert r.status == "not_evaluated"
    # OR: registers > 128 proves pressure even without the local-memory counters ...
    r = get_pattern("register_spill").run(healthy(registers_per_thread=200, local_load_inst_count=None,
                                                  local_store_inst_count=None))
    assert r.status == "fired"
    # ... but 64 registers without them decides nothing.
    r = get_pattern("register_spill").run(healthy(local_load_inst_count=None, local_store_inst_count=None))
    assert r.status == "not_evaluated"


def test_tail_effect_falls_back_to_ncu_rule() -> None:
    tail = RuleResult(identifier="LaunchConfiguration", section="LaunchStats", title="Tail Effect", message="...",
                      type="optimization", estimated_speedup_pct=25.0, speedup_type="global")
    fired = get_pattern("tail_effect").run(healthy(waves_per_sm=None, rules=[tail]))
    assert fired.status == "fired" and "Nsight Compute's own tail-effect rule" in fired.note
    missing = get_pattern("tail_effect").run(healthy(waves_per_sm=None))
    assert missing.status == "not_evaluated" and "launch__waves_per_multiprocessor" in missing.missing


def test_register_count_decides_only_without_local_counters() -> None:
    no_counts = dict(local_load_inst_count=None, local_store_inst_count=None)
    assert get_pattern("register_spill").run(healthy(registers_per_thread=128, **no_counts)).status == "not_evaluated"
    assert get_pattern("register_spill").run(healthy(registers_per_thread=129, **no_counts)).status == "fired"
    clean = dict(local_load_inst_count=0.0, local_store_inst_count=0.0)
    assert get_pattern("register_spill").run(healthy(registers_per_thread=196, **clean)).status == "not_fired"
