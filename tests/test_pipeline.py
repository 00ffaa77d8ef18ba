"""Software-pipelining analysis: the ratio and shared-memory arithmetic by hand, the stage sweep and occupancy
cliff on hand-built cases, and the SASS main-loop check on matmul compiled for sm_90 on the CPU."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES
from kernelpilot.errors import ContractError
from kernelpilot.profile.pipeline import (
    MainLoopCheck,
    PipelineReport,
    analyze_pipelines,
    check_main_loop,
    classify_ratio,
    compute_load_ratio,
    default_pipeline_configs,
    occupancy_cliffs,
    recommend,
    stage_bytes,
    stage_sweep,
    tile_tunables,
)
from kernelpilot.profile.static import parse_sass

MATMUL = EXAMPLES / "matmul.py"


def test_ratio_formula_by_hand():
    # 64x64x32 bf16: FLOPs 2*64*64*32 = 262144; bytes (64*32 + 32*64) * 2 = 8192; 262144 / 8192 = 32.
    assert compute_load_ratio(64, 64, 32, 2) == 32.0
    # BK cancels: 64x64x128 bf16: 2*64*64*128 = 1048576 / ((8192 + 8192) * 2 = 32768) = 32.
    assert compute_load_ratio(64, 64, 128, 2) == 32.0
    # 128x256x64 bf16: 2*128*256*64 = 4194304 / ((8192 + 16384) * 2 = 49152) = 85.33...
    assert compute_load_ratio(128, 256, 64, 2) == pytest.approx(4194304 / 49152)
    # 16x16x32 fp32: 2*16*16*32 = 16384 / ((512 + 512) * 4 = 4096) = 4 -> below 5.
    assert compute_load_ratio(16, 16, 32, 4) == 4.0
    # 32x32x32 fp32: 65536 / ((1024 + 1024) * 4 = 8192) = 8 -> between 5 and 20.
    assert compute_load_ratio(32, 32, 32, 4) == 8.0
    assert [classify_ratio(r)[0] for r in (4.0, 5.0, 8.0, 20.0, 32.0)] == ["low", "middle", "middle", "middle", "high"]
    assert stage_bytes(64, 64, 32, 2) == 8192 and stage_bytes(128, 128, 64, 2) == 32768
    with pytest.raises(ValueError):
        compute_load_ratio(0, 64, 32, 2)


def test_largest_stages_and_cliff_for_a_hand_built_case():
    # 128x128x64 bf16: 32768 B per stage; 128 registers x 256 threads (8 warps).
    # Limit 232448 B per block: 7 stages = 229376 fit, 8 = 262144 do not -> largest S = 7.
    # Registers: 128 * 32 = 4096 per warp; 16384 // 4096 = 4 warps per sub-partition -> 16 warps -> 2 blocks.
    # Shared at S stages: S*32768 + 1024 reserved; 233472 // that: S=1 -> 6, S=2 -> 3, S=3 -> 2, S=4 -> 1.
    # Blocks = min(2 by registers, shared): S=1..3 -> 2, S=4..7 -> 1: the cliff is at S = 4.
    rows = stage_sweep(32768, 128, 256, (9, 0))
    fitting = [r for r in rows if r.fits]
    assert max(r.stages for r in fitting) == 7 and not rows[-1].fits and rows[-1].stages == 8
    assert [r.blocks_per_sm for r in fitting] == [2, 2, 2, 1, 1, 1, 1]
    assert occupancy_cliffs(rows) == [4]
    assert fitting[3].limiter == "shared_mem" and fitting[0].limiter == "registers"
    # Ratio 64 (> 20): keep the depth; at S=5 (past the cliff) advise going back to 3, the deepest with 2 blocks.
    advice = recommend(64.0, 3, rows, candidates=[2, 3, 4, 5])
    assert advice["band"] == "high" and advice["recommended_num_stages"] == 3 and advice["next_cliff_stages"] == 4
    assert advice["stages_safe"] == 3 and advice["max_stages_under_limit"] == 7 and not advice["past_cliff"]
    advice = recommend(64.0, 5, rows, candidates=[2, 3, 4, 5])
    assert advice["past_cliff"] and advice["recommended_num_stages"] == 3 and 3 in advice["stages_to_measure"]
    # Ratio 4 (< 5): deepen up to the cliff, not past it.
    advice = recommend(4.0, 2, rows, candidates=[2, 3, 4, 5])
    assert advice["band"] == "low" and advice["recommended_num_stages"] == 3 and advice["stages_to_measure"] == [2, 3]


def test_stage_sweep_with_the_compiled_buffer_offset():
    # A kernel that allocates S - 1 buffers (Triton's mma.sync path): 8192 B per stage, S=2 -> 8192 B.
    rows = stage_sweep(8192, 64, 128, (9, 0), buffer_offset=-1)
    assert rows[1].shared_mem_bytes == 8192 and rows[0].shared_mem_bytes == 0
    # 232448 // 8192 = 28 buffers fit -> S = 29 with the offset.
    assert max(r.stages for r in rows if r.fits) == 29


def test_tile_tunables_by_role():
    assert tile_tunables({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_stages": 2}) == {
        "M": "BLOCK_M", "N": "BLOCK_N", "K": "BLOCK_K"}
    assert tile_tunables({"BLOCK_SIZE_M": 1, "BLOCK_SIZE_N": 1, "BLOCK_SIZE_K": 1})["K"] == "BLOCK_SIZE_K"
    with pytest.raises(ContractError, match="BLOCK_M/BLOCK_K"):
        tile_tunables({"BLOCK_N": 256, "ROWS_PER_PROGRAM": 1, "num_warps": 4})


LOOP_WITH_BARRIER = """
        /*0000*/                   DEPBAR.LE SB0, 0x0 ;
        /*0010*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0020*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8].tnspB, R24, gsb0 ;
        /*0030*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0050*/                   LDGSTS.E.BYPASS.128 [R21], desc[UR16][R18.64], P0 ;
        /*0060*/                   LDGDEPBAR ;
        /*0070*/               @P3 BRA 0x0 ;
        /*0080*/                   EXIT ;
