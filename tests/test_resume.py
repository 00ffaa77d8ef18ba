"""Killed and interrupted runs (issue 12): ``kernelpilot optimize`` and ``kernelpilot tune`` are started as real
processes, killed with SIGKILL (or stopped with SIGINT/SIGTERM) at set points — during v0 or mid-compile, in the
middle of the search, while the final report is written — and continued with ``--resume`` until they finish; then
``kernelpilot report`` validates every record. After each kill no process the run started may be left: every
descendant carries a marker in its environment, and /proc is searched for it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import EXAMPLES

ROOT = Path(__file__).resolve().parents[1]
MARK = "KP_TEST_RUN_MARK"


def _marked(mark: str) -> list[int]:
    """Live (not zombie) processes whose environment holds ``MARK=mark``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if f"{MARK}={mark}".encode() not in Path(f"/proc/{entry}/environ").read_bytes():
                continue
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry))
    return found


class Run:
    """``kernelpilot ARGS`` in a subprocess, its output read line by line in a thread."""

    def __init__(self, args: list[str], tmp: Path, env: dict[str, str] | None = None) -> None:
        self.mark = uuid.uuid4().hex
        full_env = {**os.environ, MARK: self.mark, "PYTHONUNBUFFERED": "1", "KERNELPILOT_CACHE": str(tmp / "cache"),
                    "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelpilot.cli", *args], cwd=tmp, env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pred, timeout_s: float = 120.0) -> None:
        """Until ``pred(output)`` holds (fails the test on timeout or when the process ended first)."""
        deadline = time.monotonic() + timeout_s
        while not pred(self.output):
            assert self.proc.poll() is None or pred(self.output), f"ended early ({self.proc.returncode}):\n{self.output}"
            assert time.monotonic() < deadline, f"timed out waiting; output:\n{self.output}"
            with self._cv:
                self._cv.wait(0.1)

    def kill(self, sig: int = signal.SIGKILL) -> int:
        """Send ``sig``, wait for the exit; for SIGKILL also assert that no descendant outlives 5 s."""
        self.proc.send_signal(sig)
        code = self.proc.wait(60)
        if sig == signal.SIGKILL:
            deadline = time.monotonic() + 5.0
            while _marked(self.mark) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _marked(self.mark) == [], f"processes left after kill -9: {_marked(self.mark)}"
        time.sleep(0.2)  # the reader thread takes the last lines
        return code

    def finish(self, timeout_s: float = 180.0) -> int:
        code = self.proc.wait(timeout_s)
        time.sleep(0.2)
        return code


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and "BrokenPipeError" not in text and "leaked semaphore" not in text, text


def _report(folder: Path, tmp: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "report", str(folder), "--json"], cwd=tmp,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def _checking(n: int):
    """True once the output says version ``n`` started (its config.json and hypothesis are written)."""
    return lambda out: f"v{n}: " in out and "— checking" in out.split(f"v{n}: ", 1)[1]


def _git(run: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(run), *args], capture_output=True, text=True).stdout


