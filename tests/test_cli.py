"""The CLI: --json prints one object, failures exit non-zero with the problem and a hint, no GPU needed."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import EXAMPLES, FIXTURES
from kernelpilot.cli import app

runner = CliRunner()


def run_json(*args):
    result = runner.invoke(app, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_profile_reads_a_saved_report_without_gpu():
    code, data = run_json("profile", "--report", str(FIXTURES / "ncu" / "h200_add_fp32_memory_bound.ncu-rep"))
    assert code == 0
    assert data["verdict"]["bound"] == "memory" and data["main"]["kernel_name"] == "add_k"
    assert abs(data["main"]["duration_ns"] - 46.1e3) < 0.1e3


def test_profile_of_a_missing_report_fails_clearly(tmp_path):
    code, data = run_json("profile", "--report", str(tmp_path / "none.ncu-rep"))
    assert code == 1 and data["error"] == "ReportError" and "none.ncu-rep" in data["message"]


def test_roofline_for_a_named_gpu_without_gpu():
    code, data = run_json("roofline", str(EXAMPLES / "matmul.py"), "--gpu", "H100-SXM")
    assert code == 0
    r = data["roofline"]
    assert r["flops"] == 2 * 4096**3 and r["bound"] == "compute"
    assert data["shape"]["M"] == 4096  # the GPU shape, not CPU_SHAPE
    assert all("<-" in c and ".md:" in c for c in r["citations"])


def test_roofline_unknown_gpu_is_an_error_naming_the_closest_and_how_to_add_one():
    code, data = run_json("roofline", str(EXAMPLES / "matmul.py"), "--gpu", "H2000")
    assert code == 1 and data["error"] == "SpecError"
    assert "H2000" in data["message"] and "H200" in data["message"] + data["hint"]
    assert "hardware/specs" in data["hint"] or "spec file" in data["hint"]


def test_check_exits_one_on_a_wrong_kernel(write_kernel):
    code, data = run_json("check", str(write_kernel("out.copy_(x * y)")))
    assert code == 1 and data["passed"] is False and "FAIL" in data["summary"]
    code, data = run_json("check", str(write_kernel()))
    assert code == 0 and data["passed"] is True


def test_contract_error_exit_and_hint(write_kernel):
    path = write_kernel(source="SHAPE = {}\n")
    code, data = run_json("check", str(path))
    assert code == 1 and data["error"] == "ContractError" and data["hint"]


def test_bench_interpreted_is_labelled(write_kernel):
    code, data = run_json("bench", str(write_kernel()), "--config", "BLOCK=128")
    assert code == 0 and data["timing"]["is_measurement"] is False and data["config"]["BLOCK"] == 128
    assert data["pct_of_roofline"] is None


def test_specs_list_and_show():
    code, data = run_json("specs", "list")
    assert code == 0 and {"H100-SXM", "H100-PCIe", "H200"} <= {s["name"] for s in data["specs"]}
    code, data = run_json("specs", "show", "NVIDIA H200")
    assert code == 0 and data["spec"]["values"]["sm_count"]["value"] == 132


def test_report_on_a_non_run_folder(tmp_path):
    code, data = run_json("report", str(tmp_path))
    assert code == 1 and data["error"] == "RunFolderError"


def test_inspect_compiles_for_sm90_without_gpu():
    code, data = run_json("inspect", str(EXAMPLES / "vector_add.py"), "--config", "BLOCK_SIZE=1024",
                          "--shape", "N=65536")
    assert code == 0, data
    assert data["arch"] == "sm_90" and data["registers_per_thread"] > 0 and data["threads_per_block"] == 128
    assert data["occupancy"]["occupancy_pct"] > 0
