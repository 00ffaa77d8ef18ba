"""The run folder recorder: ``optimize``'s per-version records and git history, as the engine's
:class:`~kernelpilot.engine.evaluator.Recorder` hook.

Before a version runs: ``vN/config.json`` (config, move, parent, incumbent, strategy, source hash, shape) and
``vN/hypothesis.md``. After it was judged: ``correctness.json`` and ``timing.json`` (the worker's full records, when
it got that far), ``verdict.json`` (the card, when one was made), ``metrics.json`` (ncu), ``outcome.json`` (the
:class:`~kernelpilot.records.evaluation.Evaluation`), and one git commit per accepted version. Everything else is
committed by :meth:`RunFolderRecorder.finish`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kernelpilot.records.evaluation import Evaluation, Move
from kernelpilot.records.history import RunHistory
from kernelpilot.records.workspace import Workspace, write_json, write_text
from kernelpilot.report.hypothesis import render_hypothesis

__all__ = ["RunFolderRecorder", "observed_change"]


def observed_change(metric: str, before: Any, after: Any) -> str:
    """How the metric a hypothesis named moved between two ncu profiles (:class:`KernelMetrics`): a field name or the
    ncu metric behind one; the ncu duration when the metric is not a profile field. Raises nothing."""
    fields = type(after).model_fields
    field = metric if metric in fields else next((f for f, src in after.sources.items() if src == metric), None)
    if field is not None:
        b, a = getattr(before, field, None), getattr(after, field, None)
        if isinstance(b, (int, float)) and isinstance(a, (int, float)):
            return f"{field}: {b:.3g} → {a:.3g}"
    b, a = before.duration_ns, after.duration_ns
    return f"ncu duration: {b:.0f} → {a:.0f} ns" if b and a else ""


class RunFolderRecorder:
    """Writes each version's folder and commits accepted versions (see the module docstring).

    Args:
        ws: the run folder. kf_sha256: the kernel source's hash. shape: the run's shape. strategy: its name.
        roofline: for the hypothesis' target line. history: the git history (None: no git).
        metrics_of: config key -> ncu metrics, for ``observed`` (None: no profiles).
        log: progress callback.
    """

    def __init__(self, ws: Workspace, *, kf_sha256: str, shape: dict[str, Any], strategy: str, roofline: Any,
                 history: RunHistory | None, metrics_of: dict[str, Any] | None = None,
                 log: Any = lambda _m: None) -> None:
        self.ws, self.sha, self.shape, self.strategy, self.roofline = ws, kf_sha256, shape, strategy, roofline
        self.history, self.metrics_of, self.log = history, metrics_of if metrics_of is not None else {}, log
        self._parents: dict[int, Evaluation | None] = {}

    def before(self, index: int, config: dict[str, Any], parent: Evaluation | None, move: Move | None,
               incumbent: Evaluation | None) -> None:
        """``config.json`` and ``hypothesis.md`` of version ``index``, written before it runs."""
        vdir = self.ws.version_dir(index)
        self._parents[index] = parent
        write_json(vdir / "config.json", {"config": config, "move": move.model_dump() if move else None,
                                          "parent": parent.index if parent else None,
                                          "incumbent": incumbent.index if incumbent else None,
                                          "strategy": self.strategy, "source_sha256": self.sha, "shape": self.shape})
        write_text(vdir / "hypothesis.md", render_hypothesis(index, config, move, parent, self.roofline, incumbent))
        self.log(f"v{index}: {'baseline' if move is None else move.label} — checking")

    def write_metrics(self, ev: Evaluation, metrics: Any, kernel_names: list[str]) -> None:
        """``metrics.json`` of a profiled version (the ncu evidence calls this)."""
        if ev.index is not None:
            write_json(self.ws.version_dir(ev.index) / "metrics.json",
                       {"main_kernel": metrics.model_dump(), "all_kernels": kernel_names})

    def report_path(self, ev: Evaluation) -> Path:
        """Where a version's ncu report goes."""
        return self.ws.version_dir(ev.index or 0) / "profile.ncu-rep"

    def after(self, ev: Evaluation, incumbent: Evaluation | None) -> Evaluation:
        """The version's records and, when it became the incumbent, its commit; returns ``ev`` (with ``commit``)."""
        assert ev.index is not None
        t0 = time.monotonic()
        vdir = self.ws.version_dir(ev.index)
        records = ev.records or {}
        if records.get("correctness") is not None:
            write_json(vdir / "correctness.json", records["correctness"])
        if records.get("timing") is not None:
            write_json(vdir / "timing.json", records["timing"])
        if ev.card:
            write_json(vdir / "verdict.json", ev.card)
        parent = self._parents.get(ev.index)
        if ev.move is not None and parent is not None and ev.key in self.metrics_of and parent.key in self.metrics_of:
            ev = ev.model_copy(update={"observed": observed_change(ev.move.expected_metric,
                                                                   self.metrics_of[parent.key], self.metrics_of[ev.key])})
        if self.history is not None and ev.accepted:
            speed = f", {ev.speedup_vs_parent:.3f}x vs v{ev.parent}" if ev.speedup_vs_parent and ev.parent is not None else ""
            what = "baseline" if ev.move is None else ev.move.label
            write_json(vdir / "outcome.json", ev)
            ev = ev.model_copy(update={"commit": self.history.commit(
                [vdir], f"v{ev.index}: {ev.version_status} — {what}{speed}")})
        # the record phase: writing these files and the commit (the rewrite with the commit id goes into the final
        # record commit)
        ev = ev.model_copy(update={"phases_s": {**ev.phases_s, "record": time.monotonic() - t0}})
        write_json(vdir / "outcome.json", ev)
        self.log(f"v{ev.index}: {ev.version_status} ({ev.status})"
                 + (f" {ev.duration_ns / 1e3:.2f} µs" if ev.duration_ns else "")
                 + f" — {(ev.decision or ev.message)[:200]}")
        return ev

    def finish(self, versions: list[Evaluation]) -> None:
        """Commit everything left: reports, rejected and failed versions, the commit ids in accepted outcomes."""
        if self.history is None:
            return
        rejected = [f"v{v.index}" for v in versions if v.version_status in ("rejected", "failed")]
        self.history.commit([self.ws.root], "record: final report, benchmark" +
                            (f"; rejected/failed versions {', '.join(rejected[:40])}"
                             f"{' …' if len(rejected) > 40 else ''} kept" if rejected else ""))