def test_optimize_killed_at_three_points_and_interrupted_then_resumed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["optimize", str(EXAMPLES / "vector_add.py"), "--out", str(run), "--iterations", "5", "--budget-s", "300",
            "--no-benchmark"]
    first = Run(args, tmp_path)  # kill -9 during v0 (its config.json is written, its worker is starting)
    first.wait_for(_checking(0))
    assert first.kill() == -signal.SIGKILL
    _no_traceback(first.output)
    assert not (run / "v0" / "outcome.json").exists()

    second = Run(["optimize", "--resume", str(run)], tmp_path)  # SIGINT (Ctrl-C) while v2 runs
    second.wait_for(_checking(2))
    assert second.kill(signal.SIGINT) == 130
    _no_traceback(second.output)
    assert "0 versions kept, v0 redone" in second.output
    assert f"resume with `kernelpilot optimize --resume {run}`" in second.output
    assert "interrupted by SIGINT during v2" in second.output
    assert json.loads((run / "v2" / "interrupted.json").read_text())["signal"] == "SIGINT"
    assert json.loads((run / "run.json").read_text())["interrupted"] == "SIGINT during v2"
    assert _git(run, "status", "--porcelain").split() == ["??", "v2/"]  # all but the version in flight committed
    found = _report(run, tmp_path)  # an unfinished run is reported as far as it got
    assert not found["finished"] and found["in_flight"] == [2] and "--resume" in found["note"]

    third = Run(["optimize", "--resume", str(run)], tmp_path)  # kill -9 mid-search, v4 in flight
    third.wait_for(_checking(4))
    third.kill()
    _no_traceback(third.output)
    assert "2 versions kept, v2 redone" in third.output and not (run / "v2" / "interrupted.json").exists()
    info = json.loads((run / "run.json").read_text())
    assert info["finished_utc"] is None and info["search_spent_s"] > 0
    spent_before = info["search_spent_s"]
    log = _git(run, "log", "--format=%s")
    assert all(f"v{i}: " in log for i in range(4))  # every decided version was committed at once, rejected too

    fourth = Run(["optimize", "--resume", str(run)], tmp_path, env={"KERNELPILOT_HOLD_AT": "final"})  # at the end
    fourth.wait_for(lambda out: "holding at final" in out)
    fourth.kill()
    _no_traceback(fourth.output)
    assert "4 versions kept, v4 redone" in fourth.output
    info = json.loads((run / "run.json").read_text())
    assert info["search_spent_s"] >= spent_before and info["stop_reason"].startswith("iterations done")
    assert info["finished_utc"] is None and "final_report.md" not in _git(run, "ls-files")

    last = Run(["optimize", "--resume", str(run)], tmp_path)
    assert last.finish() == 0, last.output
    _no_traceback(last.output)
    assert "6 versions kept" in last.output and "best: v" in last.output
    info = json.loads((run / "run.json").read_text())
    assert info["finished_utc"] and len(info["resumed_utc"]) == 4
    assert sorted(int(p.name[1:]) for p in run.glob("v*")) == list(range(6))
    assert _git(run, "status", "--porcelain") == ""
    found = _report(run, tmp_path)
    assert found["finished"] and [v["index"] for v in found["versions"]] == list(range(6))


def test_tune_killed_mid_compile_mid_search_and_at_the_end_then_resumed(tmp_path: Path) -> None:
    out = tmp_path / "search"
    args = ["tune", str(EXAMPLES / "vector_add.py"), "--strategy", "exhaustive", "--budget-evals", "6",
            "--out", str(out)]
    first = Run(args, tmp_path)  # 1: mid-compile: the compile-ahead pool and the worker are up
    first.wait_for(lambda out_: "static pruning: compiling" in out_)
    deadline = time.monotonic() + 60
    while len(_marked(first.mark)) < 4 and time.monotonic() < deadline:  # tune, its worker, 2 compile processes
        time.sleep(0.05)
    assert len(_marked(first.mark)) >= 4
    first.kill()
    _no_traceback(first.output)

    second = Run(["tune", "--resume", str(out)], tmp_path)  # 2: mid-search
    second.wait_for(lambda out_: "] eval 3 " in out_)  # the progress line of the third evaluation: [3/N] eval 3 ...
    second.kill()
    _no_traceback(second.output)
    lines = (out / "evaluations.jsonl").read_text().splitlines()
    assert len(lines) >= 3

    third = Run(["tune", "--resume", str(out)], tmp_path, env={"KERNELPILOT_HOLD_AT": "final"})  # 3: at the end
    third.wait_for(lambda out_: "holding at final" in out_)
    third.kill()
    _no_traceback(third.output)
    assert not (out / "tune.json").exists()

    last = Run(["tune", "--resume", str(out), "--json"], tmp_path)
    assert last.finish() == 0, last.output
    result = json.loads(last.output.strip().splitlines()[-1])
    configs = [json.dumps(e["config"], sort_keys=True) for e in result["evaluations"]]
    assert len(configs) == 6 and len(set(configs)) == 6  # the budget counted what the killed sessions spent
    # the compile-ahead of a resumed session gets only the configs not answered before (a fresh machine would
    # otherwise compile the whole space again)
    left, answered = map(int, re.search(r"compiling (\d+) configs in parallel with the measurements \((\d+) "
                                        r"answered before the resume\)", last.output).groups())
    assert answered >= 3 and left + answered == result["space_size"]
    assert json.loads((out / "tune-run.json").read_text())["finished_utc"]
    found = _report(out, tmp_path)
    assert found["kind"] == "tune" and found["finished"] and len(found["versions"]) == 6


