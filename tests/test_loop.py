"""The whole optimize loop under the Triton interpreter: versions, git history, reports, consistent records."""

from __future__ import annotations

import json
import subprocess
import sys

import git
import pytest

from conftest import EXAMPLES, ROOT
from kernelpilot import api
from kernelpilot.errors import RunFolderError
from kernelpilot.records.cards import read_texts, unpack_card
from kernelpilot.records.models import outcome_from_json, restored
from kernelpilot.records.samples import unpack_samples

VERSION_FILES = ("config.json", "hypothesis.md", "correctness.json", "outcome.json")


def assert_consistent(out, result):
    """Records, git history and the final report must tell the same story."""
    versions = result.versions
    assert [v.index for v in versions] == list(range(len(versions)))
    for v in versions:
        d = out / f"v{v.index}"
        for f in VERSION_FILES:
            assert (d / f).is_file(), f"v{v.index}/{f}"
        saved = outcome_from_json(json.loads((d / "outcome.json").read_text()))
        # one copy of the samples, the card and the move per version: timing.json / verdict.json / config.json hold
        # them when written (the samples as whole ns where exact, the card's pattern entries once per run)
        kept_apart = {k: getattr(saved, k) for k in ("samples_ns", "card", "move") if not getattr(saved, k)}
        assert saved == v.model_copy(update=kept_apart)
        assert restored(d, saved) == v
        if "samples_ns" in kept_apart and v.samples_ns:
            assert unpack_samples(json.loads((d / "timing.json").read_text()))["samples_ns"] == v.samples_ns
        if "card" in kept_apart and v.card:
            assert unpack_card(json.loads((d / "verdict.json").read_text()), read_texts(out)) == v.card
        # the hypothesis is written before the version runs
        assert (d / "hypothesis.md").stat().st_mtime_ns <= (d / "correctness.json").stat().st_mtime_ns
        if v.ok:
            timing = json.loads((d / "timing.json").read_text())
            assert timing["is_measurement"] is False and "not a measurement" in timing["timer"]
            assert len(timing["samples_ns"]) == timing["n_samples"] >= 3
        if v.move is not None:
            assert sum(v.config[k] != versions[v.parent].config[k] for k in v.config) == 1  # one variable
    repo = git.Repo(out)
    subjects = [c.summary for c in repo.iter_commits()]
    assert len(subjects) == len(versions) + 2  # run set-up + one per version, committed when decided + final record
    for v in versions:
        assert sum(s.startswith(f"v{v.index}: {v.version_status}") for s in subjects) == 1
        assert v.commit in {c.hexsha for c in repo.iter_commits()}
    tracked = set(repo.git.ls_files().splitlines())
    for v in versions:
        assert f"v{v.index}/outcome.json" in tracked  # rejected versions are recorded, not lost
    assert not repo.is_dirty(untracked_files=True)
    best = result.run.best_version
    accepted = [v for v in versions if v.accepted]
    assert best == min(accepted, key=lambda v: v.duration_ns).index  # best: the fastest accepted version
    assert all(v.duration_ns >= versions[best].duration_ns for v in accepted)
    report = (out / "final_report.md").read_text()
    assert "Interpreted — not a measurement" in report
    # the space the versions are a part of, as the run's own tunables and constraints give it
    from kernelpilot.search.space import SearchSpace

    space = SearchSpace(result.run.tunables, list(result.run.constraints) or None)
    assert result.run.space_size == len(space.configs()) >= len(versions)
    assert f"{len(versions)} versions of a {result.run.space_size}-config space" in report
    for v in versions:
        assert f"| v{v.index} |" in report and v.version_status in report
    assert (out / "benchmark.md").is_file() and "PyTorch eager" in (out / "benchmark.md").read_text()
    for f in ("env.json", "env.md", "roofline.md", "kernel.py", "run.json"):
        assert (out / f).is_file(), f


@pytest.mark.parametrize("name", ["vector_add", "softmax"])
def test_optimize_interpreted(name, tmp_path):
    out = tmp_path / "run"
    result = api.optimize(EXAMPLES / f"{name}.py", out=out, iterations=3)
    assert len(result.versions) == 4
    assert result.run.mode == "interpreter" and result.run.stop_reason.startswith("iterations done")
    assert result.run.profile is False and all(v.card is None for v in result.versions)
    assert_consistent(out, result)
    # the report is rebuilt from the records alone, identically
    before = (out / "final_report.md").read_text()
    rebuilt = api.report(out)
    assert (out / "final_report.md").read_text() == before and rebuilt.versions == result.versions