"""

LOOP_WITHOUT_BARRIER = """
        /*0000*/                   LDGSTS.E.BYPASS.128 [R21], desc[UR16][R18.64], P0 ;
        /*0010*/                   HMMA.16816.F32.BF16 R100, R40, R24, R100 ;
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0030*/               @P1 BRA 0x0 ;
"""

LOOP_FFMA_ONLY = """
        /*0000*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0010*/                   FFMA R5, R4, R4, R5 ;
        /*0020*/               @P1 BRA 0x0 ;
"""


def test_main_loop_check_on_hand_written_loops():
    c = check_main_loop(parse_sass(LOOP_WITH_BARRIER))
    assert (c.found, c.start_address, c.end_address) == (True, 0x0, 0x70)
    assert c.async_copies == {"LDGSTS": 1} and c.mma == {"HGMMA": 1}
    assert c.barrier_addresses == [0x10, 0x40] and c.barriers_between == [0x40]
    assert not c.meets_product_rule and c.overlapped  # one wgmma group stays in flight across the barrier
    assert c.async_copy_waits == [0] and c.mma_waits == [1]
    c = check_main_loop(parse_sass(LOOP_WITHOUT_BARRIER))
    assert c.meets_product_rule and c.overlapped and c.barriers_between == [] and c.adjacent_pairs_without_barrier == 1
    c = check_main_loop(parse_sass(LOOP_FFMA_ONLY))
    assert c.found and not c.mma and not c.async_copies and c.ffma == 1 and c.sync_global_loads == 1
    assert "no tensor cores" in c.verdict and not c.overlapped
    assert not check_main_loop(parse_sass("        /*0000*/   EXIT ;")).found


@pytest.fixture(scope="module")
def matmul_reports() -> list[PipelineReport]:
    configs = [{}, {"num_warps": 2}]
    reports = analyze_pipelines(MATMUL, configs, arch="sm_90", max_workers=2)
    assert all(isinstance(r, PipelineReport) for r in reports), reports
    return reports  # type: ignore[return-value]


def test_matmul_default_pipeline_report(matmul_reports):
    r = matmul_reports[0]
    assert (r.block_m, r.block_n, r.block_k, r.bytes_per_element, r.operand_dtype) == (64, 64, 32, 2, "bfloat16")
    assert r.compute_load_ratio == 32.0 and r.rule.startswith("compute/load ratio 32 > 20")
    # Model: 2 stages x 8192 B = 16384 B, which is what Triton allocated.
    assert r.shared_model_bytes == r.compiled_shared_bytes == 16384 and r.shared_matches_model
    assert r.max_stages_under_limit == 232448 // 8192 == 28
    # Cliff: 8 blocks/SM (registers) at 1-3 stages; at S=4, 4*8192 + 1024 = 33792 -> 233472 // 33792 = 6 blocks.
    assert [s.blocks_per_sm for s in r.stages[:4]] == [8, 8, 8, 6] and r.next_cliff_stages == 4
    assert r.stages_safe == 3 and r.recommended_num_stages == 2


def test_sass_main_loop_of_the_compiled_matmul(matmul_reports):
    wgmma, mma_sync = (r.main_loop for r in matmul_reports)
    assert isinstance(wgmma, MainLoopCheck) and wgmma.found
    # 4 warps, bf16 on sm_90: wgmma (HGMMA) fed by cp.async (LDGSTS) in the same loop.
    assert wgmma.mma.get("HGMMA", 0) > 0 and wgmma.async_copies.get("LDGSTS", 0) > 0
    # Triton puts a BAR.SYNC between the wgmma wait and the next stage's copies, leaving one wgmma group in flight.
    assert wgmma.barriers_between and not wgmma.meets_product_rule and wgmma.overlapped
    assert wgmma.mma_waits and max(wgmma.mma_waits) >= 1
    # 2 warps: no warpgroup, so mma.sync (HMMA) interleaved with the copies, with no barrier between neighbours.
    assert mma_sync.mma.get("HMMA", 0) > 0 and mma_sync.async_copies.get("LDGSTS", 0) > 0
    assert mma_sync.meets_product_rule and mma_sync.adjacent_pairs_without_barrier > 0


def test_default_pipeline_configs_vary_stages_and_block_k():
    configs = default_pipeline_configs(MATMUL)
    assert configs[0] == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 2,
                          "TMA": 0}
    assert {c["num_stages"] for c in configs} == {2, 3, 4, 5} and {c["BLOCK_K"] for c in configs} == {32, 64, 128}
    assert len(configs) == 6
    with pytest.raises(ContractError):
        default_pipeline_configs(EXAMPLES / "softmax.py")


def test_cli_pipeline_rejects_an_untiled_kernel():
    import json

    import typer
    from typer.testing import CliRunner

    from kernelpilot.cli.static import register

    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["pipeline", str(EXAMPLES / "softmax.py"), "--json"])
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["error"] == "ContractError" and "BLOCK_M" in data["message"]


def test_high_ratio_still_measures_one_more_stage_under_the_cliff():
    """The H200 matmul 128x64x32 (ratio 2·128·64·32 / ((128·32 + 32·64)·2) = 42.7 FLOP/B, 120 registers, 128 threads)
    gained 1.14x from 2 to 3 stages; the advice keeps 2 but asks for 3 to be measured."""
    ratio = compute_load_ratio(128, 64, 32, 2)
    assert ratio == pytest.approx(42.67, abs=0.01)
    rows = stage_sweep((128 * 32 + 32 * 64) * 2, 120, 128, (9, 0))
    advice = recommend(ratio, 2, rows, candidates=[2, 3, 4, 5])
    assert advice["band"] == "high" and advice["recommended_num_stages"] == 2
    assert advice["stages_to_measure"] == [2, 3]
