"""Threads a kernel file starts (kernels/threads.py), between stages: a thread whose work is done (its ``run``
returned, so ``Thread.run`` dropped its target) but that is still ending is given
:data:`~kernelpilot.kernels.threads.ENDING_S` to end and is not named; one still holding its target is named at once,
and an ending one that lives on is named once the grace is spent. This test file stands for the kernel's code (its
path is installed), so the threads it starts are the kernel's."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kernelpilot.kernels import threads


@pytest.fixture
def as_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Install this file as the kernel's code, and put the module's state back afterwards."""
    monkeypatch.setattr(threads, "_PATHS", threads._PATHS)
    monkeypatch.setattr(threads, "_QUIET", threads._QUIET)
    monkeypatch.setattr(threads, "_MADE", threads._MADE.__class__())
    threads.install([__file__])


def _started(target, *args, ending: bool) -> threading.Thread:
    """A thread of the kernel's (started from this file) on a library ``target``; ``ending``: in the state of one
    whose run() has returned (its target dropped) while the interpreter still tears it down (the call in flight
    stands for the teardown)."""
    t = threading.Thread(target=target, args=args, name=target.__name__)
    t.start()
    assert t in threads._MADE and t.is_alive()
    if ending:
        t._target = None  # type: ignore[attr-defined]  # what Thread.run's `finally` leaves (it deletes it)
    return t


def test_an_ending_thread_is_waited_for_and_not_named(as_kernel: None) -> None:
    t = _started(time.sleep, 0.05, ending=True)
    assert threads.running() == [] and not t.is_alive()


@contextmanager
def _waiting(*, ending: bool) -> Iterator[threading.Thread]:
    """A thread of the kernel's that waits (up to 30 s) until the block ends."""
    stop = threading.Event()
    t = _started(stop.wait, 30, ending=ending)
    try:
        yield t
    finally:
        stop.set()
        t.join()


def test_a_thread_still_at_its_work_is_named_at_once(as_kernel: None) -> None:
    with _waiting(ending=False):
        t0 = time.monotonic()
        assert threads.running() == ["thread 'wait' was started by the kernel file's code"]
        assert time.monotonic() - t0 < threads.ENDING_S / 2  # no grace for a thread that holds its target


def test_an_ending_thread_that_lives_on_is_named_after_the_grace(as_kernel: None) -> None:
    with _waiting(ending=True):
        t0 = time.monotonic()
        assert threads.running() == ["thread 'wait' was started by the kernel file's code"]
        assert threads.ENDING_S - 0.1 <= time.monotonic() - t0 < threads.ENDING_S + 1.0
