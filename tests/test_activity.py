"""One launch's device records read into what ran inside and outside the timed region (pure: synthetic records,
no GPU): the opening spin is found by its name, so work that started before it is reported as off-timer work
instead of being taken for the opening (which raised ``ValueError: max() iterable argument is empty``)."""

from __future__ import annotations

from kernelpilot.measure.activity import judge_activity, launch_from_events

SPIN = "at::cuda::(anonymous namespace)::spin_kernel(long)"
MARKER = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)"
T = 7  # the timed stream
SPIN_END = 10_001_000.0


def records(*work):
    """The spin (1 µs .. 10 ms on the timed stream), ``work``, and the closing marker after everything joined."""
    return [(SPIN, T, 1_000.0, SPIN_END), *work, (MARKER, T, 10_050_000.0, 10_050_100.0)]


def test_unjoined_work_that_starts_before_the_opening_spin_is_off_timer_work():
    early = ("_side_kernel", 13, 0.0, 60_000.0)  # still running from before the launch's spin, on another stream
    launch = launch_from_events(records(early, ("_k", T, 10_001_100.0, 10_002_000.0)), timed_ns=1_000.0)
    assert launch.timed_stream == T and launch.unjoined == ["_side_kernel"]
    assert [k[0] for k in launch.kernels] == ["_side_kernel", "_k"]  # neither the spin nor the marker is work
    verdict = judge_activity([launch], ["_k"])
    assert verdict.failure == "off_timer_work" and "_side_kernel" in verdict.problem


def test_the_spin_is_found_by_name_whatever_stream_comes_first():
    # the only record on the side stream is the early one: taking it for the opening left no closing marker
    early = ("_side_kernel", 13, 0.0, 5_000.0)
    launch = launch_from_events(list(reversed(records(early))), timed_ns=1_000.0)
    assert launch.timed_stream == T and launch.unjoined == ["_side_kernel"]


def test_joined_side_stream_work_is_clean_and_late_work_is_not():
    joined = [("_k", T, 10_001_100.0, 10_002_000.0), ("_k", 13, 10_002_000.0, 10_040_000.0)]
    clean = judge_activity([launch_from_events(records(*joined), timed_ns=50_000.0)], ["_k"])
    assert clean.problem is None and clean.off_stream_kernels == ["_k"] and clean.declared_launched
    late = ("_tail", 13, 10_002_000.0, 10_090_000.0)  # ends after the closing marker started: never joined
    assert launch_from_events(records(*joined, late), timed_ns=50_000.0).unjoined == ["_tail"]


def test_records_without_a_closing_marker_still_judge_the_start():
    early = ("_side_kernel", 13, 0.0, 5_000.0)
    launch = launch_from_events([(SPIN, T, 1_000.0, SPIN_END), early, ("_k", 13, SPIN_END + 10, SPIN_END + 20)],
                                timed_ns=1_000.0)
    assert launch.unjoined == ["_side_kernel"]
    assert launch_from_events([(SPIN, T, 1_000.0, SPIN_END)], timed_ns=1.0).kernels == []
