"""The bottleneck card (kernelpilot.profile.card): ncu cards of the H200 fixtures, light cards, the shipped schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import NCU_FIXTURE_NAMES
from kernelpilot.hardware.roofline import Roofline, compute_roofline
from kernelpilot.hardware.specs import SPECS_DIR, load_spec_file
from kernelpilot.profile.card import (
    BottleneckCard,
    card_from_metrics,
    card_json_schema,
    light_card,
    load_schema,
    schema_path,
)
from kernelpilot.profile.metrics import KernelMetrics
from kernelpilot.profile.patterns import PATTERN_IDS
from kernelpilot.profile.verdict import judge

try:  # jsonschema is a test-only dependency (not in pyproject): without it only the schema checks are skipped
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

NAMES = NCU_FIXTURE_NAMES


@pytest.fixture(scope="module")
def metrics(ncu_fixture_metrics) -> dict[str, KernelMetrics]:
    return ncu_fixture_metrics


@pytest.fixture(scope="module")
def cards(metrics: dict[str, KernelMetrics]) -> dict[str, BottleneckCard]:
    return {n: card_from_metrics(m) for n, m in metrics.items()}


def validate(card: BottleneckCard) -> dict[str, Any]:
    """The card's JSON, validated against the shipped schema."""
    data = json.loads(card.model_dump_json())
    if jsonschema is not None:
        jsonschema.validate(data, load_schema())
    return data


# --- ncu cards of the real reports -------------------------------------------------------------------------

EXPECTED = {
    # name: (class, rule, memory unit, fired patterns in card order, first three moves)
    "h200_add_fp32_memory_bound": ("memory", "ncu-sol:high-throughput", "DRAM",
                                   ["overall_memory_bound", "long_scoreboard", "tail_effect"],
                                   [("tile", "up"), ("group", "up"), ("stages", "up")]),
    "h200_matmul_bf16_4096": ("balanced", "ncu-sol:balanced", None, ["sync_overhead"],
                              [("warps", "down"), ("stages", "up"), ("group", "up")]),
    "h200_softmax_fp32_8192_v0": ("memory", "ncu-sol:memory-heavy", "DRAM",
                                  ["overall_memory_bound", "long_scoreboard", "sync_overhead"],
                                  [("tile", "up"), ("group", "up"), ("stages", "up")]),
    "h200_matmul_bf16_64x64x32_s2": ("memory", "ncu-sol:memory-heavy", "L2",
                                     ["overall_memory_bound", "long_scoreboard", "sync_overhead"],
                                     [("tile", "up"), ("group", "up"), ("stages", "up")]),
    "h200_matmul_bf16_128x64x32_s2": ("occupancy", "ncu-sol:latency+kernelpilot:few-warps", None,
                                      ["long_scoreboard"], [("stages", "up"), ("tile_k", "up"), ("tile", "down")]),
}


@pytest.mark.parametrize("name", NAMES)
def test_fixture_card(cards: dict[str, BottleneckCard], name: str) -> None:
    card = cards[name]
    class_, rule, unit, fired, moves = EXPECTED[name]
    assert (card.class_, card.rule, card.memory_unit) == (class_, rule, unit)
    assert card.fired_patterns == fired
    assert card.moves()[:3] == moves
    assert card.evidence_sources == ["ncu"] and card.light is False and card.light_reason is None
    assert card.schema_version == "1" and card.kind == "kernelpilot.bottleneck_card"
    assert card.device_name == "NVIDIA H200"
    assert [p.id for p in card.patterns] == list(PATTERN_IDS)
    assert all(p.status != "not_evaluated" for p in card.patterns)
    assert len(card.top_stalls) == 5 and card.top_stalls[0].share_pct > card.top_stalls[-1].share_pct
    assert card.ncu_rules[0].identifier == "SOLBottleneck" and card.ncu_rules[0].title
    assert any(r.estimated_speedup_pct for r in card.ncu_rules)
    assert card.evidence and all(e.metric for e in card.evidence)
    validate(card)


def test_add_is_memory_bound_with_no_tensor_core_complaint(cards: dict[str, BottleneckCard]) -> None:
    card = cards["h200_add_fp32_memory_bound"]
    assert card.pattern("overall_memory_bound").fired
    no_tc = card.pattern("no_tensor_cores")
    assert no_tc.status == "not_fired"  # no FMA-heavy compute: FMA pipe 2 %, far from 50 %
    assert no_tc.evidence[0].value == pytest.approx(2.09, abs=0.01) and no_tc.evidence[0].holds is False
    first = card.suggested_changes[0]
    assert first.patterns == ["overall_memory_bound", "tail_effect", "class:memory"]  # merged, one change


