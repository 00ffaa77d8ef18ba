"""The tuner on the CPU: every failure type survived as typed data, the cache resumes a killed search without
repeating work, replay answers with no GPU, decisions need evidence, pruning happens before any run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpilot.search.cache import ReplayRunner, list_caches
from kernelpilot.search.model import Evaluation, config_key
from kernelpilot.search.stats import clearly_slower, decide
from kernelpilot.search.tune import to_triton_config, tune
from kernelpilot.search.worker import classify_exception

# One config per failure type (BLOCK, num_warps) -> what the worker must record.
BROKEN_BODY = '''
    if (BLOCK, num_warps) == (64, 2):
        raise RuntimeError("boom: an ordinary exception")
    if (BLOCK, num_warps) == (128, 2):
        out.copy_(x - y)
        return
    if (BLOCK, num_warps) == (128, 4):
        out.fill_(float("nan"))
        return
    if (BLOCK, num_warps) == (128, 8):
        while True:
            pass
    if (BLOCK, num_warps) == (256, 2):
        raise ValueError("BLOCK=256 with 2 warps cannot run: accumulator too large")
    if (BLOCK, num_warps) == (256, 4):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if (BLOCK, num_warps) == (256, 8):
        import os
        os._exit(3)
    out.copy_(x + y)'''.strip("\n")

EXPECTED = {
    (64, 2): "runtime_error", (64, 4): "ok", (64, 8): "ok",
    (128, 2): "wrong_result", (128, 4): "nan", (128, 8): "timeout",
    (256, 2): "compile_error", (256, 4): "illegal_memory_access", (256, 8): "worker_crash",
}


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "kp_home"))
    monkeypatch.delenv("KERNELPILOT_CACHE", raising=False)


def _broken(write_kernel):
    import textwrap

    from tests.conftest import TORCH_KERNEL

    body = textwrap.indent(textwrap.dedent("    " + BROKEN_BODY), "    ").lstrip()
    return write_kernel(source=textwrap.dedent(TORCH_KERNEL).replace("BODY", body))


def test_every_failure_type_is_recorded_and_the_search_goes_on(write_kernel, tmp_path):
    kernel = _broken(write_kernel)
    result = tune(kernel, strategy="exhaustive", prune=False, timeout_s=8, ab_samples=5, out=tmp_path / "run")
    got = {(e.config["BLOCK"], e.config["num_warps"]): e.status for e in result.evaluations}
    assert got == EXPECTED
    assert result.stopped == "strategy finished" and len(result.evaluations) == 9
    assert result.best is not None and result.best.config["BLOCK"] == 64
    # a hang, a poisoned context and a dead process each cost a fresh worker
    assert result.worker_restarts >= 3
    by = {(e.config["BLOCK"], e.config["num_warps"]): e for e in result.evaluations}
    assert "no answer within 8 s" in by[(128, 8)].message
    assert "exit code 3" in by[(256, 8)].message
    assert "elements outside atol" in by[(128, 2)].message
    # every failure is in the cache as data, and in the records
    [summary] = list_caches()
    assert summary.configs == 9 and summary.ok == 2
    md = (tmp_path / "run" / "tune.md").read_text()
    assert "| timeout | 1 |" in md and "| worker_crash | 1 |" in md
    assert json.loads((tmp_path / "run" / "tune.json").read_text())["failures"]["nan"] == 1


def test_rerun_is_answered_from_the_cache_and_replay_needs_no_worker(write_kernel):
    kernel = write_kernel()
    first = tune(kernel, strategy="exhaustive", prune=False, ab_samples=5)
    assert first.n_new == 9 and first.n_cached == 0
    again = tune(kernel, strategy="random", seed=3, prune=False, ab_samples=5)
    assert again.n_new == 0 and again.n_cached == 9
    [summary] = list_caches()
    replayed = tune(kernel, strategy="local", replay=summary.file, budget_evals=5)
    assert replayed.n_new == 5 and replayed.device == "replay" and all(e.worker == "replay" for e in replayed.evaluations)
    assert ReplayRunner(summary.file).best() is not None


def test_killed_search_resumes_without_repeating_work(write_kernel, tmp_path):
    kernel = write_kernel("import time\n    time.sleep(0.05)\n    out.copy_(x + y)")
    env = {**os.environ, "KERNELPILOT_HOME": os.environ["KERNELPILOT_HOME"]}
    code = (f"from kernelpilot.search.tune import tune\n"
            f"tune({str(kernel)!r}, strategy='exhaustive', prune=False, ab_samples=3)\n")
    child = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    cache_dir = Path(os.environ["KERNELPILOT_HOME"]) / "cache"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        files = list(cache_dir.glob("*.jsonl"))
        if files and sum(1 for _ in files[0].open()) >= 4:  # header + at least 3 records
            break
        time.sleep(0.2)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    [file] = list(cache_dir.glob("*.jsonl"))
    done_before = {json.loads(line)["key"] for line in file.read_text().splitlines()[1:] if line.strip().endswith("}")}
    assert 3 <= len(done_before) < 9, "the kill must land mid-run"
    resumed = tune(kernel, strategy="exhaustive", prune=False, ab_samples=3)
    assert resumed.n_cached == len(done_before) and resumed.n_new == 9 - len(done_before)
    keys = [json.loads(line)["key"] for line in file.read_text().splitlines()[1:] if line.strip()]
    assert len(set(keys)) == 9
    # no config measured twice: a key repeats only when an accepted incumbent's card was added to its record
    assert all(keys.count(k) <= 2 for k in set(keys))


def test_budget_in_evaluations_stops_the_search(write_kernel):
    r = tune(write_kernel(), strategy="random", budget_evals=4, prune=False, ab_samples=3, use_cache=False)
    assert r.n_new == 4 and r.stopped.startswith("budget spent: 4 evaluations")


def test_static_pruning_drops_configs_before_any_run(tmp_path):
    from kernelpilot.api import bundled_example

    r = tune(bundled_example("vector_add"), strategy="exhaustive", max_spills=0, ab_samples=3, budget_evals=2,
             use_cache=False)
    assert r.prune is not None and r.prune.n_configs == r.space_size
    pruned = [e for e in r.evaluations if e.status == "pruned"]
    assert r.prune.n_pruned >= 1 and all("spills" in e.message for e in pruned)
    assert all(e.wall_s == 0 and not e.samples_ns for e in pruned), "a pruned config never runs"


def test_classify_exception():
    assert classify_exception(RuntimeError("CUDA error: an illegal memory access was encountered")) == \
        "illegal_memory_access"
    assert classify_exception(RuntimeError("CUDA error: misaligned address")) == "illegal_memory_access"
    assert classify_exception(ValueError("tile too large")) == "compile_error"

    class OutOfResources(Exception):
        pass

    assert classify_exception(OutOfResources("shared memory")) == "compile_error"
    assert classify_exception(KeyError("x")) == "runtime_error"


def test_decisions_need_evidence():
    import random

    rng = random.Random(0)
    base = [100 + rng.gauss(0, 2) for _ in range(30)]
    noise = [100 + rng.gauss(0, 2) for _ in range(30)]
    faster = [95 + rng.gauss(0, 2) for _ in range(30)]
    assert not decide(noise, base).replace, "same distribution: keep the incumbent"
    d = decide(faster, base)
    assert d.replace and d.ci_high < 1 and d.p_value < 0.05
    assert not decide([90.0, 91.0], [100.0, 101.0]).replace, "two samples are not evidence"
    assert clearly_slower([130.0] * 8, 100.0) and not clearly_slower([105.0] * 8, 100.0)
    assert not clearly_slower([130.0, 80.0, 130.0, 80.0], 100.0)


def test_triton_config_line():
    line = to_triton_config({"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3})
    assert line == "triton.Config({'BLOCK_M': 128, 'BLOCK_N': 64}, num_warps=4, num_stages=3)"


def test_evaluation_objective_and_key():
    ok = Evaluation(config={"b": 1, "a": 2}, status="ok", duration_ns=5.0)
    bad = Evaluation(config={"a": 2, "b": 1}, status="nan")
    assert ok.objective == 5.0 and bad.objective == float("inf") and ok.key == bad.key == config_key({"a": 2, "b": 1})


def test_several_devices_share_a_planned_search(write_kernel):
    """Two workers (two 'devices'; both the interpreter here) split an exhaustive search: every config once."""
    r = tune(write_kernel(), strategy="exhaustive", prune=False, ab_samples=3, devices=["cpu", "cpu"])
    assert r.n_new == 9 and len({e.key for e in r.evaluations}) == 9 and r.n_cached == 0
    assert r.stopped == "strategy finished" and r.best is not None


def test_speed_of_light_floor():
    from kernelpilot.hardware.roofline import impossible_reason as below_floor

    assert below_floor(90.0, 100.0, 0.05) and "under the speed-of-light floor 100 ns" in below_floor(90.0, 100.0, 0.05)
    assert below_floor(96.3, 100.0, 0.05) is None, "3.7 % under a measured floor is possible (cuBLAS did it)"
    assert below_floor(50.0, None, 0.05) is None and below_floor(150.0, 100.0, 0.05) is None


def _vector_add_with_warps(tmp_path, warps: list[int]) -> Path:
    """The bundled vector_add with TUNABLES narrowed to BLOCK_SIZE 128 and the given num_warps (fast to compile)."""
    from kernelpilot.api import bundled_example

    src = Path(bundled_example("vector_add")).read_text()
    start = src.index("TUNABLES = {")
    end = src.index("}\n", start) + 2
    path = tmp_path / "vector_add_warps.py"
    path.write_text(src[:start] + f'TUNABLES = {{"BLOCK_SIZE": [128], "num_warps": {warps!r}}}\n' + src[end:])
    return path


def test_occupancy_floor_prunes_below_and_keeps_above(tmp_path):
    """Static pruning compiles for sm_90 on the CPU: one warp per block is capped at 50 % theoretical occupancy by
    the 32 blocks per SM limit, 4 warps reach 100 %; a 60 % floor prunes the first and keeps the second."""
    from kernelpilot.engine.prune import CompileAhead

    kernel = _vector_add_with_warps(tmp_path, [1, 4])
    low, high = ({"BLOCK_SIZE": 128, "num_warps": w} for w in (1, 4))
    r = CompileAhead(kernel, [low, high], {"N": 4096, "dtype": "float32"}, arch="sm_90", min_occupancy_pct=60).finish()
    occ = {k: v["occupancy_pct"] for k, v in r.static.items()}
    assert occ[config_key(low)] < 60 <= occ[config_key(high)], occ
    assert r.arch == "sm_90" and r.n_configs == 2 and r.n_pruned == 1 and r.by_reason == {"occupancy": 1}
    assert list(r.pruned) == [config_key(low)]
    assert r.pruned[config_key(low)].startswith("occupancy: theoretical occupancy") and "< floor 60 %" in \
        r.pruned[config_key(low)]


def test_min_occupancy_option_of_tune_cli(tmp_path):
    """``kernelpilot tune --min-occupancy``: the config under the floor is answered ``pruned`` without running,
    the one above it runs (here under the interpreter)."""
    from typer.testing import CliRunner

    from kernelpilot.cli import app

    kernel = _vector_add_with_warps(tmp_path, [1, 4])
    res = CliRunner().invoke(app, ["tune", str(kernel), "--strategy", "exhaustive", "--min-occupancy", "60",
                                   "--no-cache", "--ab-samples", "3", "--json", "--all"])
    assert res.exit_code == 0, res.stdout[-2000:]
    data = json.loads(res.stdout)
    status = {e["config"]["num_warps"]: e for e in data["evaluations"]}
    assert status[1]["status"] == "pruned" and "occupancy" in status[1]["message"] and status[1]["wall_s"] == 0
    assert status[4]["status"] == "ok"
    assert data["prune"]["by_reason"] == {"occupancy": 1}



def test_a_search_resumes_only_on_the_device_that_measured_it(tmp_path):
    """tune-run.json records what the times were measured on; ``--resume`` elsewhere (an H200 search on an H100, a
    GPU search under the interpreter) is refused, naming both: the earlier incumbent's times would judge the new
    device's."""
    from kernelpilot.api import bundled_example
    from kernelpilot.app.tune import resume_tune
    from kernelpilot.errors import RunFolderError

    out = tmp_path / "t"
    tune(bundled_example("vector_add"), strategy="exhaustive", ab_samples=3, budget_evals=2, use_cache=False,
         out=out)
    run = json.loads((out / "tune-run.json").read_text())
    assert run["measured_on"] == "cpu"
    (out / "tune.json").unlink()  # as a killed search leaves it: not finished
    run.update(finished_utc=None, measured_on="cuda NVIDIA H200")
    (out / "tune-run.json").write_text(json.dumps(run))
    with pytest.raises(RunFolderError, match="measured on cuda NVIDIA H200; this session would measure on cpu") as info:
        resume_tune(out, budget_evals=4)
    assert "resume it where it was measured" in info.value.hint
    run["measured_on"] = "cpu"
    (out / "tune-run.json").write_text(json.dumps(run))
    assert len(resume_tune(out, budget_evals=4).evaluations) >= 4  # the same device resumes


