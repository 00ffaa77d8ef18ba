"""Replay: a runner that answers configs from a filled evaluation cache, with no GPU (:class:`ReplayRunner`).

A replay answers measurements, never verdicts. Each answer is the stored measurement (median, samples, static
facts, card) with the verdicts of the run that measured it taken off (accepted, decision, version numbers,
speedups: :func:`~kernelpilot.search.cache_trust.measurement_only`); the run that replays decides again, on the
stored samples, with the code a live run uses (:func:`kernelpilot.search.stats.decide` in the evaluator). A stored
"raced out" is the measuring run's judgement against *its* incumbent, so it is not replayed: the line is a short
timing (its few samples), and only a caller that races (``race_against_ns``) gets it raced out again, by
:func:`kernelpilot.search.stats.clearly_slower` against the incumbent of the replay.

Before it answers anything, the runner checks every line (:func:`kernelpilot.search.cache_admin.audit_records`):
a line signed with this user's key whose MAC does not match, or whose numbers disagree (a median that is not the
median of its samples, no samples, an unmeasured time in a cache of GPU measurements), makes the whole file
refused by name (:class:`~kernelpilot.search.cache_trust.CacheEntryRefused`); so does a header whose context does
not hash to its key. Lines signed elsewhere or not at all (caches measured on another machine, such as the
committed H100 caches) are answered after those checks, and :attr:`ReplayRunner.trust` says so
("unsigned: consistency-checked only"). A replayed time under the floor stops the replay as a live one does
(:func:`kernelpilot.engine.guards.impossible`, applied by the evaluator to every answer).

Re-exported by :mod:`kernelpilot.search.cache`.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernelpilot.errors import SearchError
from kernelpilot.search.cache_admin import audit_records, best_evaluation, resolve_cache_file
from kernelpilot.search.cache_file import CacheFileIndex
from kernelpilot.search.cache_store import CacheContext, EvaluationCache, NotInCache
from kernelpilot.search.cache_trust import CacheEntryRefused, measurement_only, race_stored, trust_note
from kernelpilot.search.model import Evaluation, config_key

__all__ = ["ReplayRunner"]

def _read_checked(path: Path) -> tuple[CacheContext | None, list[Evaluation], str]:
    """(context, last evaluation of each config, trust note) of the cache file ``path``, every line checked.

    Raises:
        SearchError: no such file; the header's context does not hash to its key.
        CacheEntryRefused: a forged or inconsistent line.
    """
    if not path.is_file():
        raise SearchError(f"no cache file {path}", hint="`kernelpilot cache list` shows the cache files")
    index = CacheFileIndex(path)
    index.read_path()
    context: CacheContext | None = None
    if index.header is not None:
        try:
            context = CacheContext.model_validate(index.header["context"])
        except ValidationError:
            context = None
        if context is not None and context.key() != index.header.get("key"):
            raise SearchError(f"{path}: line 1: the header's context does not hash to its key (edited by hand)",
                              "fill a new cache with `kernelpilot tune` on the GPU")
    states, refused = audit_records(index, context)
    if refused:
        raise CacheEntryRefused(refused, f"replay of {path}")
    return context, list(index.records.values()), trust_note(states)


class ReplayRunner:
    """A runner that answers from a filled cache with no GPU, so strategies can be compared on the CPU.

    ``runner(config)`` returns the cached measurement (``worker="replay"``, ``cached=True``; ``wall_s`` is what
    the measurement cost, so replays can add up the device seconds a strategy would have spent); see the module
    docstring for what is checked and what is taken off.

    Args:
        source: an :class:`EvaluationCache`, a cache file path, or a prefix
            :func:`~kernelpilot.search.cache_admin.show_cache` accepts.
        root: the folder searched for a prefix (None: :func:`cache_dir`'s default).

    Attributes:
        path: the cache file replayed.
        context: its context (None when the file has no readable header).
        trust: who vouches for its lines, in words (``signed by this user (MAC checked)``,
            ``unsigned: consistency-checked only`` ...): reports say it beside the replay.
        calls: how many configs were answered so far.
        history: the configs answered, in call order (repeats included).

    Raises:
        SearchError: ``source`` names no cache file or several; the header was edited.
        CacheEntryRefused: a line is forged or its numbers disagree (each one named).
    """

    def __init__(self, source: EvaluationCache | str | os.PathLike[str],
                 root: str | os.PathLike[str] | None = None) -> None:
        path = source.path if isinstance(source, EvaluationCache) else resolve_cache_file(source, root)
        context, evals, self.trust = _read_checked(Path(path))
        self.path: Path = Path(path)
        self.context: CacheContext | None = source.context if isinstance(source, EvaluationCache) else context
        self._by_key = {ev.key: self._measurement(ev) for ev in evals}
        self.calls = 0
        self.history: list[dict[str, Any]] = []

    @staticmethod
    def _measurement(ev: Evaluation) -> Evaluation:
        """The stored line as a measurement: verdicts off; a stored "raced out" becomes a short timing."""
        return measurement_only(ev).model_copy(update={"worker": "replay", "cached": True})

    def answer(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """The recorded measurement of ``config`` (a copy), raced out again only against this run's incumbent.

        Args:
            config: tunable name -> value.
            race_against_ns: the replaying run's incumbent median, ns, when it races (None: no racing). A
                measured ``ok`` line whose first samples (as many as a live race takes) are clearly slower than it
                (:func:`kernelpilot.search.stats.clearly_slower`, the live race's rule and margin) is answered
                ``raced out``.

        Raises:
            NotInCache: the cache has no record of ``config`` (a ``KeyError``).
        """
        ev = self._by_key.get(config_key(config))
        if ev is None:
            raise NotInCache(config, self.path)
        self.calls += 1
        self.history.append(dict(config))
        ev = ev.model_copy(deep=True)
        raced = race_stored(ev, race_against_ns)
        if raced is None:  # a short timing this run cannot decide on: what the measuring run had, nothing more
            return ev
        ev = raced
        return ev

    def __call__(self, config: dict[str, Any]) -> Evaluation:
        """The recorded measurement of ``config`` (:meth:`answer` without racing).

        Raises:
            NotInCache: the cache has no record of ``config`` (a ``KeyError``).
        """
        return self.answer(config)

    def __contains__(self, config: object) -> bool:
        """True when ``config`` (a dict) can be replayed."""
        return isinstance(config, dict) and config_key(config) in self._by_key

    def __len__(self) -> int:
        """Number of configs that can be replayed."""
        return len(self._by_key)

    def configs(self) -> list[dict[str, Any]]:
        """Every config that can be replayed (copies), in order of first recording."""
        return [dict(ev.config) for ev in self._by_key.values()]

    def evaluations(self) -> list[Evaluation]:
        """Every replayable measurement (copies, without stored verdicts), in order of first recording."""
        return [ev.model_copy(deep=True) for ev in self._by_key.values()]

    def best(self) -> Evaluation | None:
        """The fastest ``ok`` evaluation (lowest ``duration_ns``), or None when none is ``ok``."""
        best = best_evaluation(self._by_key.values())
        return None if best is None else best.model_copy(deep=True)
