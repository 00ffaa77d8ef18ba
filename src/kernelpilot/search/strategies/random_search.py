"""The ``random`` strategy: the valid configs in a seeded random order, each once."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from kernelpilot.search.model import config_key
from kernelpilot.search.strategies.base import StrategyBase

if TYPE_CHECKING:
    from kernelpilot.search.model import Evaluate
    from kernelpilot.search.space import SearchSpace


class RandomStrategy(StrategyBase):
    """Evaluate the valid configs in a random permutation (uniform sampling without replacement).

    A strong baseline on small budgets (Bergstra & Bengio, 2012) and the one the others must beat. Takes no options.
    """

    name = "random"

    def search(self, space: SearchSpace, evaluate: Evaluate, *, seed: int,
               start: dict[str, Any] | None = None) -> None:
        """Evaluate ``start`` first (when valid), then every other valid config in a permutation drawn from ``seed``.

        Args:
            space: the search space.
            evaluate: config -> Evaluation.
            seed: seeds ``random.Random``; the same seed on the same space gives the same order.
            start: a config to evaluate first (the incumbent), ignored when not valid.

        Raises:
            BudgetExhausted: from ``evaluate``, propagated unchanged.
        """
        for config in self.plan(space, seed=seed, start=start):
            evaluate(config)

    def plan(self, space: SearchSpace, *, seed: int, start: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The whole order :meth:`search` follows (known up front, so the tuner can spread it over GPUs)."""
        order = space.sample(random.Random(seed), space.size)
        first = [dict(start)] if start is not None and start in space else []
        skip = {config_key(c) for c in first}
        return first + [c for c in order if config_key(c) not in skip]
