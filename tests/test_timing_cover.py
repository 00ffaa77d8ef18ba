"""The opening spin must cover the host's enqueueing of every launch it times (measure/timing.py).

Session 11 on an H200: baselines that each spent 2.3-4.1 ms on the host before their launch (a settings check)
were timed round-robin in sequences of 3 x 20 launches; the spin, capped at 50 ms, ran out long before the host had
enqueued them, the GPU waited on the host inside the launches' events, and a 183 µs matmul was timed at ~4 ms.
These tests run :func:`time_event_sequence` against a model of a GPU stream (events, a spin, kernels queued behind
one another, a host clock that each launch advances), so they need no GPU: a launch's time is what the model's GPU
did between its two events.
"""

from __future__ import annotations

import statistics
import types

import pytest

from kernelpilot.measure import timing


class StreamModel:
    """One CUDA stream and the host clock (ns): work queues behind the stream's last work; an event's time is when
    the stream reaches it; the host advances by what each launch costs it."""

    def __init__(self) -> None:
        self.host_ns = 0.0
        self.gpu_free_ns = 0.0

    def timers(self) -> types.SimpleNamespace:
        def event(enable_timing: bool = True) -> types.SimpleNamespace:
            return types.SimpleNamespace(at_ns=None)

        def record(ev: types.SimpleNamespace) -> None:
            ev.at_ns = max(self.gpu_free_ns, self.host_ns)
            self.gpu_free_ns = ev.at_ns

        def spin(cycles: int) -> None:
            self.gpu_free_ns = max(self.gpu_free_ns, self.host_ns) + cycles / timing.SPIN_CYCLES_PER_NS

        def synchronize() -> None:
            self.host_ns = max(self.host_ns, self.gpu_free_ns)

        return types.SimpleNamespace(event=event, record=record, spin=spin, synchronize=synchronize,
                                     perf_counter_ns=lambda: int(self.host_ns),
                                     elapsed_time=lambda s, e: (e.at_ns - s.at_ns) / 1e6)

    def launch(self, host_ns: float, gpu_ns: float):
        """A launch that spends ``host_ns`` on the host, then queues ``gpu_ns`` of GPU work."""
        def fn() -> None:
            self.host_ns += host_ns
            self.gpu_free_ns = max(self.gpu_free_ns, self.host_ns) + gpu_ns
        return fn


@pytest.fixture
def stream(monkeypatch):
    model = StreamModel()
    monkeypatch.setattr(timing, "bound", model.timers)
    monkeypatch.setattr(timing, "_HOST_NS_PER_LAUNCH", [0.0])
    return model


def test_a_launch_slower_on_the_host_than_on_the_gpu_is_timed_at_its_gpu_time(stream):
    # the session's case: 60 launches, 4 ms of host work each before 183 µs of GPU work; the first spin is sized
    # from no history (200 µs) and the 50 ms cap covers 8 such launches, not 60
    samples = timing.time_event_sequence([(stream.launch(4e6, 183e3), "0")] * 60)
    assert len(samples) == 60
    assert statistics.median(samples) == pytest.approx(183e3, rel=1e-6)
    assert max(samples) == pytest.approx(183e3, rel=1e-6)


def test_a_round_robin_of_cheap_and_host_heavy_contenders_times_each_at_its_gpu_time(stream):
    kernel, eager, compiled = (stream.launch(30e3, 189e3), stream.launch(2.5e6, 183e3),
                               stream.launch(3.5e6, 185e3))
    seq = [(kernel, "0"), (eager, "1"), (compiled, "2")]
    timing.time_event_sequence(seq * 2)  # the warm-up's rounds, timed and dropped: they size the spin
    got = timing.time_event_sequence(seq * 20)
    cols = [got[i::3] for i in range(3)]
    assert [statistics.median(c) for c in cols] == pytest.approx([189e3, 183e3, 185e3], rel=1e-6)


def test_cheap_launches_stay_in_one_spin(stream, monkeypatch):
    spins = []
    timers = stream.timers()
    real_spin = timers.spin
    timers.spin = lambda cycles: (spins.append(cycles), real_spin(cycles))
    monkeypatch.setattr(timing, "bound", lambda: timers)
    timing.time_event_sequence([(stream.launch(20e3, 100e3), "0")] * 40)  # sizes the spin (history)
    spins.clear()
    samples = timing.time_event_sequence([(stream.launch(20e3, 100e3), "0")] * 40)
    assert len(spins) == 1  # 40 launches of 20 µs host time fit one spin: no chunking, no second try
    assert samples == pytest.approx([100e3] * 40, rel=1e-6)
