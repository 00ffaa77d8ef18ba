"""The defaults of a strategy's optional parts (:class:`StrategyBase`); the protocol is
:class:`kernelpilot.search.strategies.Strategy`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelpilot.search.space import SearchSpace

__all__ = ["StrategyBase"]


class StrategyBase:
    """Defaults for a strategy whose order depends on its answers (no plan) and that shares the GPU with the
    session's profiles and baselines.

    Attributes:
        search_first: True when the GPU should serve the search alone until it ends (``optimize``: no ncu profile of
            v0, the baselines timed after the search, no roofline-target stop; :func:`kernelpilot.app.session.
            search_first`). False here.
    """

    search_first: bool = False

    def plan(self, space: SearchSpace, *, seed: int,
             start: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
        """Every config the strategy will ask for, in order, when that order is known before any answer (measured
        ahead over several workers, compiled ahead in that order); None here: the order depends on the answers."""
        return None
