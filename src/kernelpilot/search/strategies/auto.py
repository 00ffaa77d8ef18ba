"""The ``auto`` strategy (``optimize``'s default): the card's moves as a prior, then a model over the whole space.

Three facts from the H100/H200 runs of issue 25 shaped it (docs/search.md has the numbers):

- The card's one-variable moves reach a good config in a handful of evaluations, but on their own they stop at a
  local optimum, and on a ``@triton.autotune`` config list (whose configs are rarely one move apart) after one
  step: a walk over neighbours is a prior, not a search.
- An exhaustive ``tune`` of the examples' spaces reached the space's best 1.7–3.2x sooner than the guided walk with
  its per-version profiles: when the space fits the budget, measuring all of it *is* the search, and the order only
  decides how soon the best is met (and, through racing, how cheap the slow configs are once a fast incumbent exists).
- Spaces too large to enumerate need a model: Optuna's TPE over the tunables (``search/strategies/bayes.py``), told
  every result so far, proposes the next configs; a config it asks for twice is replaced by the nearest untried one.

So the search is: ``start`` (v0); then the guided moves from the incumbent while they keep paying (each move the
card ranks first; the phase ends when the incumbent has no untried move or ``patience`` moves in a row were not
accepted); then every value of every tunable that no config tried yet had, once, in the valid config nearest the
incumbent that has it (a variant switch valid only in a corner of the space is not left to chance); then TPE,
seeded with every evaluation made so far, until every valid config of the space was tried or the budget is spent,
every other config of it a step around the best configs measured so far (``search/strategies/polish.py``: on
torchao's int8 mm list TPE alone stayed in a local optimum 8.5 % off for 4 seeds of 30; with the steps none did).
No config is evaluated twice (the evaluator answers a repeat from memory, and neither phase asks for one), and the
search never ends while the budget and the space both have something left. With several
workers each step is a batch (the card's top moves; TPE's batch mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelpilot.records.evaluation import Candidate
from kernelpilot.search.guided import propose_moves
from kernelpilot.search.model import Evaluation, config_key
from kernelpilot.search.strategies.base import StrategyBase
from kernelpilot.search.strategies.bayes import BayesStrategy
from kernelpilot.search.strategies.guided import CardFor, stored_card
from kernelpilot.search.strategies.polish import Polish

if TYPE_CHECKING:
    from kernelpilot.search.model import Evaluate
    from kernelpilot.search.space import SearchSpace


class AutoStrategy(StrategyBase):
    """The card's moves while they pay, then TPE over the rest of the space (see the module docstring).

    Args:
        card_for: the incumbent's bottleneck card (default: the card stored on the evaluation, ``Evaluation.card``).
        patience: card moves in a row that were not accepted before the model takes over (per worker: with ``w``
            workers the phase ends after ``patience * w``). 0 skips the card's moves.
        n_startup_trials: TPE's random trials before it models (counted over all evaluations, the card's included).
        top_k: the centers of the steps interleaved with TPE's proposals
            (:class:`~kernelpilot.search.strategies.polish.Polish`); 0: TPE alone.

    Raises:
        ValueError: ``patience`` or ``top_k`` < 0 (and as :class:`BayesStrategy` for ``n_startup_trials``).
    """

    name = "auto"
    #: the GPU serves the search alone until it ends (:func:`kernelpilot.app.session.search_first`): light cards
    #: during the search, ncu on the final best, the baselines after the search, and no roofline-target stop: only
    #: the budget and the space end it, so a space that fits the budget is measured whole.
    search_first = True

    def __init__(self, card_for: CardFor | None = None, patience: int = 4, n_startup_trials: int = 8,
                 top_k: int = 5) -> None:
        if patience < 0 or top_k < 0:
            raise ValueError(f"need patience >= 0 and top_k >= 0, got {patience}, {top_k}")
        self.card_for = card_for or stored_card
        self.patience, self.top_k = patience, top_k
        self.model = BayesStrategy(n_startup_trials=n_startup_trials, multivariate=True)

    def search(self, space: SearchSpace, evaluate: Evaluate, *, seed: int, start: dict[str, Any] | None = None) -> None:
        """Evaluate ``start``, the card's moves, then TPE's proposals until the space or the budget is spent.

        Raises:
            BudgetExhausted: from ``evaluate``, when the budget is spent (propagated).
        """
        configs = space.configs()
        if not configs:
            return
        start = start if start is not None and space.is_valid(start) else configs[0]
        tried: dict[str, Evaluation] = {}
        incumbent = self._card_moves(space, evaluate, start, tried)
        self._cover_values(space, evaluate, incumbent, tried)
        polish = Polish(space, self.top_k) if self.top_k else None
        self.model.search_from(space, evaluate, seed=seed, prior=list(tried.values()), polish=polish)

    def _card_moves(self, space: SearchSpace, evaluate: Evaluate, start: dict[str, Any],
                    tried: dict[str, Evaluation]) -> Evaluation:
        """The prior: v0, then the card's first-ranked untried moves from the incumbent, one per worker per step,
        until no move is left or ``patience`` (times the workers) in a row were not accepted. Returns the
        incumbent."""
        width = evaluate.parallel

        def run(batch: list[Any]) -> list[Evaluation]:
            evs = evaluate.many(batch)
            for ev in evs:
                tried[ev.key] = ev
            return evs

        incumbent = run([start])[0]
        misses = 0
        while misses < self.patience * width:
            card = self.card_for(incumbent) if incumbent.ok else None
            spills = incumbent.static.get("spills") if incumbent.ok else None
            moves = [m for m in propose_moves(incumbent.config, space.tunables, tried, card=card, spills=spills)
                     if space.is_valid(m.apply(incumbent.config)) and config_key(m.apply(incumbent.config)) not in tried]
            if not moves:
                return incumbent
            for cand in run([Candidate(m.apply(incumbent.config), m) for m in moves[:width]]):
                better = cand.accepted if cand.accepted is not None else cand.objective < incumbent.objective
                if better:
                    incumbent, misses = cand, 0
                else:
                    misses += 1
        return incumbent

    def _cover_values(self, space: SearchSpace, evaluate: Evaluate, incumbent: Evaluation,
                      tried: dict[str, Evaluation]) -> None:
        """Every value of every tunable measured once before the model takes over: for each value no tried config
        has, the valid untried config nearest the incumbent that has it (fewest other tunables changed, then the
        smallest steps in each tunable's value order). A variant switch that is valid only in a small corner of the
        space (the matmul example's ``TMA`` = 1: 10 of 1,162 configs) is otherwise left to chance: the model, fed
        only configs near the incumbent, proposes near them."""
        base = incumbent.config
        pos = {n: {v: i for i, v in enumerate(vals)} for n, vals in space.tunables.items()}

        def distance(c: dict[str, Any]) -> tuple[int, int]:
            diff = [n for n in space.names if c[n] != base.get(n)]
            return len(diff), sum(abs(pos[n][c[n]] - pos[n].get(base.get(n), 0)) for n in diff)

        picked: dict[str, dict[str, Any]] = {}
        configs = space.configs()
        for name, values in space.tunables.items():
            have = {ev.config.get(name) for ev in tried.values()} | {c[name] for c in picked.values()}
            for value in values:
                if value in have:
                    continue
                options = [c for c in configs if c[name] == value and config_key(c) not in tried
                           and config_key(c) not in picked]
                if options:
                    best = min(options, key=distance)
                    picked[config_key(best)] = best
        for ev in evaluate.many(list(picked.values())):
            tried[ev.key] = ev
