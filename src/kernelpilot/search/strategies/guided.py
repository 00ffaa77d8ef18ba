"""The ``guided`` strategy: bottleneck-driven one-variable moves from the incumbent's card.

The search form of the optimize loop's next-change rule (:func:`kernelpilot.search.guided.propose_moves`):
from the incumbent, take the first untried valid move the incumbent's bottleneck card ranks highest (defects
first, then the patterns behind the bottleneck class, then the class's default moves, then exploration of the
remaining one-step neighbours; a config whose binary spills, ``static["spills"] > 0``, tries smaller tiles, fewer
stages and fewer warps first); move when the tuner accepts the candidate (faster beyond noise,
``Evaluation.accepted``; by objective when it was not judged). The card comes from ``card_for(evaluation)``:
the tuner gives an ncu card when it profiles, else a light card (timing + roofline + compile metadata), and a
replay gives the card stored with the evaluation. When every neighbour of the incumbent was tried, the search
steps from the best evaluated config whose neighbourhood still has untried configs, so every call makes
progress and a budget is never left unspent while the space has connected configs; it stops when none is left.

With several workers (``evaluate.parallel`` > 1: one per GPU or Ray actor) each step evaluates the card's
top moves at once, one per worker, and keeps the last one the tuner accepted (each is judged against the
incumbent of the moment, in rank order); with one worker it is the sequential walk above.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernelpilot.records.evaluation import Candidate
from kernelpilot.search.guided import propose_moves
from kernelpilot.search.model import Evaluation, config_key
from kernelpilot.search.strategies.base import StrategyBase

if TYPE_CHECKING:
    from kernelpilot.profile.card import BottleneckCard
    from kernelpilot.search.model import Evaluate
    from kernelpilot.search.space import SearchSpace

CardFor = Callable[[Evaluation], "BottleneckCard | None"]


class GuidedStrategy(StrategyBase):
    """Card-driven one-variable moves (see the module docstring).

    Args:
        card_for: the incumbent's bottleneck card, or None without evidence (then the moves are exploration).
            Default: the card stored on the evaluation (``Evaluation.card``), if any.
    """

    name = "guided"

    def __init__(self, card_for: CardFor | None = None) -> None:
        self.card_for = card_for or stored_card

    def search(self, space: SearchSpace, evaluate: Evaluate, *, seed: int, start: dict[str, Any] | None = None) -> None:
        """Walk from ``start`` (default: the space's first config) by the card's moves; see the module docstring.

        Raises:
            BudgetExhausted: from ``evaluate``, when the tuner's budget is spent (propagated).
        """
        del seed  # deterministic given the evaluations
        configs = space.configs()
        if not configs:
            return
        start = start if start is not None and space.is_valid(start) else configs[0]
        tried: dict[str, Evaluation] = {}
        width = evaluate.parallel

        def run(batch: list[dict[str, Any]]) -> list[Evaluation]:
            evs = evaluate.many(batch)
            for ev in evs:
                tried[ev.key] = ev
            return evs

        incumbent = run([start])[0]
        while True:
            card = self.card_for(incumbent) if incumbent.ok else None
            spills = incumbent.static.get("spills") if incumbent.ok else None
            moves = [m for m in propose_moves(incumbent.config, space.tunables, tried, card=card, spills=spills)
                     if space.is_valid(m.apply(incumbent.config)) and config_key(m.apply(incumbent.config)) not in tried]
            if moves:
                candidates = run([Candidate(m.apply(incumbent.config), m) for m in moves[:width]])
            else:  # neighbourhood done: step from the best config that still has an untried neighbour
                restart = _restart_point(space, tried)
                if restart is None:
                    return
                incumbent = restart
                steps = [n for n in space.neighbours(restart.config) if config_key(n) not in tried]
                candidates = run(steps[:width])
            for candidate in candidates:
                better = (candidate.accepted if candidate.accepted is not None
                          else candidate.objective < incumbent.objective)
                if better:
                    incumbent = candidate


def _restart_point(space: SearchSpace, tried: dict[str, Evaluation]) -> Evaluation | None:
    """The best evaluated config with an untried valid neighbour, or None when every neighbourhood is done."""
    for ev in sorted(tried.values(), key=lambda e: e.objective):
        if any(config_key(n) not in tried for n in space.neighbours(ev.config)):
            return ev
    return None


def stored_card(evaluation: Evaluation) -> BottleneckCard | None:
    """The card stored with an evaluation (``Evaluation.card``, a BottleneckCard dump), or None."""
    if not evaluation.card:
        return None
    from kernelpilot.profile.card import BottleneckCard

    return BottleneckCard.model_validate(evaluation.card)
