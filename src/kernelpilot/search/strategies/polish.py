"""Steps around the best configs measured so far, interleaved with the model's proposals (the ``auto`` strategy).

Why (measured): on torchao's int8 mm config list (960 configs, an exhaustive tune on an H200, session 12,
``benchmarks/search/landscapes.py``) one config is within 1 % of the best, and the next best one is a local
optimum 8.5 % slower whose single-tunable neighbours are all slower: the card's moves stop there, and TPE alone
left one seed of six there after its 200 s budget. The best is two coupled steps from configs TPE had already
measured (``num_stages`` up from a config with the best's tiles and fewer warps). Exploring around every good
config found, not only around the incumbent, escapes such a valley.

A step: the *centers* are the ``top_k`` best configs measured so far (finite objective), best first; a center's
neighbours are, per tunable and per direction, the valid config that takes that tunable's next value down or up and
changes the other tunables as little as possible (fewest changed, then smallest steps: in a config list such as
``@triton.autotune``'s, where ``num_warps`` and ``num_stages`` come in listed pairs, moving one moves the other).
The step is an untried neighbour of the best center that has one; among them, the one that an additive model of
log time over every result so far (each tunable value's mean effect: a main-effects fit) predicts fastest. With no
untried neighbour around the centers there is no step, and the model proposes alone.

Measured on the landscapes (``benchmarks/search/landscapes.py --in-process --top-k 0,5 --seeds 0-29``: the strategy
run against each stored landscape, budget 200 device seconds): on torchao's list TPE alone met 1 % of the best in 26
of 30 seeds (median 96.0 device seconds), with these steps (5 centers) in 30 of 30 (median 56.5, worst 170.4); on
the matmul example's H100 cache the median went from 73.9 to 67.8 s and the worst from 136.0 to 103.4 s; attention
13.8 to 12.7 s; the softmax example, the matmul tutorial, GeGLU and the 10,800-config softmax space did not change.
A scratch variant that ranked the neighbours of all centers by the model first (budget 150 evaluations, seeds 0–29)
met 1 % on torchao in 28 of 30, median 105 evaluations against 49 for the best center first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kernelpilot.search.model import config_key

if TYPE_CHECKING:
    from kernelpilot.search.space import SearchSpace

__all__ = ["Polish"]


class Polish:
    """Best-neighbour steps around the ``top_k`` best configs (see the module docstring).

    Args:
        space: the search space (its valid configs are the candidates).
        top_k: how many of the best measured configs are centers (>= 1).

    Raises:
        ValueError: ``top_k`` < 1.
    """

    def __init__(self, space: SearchSpace, top_k: int = 5) -> None:
        if top_k < 1:
            raise ValueError(f"need top_k >= 1, got {top_k}")
        self.space, self.top_k = space, top_k
        self._around: dict[str, list[dict[str, Any]]] = {}

    def neighbours(self, center: dict[str, Any]) -> list[dict[str, Any]]:
        """The valid configs one step from ``center`` (:meth:`SearchSpace.steps
        <kernelpilot.search.space.SearchSpace.steps>`), computed once per center."""
        key = config_key(center)
        if key not in self._around:
            self._around[key] = self.space.steps(center)
        return self._around[key]

    def propose(self, results: Mapping[str, tuple[dict[str, Any], float]],
                exclude: set[str]) -> dict[str, Any] | None:
        """The next step, or None when no center has an untried neighbour.

        Args:
            results: config key -> (config, objective in ns; inf for a failure) of every config
                measured or answered so far.
            exclude: keys not to propose (tried, or already in the batch being built).
        """
        ok = sorted((obj, key) for key, (_c, obj) in results.items() if math.isfinite(obj))
        if not ok:
            return None
        effect = self._effects([(results[k][0], math.log(o)) for o, k in ok])
        best: tuple[float, int, int] | None = None
        pick: dict[str, Any] | None = None
        for rank, (_obj, key) in enumerate(ok[:self.top_k]):
            for order, config in enumerate(self.neighbours(results[key][0])):
                if config_key(config) in exclude:
                    continue
                score = (rank, sum(effect.get((n, config[n]), 0.0) for n in self.space.names), order)
                if best is None or score < best:
                    best, pick = score, config
        return pick

    def _effects(self, logs: list[tuple[dict[str, Any], float]]) -> dict[tuple[str, Any], float]:
        """(tunable, value) -> mean of log time minus the overall mean, over the results having that value."""
        mean = sum(v for _c, v in logs) / len(logs)
        sums: dict[tuple[str, Any], list[float]] = {}
        for config, v in logs:
            for n in self.space.names:
                sums.setdefault((n, config.get(n)), []).append(v - mean)
        return {k: sum(v) / len(v) for k, v in sums.items()}
