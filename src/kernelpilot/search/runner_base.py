"""The defaults of the optional parts of the :class:`~kernelpilot.engine.runner.Runner` protocol (:class:`RunnerBase`).

The protocol lives in :mod:`kernelpilot.engine.runner`; this base sits in ``search/`` so that the runners of this
layer (:class:`~kernelpilot.search.worker.WorkerPool`, :class:`~kernelpilot.search.ray_pool.RayPool`) can subclass it
without importing upwards. A runner that subclasses it declares only what it does differently; the
:class:`~kernelpilot.engine.evaluator.Evaluator` calls every part directly (no ``getattr`` probe).
"""

from __future__ import annotations

from typing import Any

from kernelpilot.errors import KernelpilotError

__all__ = ["RunnerBase"]


class RunnerBase:
    """Defaults for a runner that has no per-config time limit, answers every config, does not audit device activity
    and stops its workers the same way whether or not the run was interrupted.

    Attributes:
        timeout_s: the per-config time limit of the runner's workers (s); None: no limit (a replay, a wrapper).
        audits: whether :meth:`audit` runs the device-activity audit (:mod:`kernelpilot.measure.activity`). False:
            the evaluator neither calls it nor records an ``audit`` phase (a replay, whose answers were judged when
            measured).
        concurrent: whether the runner takes requests from several threads at once (a window of configs measured
            on one thread while the main thread asks for A/B samples and audits:
            :class:`~kernelpilot.engine.plan_ahead.PlanAhead`). False: one request at a time.
        measures: whether :meth:`evaluate` measures the config now (False: a replay reads a stored measurement,
            so re-asking it proves nothing: :mod:`kernelpilot.engine.verify_best`).
    """

    timeout_s: float | None = None
    audits: bool = False
    concurrent: bool = False
    measures: bool = True

    def knows(self, config: dict[str, Any]) -> bool:
        """Whether this runner can answer ``config`` at all (True: it measures whatever it is given; a replay
        answers only the configs its cache holds, the evaluator skips the others as ``not_in_cache``)."""
        return True

    def audit(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """The device-activity audit of ``config``: ``{"status", "message"}`` of what it found; when clean, None or
        a dict without ``status`` (a worker's ``{"phases_s"}``: seconds per audit stage). The default audits
        nothing (None); it is called only when :attr:`audits` is True."""
        return None

    def ab_error(self, config: dict[str, Any]) -> KernelpilotError | None:
        """Why the A/B samples of a pair with ``config`` could not be taken; the default keeps no such error
        (None)."""
        return None

    def close(self) -> None:
        """Release the workers (the default holds none)."""

    def abort(self) -> None:
        """Release the workers at once, without the polite stop (an interrupted run). The default is
        :meth:`close`."""
        self.close()