def test_failing_config_is_recorded_and_the_loop_goes_on(write_kernel, tmp_path):
    path = write_kernel("if BLOCK == 128: raise RuntimeError('illegal tile')\n    out.copy_(x + y)")
    out = tmp_path / "run"
    result = api.optimize(path, out=out, iterations=2, benchmark=False)
    v1 = result.versions[1]
    assert v1.version_status == "failed" and "illegal tile" in v1.message and v1.config["BLOCK"] == 128
    assert result.versions[2].config["BLOCK"] != 128  # the loop moved on to another neighbour
    assert "v1" in (out / "final_report.md").read_text().split("## What did not")[1]


def test_incorrect_baseline_stops_with_a_reason(write_kernel, tmp_path):
    result = api.optimize(write_kernel("out.copy_(x - y)"), out=tmp_path / "run", iterations=3)
    assert [v.version_status for v in result.versions] == ["failed"] and result.run.best_version is None
    assert result.versions[0].status == "wrong_result"
    assert "v0 is not correct" in result.run.stop_reason


def test_existing_run_folder_is_never_overwritten(write_kernel, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    with pytest.raises(RunFolderError, match="never overwrites"):
        api.optimize(write_kernel(), out=out, iterations=1)
    assert (out / "precious.txt").read_text() == "keep me" and len(list(out.iterdir())) == 1


def test_corrupt_record_is_named(write_kernel, tmp_path):
    out = tmp_path / "run"
    api.optimize(write_kernel(), out=out, iterations=1, benchmark=False)
    (out / "v1" / "outcome.json").write_text("{not json")
    with pytest.raises(RunFolderError) as info:
        api.report(out)
    assert "v1/outcome.json" in info.value.message and "git" in info.value.hint


def test_cli_optimize_json_is_one_object(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "optimize", str(EXAMPLES / "vector_add.py"),
                           "--iterations", "1", "--out", str(out), "--no-benchmark", "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["run"]["kernel_name"] == "vector_add" and len(data["versions"]) == 2
    assert str(out) == data["out"]


def test_hang_and_crash_are_failed_versions_and_the_loop_goes_on(write_kernel, tmp_path):
    """Each version runs in a worker process: a hang is killed at the timeout, a segfault is a worker crash."""
    body = ("import os, signal, time\n"
            "    if BLOCK == 128:\n        time.sleep(3600)\n"
            "    if num_warps == 8:\n        os.kill(os.getpid(), signal.SIGSEGV)\n"
            "    out.copy_(x + y)")
    result = api.optimize(write_kernel(body), out=tmp_path / "run", iterations=4, benchmark=False, timeout_s=15)
    by_config = {(v.config["BLOCK"], v.config["num_warps"]): v for v in result.versions}
    hang, crash = by_config[(128, 4)], by_config[(64, 8)]
    assert hang.version_status == "failed" and hang.status == "timeout" and "no answer within 15 s" in hang.message
    assert crash.version_status == "failed" and crash.status == "worker_crash" and "died" in crash.message
    assert len(result.versions) == 5 and result.run.stop_reason == "iterations done (4 after v0)"
    later = [v for v in result.versions if v.index > max(hang.index, crash.index)]
    assert any(v.ok and v.duration_ns for v in later)  # a fresh worker ran the next correct config
    for v in result.versions:  # every failure is one of the planted ones
        planted = "timeout" if v.config["BLOCK"] == 128 else "worker_crash" if v.config["num_warps"] == 8 else None
        assert v.status == (planted or "ok") and (v.version_status == "failed") == (planted is not None)
    for v in (hang, crash):
        saved = outcome_from_json(json.loads((tmp_path / "run" / f"v{v.index}" / "outcome.json").read_text()))
        assert saved.status == v.status


def test_another_strategy_proposes_and_its_jumps_are_recorded(write_kernel, tmp_path):
    result = api.optimize(write_kernel(), out=tmp_path / "run", iterations=3, benchmark=False, strategy="random",
                          seed=3)
    assert result.run.strategy == "random" and result.run.seed == 3 and len(result.versions) == 4
    assert len({json.dumps(v.config, sort_keys=True) for v in result.versions}) == 4
    for v in result.versions[1:]:
        assert v.move is not None and v.move.rule == "strategy:random"
        base = result.versions[v.parent].config
        changed = [k for k in v.config if v.config[k] != base[k]]
        assert v.move.tunable == "+".join(changed)  # a jump names every tunable it changed
        text = (tmp_path / "run" / f"v{v.index}" / "hypothesis.md").read_text()
        assert (f"{len(changed)} variables" if len(changed) > 1 else "One variable") in text


def test_unknown_strategy_or_gpu_fails_before_the_run_folder_exists(write_kernel, tmp_path):
    from kernelpilot.errors import SearchError, SpecError

    with pytest.raises(SearchError, match="unknown search strategy"):
        api.optimize(write_kernel(), out=tmp_path / "a", strategy="annealing")
    with pytest.raises(SpecError) as info:
        api.optimize(write_kernel(), out=tmp_path / "b", gpu="RTX9999")
    assert "RTX9999" in info.value.message and info.value.hint
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
