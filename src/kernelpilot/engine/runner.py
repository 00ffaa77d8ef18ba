"""The runner seam: what evaluates one config (Kernel Tuner's runner layer).

Three runners implement :class:`Runner`: :class:`kernelpilot.search.worker.WorkerPool` (isolated worker processes,
one per GPU), :class:`kernelpilot.search.ray_pool.RayPool` (Ray actors) and :class:`ReplayRunner` (answers from a
filled cache with no GPU). The :class:`~kernelpilot.engine.evaluator.Evaluator` only speaks this protocol, and calls
every part of it directly; :class:`~kernelpilot.search.runner_base.RunnerBase` gives the defaults of the parts most
runners do not need (``timeout_s``, ``knows``, ``audits``/``audit``, ``measures``, ``ab_error``, ``abort``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kernelpilot.errors import KernelpilotError
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.search.cache import ReplayRunner as CacheReplay
from kernelpilot.search.runner_base import RunnerBase

__all__ = ["Comparison", "ReplayRunner", "Runner", "RunnerBase", "compare_ab"]


@runtime_checkable
class Runner(Protocol):
    """Evaluates configs; never raises for a config's own faults (they are failure statuses). Subclass
    :class:`~kernelpilot.search.runner_base.RunnerBase` for the defaults of ``timeout_s``, ``concurrent``, ``knows``,
    ``audits``, ``audit``, ``measures``, ``ab_error`` and ``abort``."""

    @property
    def parallel(self) -> int:
        """Configs evaluated at once (GPUs, actors; 1 for a replay)."""
        ...

    @property
    def timeout_s(self) -> float | None:
        """The per-config time limit of the runner's workers (s), recorded with each new evaluation; a cached
        ``timeout`` measured under a smaller limit is run again. None: no limit (a replay)."""
        ...

    @property
    def concurrent(self) -> bool:
        """Whether requests may come from several threads at once (False: the evaluator makes one at a time)."""
        ...

    @property
    def audits(self) -> bool:
        """Whether :meth:`audit` audits device activity (False: the evaluator skips the audit and its phase)."""
        ...

    @property
    def measures(self) -> bool:
        """Whether :meth:`evaluate` measures now (False: a replay answers from its cache)."""
        ...

    def knows(self, config: dict[str, Any]) -> bool:
        """Whether the runner can answer ``config`` (False: the evaluator answers ``not_in_cache`` without asking;
        only a replay says False, for a config its cache does not hold)."""
        ...

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """Evaluate one config; ``race_against_ns`` (the incumbent's median, ns) lets clearly slower configs stop
        after a few samples."""
        ...

    def map(self, configs: Sequence[dict[str, Any]], race_against_ns: float | None = None) -> Iterator[Evaluation]:
        """Evaluate several configs spread over the workers; results in input order."""
        ...

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """``n`` interleaved samples of configs ``a`` and ``b`` on the same inputs (ns), or None when impossible."""
        ...

    def ab_error(self, config: dict[str, Any]) -> KernelpilotError | None:
        """Why :meth:`ab_samples` of a pair with ``config`` (the side this runner evaluated) answered None: the
        error the timing raised, or None when it did not fail that way (no worker, no samples asked for)."""
        ...

    def audit(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """Before ``config`` leads: the device-activity audit (:mod:`kernelpilot.measure.activity`: work on unjoined
        streams, the file's kernels never launched): ``{"status", "message"}`` of what it found; when clean, None or
        a dict without ``status`` (``{"phases_s"}``: seconds per audit stage). Called only when :attr:`audits` is
        True."""
        ...

    def close(self) -> None:
        """Release the workers."""
        ...

    def abort(self) -> None:
        """Release the workers at once, dropping the config in flight (an interrupted run); else as :meth:`close`."""
        ...


class ReplayRunner(CacheReplay, RunnerBase):
    """A :class:`Runner` over a filled evaluation cache: every answer is the stored measurement (no GPU), checked
    and without the measuring run's verdicts (:mod:`kernelpilot.search.replay`).

    Args:
        source: a cache file path, a prefix :func:`kernelpilot.search.cache.show_cache` accepts, or an
            :class:`~kernelpilot.search.cache.EvaluationCache`.
        root: the folder searched for a prefix.

    Raises:
        SearchError: ``source`` names no cache file or several.
        CacheEntryRefused: a line of the file is forged or inconsistent (each named).
    """

    parallel = 1
    measures = False

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """The stored measurement of ``config``, its verdicts off; raced out only when this run races and its first
        stored samples are clearly slower than ``race_against_ns`` (:meth:`CacheReplay.answer`).

        Raises:
            NotInCache: the cache has no record of ``config`` (a ``KeyError``: the replay cannot answer).
        """
        return self.answer(config, race_against_ns)

    def map(self, configs: Sequence[dict[str, Any]], race_against_ns: float | None = None) -> Iterator[Evaluation]:
        """The stored measurements, in order (raced as :meth:`evaluate` does)."""
        return iter([self.evaluate(c, race_against_ns) for c in configs])

    def knows(self, config: dict[str, Any]) -> bool:
        """Whether the cache holds a measurement of ``config`` (the evaluator skips the others: ``not_in_cache``)."""
        return config in self

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> None:
        """None: a replay cannot take new samples (the evaluator decides on the stored ones)."""
        return None

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class Comparison:
    """Interleaved A/B samples of two configs ``a`` and ``b`` (ns, same inputs, one worker) and the one decision
    rule (:func:`kernelpilot.search.stats.decide`, a :class:`~kernelpilot.search.stats.Decision` each way):
    ``faster`` says whether ``a`` is faster than ``b`` beyond noise, ``slower`` whether ``b`` is faster than ``a``
    beyond noise (both not ``replace``: neither is). A session classifies a version against its parent with it."""

    faster: Any
    slower: Any
    a_ns: list[float]
    b_ns: list[float]


def compare_ab(runner: Runner, a: dict[str, Any], b: dict[str, Any], n: int) -> Comparison | None:
    """``a`` against ``b`` both ways (:class:`Comparison`) on ``n`` interleaved samples per side from
    ``runner.ab_samples`` (a runner may answer a pair it already sampled from memory, as the session's does). None
    when ``n`` is 0 or the runner could not time them (None, or an empty side). Raises nothing the runner does
    not."""
    from kernelpilot.search.stats import decide

    got = runner.ab_samples(a, b, n) if n > 0 else None
    if not got or not got[0] or not got[1]:
        return None
    x, y = list(got[0]), list(got[1])
    return Comparison(faster=decide(x, y), slower=decide(y, x), a_ns=x, b_ns=y)
