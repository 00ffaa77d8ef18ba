"""Search strategies behind one interface, and the registry that names them.

A strategy is a class with a ``name`` and a method::

    search(self, space: SearchSpace, evaluate: Evaluate, *, seed: int, start: dict | None = None) -> None

that proposes valid configs of ``space`` and calls ``evaluate(config)`` or ``evaluate.many(configs)`` (an
:class:`~kernelpilot.search.model.Evaluate`, ``evaluate.parallel`` configs at a time; an
:class:`~kernelpilot.search.model.Evaluation` comes back; a failure has ``objective == inf``) until it has
nothing left to try or ``evaluate`` raises :class:`~kernelpilot.search.model.BudgetExhausted`, which it lets
propagate (the tuner catches it). A strategy never evaluates the same config twice, and never an invalid one; it
keeps no result of its own (the tuner records every evaluation). Options go to the class's constructor
(:func:`get_strategy`), the seed to ``search``, so one strategy object can run several seeded searches. Two optional
parts, ``plan`` (the order, when known before any answer) and ``search_first``, have their defaults in
:class:`StrategyBase`, which every strategy here subclasses.

Strategies: ``auto`` (``optimize``'s default: the card's moves while they pay, then Optuna's TPE over the rest of
the space until the space or the budget is spent), ``guided`` (the bottleneck card's one-variable moves), ``exhaustive`` (every config in space order), ``random`` (a seeded permutation), ``local`` (greedy
best-improvement hill climbing with random restarts), ``bayes`` (Optuna's TPE sampler through ask/tell).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kernelpilot.errors import SearchError
from kernelpilot.search.strategies.auto import AutoStrategy
from kernelpilot.search.strategies.base import StrategyBase
from kernelpilot.search.strategies.bayes import BayesStrategy
from kernelpilot.search.strategies.exhaustive import ExhaustiveStrategy
from kernelpilot.search.strategies.guided import GuidedStrategy
from kernelpilot.search.strategies.local import LocalStrategy
from kernelpilot.search.strategies.random_search import RandomStrategy

if TYPE_CHECKING:
    from kernelpilot.search.model import Evaluate
    from kernelpilot.search.space import SearchSpace

__all__ = [
    "STRATEGIES",
    "AutoStrategy",
    "BayesStrategy",
    "ExhaustiveStrategy",
    "LocalStrategy",
    "RandomStrategy",
    "Strategy",
    "StrategyBase",
    "get_strategy",
    "register",
]


@runtime_checkable
class Strategy(Protocol):
    """What every strategy provides (a structural type; :class:`StrategyBase` holds the defaults of ``search_first``
    and ``plan``, which the callers use directly)."""

    name: str

    @property
    def search_first(self) -> bool:
        """Whether the GPU serves the search alone until it ends (``auto``; see :class:`StrategyBase`)."""
        ...

    def plan(self, space: SearchSpace, *, seed: int,
             start: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
        """Every config the strategy will ask for, in order, when that order is known before any answer (the tuner
        measures it ahead over several workers, compile-ahead compiles in that order); None when it depends on the
        answers."""
        ...

    def search(self, space: SearchSpace, evaluate: Evaluate, *, seed: int,
               start: dict[str, Any] | None = None) -> None:
        """Evaluate configs of ``space`` until done; ``BudgetExhausted`` from ``evaluate`` propagates."""
        ...


#: Strategy name -> class. Filled by :func:`register` below; a new strategy is one import and one call.
STRATEGIES: dict[str, type] = {}


def register(cls: type) -> type:
    """Add a strategy class to :data:`STRATEGIES` under its ``name`` (usable as a class decorator).

    Args:
        cls: a class with a non-empty string ``name`` and a ``search`` method, and the optional parts
            ``search_first`` and ``plan`` (subclass :class:`StrategyBase` for their defaults).

    Returns:
        ``cls`` unchanged.

    Raises:
        SearchError: ``cls`` has no name, no ``search`` or ``plan`` method or no ``search_first``, or another class
            already has that name.
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or not callable(getattr(cls, "search", None)):
        raise SearchError(f"{cls!r} is not a strategy: it needs a string `name` and a `search` method",
                          "see kernelpilot.search.strategies.Strategy")
    if not callable(getattr(cls, "plan", None)) or not isinstance(getattr(cls, "search_first", None), bool):
        raise SearchError(f"{cls!r} is not a strategy: it needs a `plan` method and a boolean `search_first`",
                          "subclass kernelpilot.search.strategies.StrategyBase for their defaults")
    if STRATEGIES.get(name, cls) is not cls:
        raise SearchError(f"two strategies are named {name!r}: {STRATEGIES[name]!r} and {cls!r}",
                          "give each strategy a distinct name")
    STRATEGIES[name] = cls
    return cls


for _cls in (AutoStrategy, GuidedStrategy, ExhaustiveStrategy, RandomStrategy, LocalStrategy, BayesStrategy):
    register(_cls)


def get_strategy(name: str, **options: Any) -> Any:
    """A new strategy object by name.

    Args:
        name: a key of :data:`STRATEGIES` (``exhaustive``, ``random``, ``local``, ``bayes``, ...).
        **options: passed to the strategy's constructor (e.g. ``n_startup_trials=8`` for ``bayes``).

    Returns:
        The strategy object.

    Raises:
        SearchError: unknown name (the hint lists the names), or an option the strategy does not take (the hint
            lists the options it takes).
    """
    if name not in STRATEGIES:
        raise SearchError(f"unknown search strategy {name!r}",
                          f"choose one of: {', '.join(sorted(STRATEGIES))}")
    cls = STRATEGIES[name]
    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"
              and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())
    unknown = [k for k in options if k not in {p.name for p in params}]
    if unknown and not takes_any:
        takes = ", ".join(f"{p.name}={p.default!r}" for p in params) or "no options"
        raise SearchError(f"strategy {name!r} has no option {unknown[0]!r}", f"it takes: {takes}")
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        raise SearchError(f"strategy {name!r} refused its options {options}: {exc}",
                          "check the option values' types and ranges") from exc
