"""Every user error is ``error:``/``hint:`` with a non-zero exit, and with ``--json`` one object (issue 12): bad
options, a folder given as kernel file, an ``--out`` that cannot be created, a bad cache file among good ones, a
truncated Nsight Compute report; and a cached timeout is tried again under a larger time limit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EXAMPLES, FIXTURES
from kernelpilot import api
from kernelpilot.cli import app
from kernelpilot.errors import OptionError, ReportError

runner = CliRunner()
VECTOR_ADD = str(EXAMPLES / "vector_add.py")


def _json(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args, names", [
    (["check", VECTOR_ADD, "--seeds", "0"], "--seeds 0"),
    (["check", VECTOR_ADD, "--timeout-s", "-1"], "--timeout-s -1"),
    (["bench", VECTOR_ADD, "--timeout-s", "0"], "--timeout-s 0"),
    (["check", VECTOR_ADD, "--shape", "N=abc"], "--shape N=abc"),
    (["optimize", VECTOR_ADD, "--iterations", "-1"], "--iterations -1"),
    (["optimize", VECTOR_ADD, "--timeout-s", "-5"], "--timeout-s -5"),
    (["optimize", VECTOR_ADD, "--budget-s", "-5"], "--budget-s -5"),
    (["optimize", VECTOR_ADD, "--shape", "N=abc"], "--shape N=abc"),
    (["tune", VECTOR_ADD, "--budget-evals", "-1"], "--budget-evals -1"),
    (["tune", VECTOR_ADD, "--timeout-s", "-1"], "--timeout-s -1"),
    (["inspect", VECTOR_ADD, "--arch", "sm_999"], "--arch sm_999"),
    (["inspect", VECTOR_ADD, "--arch", "hopper"], "--arch 'hopper'"),
])
def test_a_bad_option_is_a_usage_error_naming_it(args: list[str], names: str, tmp_path: Path) -> None:
    code, obj = _json(*args, *(["--out", str(tmp_path / "o")] if args[0] == "optimize" else []))
    assert code == 2, obj
    assert obj["error"] == "OptionError" and names in obj["message"] and obj["hint"]
    assert not (tmp_path / "o").exists()  # refused before anything was written


@pytest.mark.parametrize("args", [["check", VECTOR_ADD, "--seeds", "0"], ["inspect", VECTOR_ADD, "--arch", "sm_999"],
                                  ["tune", VECTOR_ADD, "--timeout-s", "-1"]])
def test_a_bad_option_prints_error_and_hint(args: list[str]) -> None:
    human = runner.invoke(app, args)
    assert human.exit_code == 2
    assert "error:" in human.output and "hint:" in human.output and "Traceback" not in human.output


def test_unknown_arch_lists_the_known_ones() -> None:
    with pytest.raises(OptionError) as info:
        api.inspect(VECTOR_ADD, arch="sm_999")
    assert "sm_90" in info.value.hint and "sm_80" in info.value.hint


def test_a_shape_value_of_the_wrong_type_is_not_blamed_on_setup() -> None:
    with pytest.raises(OptionError) as info:
        api.roofline(VECTOR_ADD, gpu="H100-SXM", shape={"N": "abc"})
    assert "setup" not in info.value.message and "whole number" in info.value.message


def test_a_folder_given_as_kernel_file(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text("")
    code, obj = _json("check", str(tmp_path))
    assert code == 1 and obj["error"] == "ContractError"
    assert "is a folder, not a kernel file" in obj["message"] and "k.py" in obj["hint"]


def test_an_out_folder_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, obj = _json("optimize", VECTOR_ADD, "--out", str(blocker / "run"))
    assert code == 1 and obj["error"] == "RunFolderError"
    assert "cannot create the run folder" in obj["message"] and "--out" in obj["hint"]


def test_cache_list_skips_a_bad_file_and_lists_the_others(tmp_path: Path) -> None:
    from kernelpilot.records.evaluation import Evaluation
    from kernelpilot.search.cache import CacheContext, EvaluationCache

    ctx = CacheContext(kernel="k", kernel_sha256="0" * 64, shape={"N": 8}, gpu="cpu", driver=None, torch=None,
                       triton=None, interpreted=True)
    EvaluationCache(ctx, root=tmp_path).put(Evaluation(config={"B": 1}, status="ok", duration_ns=5.0))
    (tmp_path / "bad-0123456789abcdef.jsonl").write_bytes(b"\x00\xff not json")
    code, obj = _json("cache", "list", "--root", str(tmp_path))
    assert code == 0 and [c["kernel"] for c in obj["caches"]] == ["k"]
    assert len(obj["skipped"]) == 1 and "bad-0123456789abcdef.jsonl" in obj["skipped"][0]
    human = runner.invoke(app, ["cache", "list", "--root", str(tmp_path)])
    assert human.exit_code == 0 and "warning:" in human.output and "bad-0123456789abcdef" in human.output


@pytest.mark.parametrize("pct", [25, 50, 75, 99])
def test_a_truncated_ncu_report_is_an_error_never_a_verdict(pct: int, tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    full = FIXTURES / "ncu" / "h200_add_fp32_memory_bound.ncu-rep"
    data = full.read_bytes()
    cut = tmp_path / f"cut{pct}.ncu-rep"
    cut.write_bytes(data[: len(data) * pct // 100])
    code, obj = _json("profile", "--report", str(cut))
    assert code == 1 and obj["error"] == "ReportError" and str(cut) in obj["message"], obj
    assert "verdict" not in obj
    with pytest.raises(ReportError, match="partly readable"):
        api.profile(report=cut)


SLOW_FIRST = '''
import time
import torch
SHAPE = {"N": 64}
TUNABLES = {"BLOCK": [64]}
_launches = []

def setup(N, seed=0, device="cpu", **_):
    x = torch.arange(N, dtype=torch.float32)
    return {"inputs": {"x": x, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}

def run_kernel(x, out, N, *, BLOCK, **_):
    if not _launches:  # the first launch in a fresh worker is slow (a cold compile, say)
        time.sleep(2.5)
    _launches.append(1)
    out.copy_(x + 1)

def reference(x, out, N, **_):
    return x + 1
'''


def test_a_cached_timeout_is_retried_under_a_larger_limit(tmp_path: Path) -> None:
    kernel = tmp_path / "slow_first.py"
    kernel.write_text(SLOW_FIRST)
    opts = dict(strategy="exhaustive", prune=False, budget_evals=1, cache_root=tmp_path / "cache", ab_samples=0)
    from kernelpilot.engine.guards import BrokenFirstConfig

    with pytest.raises(BrokenFirstConfig) as first:  # a first config that times out stops the search at once
        api.tune(kernel, timeout_s=1.0, **opts)
    assert first.value.evaluation.status == "timeout" and first.value.evaluation.timeout_s == 1.0
    (line,) = [json.loads(s) for s in next((tmp_path / "cache").glob("*.jsonl")).read_text().splitlines()[1:]]
    assert line["evaluation"]["status"] == "timeout" and line["evaluation"]["timeout_s"] == 1.0
    with pytest.raises(BrokenFirstConfig) as again:  # the same limit: the cached answer stands
        api.tune(kernel, timeout_s=1.0, **opts)
    assert again.value.evaluation.cached and again.value.evaluation.status == "timeout"
    looser = api.tune(kernel, timeout_s=30.0, **opts)  # a looser limit: run again
    assert not looser.evaluations[0].cached and looser.evaluations[0].status == "ok"
    assert looser.evaluations[0].timeout_s == 30.0