def test_tensor_core_gemm_is_balanced_and_uses_tensor_cores(cards: dict[str, BottleneckCard]) -> None:
    card = cards["h200_matmul_bf16_4096"]
    assert card.class_ == "balanced"
    tensor = next(e for e in card.pattern("no_tensor_cores").evidence if "tensor" in e.metric)
    assert tensor.value == pytest.approx(81.26, abs=0.01) and tensor.holds is False
    assert card.ncu_rules[0].title == "Balanced Throughput"
    tail = next(r for r in card.ncu_rules if r.identifier == "LaunchConfiguration")
    assert tail.title == "Tail Effect" and tail.estimated_speedup_pct == pytest.approx(25.0)
    assert not card.pattern("tail_effect").fired  # the last wave is 88 % full (PRODUCT.md: idle > 15 % fires)


def test_register_limited_matmul_is_occupancy_bound(cards: dict[str, BottleneckCard]) -> None:
    card = cards["h200_matmul_bf16_128x64x32_s2"]
    assert card.class_ == "occupancy" and card.occupancy_limiter == "registers"
    assert card.pattern("long_scoreboard").fired
    low = card.pattern("low_achieved_occupancy")
    assert low.status == "not_fired"  # theoretical 25 % is not > 50 %: the rule does not apply
    assert low.evidence[0].value == pytest.approx(25.0) and low.evidence[0].holds is False
    # long-scoreboard's stages up first (accepted on the device: 404 -> 353 us), then the register-limit moves
    assert card.suggested_changes[0].patterns == ["long_scoreboard"]
    assert ("tile", "down") in card.moves() and ("stages", "down") in card.moves()


def test_l2_heavy_matmul_grows_tiles_first(cards: dict[str, BottleneckCard]) -> None:
    card = cards["h200_matmul_bf16_64x64x32_s2"]
    assert card.memory_unit == "L2"
    assert card.suggested_changes[0].tunables[0].role == "tile"
    assert card.suggested_changes[0].patterns == ["overall_memory_bound", "class:memory"]


def test_softmax_short_scoreboard_is_not_called_bank_conflicts(cards: dict[str, BottleneckCard]) -> None:
    card = cards["h200_softmax_fp32_8192_v0"]
    bank = card.pattern("shared_bank_conflicts")
    assert bank.status == "not_fired"
    assert bank.evidence[0].holds is True  # ratio 6.4 > 2 ...
    assert bank.evidence[1].value == pytest.approx(1.4, abs=0.1) and bank.evidence[1].holds is False  # ... 1.4 %


def test_card_uses_the_given_verdict(metrics: dict[str, KernelMetrics]) -> None:
    m = metrics["h200_add_fp32_memory_bound"]
    verdict = judge(m)
    assert card_from_metrics(m, verdict).model_dump() == card_from_metrics(m).model_dump()


def test_card_without_sol_metrics_is_unknown() -> None:
    card = card_from_metrics(KernelMetrics(kernel_name="k"))
    assert card.class_ == "unknown" and card.rule == "ncu-sol:missing-metrics"
    assert card.fired_patterns == [] and card.suggested_changes == []
    assert all(p.status == "not_evaluated" for p in card.patterns)
    validate(card)


# --- JSON: the "class" key, round trip, schema ----------------------------------------------------------------


def test_json_uses_class_key_and_round_trips(cards: dict[str, BottleneckCard]) -> None:
    card = cards["h200_matmul_bf16_128x64x32_s2"]
    data = card.model_dump()
    assert data["class"] == "occupancy" and "class_" not in data
    assert json.loads(card.model_dump_json())["class"] == "occupancy"
    assert BottleneckCard.model_validate_json(card.model_dump_json()) == card
    assert BottleneckCard(**{**data, "class": "memory"}).class_ == "memory"


def test_shipped_schema_equals_generated_schema() -> None:
    """If this fails, regenerate: python -m kernelpilot.profile.card --write-schema"""
    assert schema_path().name == "bottleneck_card.v1.json"
    assert schema_path().is_file()
    assert load_schema() == card_json_schema()


