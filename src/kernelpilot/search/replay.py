"""Replay: a runner that answers configs from a filled evaluation cache, with no GPU (:class:`ReplayRunner`).

Re-exported by :mod:`kernelpilot.search.cache`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kernelpilot.search.cache_admin import best_evaluation, show_cache
from kernelpilot.search.cache_store import CacheContext, EvaluationCache, NotInCache
from kernelpilot.search.model import Evaluation, config_key

__all__ = ["ReplayRunner"]


class ReplayRunner:
    """A runner that answers from a filled cache with no GPU, so strategies can be compared on the CPU.

    ``runner(config)`` returns the cached evaluation (``worker="replay"``, ``cached=True``; ``wall_s`` is what
    the measurement cost, so replays can add up the device seconds a strategy would have spent).

    Args:
        source: an :class:`EvaluationCache`, a cache file path, or a prefix :func:`show_cache` accepts.
        root: the folder searched for a prefix (None: :func:`cache_dir`'s default).

    Attributes:
        path: the cache file replayed.
        context: its context (None when the file has no readable header).
        calls: how many configs were answered so far.
        history: the configs answered, in call order (repeats included).

    Raises:
        SearchError: ``source`` names no cache file or several.
    """

    def __init__(self, source: EvaluationCache | str | os.PathLike[str],
                 root: str | os.PathLike[str] | None = None) -> None:
        if isinstance(source, EvaluationCache):
            evals = source.evaluations()
            self.path: Path = source.path
            self.context: CacheContext | None = source.context
        else:
            summary, evals = show_cache(source, root=root)
            self.path, self.context = summary.file, summary.context
        self._by_key = {ev.key: ev.model_copy(update={"worker": "replay", "cached": True}) for ev in evals}
        self.calls = 0
        self.history: list[dict[str, Any]] = []

    def __call__(self, config: dict[str, Any]) -> Evaluation:
        """The recorded evaluation of ``config`` (a copy, ``worker="replay"``, ``cached=True``).

        Raises:
            NotInCache: the cache has no record of ``config`` (a ``KeyError``).
        """
        ev = self._by_key.get(config_key(config))
        if ev is None:
            raise NotInCache(config, self.path)
        self.calls += 1
        self.history.append(dict(config))
        return ev.model_copy(deep=True)

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
        """Every replayable evaluation (copies), in order of first recording."""
        return [ev.model_copy(deep=True) for ev in self._by_key.values()]

    def best(self) -> Evaluation | None:
        """The fastest ``ok`` evaluation (lowest ``duration_ns``), or None when none is ``ok``."""
        best = best_evaluation(self._by_key.values())
        return None if best is None else best.model_copy(deep=True)

