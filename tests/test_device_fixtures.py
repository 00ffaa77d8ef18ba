"""Reports captured by kernelpilot itself on an H200 (2026-11-22, ncu 2025.3.1, Triton 3.6): verdict and next move.

h200_softmax_fp32_8192_v0: examples/softmax.py at 8192×8192 fp32, DEFAULT_CONFIG (BLOCK_N 256, 4 warps).
h200_matmul_bf16_64x64x32_s2: examples/matmul.py at 4096³ bf16, DEFAULT_CONFIG (64×64×32, 4 warps, 2 stages).
h200_matmul_bf16_128x64x32_s2: the same with BLOCK_M 128 (the loop's v1).
"""

from __future__ import annotations


import pytest

from conftest import FIXTURES
from kernelpilot.profile.card import card_from_metrics
from kernelpilot.profile.metrics import main_kernel, read_report
from kernelpilot.profile.verdict import judge
from kernelpilot.search.guided import propose_moves

MATMUL_TUNABLES = {"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256], "BLOCK_K": [32, 64, 128],
                   "GROUP_M": [1, 8], "num_warps": [2, 4, 8], "num_stages": [2, 3, 4, 5]}


def load(name):
    m = main_kernel(read_report(FIXTURES / "ncu" / f"{name}.ncu-rep"))
    return m, judge(m)


@pytest.fixture(scope="module")
def reports():
    return {n: load(n) for n in ("h200_softmax_fp32_8192_v0", "h200_matmul_bf16_64x64x32_s2",
                                 "h200_matmul_bf16_128x64x32_s2")}


def test_softmax_baseline_is_memory_bound(reports):
    m, v = reports["h200_softmax_fp32_8192_v0"]
    assert "softmax" in m.kernel_name and m.grid_size == 8192
    assert v.bound == "memory" and m.memory_sol_pct > m.compute_sol_pct


def test_matmul_baseline_is_memory_heavy_on_l2_and_grows_tiles(reports):
    m, v = reports["h200_matmul_bf16_64x64x32_s2"]
    assert m.registers_per_thread == 64 and m.block_size == 128
    assert v.bound == "memory" and v.memory_unit == "L2" and m.dram_pct < 20
    start = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 2}
    move = propose_moves(start, MATMUL_TUNABLES, [], card=card_from_metrics(m, v))[0]
    assert "overall_memory_bound" in move.rule and (move.tunable, move.new) == ("BLOCK_M", 128)


def test_matmul_128_is_occupancy_limited_but_long_scoreboard_drives_the_move(reports):
    m, v = reports["h200_matmul_bf16_128x64x32_s2"]
    assert m.registers_per_thread == 120 and m.theoretical_occupancy_pct == pytest.approx(25.0)
    assert v.bound == "occupancy" and v.occupancy_limiter == "registers"
    assert m.top_stalls[0].reason == "long_scoreboard" and m.top_stalls[0].ratio > 3
    config = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 2}
    move = propose_moves(config, MATMUL_TUNABLES, [], card=card_from_metrics(m, v))[0]
    # on the device this move (v2) was accepted: 404 µs -> 353 µs
    assert (move.tunable, move.new) == ("num_stages", 3) and "long_scoreboard" in move.rule
    assert "long_scoreboard" in move.expected_metric


# Six cases captured for issue 3 by scripts/issue3-device.sh (H200, 2026-11-22): the card's class, the verdict rule it
# follows and the EXACT set of patterns that fire (every other of the 14 patterns must be evaluated and not fire).
# Why each fires, from the reports' numbers:
#   stream copy: memory 86 % vs compute 8.7 % (overall_memory_bound), long-scoreboard ratio 126 (> 3).
#   bf16 tensor-core GEMM: nothing; 196 registers but no local loads/stores, so register_spill stays silent.
#   small grid (16 blocks of 132 SMs, 0.008 waves): small_grid; achieved 6.2 % of a 100 % theoretical occupancy
#     (low_achieved_occupancy); long-scoreboard 35.5; and sparse_writes from its 16 one-float stores (4 B per sector).
#   register-limited kernel (148 registers, 18.75 % theoretical): only long_scoreboard (82); the class comes from
#     the few-warps rule, and low_achieved_occupancy needs a theoretical occupancy above 50 %.
#   strided gather: 32 sectors per request and 4 B used per sector (uncoalesced_loads), memory 59 % > 1.5 x compute
#     (overall_memory_bound), long-scoreboard 288; short-scoreboard 55 and LG-throttle 557 alone do not fire
#     shared_bank_conflicts (no bank conflicts) or atomics_contention (no atomics).
#   fp32 FMA GEMM: FMA pipe 67 %, tensor pipe 0.004 % (no_tensor_cores).
CASES = [
    ("h200_stream_copy_fp32", "memory", "ncu-sol:high-throughput", {"long_scoreboard", "overall_memory_bound"}),
    ("h200_gemm_bf16_tc_compute", "compute", "ncu-sol:high-throughput", set()),
    ("h200_small_grid_latency", "small-grid", "ncu-sol:small-grid",
     {"small_grid", "low_achieved_occupancy", "long_scoreboard", "sparse_writes"}),
    ("h200_occupancy_registers", "occupancy", "ncu-sol:latency+kernelpilot:few-warps", {"long_scoreboard"}),
    ("h200_strided_uncoalesced", "latency", "ncu-sol:latency",
     {"uncoalesced_loads", "overall_memory_bound", "long_scoreboard"}),
    ("h200_gemm_fp32_fma_only", "balanced", "ncu-sol:balanced", {"no_tensor_cores"}),
]
#: The 14 numeric patterns of PRODUCT.md "Diagnosing", as the card names them.
PATTERN_IDS = {"small_grid", "tail_effect", "uncoalesced_loads", "sparse_writes", "long_scoreboard", "no_tensor_cores",
               "atomics_contention", "shared_bank_conflicts", "sync_overhead", "low_achieved_occupancy",
               "register_spill", "unintended_fp64", "warp_divergence", "overall_memory_bound"}


@pytest.mark.parametrize("name,cls,rule,fires", CASES, ids=[c[0] for c in CASES])
def test_issue3_fixture_cards(name, cls, rule, fires):
    from kernelpilot.profile.card import card_from_metrics

    m, v = load(name)
    card = card_from_metrics(m, v)
    assert (card.class_, card.rule) == (cls, rule)
    assert set(card.fired_patterns) == fires, card.fired_patterns
    assert len(card.fired_patterns) == len(fires)  # no pattern listed twice
    assert {p.id for p in card.patterns} == PATTERN_IDS
    for p in card.patterns:
        assert p.status == ("fired" if p.id in fires else "not_fired"), (p.id, p.status, p.evidence)
        assert p.fired == (p.id in fires)
    assert card.evidence_sources == ["ncu"] and not card.light


def test_occupancy_fixture_is_limited_by_registers():
    m, v = load("h200_occupancy_registers")
    assert v.occupancy_limiter == "registers" and m.registers_per_thread == 148
    assert m.theoretical_occupancy_pct == pytest.approx(18.75)


def test_fma_only_gemm_card_suggests_tensor_cores_first():
    from kernelpilot.profile.card import card_from_metrics

    m, v = load("h200_gemm_fp32_fma_only")
    first = card_from_metrics(m, v).suggested_changes[0]
    assert "no_tensor_cores" in first.patterns and first.code_change