def test_skipped_configs_are_lines_of_the_folder_and_a_resume_does_not_compile_them_again(tmp_path):
    """A pruned config is an evaluation the strategy received: it is a line of evaluations.jsonl (so a finished
    folder validates: tune.json lists it too, and before it was a line the folder failed `report` and `export`),
    and a resumed search neither compiles nor answers it again."""
    from kernelpilot.api import bundled_example
    from kernelpilot.app.report_cmd import check_records
    from kernelpilot.app.tune import resume_tune
    from kernelpilot.app.tune_run import LINES_FILE, RUN_FILE, read_lines

    out = tmp_path / "search"
    first = tune(bundled_example("vector_add"), strategy="exhaustive", min_occupancy_pct=60, ab_samples=3,
                 budget_evals=3, use_cache=False, out=out)
    lines, problems = read_lines(out / LINES_FILE)
    skipped = [line.evaluation for line in lines if line.evaluation.index is None]
    assert not problems and skipped and all(e.status == "pruned" for e in skipped)
    assert [e.key for e in first.evaluations] == [line.evaluation.key for line in lines]
    check_records(out)  # raises RecordError on any problem

    # the same folder as a killed search leaves it: no tune.json, not finished; then resumed with a larger budget
    for name in ("tune.json", "tune.md", "report.html"):
        (out / name).unlink(missing_ok=True)
    run = json.loads((out / RUN_FILE).read_text())
    (out / RUN_FILE).write_text(json.dumps({**run, "finished_utc": None}))
    said: list[str] = []
    resumed = resume_tune(out, budget_evals=5, log=said.append)
    compiling = next(m for m in said if "static pruning: compiling" in m)
    assert f"({len(lines)} answered before the resume)" in compiling
    assert f"compiling {first.space_size - len(lines)} configs" in compiling
    keys = [e.key for e in resumed.evaluations]
    assert keys[:len(lines)] == [line.evaluation.key for line in lines] and len(set(keys)) == len(keys)
    assert sum(1 for e in resumed.evaluations if e.index is not None) == 5  # the budget counted the first part
    check_records(out)

    # the CLI reads the finished folder back: --json lists what tune.md lists and counts the skipped configs,
    # --json --all prints every evaluation
    from typer.testing import CliRunner

    from kernelpilot.cli import app

    short = json.loads(CliRunner().invoke(app, ["tune", "--resume", str(out), "--json", "--quiet"]).stdout)
    every = json.loads(CliRunner().invoke(app, ["tune", "--resume", str(out), "--json", "--all", "--quiet"]).stdout)
    assert len(every["evaluations"]) == every["evaluations_total"] == short["evaluations_total"] == len(keys)
    assert all(e["index"] is not None for e in short["evaluations"])
    assert any("pruned ×" in line for line in short["not_listed"]) and not every["not_listed"]