def test_schema_rejects_bad_cards(cards: dict[str, BottleneckCard]) -> None:
    if jsonschema is None:
        pytest.skip("jsonschema is not installed")
    good = validate(cards["h200_add_fp32_memory_bound"])
    for key, value in (("class", "slow"), ("schema_version", "2"), ("kind", "card"), ("light", "no")):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, key: value}, load_schema())
    for key in ("class", "schema_version", "kind"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({k: v for k, v in good.items() if k != key}, load_schema())
    bad_source = {**good, "evidence_sources": ["ncu", "vibes"]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_source, load_schema())


def test_markdown_mentions_class_patterns_and_changes(cards: dict[str, BottleneckCard]) -> None:
    text = cards["h200_add_fp32_memory_bound"].to_markdown()
    assert "**memory**" in text and "overall memory-bound" in text and "tile up" in text and "ncu" in text


# --- light cards ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def h200():
    return load_spec_file(SPECS_DIR / "H200.md")


@pytest.fixture(scope="module")
def add_roofline(h200) -> Roofline:
    n = 1 << 24
    return compute_roofline(flops=n, bytes_moved=3 * 4 * n, compute_unit="fp32", spec=h200)


@pytest.fixture(scope="module")
def gemm_roofline(h200) -> Roofline:
    n = 4096
    return compute_roofline(flops=2 * n**3, bytes_moved=3 * 2 * n * n, compute_unit="bf16_tensor", spec=h200)


STATIC_OK = {"registers_per_thread": 32, "shared_mem_bytes": 0, "threads_per_block": 128, "occupancy_pct": 100.0,
             "limiter": "warps", "spills": 0, "instruction_mix": {"FADD": 8, "LDG.E.128": 2, "STG.E.128": 1}}


def test_light_memory_bound_at_40_pct_suggests_tile_up(add_roofline: Roofline) -> None:
    assert add_roofline.bound == "memory"
    timing_ns = add_roofline.floor_ns / 0.40
    card = light_card(timing_ns=timing_ns, roofline=add_roofline, static=STATIC_OK, device_name="NVIDIA H200",
                      kernel_name="add_k", reason="ncu not found")
    assert card.light is True and card.light_reason == "ncu not found"
    assert card.evidence_sources == ["timing", "roofline", "compile"] and "ncu" not in card.evidence_sources
    assert (card.class_, card.rule, card.memory_unit) == ("memory", "light:roofline-memory", "DRAM")
    pct = next(e for e in card.evidence if e.metric == "roofline.floor_ns / timing_ns")
    assert pct.value == pytest.approx(40.0)
    assert card.pattern("overall_memory_bound").fired
    assert card.moves()[0] == ("tile", "up")
    assert card.suggested_changes[0].patterns[0] == "overall_memory_bound"
    # what needs counters says so, with the reason
    stalls = card.pattern("long_scoreboard")
    assert stalls.status == "not_evaluated" and "ncu not found" in stalls.note
    assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in stalls.missing
    assert card.top_stalls == [] and card.ncu_rules == []
    assert "light profile" in card.summary and "40 %" in card.summary
    validate(card)


def test_light_spills_suggest_register_relief(add_roofline: Roofline) -> None:
    static = {**STATIC_OK, "spills": 24, "registers_per_thread": 255}
    card = light_card(timing_ns=add_roofline.floor_ns / 0.9, roofline=add_roofline, static=static,
                      device_name=None, kernel_name="k", reason="ERR_NVGPUCTRPERM")
    spill = card.pattern("register_spill")
    assert spill.fired and spill.note.startswith("light profile")
    assert {e.metric for e in spill.evidence} == {"static.spills", "static.instruction_mix LDL + STL",
                                                  "static.registers_per_thread"}
    assert card.fired_patterns[0] == "register_spill"
    assert card.moves()[:3] == [("tile", "down"), ("stages", "down"), ("warps", "down")]
    validate(card)


def test_light_local_memory_in_sass_is_a_spill(add_roofline: Roofline) -> None:
    static = {**STATIC_OK, "instruction_mix": {"FADD": 8, "LDL": 2, "STL": 2}}
    card = light_card(timing_ns=None, roofline=add_roofline, static=static, device_name=None, kernel_name="k",
                      reason="no ncu")
    assert card.pattern("register_spill").fired


def test_light_no_spill_is_not_fired(add_roofline: Roofline) -> None:
    card = light_card(timing_ns=None, roofline=add_roofline, static=STATIC_OK, device_name=None, kernel_name="k",
                      reason="no ncu")
    assert card.pattern("register_spill").status == "not_fired"
    assert card.evidence_sources == ["roofline", "compile"]
    assert card.class_ == "memory"  # the roofline's bound, no timing to say how far
    assert card.pattern("overall_memory_bound").status == "not_evaluated"


def test_light_ffma_only_tensor_kernel_suggests_tensor_cores(gemm_roofline: Roofline) -> None:
    static = {**STATIC_OK, "registers_per_thread": 128, "occupancy_pct": 50.0,
              "instruction_mix": {"FFMA": 4096, "LDG.E.128": 64, "LDS.128": 256, "HGMMA.64x128x16.F32.BF16": 0}}
    card = light_card(timing_ns=gemm_roofline.floor_ns * 20, roofline=gemm_roofline, static=static,
                      device_name="NVIDIA H200", kernel_name="mm", reason="ncu not found")
    no_tc = card.pattern("no_tensor_cores")
    assert no_tc.fired and "static.instruction_mix" in no_tc.metrics
    first = card.suggested_changes[0]
    assert first.code_change and "tl.dot" in first.action and first.patterns == ["no_tensor_cores"]
    validate(card)


def test_light_tensor_kernel_with_hgmma_is_fine(gemm_roofline: Roofline) -> None:
    static = {**STATIC_OK, "instruction_mix": {"FFMA": 16, "HGMMA.64x128x16.F32.BF16": 512}}
    card = light_card(timing_ns=gemm_roofline.floor_ns * 1.2, roofline=gemm_roofline, static=static,
                      device_name=None, kernel_name="mm", reason="ncu not found")
    assert card.class_ == "compute" and card.pattern("no_tensor_cores").status == "not_fired"


def test_light_ffma_in_a_memory_bound_fp32_kernel_is_not_a_tensor_core_miss(add_roofline: Roofline) -> None:
    static = {**STATIC_OK, "instruction_mix": {"FFMA": 64, "MUFU.EX2": 16}}
    card = light_card(timing_ns=add_roofline.floor_ns * 2, roofline=add_roofline, static=static, device_name=None,
                      kernel_name="softmax", reason="ncu not found")
    assert card.pattern("no_tensor_cores").status == "not_fired"


def test_light_few_warps_far_from_roofline_is_occupancy(gemm_roofline: Roofline) -> None:
    static = {**STATIC_OK, "occupancy_pct": 12.5, "limiter": "registers", "registers_per_thread": 232}
    card = light_card(timing_ns=gemm_roofline.floor_ns * 4, roofline=gemm_roofline, static=static,
                      device_name=None, kernel_name="mm", reason="no ncu")
    assert (card.class_, card.rule, card.occupancy_limiter) == ("occupancy", "light:roofline+compile:few-warps",
                                                               "registers")
    assert ("tile", "down") in card.moves()
    validate(card)


def test_light_without_roofline_is_unknown() -> None:
    card = light_card(timing_ns=1000.0, roofline=None, static=STATIC_OK, device_name=None, kernel_name="k",
                      reason="no ncu")
    assert card.class_ == "unknown" and card.rule == "light:no-roofline"
    assert card.evidence_sources == ["timing", "compile"]
    assert card.pattern("register_spill").status == "not_fired"
    validate(card)
    empty = light_card(timing_ns=None, roofline=None, static=None, device_name=None, kernel_name="k", reason="r")
    assert empty.evidence_sources == [] and all(p.status == "not_evaluated" for p in empty.patterns)


def test_light_rejects_impossible_or_bad_timing(add_roofline: Roofline) -> None:
    with pytest.raises(ValueError, match="below the roofline floor"):
        light_card(timing_ns=add_roofline.floor_ns / 2, roofline=add_roofline, static=None, device_name=None,
                   kernel_name="k", reason="r")
    for bad in (0.0, -5.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="positive finite"):
            light_card(timing_ns=bad, roofline=add_roofline, static=None, device_name=None, kernel_name="k",
                       reason="r")


def test_a_cuda_kernels_card_suggests_changes_in_cuda_words(metrics: dict[str, KernelMetrics]):
    """Seen on an H100: the SGEMM series' cards told a CUDA author to "use tl.dot" and move "stages up"."""
    from pathlib import Path

    from kernelpilot.engine.evidence import _with_card
    from kernelpilot.profile.card import card_from_metrics
    from kernelpilot.profile.card_suggest import for_backend
    from kernelpilot.records.evaluation import Evaluation

    card = {"suggested_changes": [
        {"action": "use tl.dot with bf16/fp16 (or tf32) inputs and tile dims >= 16 (code change)",
         "why": "the matrix math runs as FFMA; tl.dot on bf16/fp16 operands uses the tensor cores"},
        {"action": "stages up (default move of the balanced class)", "why": "hide latency"},
        {"action": "larger L2 grouping", "why": "reuse in L2"}]}
    cuda = for_backend(card, "cuda")
    text = " ".join(c["action"] + " " + c["why"] for c in cuda["suggested_changes"])
    assert "tl." not in text and "stages up" not in text
    assert "tensor-core MMA" in text and "deeper software pipeline" in text and "swizzle" in text
    assert for_backend(card, "triton") == card  # Triton's words stay
    assert card["suggested_changes"][0]["action"].startswith("use tl.dot")  # the input is not modified
    ev = Evaluation(config={}, status="ok", duration_ns=1.0)
    for m in metrics.values():
        as_cu = _with_card(ev, card_from_metrics(m), Path("k.cu")).card
        as_py = _with_card(ev, card_from_metrics(m), Path("k.py")).card
        assert as_cu["class"] == as_py["class"] and len(as_cu["suggested_changes"]) == len(as_py["suggested_changes"])
        assert all("tl." not in c["action"] + c["why"] for c in as_cu["suggested_changes"])