def test_sigterm_becomes_run_interrupted_and_waits_for_a_held_block() -> None:
    from kernelpilot.app.interrupt import GracefulStop, RunInterrupted

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted) as info:
        with GracefulStop():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler raises here
    assert info.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before  # the previous handler is back

    order = []
    with pytest.raises(RunInterrupted):
        with GracefulStop() as guard:
            with guard.held():  # a version's files and commit: not cut by the signal
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
                order.append("block finished")
            order.append("after the block")  # never reached: raised when the block ended
    assert order == ["block finished"]


def test_optimize_resumes_only_on_the_device_that_measured_it(tmp_path: Path) -> None:
    """run.json records what the times were measured on; ``optimize --resume`` on another device is refused with
    error/hint and a non-zero exit, and the run folder is left as it was."""
    run = tmp_path / "run"
    first = Run(["optimize", str(EXAMPLES / "vector_add.py"), "--out", str(run), "--iterations", "5",
                 "--budget-s", "300", "--no-benchmark"], tmp_path)
    first.wait_for(_checking(1))
    first.kill()
    info = json.loads((run / "run.json").read_text())
    assert info["measured_on"] == "cpu"
    info["measured_on"] = "cuda NVIDIA H100 80GB HBM3"  # as if the first session had run on an H100
    (run / "run.json").write_text(json.dumps(info))
    before = (run / "run.json").read_bytes()
    other = Run(["optimize", "--resume", str(run)], tmp_path)
    assert other.finish() != 0
    assert "error:" in other.output and "measured on cuda NVIDIA H100 80GB HBM3" in other.output
    assert "hint:" in other.output and "resume it where it was measured" in other.output
    assert (run / "run.json").read_bytes() == before


def test_a_signal_noted_in_a_held_block_wins_over_the_exception_that_ends_the_block() -> None:
    # the block's helpers died of the same signal (timeout signals the whole process group), so the pipe error that
    # ends the block is a consequence: the run reports the signal, with the error as its context
    from kernelpilot.app.interrupt import GracefulStop, RunInterrupted

    with pytest.raises(RunInterrupted) as info:
        with GracefulStop() as guard:
            with guard.held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.2)
                raise BrokenPipeError(32, "Broken pipe")
    assert info.value.signum == signal.SIGTERM and isinstance(info.value.__context__, BrokenPipeError)


def test_a_tune_whose_helpers_fail_while_it_stops_reports_the_signal_not_the_failure(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    # session 11 on an H200: SIGTERM from `timeout` reached the run and its helpers; an optimize stopping in its
    # Inductor capture came out as BrokenPipeError, so its caller saw a crash instead of an interruption to resume
    from kernelpilot import api
    from kernelpilot.app import tune as tune_app
    from kernelpilot.app.interrupt import RunInterrupted
    from kernelpilot.errors import Interrupted

    def stopping_then_broken(*_a, **_k):
        try:
            signal.raise_signal(signal.SIGTERM)
            time.sleep(1)
        except RunInterrupted:
            raise BrokenPipeError(32, "Broken pipe") from None  # a helper's pipe, closed by the same signal

    monkeypatch.setattr(tune_app, "_result", stopping_then_broken)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "tune"
    with pytest.raises(Interrupted) as info:
        api.tune(EXAMPLES / "vector_add.py", strategy="exhaustive", budget_evals=2, out=out)
    assert info.value.signum == signal.SIGTERM and "--resume" in info.value.hint
    assert json.loads((out / "tune-run.json").read_text())["interrupted"].startswith("SIGTERM after")
