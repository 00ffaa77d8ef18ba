"""Derived spec values: ridge points and 90 % targets from cited values, measured beside datasheet, citations."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kernelpilot.cli import app
from kernelpilot.errors import SpecError
from kernelpilot.hardware.derived import cite_metric, compare_ceilings, derived_points
from kernelpilot.hardware.specs import find_spec


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "kp_home"))


def test_ridge_point_and_targets_from_datasheet_values():
    spec = find_spec("MI300X")  # nothing measured: datasheet values only
    points = {p.compute_unit: p for p in derived_points(spec)}
    bf16 = points["bf16_tensor"]
    peak, bw = spec.get("peak_bf16_tensor_dense_tflops").value, spec.get("dram_bandwidth_gbps").value
    assert bf16.ridge_point_flop_per_byte == pytest.approx(peak * 1e12 / (bw * 1e9))
    assert bf16.target_peak == pytest.approx(0.9 * peak) and bf16.target_bandwidth_gbps == pytest.approx(0.9 * bw)
    assert bf16.source == "datasheet" and bf16.citations[0].startswith("peak_bf16_tensor_dense_tflops: ")
    # a unit whose peak the file lacks has no point (MI300X quotes no INT8 dense? then it is simply absent)
    assert set(points) <= {"fp32", "fp64", "fp64_tensor", "tf32_tensor", "bf16_tensor", "fp16_tensor",
                           "fp8_tensor", "int8_tensor"}
    with pytest.raises(ValueError):
        derived_points(spec, target_fraction=1.5)


def test_measured_ceiling_replaces_datasheet_and_ratio_is_reported():
    spec = find_spec("H100-SXM")  # the packaged measured/H100-SXM.md (H100 device run, 2026-11-22)
    comparisons = {c.measured.metric: c for c in compare_ceilings(spec)}
    copy = comparisons["measured_copy_bandwidth_gbps"]
    assert copy.datasheet.metric == "dram_bandwidth_gbps"
    assert copy.ratio == pytest.approx(copy.measured.value / copy.datasheet.value) and 0 < copy.ratio < 1
    bf16 = {p.compute_unit: p for p in derived_points(spec)}["bf16_tensor"]
    assert bf16.peak.is_measured and bf16.bandwidth.is_measured and bf16.source == "measured"


def test_cite_lists_every_source_and_flags_conflicts():
    c = cite_metric("dram_bandwidth_gbps", "B200")
    assert c.conflict and len(c.citations) == len(c.sources) >= 2
    assert c.value.value == 7700 and c.citations[0].startswith("dram_bandwidth_gbps: 7700 GB/s <- hardware/specs/B200.md:")
    h200 = cite_metric("dram_bandwidth_gbps", "NVIDIA H200")
    assert not h200.conflict and h200.measured is not None and h200.measured.metric == "measured_copy_bandwidth_gbps"
    with pytest.raises(SpecError, match="no value for 'peak_fp4_tensor_dense_tflops'"):
        cite_metric("peak_fp4_tensor_dense_tflops", "V100-SXM2")
    with pytest.raises(SpecError, match="unknown GPU"):
        cite_metric("sm_count", "Radeon 9700")


def test_cli_show_and_cite_json():
    runner = CliRunner()
    shown = runner.invoke(app, ["specs", "show", "B200", "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert "dram_bandwidth_gbps" in data["conflicts"] and data["derived"]
    cited = runner.invoke(app, ["specs", "cite", "peak_bf16_tensor_dense_tflops", "--gpu", "MI300X", "--json"])
    assert cited.exit_code == 0 and json.loads(cited.output)["value"]["value"] > 0
    bad = runner.invoke(app, ["specs", "cite", "sm_count", "--gpu", "nonesuch", "--json"])
    assert bad.exit_code == 1 and "unknown GPU" in json.loads(bad.output)["message"]


def test_cli_show_names_the_datasheet_metric_of_each_measured_row_and_keeps_source_keys(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    shown = CliRunner().invoke(app, ["specs", "show", "H100-SXM"])
    assert shown.exit_code == 0, shown.output
    text = shown.output
    # source keys in brackets are printed, not eaten as rich markup
    assert "[h100-datasheet]" in text and "[hopper-tuning]" in text
    # the measured bf16 GEMM appears once per datasheet metric it stands in for, each row naming that metric
    rows = [line for line in text.splitlines() if "measured_bf16_gemm_tflops" in line]
    assert len(rows) == 2
    assert any("peak_bf16_tensor_dense_tflops" in r for r in rows) and any("peak_fp16_tensor_dense_tflops" in r for r in rows)
    spec = find_spec("H100-SXM")
    gemm, peak = spec.measured["measured_bf16_gemm_tflops"], spec.values["peak_bf16_tensor_dense_tflops"]
    for row in rows:  # datasheet value, measured value and ratio on the row
        assert "989.5 TFLOP/s" in row and f"{gemm.value_text} TFLOP/s" in row and f"{gemm.value / peak.value:.3f}" in row


def test_cli_list_and_show_of_a_package_name_its_single_device(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    runner = CliRunner()
    listed = json.loads(runner.invoke(app, ["specs", "list", "--json"]).output)
    by_name = {s["name"]: s for s in listed["specs"]}
    assert by_name["MI250X"]["per_device"] == "MI250X-GCD" and by_name["MI250X"]["devices_per_package"] == 2
    assert by_name["Max-1550"]["per_device"] == "Max-1550-stack" and by_name["H200"]["per_device"] is None
    shown = runner.invoke(app, ["specs", "show", "Max-1550-stack", "--json"])
    assert shown.exit_code == 0, shown.output
    spec = json.loads(shown.output)["spec"]
    assert spec["package_of"] == "Max-1550" and "tdp_w" not in spec["values"]
    cited = runner.invoke(app, ["specs", "cite", "dram_bandwidth_gbps", "--gpu", "MI250X-GCD"])
    assert cited.exit_code == 0 and "dram_bandwidth_gbps: 1638.4 GB/s <- hardware/specs/MI250X.md:" in cited.output
    assert "package value 3276.8 GB/s / 2" in cited.output
