"""The ``local`` strategy: greedy best-improvement hill climbing over adjacent values, with random restarts."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from kernelpilot.search.model import config_key
from kernelpilot.search.strategies.base import StrategyBase

if TYPE_CHECKING:
    from kernelpilot.search.model import Evaluate
    from kernelpilot.search.space import SearchSpace


class LocalStrategy(StrategyBase):
    """Greedy hill climbing: evaluate all untried neighbours, move to the best if it is strictly better.

    From the current config, every valid neighbour (one tunable changed to the next value up or down in its list,
    or to any other value with ``adjacent=False``) that has not been tried is evaluated; the climb moves to the
    best neighbour (first in neighbour order on a tie) when its objective is strictly lower than the current one's,
    and stops at a local optimum otherwise (ties never move, so the climb cannot cycle). Then it restarts from a
    config drawn uniformly from the untried ones. Failures have an infinite objective: a failed neighbour is
    never moved to, and a failed start moves to any neighbour that ran. It ends when every valid config was tried
    or after ``max_restarts`` restarts. A config's untried neighbours are evaluated as one batch, in parallel over
    the workers when there are several (:meth:`kernelpilot.search.model.Evaluate.many`).

    Args:
        adjacent: neighbourhood of one step in a tunable's list (True) or of any other value (False).
        max_restarts: most restarts after the first climb, or None for no limit (the budget stops it).

    Raises:
        ValueError: ``max_restarts`` is negative.
    """

    name = "local"

    def __init__(self, adjacent: bool = True, max_restarts: int | None = None) -> None:
        if max_restarts is not None and max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0 or None, got {max_restarts}")
        self.adjacent = adjacent
        self.max_restarts = max_restarts

    def search(self, space: SearchSpace, evaluate: Evaluate, *, seed: int,
               start: dict[str, Any] | None = None) -> None:
        """Climb from ``start`` (or a random config), then restart from random untried configs.

        Args:
            space: the search space.
            evaluate: config -> Evaluation.
            seed: seeds the choice of the first config (without ``start``) and of every restart.
            start: the first config; when it breaks a constraint the nearest valid config is used, when it is
                outside the space (unknown tunable or value) a random config is.

        Raises:
            BudgetExhausted: from ``evaluate``, propagated unchanged.
        """
        rng = random.Random(seed)
        restarts = iter(space.sample(rng, space.size))  # untried configs in random order, drawn lazily
        tried: dict[str, float] = {}

        def objective(config: dict[str, Any]) -> float:
            key = config_key(config)
            if key not in tried:
                tried[key] = evaluate(config).objective
            return tried[key]

        def objectives(configs: list[dict[str, Any]]) -> list[float]:
            new = [c for c in configs if config_key(c) not in tried]
            for ev in evaluate.many(new):
                tried[ev.key] = ev.objective
            return [tried[config_key(c)] for c in configs]

        def next_restart() -> dict[str, Any] | None:
            return next((c for c in restarts if config_key(c) not in tried), None)

        current = None
        if start is not None and space.why_invalid(start) is not None:
            try:
                current = space.nearest(start)
            except Exception:  # noqa: BLE001 - outside the product space: start at random instead
                current = None
        elif start is not None:
            current = dict(start)
        if current is None:
            current = next_restart()
        climbs = 0
        while current is not None:
            value = objective(current)
            while True:
                neighbours = space.neighbours(current, adjacent=self.adjacent)
                values = objectives(neighbours)
                if not neighbours:
                    break
                best = min(range(len(neighbours)), key=values.__getitem__)
                if not values[best] < value:
                    break
                current, value = neighbours[best], values[best]
            climbs += 1
            if self.max_restarts is not None and climbs > self.max_restarts:
                return
            current = next_restart()
