"""Structured progress for long work (a search, compile-ahead, ncu, the baselines, a session's steps), carried by
the ``log`` callbacks the API already has.

Every long API call takes ``log: Callable[[str], None]``. A message that reports progress is a
:class:`ProgressLine`: a ``str`` (so any callback prints it as before) that also carries a :class:`Step` — the
phase, how much is done out of how much, the best time so far and the time budget. The command line
(:mod:`kernelpilot.cli.progress`) turns steps into a Rich progress bar with an ETA on a terminal, and into plain
``[3/12] …`` lines elsewhere; a Python caller may read ``getattr(message, "step", None)`` (:func:`step_of`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelpilot.fmt import format_clock, format_duration_ns

__all__ = ["Log", "Phase", "ProgressLine", "Step", "Steps", "counter", "is_milestone", "step_of"]

#: The progress callback every long API call takes: one message at a time.
Log = Callable[[str], None]

#: Lines a counter phase (compile-ahead, ``inspect --all-configs``) prints when it cannot draw a bar: about one per
#: 5 % of the work, whatever its size.
COUNTER_LINES = 20


@dataclass(frozen=True)
class Step:
    """Where a long piece of work stands.

    Attributes:
        phase: what is running: ``search``, ``compile-ahead``, ``inspect``, ``ncu``, ``baselines``, ``v3`` (a
            session's version) ...
        done: units finished (evaluations, configs compiled, steps).
        total: units in all, None when unknown; an upper bound for a search (the space, the evaluation budget or
            the version cap, whichever is smallest), which may stop earlier.
        best_ns: the best (incumbent) time so far, nanoseconds; None when nothing is correct yet or not a search.
        elapsed_s: seconds spent on the phase so far (a search: its budget's clock), None when not tracked.
        budget_s: the phase's time budget in seconds, None when it has none.
        tick: an intermediate count (a config compiled): a progress bar shows it, a printed line only at a
            milestone (:func:`is_milestone`).
    """

    phase: str
    done: int
    total: int | None = None
    best_ns: float | None = None
    elapsed_s: float | None = None
    budget_s: float | None = None
    tick: bool = False

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the rate so far (``elapsed_s / done``) times the units left, capped by what the time budget
        has left; None when neither can be known (nothing done yet and no budget, or no clock)."""
        if self.elapsed_s is None:
            return None
        left: list[float] = []
        if self.total is not None and self.done > 0:
            left.append(self.elapsed_s / self.done * max(0, self.total - self.done))
        if self.budget_s is not None:
            left.append(max(0.0, self.budget_s - self.elapsed_s))
        return min(left) if left else None

    @property
    def counts(self) -> str:
        """``[3/12]`` (``[3]`` without a total)."""
        return f"[{self.done}/{self.total}]" if self.total is not None else f"[{self.done}]"

    @property
    def status(self) -> str:
        """``best 80.90 µs · ETA 0:00:21``: what is known of the best time and the time left (may be empty)."""
        parts = [f"best {format_duration_ns(self.best_ns)}"] if self.best_ns is not None else []
        if self.eta_s is not None and (self.total is None or self.done < self.total):
            parts.append(f"ETA {format_clock(self.eta_s)}")
        return " · ".join(parts)


class ProgressLine(str):
    """A progress message: the text any ``log`` callback prints, carrying its :class:`Step` as ``.step``.

    Args:
        text: the line as people read it (it should say the counts itself, e.g. ``[3/12] …``).
        step: the structured progress.
    """

    step: Step

    def __new__(cls, text: str, step: Step) -> ProgressLine:
        line = super().__new__(cls, text)
        line.step = step
        return line


def step_of(message: str) -> Step | None:
    """The :class:`Step` a message carries (a :class:`ProgressLine`), or None for a plain line."""
    return message.step if isinstance(message, ProgressLine) else None


def is_milestone(done: int, total: int, lines: int = COUNTER_LINES) -> bool:
    """True when a counter at ``done`` of ``total`` is worth a printed line: the first and the last unit, and about
    one per ``1/lines`` of the work in between (so a 2,000-config space prints ~20 lines, not 2,000)."""
    if done <= 1 or done >= total:
        return True
    every = max(1, total // lines)
    return done % every == 0


def counter(log: Log, phase: str, noun: str, *, every: bool = False) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback (compile-ahead, a static space) that sends ``log`` a :class:`ProgressLine`
    such as ``compile-ahead [40/200] configs compiled · ETA 0:00:12`` at each milestone (:func:`is_milestone`), or at
    every call with ``every`` (for a ``log`` that filters ticks itself, as the command line's does).

    Args:
        log: where the lines go. phase: the step's phase. noun: what is counted, in the plural (``configs compiled``).
        every: send every count, not only the milestones.
    """
    t0 = time.monotonic()

    def progress(done: int, total: int) -> None:
        if every or is_milestone(done, total):
            step = Step(phase=phase, done=done, total=total, elapsed_s=time.monotonic() - t0, tick=done < total)
            log(ProgressLine(f"{phase} {step.counts} {noun}" + (f" · {step.status}" if step.status else ""), step))

    return progress


class Phase:
    """One long step without a count (an ncu profile, the baselines): ``log`` gets ``{name}: {what}`` when it
    starts (a :class:`Step` at 0 of 1) and ``{name}: done in 15.2 s`` at :meth:`end` (1 of 1). As a context
    manager it ends itself, saying ``stopped after 3.1 s`` when the block raised (the exception goes on).

    Args:
        log: where the lines go. name: the phase (``ncu``, ``baselines``). what: what it does, in words.
    """

    def __init__(self, log: Log, name: str, what: str) -> None:
        self.log, self.name = log, name
        self._t0 = time.monotonic()
        self._ended = False
        log(ProgressLine(f"{name}: {what}", Step(phase=name, done=0, total=1, elapsed_s=0.0)))

    def end(self, how: str = "done in") -> None:
        """Log the end of the step (once; later calls do nothing)."""
        if self._ended:
            return
        self._ended = True
        took = time.monotonic() - self._t0
        self.log(ProgressLine(f"{self.name}: {how} {took:.1f} s",
                              Step(phase=self.name, done=1, total=1, elapsed_s=took)))

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.end("done in" if exc_type is None else "stopped after")


class Steps:
    """The numbered steps of one piece of work whose steps are known up front (a session's version: check and
    time, A/B, card, record): :meth:`start` logs ``v3 step 2/4: A/B against v2``, :meth:`finish` the last line.

    Args:
        log: where the lines go. name: the phase (``v3``). total: the steps planned.
    """

    def __init__(self, log: Log, name: str, total: int) -> None:
        self.log, self.name, self.total = log, name, max(1, total)
        self.done = 0
        self._t0 = time.monotonic()

    def start(self, what: str) -> None:
        """Log that the next step starts (its :class:`Step` counts the steps finished before it)."""
        number = min(self.done + 1, self.total)
        self.log(ProgressLine(f"{self.name} step {number}/{self.total}: {what}",
                              Step(phase=self.name, done=self.done, total=self.total,
                                   elapsed_s=time.monotonic() - self._t0)))
        self.done = number

    def finish(self, what: str) -> None:
        """Log the work's last line: every step done."""
        self.done = self.total
        self.log(ProgressLine(f"{self.name}: {what}", Step(phase=self.name, done=self.total, total=self.total,
                                                          elapsed_s=time.monotonic() - self._t0)))
