"""The seams of the :class:`~kernelpilot.engine.evaluator.Evaluator` besides the runner and the stop rules: static
pruning (:class:`Pruner`), bottleneck cards (:class:`EvidenceSource`) and the records (:class:`Recorder`), each
with a base class (:class:`PrunerBase`, :class:`RecorderBase`) holding the defaults of its optional parts. The
evaluator calls every part directly (no ``getattr`` probe); an implementation subclasses the base and declares only
what it does. Re-exported by :mod:`kernelpilot.engine.evaluator`.
"""

from __future__ import annotations

from typing import Any, Protocol

from kernelpilot.records.evaluation import Evaluation, Move

__all__ = ["EvidenceSource", "Pruner", "PrunerBase", "Recorder", "RecorderBase"]


class Pruner(Protocol):
    """Static pruning handed to the evaluator (``engine/prune.py:CompileAhead``)."""

    def reason(self, config: dict[str, Any]) -> str | None:
        """Why ``config`` can never win (it is answered ``pruned``), or None to measure it."""
        ...

    def failure(self, config: dict[str, Any]) -> str | None:
        """For a config :meth:`reason` refused: the failure status (``timeout``, ``worker_crash``, ...) when its
        compile hung or killed its worker (the evaluator answers that status instead of ``pruned``); else None."""
        ...

    def facts(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """The compiled binary's facts of ``config`` (``registers_per_thread``, ``spills``, ``shared_bytes``,
        ``occupancy_pct``) to put in an evaluation's ``static``, or None when there are none (yet)."""
        ...

    def warm(self, config: dict[str, Any]) -> None:
        """Start compiling ``config`` at the shapes its audit will check, without waiting: ``config`` is about to
        lead (the evaluator calls it before the A/B timing, and for the first config before it is measured)."""
        ...


class PrunerBase:
    """Defaults of a :class:`Pruner` that prunes nothing, knows no compile failure and no binary facts, and compiles
    nothing ahead of an audit."""

    def reason(self, config: dict[str, Any]) -> str | None:
        """None: every config is measured."""
        return None

    def failure(self, config: dict[str, Any]) -> str | None:
        """None: a refused config is answered ``pruned``."""
        return None

    def facts(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """None: no binary facts."""
        return None

    def warm(self, config: dict[str, Any]) -> None:
        """Nothing: the audit compiles what it runs."""


class EvidenceSource(Protocol):
    """Makes a bottleneck card for an evaluation that became the incumbent (ncu, else a light card)."""

    def evidence(self, ev: Evaluation) -> Evaluation:
        """``ev`` with ``card`` (and ``bound``, ``verdict_summary``, ``profile_error``) filled as far as possible.
        Never raises for the kernel's faults."""
        ...

    def needs_gpu(self, ev: Evaluation) -> bool:
        """Whether :meth:`evidence` for ``ev`` would run on the GPU (an ncu profile). A card that needs none (a light
        card: a compile for the target on the CPU) is made in a thread while the worker audits the same config, so
        a new incumbent waits for the longer of the two, not their sum. Raises nothing."""
        ...

    def warm(self, config: dict[str, Any]) -> None:
        """Start what a card of ``config`` needs on the CPU (a light card's compile), without waiting: the first
        config leads without an A/B, and its card is made while it is measured. Raises nothing."""
        ...


class Recorder(Protocol):
    """Keeps the record of each evaluation (``optimize``'s run folder; ``tune`` keeps none per evaluation)."""

    def before(self, index: int, config: dict[str, Any], parent: Evaluation | None, move: Move | None,
               incumbent: Evaluation | None) -> None:
        """Called before version ``index`` runs: write what is planned (``config.json``, ``hypothesis.md``). Not
        called for a skipped config (:meth:`skipped` records those)."""
        ...

    def after(self, ev: Evaluation, incumbent: Evaluation | None) -> Evaluation:
        """Called with the judged evaluation: write its records; returns it (with ``commit`` set when committed)."""
        ...

    def skipped(self, ev: Evaluation) -> Evaluation:
        """Called instead of :meth:`before`/:meth:`after` for a config answered without a run (``invalid_config``,
        ``pruned``, ...): record it (a row of a table); returns it."""
        ...

    def describe(self, ev: Evaluation) -> str | None:
        """The head of ``ev``'s progress line in the recorder's words (``v3: rejected (ok) 81.40 µs``), or None
        for the evaluator's own (``eval 3 {config}: ok 81.40 µs``)."""
        ...


class RecorderBase:
    """Defaults of a :class:`Recorder`'s optional parts: skipped configs are not recorded, progress lines are the
    evaluator's own. :meth:`before` and :meth:`after` are the implementation's."""

    def skipped(self, ev: Evaluation) -> Evaluation:
        """``ev`` unchanged, recorded nowhere."""
        return ev

    def describe(self, ev: Evaluation) -> str | None:
        """None: the evaluator's own line."""
        return None
