"""What a search evaluates and records: one :class:`Evaluation` per config, typed failures, and the budget.

Every layer of the search speaks these types (Kernel Tuner's layering: strategy → runner → device → back end):

* a **strategy** (``search/strategies``) proposes configs and calls an :class:`Evaluate` (``evaluate(config) ->
  Evaluation``, ``evaluate.many(configs)``, ``evaluate.parallel``) until it is done or it raises
  :class:`BudgetExhausted`;
* the **tuner** (``search/tune.py``) wraps the runner's evaluate with the cache, the budget and the
  incumbent's statistics;
* the **runner** (``search/worker.py``, or ``search/cache.py``'s replay) produces the :class:`Evaluation`.

A failed config is data, never an exception: its ``status`` names the failure (:data:`FAILURES`) and its
``objective`` is infinite, so every strategy can rank it and move on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

__all__ = [
    "FAILURES",
    "Budget",
    "BudgetExhausted",
    "Evaluate",
    "EvaluateBase",
    "Evaluation",
    "OneByOne",
    "Status",
    "config_key",
]

from kernelpilot.records.evaluation import (  # noqa: E402,F401  (re-exported)
    FAILURES, Candidate, Evaluation, Status, config_key)


class Evaluate(Protocol):
    """What a strategy calls: config -> evaluation. Never raises for a bad config (that is a failure status); may
    raise :class:`BudgetExhausted` when it holds the search's budget. The tuner's
    :class:`~kernelpilot.engine.evaluator.Evaluator` implements it; :class:`EvaluateBase` gives the defaults of the
    parallel parts and :class:`OneByOne` makes one of a plain function."""

    @property
    def parallel(self) -> int:
        """How many configs it can run at once (the tuner's: one per worker, i.e. per GPU or Ray actor); strategies
        propose that many configs per step. At least 1."""
        ...

    def __call__(self, config: dict[str, Any] | Candidate) -> Evaluation:
        """Evaluate one config (or a :class:`~kernelpilot.records.evaluation.Candidate`: a config and its move)."""
        ...

    def many(self, configs: Sequence[dict[str, Any] | Candidate]) -> list[Evaluation]:
        """Evaluate several configs (in parallel over the workers where it has several); results in input order,
        each judged as if evaluated alone in that order.

        Raises:
            BudgetExhausted: the budget ran out (what was measured before is recorded by the tuner).
        """
        ...


class EvaluateBase:
    """Defaults of an :class:`Evaluate` that runs one config at a time: ``parallel`` 1, ``many`` calls itself on
    each config in order. A subclass defines ``__call__``."""

    parallel: int = 1

    def many(self, configs: Sequence[dict[str, Any] | Candidate]) -> list[Evaluation]:
        """Each config evaluated in turn, in input order (a :class:`BudgetExhausted` stops the rest)."""
        return [self(c) for c in configs]  # type: ignore[operator]  # the subclass's __call__


class OneByOne(EvaluateBase):
    """An :class:`Evaluate` of a plain function ``config -> Evaluation`` (one config at a time).

    Args:
        fn: the function; its exceptions (``BudgetExhausted``) propagate.
    """

    def __init__(self, fn: Callable[[Any], Evaluation]) -> None:
        self.fn = fn

    def __call__(self, config: dict[str, Any] | Candidate) -> Evaluation:
        """``fn(config)``."""
        return self.fn(config)


class BudgetExhausted(Exception):
    """Raised by the tuner's evaluate when the search's budget is spent; strategies let it propagate."""


class Budget(BaseModel):
    """How much a search may spend: evaluations and/or wall seconds (either may be None for no limit).

    Only evaluations that were not answered from the cache count against ``max_evals`` and ``max_s``
    (a cached answer costs nothing), so a rerun goes further, not shorter.

    A replay has no wall clock worth counting: with ``charged=True`` the seconds are the device seconds each
    evaluation cost when it was measured (its stored ``wall_s``, passed to :meth:`charge`), so a replayed search stops
    where the live one would have.

    A resumed search (``optimize --resume``, ``tune --resume``) starts with what the killed one spent:
    ``spent_before_s`` seconds and ``evals`` evaluations.

    Attributes:
        max_evals: most new evaluations, or None.
        max_s: most seconds (wall from :meth:`start`, or charged), or None.
        charged: count charged seconds instead of the wall clock.
        spent_before_s: seconds spent by earlier sessions of the same search (added to both clocks).
        evals: new evaluations so far. charged_s: seconds charged so far.
        started_s: ``time.monotonic()`` at :meth:`start`.
    """

    max_evals: int | None = None
    max_s: float | None = None
    charged: bool = False
    evals: int = 0
    charged_s: float = 0.0
    started_s: float | None = None
    spent_before_s: float = 0.0

    def start(self) -> Budget:
        """Start the clock (idempotent) and return self."""
        if self.started_s is None:
            self.started_s = time.monotonic()
        return self

    def elapsed_s(self) -> float:
        """Seconds spent: charged seconds, or wall seconds since :meth:`start` (0 before it), plus
        ``spent_before_s``."""
        if self.charged:
            return self.spent_before_s + self.charged_s
        return self.spent_before_s + (0.0 if self.started_s is None else time.monotonic() - self.started_s)

    def exhausted(self) -> bool:
        """True when the evaluation count or the time limit is reached."""
        if self.max_evals is not None and self.evals >= self.max_evals:
            return True
        return self.max_s is not None and self.elapsed_s() >= self.max_s

    def charge(self, seconds: float = 0.0) -> None:
        """Count one new (uncached) evaluation that cost ``seconds`` (counted when ``charged``)."""
        self.evals += 1
        self.charged_s += max(0.0, seconds)

    def check(self) -> None:
        """Raise :class:`BudgetExhausted` if the budget is spent (call before starting an evaluation)."""
        if self.exhausted():
            what = "device seconds charged" if self.charged else "s"
            raise BudgetExhausted(f"budget spent: {self.evals} evaluations, {self.elapsed_s():.1f} {what}")
