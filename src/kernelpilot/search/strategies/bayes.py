"""The ``bayes`` strategy: Optuna's TPE sampler (a Bayesian-optimization method) through its ask/tell interface."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kernelpilot.search.model import config_key
from kernelpilot.search.strategies.base import StrategyBase

if TYPE_CHECKING:
    from kernelpilot.search.model import Evaluate, Evaluation
    from kernelpilot.search.space import SearchSpace
    from kernelpilot.search.strategies.polish import Polish

#: What TPE is told for a failed or invalid config. TPE ranks trials (good vs bad by quantile), so any value above
#: every real time works; this one is finite (Optuna stores it) and far above any kernel time in nanoseconds.
PENALTY = 1e30


class BayesStrategy(StrategyBase):
    """Optuna TPE over categorical distributions of each tunable's values, evaluating only valid, untried configs.

    Each step asks TPE for a config. A valid, untried one is evaluated and told its objective (``PENALTY`` when
    it failed). One that breaks a constraint is told ``PENALTY`` without being evaluated (TPE learns to avoid
    the region); one already tried is told its known objective again. In both cases the step then evaluates the
    nearest valid untried config instead (fewest differing tunables, then value-position distance; see
    :meth:`SearchSpace.nearest`) and adds it to the study as a completed trial, so every step costs exactly one
    evaluation and the search ends when every valid config was tried. A valid ``start`` is evaluated first and
    added to the study. Optuna's logging is silenced while it runs. With several workers (one per GPU or Ray
    actor) each step asks for that many configs and evaluates them as one parallel batch (TPE's batch mode:
    asked trials stay open until their batch is measured); with one worker it is the sequential loop above.

    Args:
        n_startup_trials: random trials before TPE models the results (Optuna's default is 10).
        multivariate: model the tunables jointly (Optuna's multivariate TPE; recommended for interacting tile
            sizes) rather than one by one.
        n_ei_candidates: candidates TPE scores per step.

    Raises:
        ValueError: ``n_startup_trials`` < 0 or ``n_ei_candidates`` < 1.
    """

    name = "bayes"

    def __init__(self, n_startup_trials: int = 10, multivariate: bool = True, n_ei_candidates: int = 24) -> None:
        if n_startup_trials < 0 or n_ei_candidates < 1:
            raise ValueError(f"need n_startup_trials >= 0 and n_ei_candidates >= 1, got {n_startup_trials}, "
                             f"{n_ei_candidates}")
        self.n_startup_trials = n_startup_trials
        self.multivariate = multivariate
        self.n_ei_candidates = n_ei_candidates

    def search(self, space: SearchSpace, evaluate: Evaluate, *, seed: int,
               start: dict[str, Any] | None = None) -> None:
        """Run TPE until every valid config was tried or ``evaluate`` raises.

        Args:
            space: the search space.
            evaluate: config -> Evaluation.
            seed: seeds the TPE sampler (same seed, same space, same objective: same sequence).
            start: a config to evaluate first (the incumbent), ignored when not valid.

        Raises:
            BudgetExhausted: from ``evaluate``, propagated unchanged.
        """
        prior = [evaluate(dict(start))] if start is not None and start in space and space.size else []
        self.search_from(space, evaluate, seed=seed, prior=prior)

    def search_from(self, space: SearchSpace, evaluate: Evaluate, *, seed: int,
                    prior: Sequence[Evaluation] = (), polish: Polish | None = None) -> None:
        """TPE told ``prior`` (evaluations already made, e.g. the ``auto`` strategy's card moves) as completed trials,
        then asked until every valid config was tried or ``evaluate`` raises. Invalid priors are ignored. With
        ``polish``, every other config is its step around the best configs so far
        (:class:`~kernelpilot.search.strategies.polish.Polish`; TPE's turn when it has none), told to TPE as a
        completed trial like a substitute.

        Raises:
            BudgetExhausted: from ``evaluate``, propagated unchanged.
        """
        import optuna
        from optuna.distributions import CategoricalDistribution
        from optuna.trial import TrialState, create_trial

        if space.size == 0:
            return
        distributions = {n: CategoricalDistribution(list(v)) for n, v in space.tunables.items()}
        tried: dict[str, tuple[dict[str, Any], float]] = {}  # key -> (config, objective): what polish reads too
        width = evaluate.parallel
        turn = 0

        def told(value: float) -> float:
            return value if math.isfinite(value) else PENALTY

        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                sampler = optuna.samplers.TPESampler(
                    seed=seed, n_startup_trials=self.n_startup_trials, multivariate=self.multivariate,
                    n_ei_candidates=self.n_ei_candidates,
                )
                study = optuna.create_study(direction="minimize", sampler=sampler)

                def add(config: dict[str, Any], value: float) -> None:
                    study.add_trial(create_trial(params=dict(config), distributions=distributions,
                                                 value=told(value), state=TrialState.COMPLETE))

                for ev in prior:
                    if ev.key not in tried and space.is_valid(ev.config):
                        tried[ev.key] = ({n: ev.config[n] for n in space.names}, ev.objective)
                        add(tried[ev.key][0], ev.objective)
                size = space.size
                while len(tried) < size:
                    # one batch: up to `width` valid untried configs (asked, or nearest substitutes)
                    batch: list[tuple[Any, dict[str, Any]]] = []  # (open trial or None for a substitute, config)
                    repeats: list[tuple[Any, str]] = []  # trials that asked for a config already in this batch
                    exhausted = False
                    while len(batch) < width and len(tried) + len(batch) < size:
                        pending = {config_key(c) for _, c in batch}
                        turn += 1
                        step = polish.propose(tried, set(tried) | pending) if polish and turn % 2 == 0 else None
                        if step is not None:
                            batch.append((None, step))
                            continue
                        trial = study.ask(distributions)
                        config = {n: trial.params[n] for n in space.names}
                        key = config_key(config)
                        if key not in tried and key not in pending and space.is_valid(config):
                            batch.append((trial, config))
                            continue
                        if key in pending:  # told once its batch is measured
                            repeats.append((trial, key))
                        else:  # invalid: TPE learns it is bad; tried: TPE hears the known value again
                            study.tell(trial, told(tried[key][1]) if key in tried else PENALTY)
                        substitute = space.nearest(config, exclude=set(tried) | pending)
                        if substitute is None:
                            exhausted = True
                            break
                        batch.append((None, substitute))
                    evs = evaluate.many([c for _, c in batch])
                    for (trial, config), ev in zip(batch, evs):
                        tried[config_key(config)] = (config, ev.objective)
                        if trial is None:
                            add(config, ev.objective)
                        else:
                            study.tell(trial, told(ev.objective))
                    for trial, key in repeats:
                        study.tell(trial, told(tried[key][1]))
                    if exhausted or not batch:
                        return
        finally:
            optuna.logging.set_verbosity(verbosity)
