"""The first hour on a fresh machine (issue 23, "First-hour fixes"): the README's test command and CI run one script,
a broken v0 (exit, os._exit, hang) stops a campaign at once with a typed error and leaves the experience log alone,
and the README's Python API snippet runs as a script."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    """The one-line commands of README.md's "Two commands" section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_readme_test_command_and_ci_run_the_same_script():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    test_cmd = commands[1]
    script = re.fullmatch(r"bash (scripts/\S+\.sh)", test_cmd)
    assert script, f"README's test command is not one script: {test_cmd!r}"
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert any(ln.endswith(f"bash {script.group(1)}") for ln in ci_lines), ci_lines
    for where, text in (("README's test command", test_cmd), (".ci/run", ci)):  # the install logic lives once
        code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        assert "pip install" not in code and "apt-get" not in code and "pytest" not in code, where
    body = (ROOT / script.group(1)).read_text()
    assert "torch==2.13.0" in body and "-e '.[test]'" in body
    assert "apt-get install" in body and "chromium" in body and "python3 -m pytest -q" in body
    assert subprocess.run(["bash", "-n", str(ROOT / script.group(1))]).returncode == 0  # it parses


def test_readme_main_command_is_unchanged():
    assert _readme_commands()[0] == "python3 -m pip install torch==2.13.0 -e . && kernelpilot optimize"


# -- a broken v0 stops the campaign at once (issue 23, "First-hour fixes" 3) ----------------------------------------

import sys  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

BROKEN_V0 = {
    "exit": ("import sys\n    sys.exit(3)", "worker_crash"),
    "os_exit": ("import os\n    os._exit(3)", "worker_crash"),
    "hang": ("while True:\n        pass", "timeout"),
}


@pytest.fixture
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "kp_home"))
    monkeypatch.setenv("KERNELPILOT_EXPERIENCE", str(tmp_path / "experience.db"))
    monkeypatch.delenv("KERNELPILOT_CACHE", raising=False)
    return tmp_path


def _experience_entries(tmp_path: Path) -> int:
    from kernelpilot.experience.db import ExperienceDB

    if not (tmp_path / "experience.db").exists():
        return 0
    with ExperienceDB.open(str(tmp_path / "experience.db")) as log:
        return len(log.entries(include_masked=True))


@pytest.mark.parametrize("what", sorted(BROKEN_V0))
def test_a_broken_v0_stops_tune_at_once_and_records_no_experience(what, write_kernel, _home):
    from kernelpilot.app.tune import tune
    from kernelpilot.engine.guards import BrokenFirstConfig

    body, status = BROKEN_V0[what]
    kernel = write_kernel(body)  # every config runs the same broken body
    t0 = time.monotonic()
    with pytest.raises(BrokenFirstConfig) as info:
        tune(kernel, strategy="exhaustive", prune=False, timeout_s=4, ab_samples=3, out=_home / "run")
    assert time.monotonic() - t0 < 60, "one evaluation, not the whole space"
    err = info.value
    assert err.failure == status and err.evaluation.status == status
    assert "first config" in err.message and err.hint
    lines = (_home / "run" / "evaluations.jsonl").read_text().splitlines()
    assert len(lines) == 1, "the search stopped after the first evaluation"
    assert _experience_entries(_home) == 0


def test_a_broken_v0_stops_optimize_at_once(write_kernel, _home):
    from kernelpilot.app.optimize import optimize
    from kernelpilot.engine.guards import BrokenFirstConfig

    kernel = write_kernel(BROKEN_V0["exit"][0])
    with pytest.raises(BrokenFirstConfig, match="killed its worker process") as info:
        optimize(kernel, out=_home / "run", timeout_s=4, budget_s=60)
    assert info.value.evaluation.index == 0
    assert (_home / "run" / "v0" / "outcome.json").is_file() and not (_home / "run" / "v1").exists()
    assert _experience_entries(_home) == 0


