"""The ``exhaustive`` strategy: every valid config, once, in the space's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelpilot.search.strategies.base import StrategyBase

if TYPE_CHECKING:
    from kernelpilot.search.model import Evaluate
    from kernelpilot.search.space import SearchSpace


class ExhaustiveStrategy(StrategyBase):
    """Evaluate every valid config of the space once, in :meth:`SearchSpace.configs` order.

    The reference every other strategy is judged against (the benchmark's "exhaustive best"). Takes no options.
    """

    name = "exhaustive"

    def search(self, space: SearchSpace, evaluate: Evaluate, *, seed: int,
               start: dict[str, Any] | None = None) -> None:
        """Evaluate all valid configs in space order.

        Args:
            space: the search space.
            evaluate: config -> Evaluation.
            seed: unused (the order is fixed); accepted for the common interface.
            start: unused: every config is visited anyway, in the same order whatever the start.

        Raises:
            BudgetExhausted: from ``evaluate``, propagated unchanged.
        """
        for config in self.plan(space, seed=seed, start=start):
            evaluate(config)

    def plan(self, space: SearchSpace, *, seed: int, start: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The whole order :meth:`search` follows: the space's order (the tuner spreads it over GPUs)."""
        del seed, start
        return space.configs()
