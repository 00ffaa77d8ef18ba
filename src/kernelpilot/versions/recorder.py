"""The session's :class:`~kernelpilot.engine.evaluator.Recorder`: what a judged version leaves in its folder.

``vN/correctness.json`` and ``timing.json`` (the worker's records), ``ab.json`` (the A/B comparisons against the
parent and the incumbent), ``verdict.json`` (the card), ``metrics.json`` and ``profile.ncu-rep`` (when ncu could
profile it) and ``memory.json`` (:class:`~kernelpilot.versions.records.MemoryRecord`); then the session's own part
(``session.json``, the experience log, the commit) through ``finalize``.

The Evaluator has judged the version against the incumbent before :meth:`SessionRecorder.after` runs (its
``accepted`` says whether it leads now). The recorder adds the session's classification of the version against its
*parent* (:mod:`kernelpilot.versions.outcome`: improved / regressed / neutral / mixed), with the same rule applied
both ways to interleaved A/B samples (:func:`kernelpilot.engine.runner.compare_ab`; a pair the Evaluator already
sampled is not timed again).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernelpilot.engine.seams import RecorderBase
from kernelpilot.records.evaluation import Evaluation, Move
from kernelpilot.records.models import now_utc
from kernelpilot.records.seal import note_written
from kernelpilot.records.workspace import write_json
from kernelpilot.versions.candidates import version_config, version_of
from kernelpilot.versions.outcome import classify, flat_metrics, judge_expectations
from kernelpilot.versions.records import Expectation, MemoryRecord, memory_path

if TYPE_CHECKING:
    from kernelpilot.engine.runner import Comparison
    from kernelpilot.profile.kernel_metrics import KernelMetrics
    from kernelpilot.versions.run_version import VersionRun

__all__ = ["SessionRecorder"]


def _invalid(index: int, parent: MemoryRecord | None, hypothesis: str, status: str, message: str,
             expects: list[Expectation], before: dict[str, float]) -> MemoryRecord:
    return MemoryRecord(version=index, parent=parent.version if parent else None, hypothesis=hypothesis,
                        expectations=[e.model_copy(update={"before": before.get(e.metric)}) for e in expects],
                        status=status, message=message[:2000], outcome="invalid", metrics_before=before,
                        bottleneck_before=parent.bottleneck_after if parent else None,
                        pitfalls=[f"{status}: {message.strip().splitlines()[0][:300]}" if message.strip() else status],
                        recorded_utc=now_utc())


def _detail(cmp: Comparison) -> dict[str, Any]:
    """A :class:`~kernelpilot.engine.runner.Comparison` as memory.json's ``vs_parent``/``vs_incumbent``: the
    forward :class:`~kernelpilot.search.stats.Decision`, ``reverse_replace`` (the other side faster beyond noise)
    and both medians (ns)."""
    detail = cmp.faster.model_dump()
    detail["reverse_replace"] = cmp.slower.replace
    detail["median_ns"] = statistics.median(cmp.a_ns)
    detail["other_median_ns"] = statistics.median(cmp.b_ns)
    return detail


def _evidence(run: VersionRun, index: int, ev: Evaluation,
              kernel_config: dict[str, Any]) -> tuple[Evaluation, KernelMetrics | None]:
    """The version's card (ncu when possible, else light) and its ncu metrics (None without a profile); the card is
    made for the file at ``kernel_config`` (its default config; ``ev.config`` names the version) and ``ev`` keeps
    its own config."""
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence

    if not ev.ok or not ev.measured:
        return ev, None
    version_cfg, ev = ev.config, ev.model_copy(update={"config": dict(kernel_config)})
    vdir = run.root / f"v{index}"
    light = LightEvidence(run.kernel(index), run.state.shape, run.roofline, run.state.device_name,
                          run.state.kernel_name,
                          "no Nsight Compute profile (--no-profile)" if not run.profile else "ncu unavailable")
    got: dict[str, Any] = {}

    def on_metrics(_ev: Evaluation, metrics: KernelMetrics, names: list[str]) -> None:
        got["metrics"] = metrics
        write_json(vdir / "metrics.json", {"main_kernel": metrics.model_dump(), "all_kernels": names})

    if run.profile:
        ncu = NcuEvidence(run.kernel(index), run.reference, run.state.shape, lambda _e: vdir / "profile.ncu-rep",
                          light, on_metrics=on_metrics, log=run.log)
        ev = ncu.profile(ev)
        if (vdir / "profile.ncu-rep").is_file():  # ncu wrote it for this command: the session's commit takes it
            note_written(vdir / "profile.ncu-rep")
    else:
        ev = light.evidence(ev)
    return ev.model_copy(update={"config": version_cfg}), got.get("metrics")


class SessionRecorder(RecorderBase):
    """Writes one version's folder and memory record (see the module docstring).

    Args:
        run: the session's :class:`~kernelpilot.versions.run_version.VersionRun`.
        parent: the parent's memory record (None for v0). hypothesis / expects / change: the version's.
        finalize: called with the memory record once ``memory.json`` is written; returns the commit (or None).

    Attributes:
        evaluator: the :class:`~kernelpilot.engine.evaluator.Evaluator` it records for (set after it is built).
        memory / commit: the version's record and commit, once :meth:`after` ran.
    """

    def __init__(self, run: VersionRun, *, parent: MemoryRecord | None, hypothesis: str, expects: list[Expectation],
                 change: str, finalize: Callable[[MemoryRecord], str | None]) -> None:
        self.run, self.parent, self.hypothesis, self.expects = run, parent, hypothesis, expects
        self.change, self.finalize = change, finalize
        self.evaluator: Any = None
        self.incumbent_before: Evaluation | None = None
        self.memory: MemoryRecord | None = None
        self.commit: str | None = None

    def before(self, index: int, config: dict[str, Any], parent: Evaluation | None, move: Move | None,
               incumbent: Evaluation | None) -> None:
        """Note the incumbent the version is judged against (the hypothesis was committed by ``try`` already)."""
        self.incumbent_before = incumbent

    def describe(self, ev: Evaluation) -> str:
        """``v3: accepted ok`` — the Evaluator's progress head for a version."""
        return f"v{version_of(ev.config)}: {'accepted' if ev.accepted else 'kept the incumbent'} ({ev.status})"

    def after(self, ev: Evaluation, incumbent: Evaluation | None) -> Evaluation:
        """Write the version's records, its memory.json (with ``incumbent_after``), then ``finalize``; returns
        ``ev`` with ``commit`` set. A version whose A/B timing failed is invalid and does not lead, even when the
        Evaluator's judge (on stored samples) accepted it."""
        index = version_of(ev.config)
        records = ev.records or {}
        for name in ("correctness", "timing"):
            if records.get(name) is not None:
                write_json(self.run.root / f"v{index}" / f"{name}.json", records[name])
        mem = self._memory(ev, index, records)
        ev_obj = self.evaluator
        if mem.outcome == "invalid" and ev.accepted and ev_obj is not None:
            ev_obj.incumbent = self.incumbent_before
            if ev_obj.history:
                ev_obj.history.pop()
            incumbent = self.incumbent_before
        lead = version_of(incumbent.config) if incumbent is not None else None
        mem = mem.model_copy(update={"change": self.change, "incumbent_after": lead})
        write_json(memory_path(self.run.root, index), mem)
        self.memory = mem
        self.commit = self.finalize(mem)
        return ev.model_copy(update={"commit": self.commit})

    def _memory(self, ev: Evaluation, index: int, records: dict[str, Any]) -> MemoryRecord:
        from kernelpilot.engine.runner import compare_ab

        parent, expects, hyp = self.parent, self.expects, self.hypothesis
        before = dict(parent.metrics_after) if parent else {}
        if not ev.ok:
            return _invalid(index, parent, hyp, records.get("session_status") or ev.status, ev.message, expects,
                            before)
        run, runner = self.run, self.evaluator.runner
        n = self.evaluator.ab_samples
        ab: dict[str, Any] = {"config": records.get("kernel_config")}
        faster = slower = None
        slower_than_incumbent = False
        inc = version_of(self.incumbent_before.config) if self.incumbent_before is not None else None
        for name, other in (("vs_parent", parent.version if parent and parent.outcome != "invalid" else None),
                            ("vs_incumbent", inc if inc is not None and (parent is None or inc != parent.version)
                             else None)):
            if other is None:
                continue
            cmp = compare_ab(runner, ev.config, version_config(other), n)
            if cmp is None:
                exc = runner.ab_error(ev.config)
                return _invalid(index, parent, hyp, getattr(exc, "failure", None) or "runtime_error",
                                f"A/B timing failed: {exc.message if exc is not None else 'no samples'}", expects,
                                before)
            ab[name] = _detail(cmp)
            if name == "vs_parent":
                faster, slower = cmp.faster.replace, cmp.slower.replace
            else:
                slower_than_incumbent = cmp.slower.replace
        if "vs_parent" in ab and inc is not None and "vs_incumbent" not in ab:
            ab["vs_incumbent"], slower_than_incumbent = ab["vs_parent"], bool(slower)
        write_json(run.root / f"v{index}" / "ab.json", ab)
        if ev.measured:
            run.step("bottleneck card (Nsight Compute)" if run.profile else "light bottleneck card")
        ev, metrics = _evidence(run, index, ev, records.get("kernel_config") or {})
        if ev.card:
            write_json(run.root / f"v{index}" / "verdict.json", ev.card)
        after = flat_metrics(ev, metrics)
        if ev.measured:
            judged = judge_expectations(expects, before, after, faster, slower)
        else:  # interpreted: the times say nothing; neither do the decisions drawn from them
            judged = [e.model_copy(update={"before": before.get(e.metric), "after": after.get(e.metric)})
                      for e in expects]
            for detail in (ab.get("vs_parent"), ab.get("vs_incumbent")):
                if detail is not None:
                    detail.update({"replace": False, "reverse_replace": False, "measured": False})
        outcome = classify(True, faster, slower, slower_than_incumbent, judged, measured=ev.measured,
                           first=parent is None)
        pitfalls = [f"expected {e.metric} {e.direction}, it was {e.verdict}"
                    + (f" ({e.change_rel:+.1%})" if e.change_rel is not None else "")
                    for e in judged if e.verdict in ("contradicted", "unchanged")]
        if ev.profile_error:
            pitfalls.append(f"profile: {ev.profile_error[:300]}")
        return MemoryRecord(version=index, parent=parent.version if parent else None, hypothesis=hyp,
                            expectations=judged, status=ev.status, message=ev.message, outcome=outcome,
                            duration_ns=ev.duration_ns, iqr_ns=ev.iqr_ns, pct_of_roofline=ev.pct_of_roofline,
                            vs_parent=ab.get("vs_parent"), vs_incumbent=ab.get("vs_incumbent"),
                            metrics_before=before, metrics_after=after,
                            bottleneck_before=parent.bottleneck_after if parent else None,
                            bottleneck_after=ev.bound, pitfalls=pitfalls, measured=ev.measured,
                            recorded_utc=now_utc())
