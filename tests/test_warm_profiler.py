"""The search worker sets the profiler up beside untimed work, and nothing is timed while it runs (issue 11: the
first profiler session of a process costs seconds; a session open during timing would record the timed launches)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kernelpilot.search import worker_child

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def slow_warm(monkeypatch):
    """A warm-up that takes 0.3 s and records when it ended."""
    ended: list[float] = []

    def fake_warm() -> float:
        time.sleep(0.3)
        ended.append(time.monotonic())
        return 0.3

    monkeypatch.setattr("kernelpilot.measure.activity.warm_profiler", fake_warm)
    yield ended
    worker_child._await_warm_profiler()


def test_awaiting_the_warm_up_waits_for_it_to_end(slow_warm):
    worker_child._start_warm_profiler()
    assert worker_child._WARMING is not None and worker_child._WARMING.is_alive()
    worker_child._await_warm_profiler()
    assert slow_warm, "the await returned before the warm-up ended"
    assert worker_child._WARMING is None
    worker_child._await_warm_profiler()  # a second await is a no-op


def test_timing_starts_only_after_the_warm_up_ended(slow_warm, monkeypatch):
    from kernelpilot.kernels.contract import load_kernel, use_interpreter
    from kernelpilot.measure import timing

    use_interpreter(True)
    kf = load_kernel(EXAMPLES / "vector_add.py", interpreted=True)
    started: list[float] = []
    real = timing.time_callable

    def spy(*args, **kwargs):
        started.append(time.monotonic())
        return real(*args, **kwargs)

    monkeypatch.setattr(timing, "time_callable", spy)
    opts = worker_child.WorkerOptions(kernel=str(kf.path), shape=kf.cpu_shape or kf.shape, interpreted=True)
    worker_child._start_warm_profiler()
    ev = worker_child._child_evaluate(kf, opts, "cpu", dict(kf.default_config), None)
    assert ev.status == "ok", ev.message
    assert started and slow_warm and started[0] >= slow_warm[0], "a sample was timed while the profiler warmed up"
    assert not any(t.name == "kernelpilot-warm-profiler" for t in threading.enumerate())
