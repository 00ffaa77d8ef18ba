"""``kernelpilot workload ranges|capture|buckets`` (issue 26): workload files written from ranges and from a real
PyTorch program's calls, and the buckets tune --workload would search, through the CLI with --json."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kernelpilot.cli import app

REPO = Path(__file__).resolve().parents[1]
LAYER_NORM = REPO / "src" / "kernelpilot" / "examples" / "layer_norm.py"
runner = CliRunner()


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_ranges_write_a_workload_that_tune_reads_back_and_buckets_by_powers_of_two(tmp_path: Path) -> None:
    f = tmp_path / "w.json"
    r = _json(["workload", "ranges", str(LAYER_NORM), "M=32:512", "--out", str(f)])
    ms = [e["shape"]["M"] for e in json.loads(f.read_text())]
    assert ms == [32, 48, 64, 96, 128, 192, 256, 384, 512] and r["shapes"] == 9
    assert all(e["shape"]["N"] == 4096 for e in r["workload"])  # the other keys from SHAPE
    b = _json(["workload", "buckets", str(LAYER_NORM), str(f)])
    assert b["keys"] == ["M"]
    assert [x["ranges"]["M"] for x in b["buckets"]] == [[32, 63], [64, 127], [128, 255], [256, 511], [512, 1023]]
    assert [len(x["shapes"]) for x in b["buckets"]] == [2, 2, 2, 2, 1]


def test_capture_counts_a_programs_calls_to_the_reference_op(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch\n"
        "def main():\n"
        "    ln = torch.nn.LayerNorm(256)\n"
        "    for tokens in (8, 8, 8, 24):\n"
        "        ln(torch.randn(tokens, 256))\n"
        "    torch.relu(torch.randn(4, 4))\n")
    f = tmp_path / "captured.json"
    r = _json(["workload", "capture", str(LAYER_NORM), str(prog), "--out", str(f)])
    assert r["op"] == "aten::layer_norm" and r["calls"] == 4
    got = {e["shape"]["M"]: e["weight"] for e in json.loads(f.read_text())}
    assert got == {8: 3.0, 24: 1.0}
    assert all(e["shape"]["N"] == 256 for e in r["workload"])


def test_a_program_without_the_op_is_an_error_naming_the_ops_it_called(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("import torch\ndef main():\n    torch.relu(torch.randn(4, 4))\n")
    res = runner.invoke(app, ["workload", "capture", str(LAYER_NORM), str(prog), "--json"])
    assert res.exit_code != 0
    err = json.loads(res.stdout)
    assert err["error"] == "WorkloadError" and "aten::relu" in err["message"]


def test_a_program_without_the_function_named_is_a_typed_error(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("def run():\n    pass\n")
    res = runner.invoke(app, ["workload", "capture", str(LAYER_NORM), str(prog), "--json"])
    assert res.exit_code != 0
    err = json.loads(res.stdout)
    assert err["error"] == "WorkloadError" and "`main`" in err["message"] and "--function" in err["hint"]
