"""Timing statistics: quartiles, flush size, interpreted labels, interleaved A/B samples (the accept rule itself is
tested with the engine, tests/test_engine.py)."""

from __future__ import annotations

import pytest

from kernelpilot.measure.timing import INTERPRETED_LABEL, TimingResult, flush_size_bytes, summarize, time_interpreted
from kernelpilot.target import Target


def fake(samples):
    return TimingResult(timer="test", is_measurement=True, samples_ns=samples, n_samples=len(samples),
                        **summarize(samples), n_warmup=0, warmup_ms=0, warmup_stable=True, flush_bytes=0, l2_bytes=None)


def test_summarize_quartiles():
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s["median_ns"], s["q1_ns"], s["q3_ns"], s["iqr_ns"], s["min_ns"]) == (3.0, 2.0, 4.0, 2.0, 1.0)
    with pytest.raises(ValueError):
        summarize([])


def test_flush_is_at_least_twice_l2_and_never_under_256_mib():
    assert flush_size_bytes(60 * 2**20) == 256 * 2**20
    assert flush_size_bytes(200 * 2**20) == 400 * 2**20
    assert flush_size_bytes(None) == 256 * 2**20


def test_interpreted_timing_is_labelled_not_a_measurement():
    t = time_interpreted(lambda: sum(range(100)), max_samples=5, rep_ms=10)
    assert not t.is_measurement and INTERPRETED_LABEL in t.timer and 3 <= t.n_samples <= 5


def test_time_interleaved_alternates_and_returns_both_sides():
    from kernelpilot.measure.timing import time_interleaved

    order: list[str] = []
    a, b = time_interleaved(lambda: order.append("a"), lambda: order.append("b"), 4, Target.cpu())
    assert len(a) == len(b) == 4 and all(x > 0 for x in a + b)
    assert order == ["a", "b"] * 4, "A and B alternate so drift hits both alike"
    with pytest.raises(ValueError):
        time_interleaved(lambda: None, lambda: None, 0, Target.cpu())


def test_median_ci_is_tight_for_steady_samples_and_wide_for_noisy_ones() -> None:
    import random

    from kernelpilot.measure.timing import TIGHT_CI_REL, median_ci_rel

    rng = random.Random(0)
    steady = [100_000 * (1 + rng.gauss(0, 0.002)) for _ in range(20)]
    noisy = [100_000 * (1 + rng.gauss(0, 0.05)) for _ in range(20)]
    assert median_ci_rel(steady) <= TIGHT_CI_REL < median_ci_rel(noisy)
    assert median_ci_rel(noisy[:5]) == float("inf")  # too few samples to say anything
    # more samples of the same noise narrow the interval (about as 1/sqrt(n))
    more = [100_000 * (1 + rng.gauss(0, 0.05)) for _ in range(400)]
    assert median_ci_rel(more) < median_ci_rel(noisy) / 2


@pytest.mark.gpu
def test_interleaved_samples_do_not_time_host_work_that_a_busy_gpu_hides():
    """A launch whose Python side spends 300 µs before a ~1 ms GPU op (a TMA kernel building descriptors, a slow
    launcher) times like the bare op: the host enqueues ahead while the GPU is busy, as in time_cuda. A synchronize
    per sample used to add the host time to every sample."""
    import statistics
    import time

    import torch

    from kernelpilot.measure.timing import time_cuda, time_interleaved

    x = torch.randn(4096, 4096, device="cuda")

    def bare():
        torch.mm(x, x)

    def slow_host():
        t_end = time.perf_counter() + 300e-6
        while time.perf_counter() < t_end:
            pass
        torch.mm(x, x)

    a, b = time_interleaved(bare, slow_host, 40, Target.detect())
    ratio = statistics.median(b) / statistics.median(a)
    assert ratio < 1.05, f"host work timed as GPU time: {ratio:.3f}"
    lone = time_cuda(slow_host).median_ns
    assert statistics.median(b) < 1.05 * lone


def test_round_robin_alternates_every_contender_and_labels_cpu_times():
    from kernelpilot.measure.timing import time_round_robin

    order: list[str] = []
    res = time_round_robin([lambda: order.append("k"), lambda: order.append("e"), lambda: order.append("c")],
                           Target.cpu(), min_samples=5)
    assert [len(r.samples_ns) for r in res] == [5, 5, 5]
    assert order == ["k", "e", "c"] * 5, "one sample of each contender per round"
    assert all(not r.is_measurement and "round-robin with 3" in r.note for r in res)
    with pytest.raises(ValueError):
        time_round_robin([], Target.cpu())


@pytest.mark.gpu
def test_host_work_longer_than_the_gpu_work_is_not_timed_either():
    """300 µs of Python before a ~20 µs op: the host, not the GPU, sets the pace, and without the opening spin every
    sample would hold the host's time (a synchronize-free loop keeps no lead when the host is the slower side)."""
    import statistics
    import time

    import torch

    from kernelpilot.measure.timing import time_interleaved

    x = torch.randn(1 << 22, device="cuda")

    def bare():
        x.mul_(1.0)

    def slow_host():
        t_end = time.perf_counter() + 300e-6
        while time.perf_counter() < t_end:
            pass
        x.mul_(1.0)

    a, b = time_interleaved(bare, slow_host, 60, Target.detect())
    ratio = statistics.median(b) / statistics.median(a)
    assert ratio < 1.2, f"host work timed as GPU time: {ratio:.3f} ({statistics.median(a):.0f} ns bare)"
