"""A strategy's known order measured ahead over several workers, a window at a time (:class:`PlanAhead`).

A strategy with a ``plan`` (exhaustive, random) asks for configs one by one in that order. Over several GPUs the
evaluator measures the plan ahead: when the strategy asks for a planned config not measured yet, that config and
the ``window - 1`` planned after it go to the runner's workers at once (``Runner.map``); the strategy's calls then
answer them from ``Evaluator.ready`` and judge them one by one (A/B, audit, records).

Measuring the whole plan as one batch (as ``tune`` did) fails on a large space: on 3 H200s a 10,800-config
exhaustive tune waited 544 s for every config's compile before its first measurement, raced nothing (no incumbent
before the batch) and recorded nothing until the batch would end (docs/device-runs/2026-11-27-s8). Windows bound
all three: the compile waited for is the window's, each window races the incumbent judged before it, and an
interruption or a time budget loses at most the window in flight.

When the runner takes requests from several threads (``Runner.concurrent``: the local worker pool, one lock per
worker), the next window is measured while the main thread judges and records the one before it (the GPUs would
otherwise wait for the judging: on that run the GPUs were busy 45 % of the wall time with one window at a time).
That next window races the incumbent of the moment it starts, one window older than the judging; the A/B samples
and the audit of a new incumbent wait for the first worker's config in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kernelpilot.records.evaluation import config_key
from kernelpilot.search.model import BudgetExhausted

if TYPE_CHECKING:
    from kernelpilot.engine.evaluator import Evaluator

__all__ = ["PlanAhead"]


class _Window:
    """One window's configs measured on a thread (``Runner.map``): the results, or what the map raised."""

    def __init__(self, start: int, end: int, todo: list[dict[str, Any]], ev: Evaluator, race_ns: float | None):
        self.start, self.end, self.results = start, end, []  # type: ignore[var-annotated]
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(ev, todo, race_ns), name="kp-plan-window",
                                       daemon=True)
        self.thread.start()

    def _run(self, ev: Evaluator, todo: list[dict[str, Any]], race_ns: float | None) -> None:
        try:
            for answer in ev.runner.map(todo, race_against_ns=race_ns):
                self.results.append(answer)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread by PlanAhead._join
            self.error = exc


class PlanAhead:
    """Measure ``planned`` ahead over ``ev``'s runner, ``window`` configs at a time (see the module docstring).

    Args:
        ev: the evaluator (its ``runner``, ``budget``, ``ready``, ``runs_needed`` and ``_absorb`` are used).
        planned: the strategy's order (configs). window: configs per window (at least 1).

    Raises:
        ValueError: ``window`` under 1.
    """

    def __init__(self, ev: Evaluator, planned: Sequence[dict[str, Any]], window: int) -> None:
        if window < 1:
            raise ValueError(f"plan_ahead: window must be at least 1, got {window}")
        self.ev, self.window = ev, window
        self.plan = [dict(c) for c in planned]
        self.at: dict[str, int] = {}
        for i, c in enumerate(self.plan):
            self.at.setdefault(config_key(c), i)
        self.next = 0  # the first place not handed to the runner yet
        self.inflight: _Window | None = None
        self.concurrent = bool(ev.runner.concurrent) and ev.parallel > 1

    def before(self, key: str) -> None:
        """Called (main thread) when the strategy asks for ``key``: its window measured and absorbed into
        ``ev.ready`` first when it is planned and not answered yet; then, with a concurrent runner, the next window
        started.

        Raises:
            BudgetExhausted: the budget was spent before ``key``'s window could start. Whatever a window's map
                raised (the runner's own errors), once the window is joined.
        """
        ev = self.ev
        i = self.at.get(key)
        if i is not None and key not in ev.ready and key not in ev.seen:
            if self.inflight is not None and self.inflight.start <= i < self.inflight.end:
                self._join()
            elif i >= self.next:
                self._join()
                self._launch(i, speculative=False)
                self._join()
        if self.concurrent and self.inflight is None and self.next < len(self.plan):
            self._launch(self.next, speculative=True)

    def finish(self) -> None:
        """Wait for the window in flight and keep its answers (measured, counted, cached; never judged): before the
        runner's workers close. Raises what that window's map raised."""
        self._join()

    def _launch(self, start: int, *, speculative: bool) -> None:
        """Start the window at ``start``: the planned configs that would cost a run (``needs_run``), each once, no
        more than the evaluation budget has left. A speculative start (the next window, before anyone asked) is
        skipped when the budget is spent instead of raising."""
        ev = self.ev
        try:
            ev.budget.check()
        except BudgetExhausted:
            if speculative:
                return
            raise
        end = start + self.window
        self.next = end
        todo = ev.runs_needed(self.plan[start:end])
        if todo:
            self.inflight = _Window(start, end, todo, ev, ev._race_ns())

    def _join(self) -> None:
        """Wait for the window in flight (in short joins: a signal still reaches the main thread) and put its
        answers into ``ev.ready``, counted and cached; then raise what its map raised, if anything."""
        w, self.inflight = self.inflight, None
        if w is None:
            return
        while w.thread.is_alive():
            w.thread.join(timeout=0.5)
        for answer in w.results:
            self.ev.ready[answer.key] = self.ev._absorb(answer)
        if w.error is not None:
            raise w.error