def test_a_later_crash_is_one_failed_config_not_a_stop(write_kernel, _home):
    from kernelpilot.app.tune import tune

    kernel = write_kernel("if BLOCK == 256:\n        import os\n        os._exit(3)\n    out.copy_(x + y)")
    r = tune(kernel, strategy="exhaustive", prune=False, timeout_s=8, ab_samples=3, use_cache=False)
    assert r.stopped == "strategy finished" and r.failures == {"worker_crash": 3}


# -- the README's Python API snippet as a script (issue 23, "First-hour fixes" 4) -----------------------------------

import os  # noqa: E402
import textwrap  # noqa: E402


def _api_snippet() -> str:
    section = (ROOT / "README.md").read_text().split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _run_script(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    (work / "script.py").write_text(source)
    env = {**os.environ, "KERNELPILOT_HOME": str(tmp_path / "home"), "KERNELPILOT_EXPERIENCE": "off",
           "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "script.py"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=800)


def test_readme_api_snippet_runs_as_a_script(tmp_path):
    proc = _run_script(tmp_path, _api_snippet())
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "work" / "runs" / "mm"
    assert (run / "final_report.md").is_file() and (run / "v0" / "outcome.json").is_file()
    assert "duration_ns" in proc.stdout


def test_the_snippet_without_its_main_guard_is_refused_in_one_line_and_writes_nothing(tmp_path):
    snippet = _api_snippet()
    guard = 'if __name__ == "__main__":'
    assert guard in snippet
    head, body = snippet.split(guard, 1)
    unguarded = head + textwrap.dedent(body.split("\n", 1)[1])
    proc = _run_script(tmp_path, unguarded)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()
    assert any(line.startswith("kernelpilot.app.context.UnguardedScriptError:") and "script.py:3" in line
               and "__main__" in line for line in last), proc.stderr[-2000:]
    assert any("hint:" in line and 'if __name__ == "__main__":' in line for line in last)
    assert len(last) < 40, "a short traceback, not one per dead worker"
    assert "KernelFailed" not in proc.stderr and "process died" not in proc.stderr  # no worker ever started
    assert not (tmp_path / "work" / "runs").exists(), "no half-made run folder"


def test_the_experience_log_takes_nothing_from_a_run_whose_first_config_broke_or_hit_the_floor():
    from kernelpilot.experience.from_runs import entries_from_optimize, entry_from_tune, untrusted_run
    from kernelpilot.records.evaluation import Evaluation, Move

    def ev(i, status, ns=None, parent=None):
        move = Move(tunable="B", old=1, new=i, direction="up", rule="r", why="w", expected_metric="duration",
                    expected="down") if parent is not None else None
        return Evaluation(config={"B": i}, status=status, duration_ns=ns, index=i, parent=parent, move=move,
                          accepted=True if status == "ok" else None)

    healthy = [ev(0, "ok", 100.0), ev(1, "worker_crash", parent=0), ev(2, "ok", 80.0, parent=0)]
    assert untrusted_run(healthy) is None and len(entries_from_optimize(healthy, run="r", kernel="k",
                                                                         kernel_type="other")) == 2
    broken = [ev(0, "worker_crash"), ev(1, "worker_crash", parent=0), ev(2, "worker_crash", parent=0)]
    floor = [ev(0, "ok", 100.0), ev(1, "impossible", 10.0, parent=0), ev(2, "ok", 90.0, parent=0)]
    for run in (broken, floor):
        assert untrusted_run(run)
        assert entries_from_optimize(run, run="r", kernel="k", kernel_type="other") == []
        assert entry_from_tune(run, run="r", kernel="k", kernel_type="other") is None


def test_readme_main_job_runs_as_written(tmp_path):
    # the README's first command after its install: `kernelpilot optimize` with no argument optimizes the bundled
    # softmax (here under the interpreter at CPU_SHAPE, its 45 s budget) and leaves a complete run folder
    import shutil

    command = _readme_commands()[0].split(" && ", 1)[1]
    exe = shutil.which("kernelpilot")
    assert command == "kernelpilot optimize" and exe, (command, exe)
    proc = subprocess.run([exe, "optimize"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reports = list(tmp_path.rglob("final_report.md"))
    assert len(reports) == 1 and (reports[0].parent / "v0" / "outcome.json").exists(), proc.stdout[-2000:]
