"""The stop rules of a search (:class:`StopRule`): reasons to end it before the budget, checked by the
:class:`~kernelpilot.engine.evaluator.Evaluator` before every new evaluation. Re-exported by
:mod:`kernelpilot.engine.evaluator`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kernelpilot.search.model import BudgetExhausted

if TYPE_CHECKING:
    from kernelpilot.engine.evaluator import Evaluator

__all__ = ["MaxVersions", "StopRule", "StopRuleBase", "StopSearch", "TargetMet"]


class StopSearch(BudgetExhausted):
    """Raised by a stop rule: ends the strategy like a spent budget; the message says why."""


class StopRule(Protocol):
    """A reason to end a search before the budget: ``check(evaluator)`` returns the reason, or None to go on."""

    def check(self, evaluator: Evaluator) -> str | None:
        """Why the search should stop now (checked before every new evaluation), or None."""
        ...

    def version_cap(self) -> int | None:
        """The most versions this rule lets the search measure (the progress line's total), or None: no cap."""
        ...


class StopRuleBase:
    """Defaults of a :class:`StopRule`'s optional parts: no version cap."""

    def version_cap(self) -> int | None:
        """None: this rule caps no version count."""
        return None


@dataclass
class TargetMet(StopRuleBase):
    """Stop when the incumbent runs at or above ``target_pct`` of the roofline — unless a measured baseline (PyTorch
    eager or torch.compile, ``baselines_ns``) is still faster than the incumbent by more than ``margin`` (relative):
    then the target is not enough. The margin absorbs the run-to-run spread of two separate timings (the baselines
    are timed once, before the search); 3 % is the tolerance the project's acceptance bound uses."""

    target_pct: float
    baselines_ns: dict[str, float]
    margin: float = 0.03

    def check(self, evaluator: Evaluator) -> str | None:
        """The stop reason, or None (see the class docstring)."""
        inc = evaluator.incumbent
        if inc is None or inc.pct_of_roofline is None or inc.pct_of_roofline < self.target_pct:
            return None
        faster = {n: t for n, t in self.baselines_ns.items()
                  if inc.duration_ns is not None and t < inc.duration_ns * (1 - self.margin)}
        if faster:
            return None
        where = f"v{inc.index}" if inc.index is not None else str(inc.config)
        return (f"target met: {where} runs at {inc.pct_of_roofline:.1f} % of the roofline (target "
                f"{self.target_pct:.0f} %) and no measured baseline is more than {self.margin:.0%} faster")


@dataclass
class MaxVersions(StopRuleBase):
    """Stop after ``max_versions`` measured versions (``optimize --iterations`` caps the versions after v0; configs
    answered without a run — invalid, pruned — are no versions and do not count)."""

    max_versions: int

    def check(self, evaluator: Evaluator) -> str | None:
        """The stop reason, or None."""
        if len(evaluator.versions) >= self.max_versions:
            return f"iterations done ({self.max_versions - 1} after v0)"
        return None

    def version_cap(self) -> int | None:
        """``max_versions``."""
        return self.max_versions
