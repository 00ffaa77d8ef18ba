"""The run folder recorder: ``optimize``'s per-version records and git history, as the engine's
:class:`~kernelpilot.engine.evaluator.Recorder` hook.

Before a version runs: ``vN/config.json`` (config, move, parent, incumbent, strategy, source hash, shape, search
seconds spent so far) and ``vN/hypothesis.md``. After it was judged: ``correctness.json`` and ``timing.json`` (the
worker's full records, when it got that far), ``verdict.json`` (the card, when one was made), ``metrics.json``
(ncu), ``outcome.json`` (the :class:`~kernelpilot.records.evaluation.Evaluation`), and one git commit per version
as soon as it is decided — accepted, rejected or failed — together with ``run.json`` (the search seconds spent), so
a killed run loses at most the version in flight (``optimize --resume`` redoes it).

A config answered without a run (``invalid_config``, ``pruned``, a compile-ahead failure) gets no folder, no
version number and no commit of its own: it is one line of ``skipped.jsonl``
(:class:`~kernelpilot.records.models.SkippedRow`: its ``seq`` in the evaluation order, config, status, reason,
search seconds), appended as it comes and committed with the next version's commit (or the final one). The
recorder keeps the sha256 of every byte it appended: a table changed by anyone else is not committed.

A version's samples are kept once: in ``timing.json`` when the worker wrote one (outcome.json then holds none),
else in ``outcome.json``; its bottleneck card only in ``verdict.json``, its patterns' fixed text once per run in
``patterns.json`` (:mod:`kernelpilot.records.cards`). A version's records are compact JSON (one line, no indentation): a run
of 1,000 versions stays under the 10 MB issue 25 asks for (``benchmarks/records_size.py`` measures it).
:meth:`RunFolderRecorder.finish` packs the run's git objects (``git repack``: each commit's growing ``seals.jsonl``
and ``skipped.jsonl``, stored whole as loose objects, become deltas) and leaves ``report.html`` out of git: a page
of several MB (plotly inline) rebuilt from the records by ``kernelpilot report`` and never compared with git
(:data:`kernelpilot.app.validate.DERIVED`), like a session's.

Each commit stages only what this command wrote (the write journal of :mod:`kernelpilot.records.seal`: a
version's folder contributes the files the recorder and the evidence wrote, and ``profile.ncu-rep``, which ncu wrote
at the recorder's request) and is sealed: ``seals.jsonl`` holds the sha256 of every file it commits
(:class:`~kernelpilot.records.history.RunHistory`). A file dropped into the run folder, or edited there, is not
committed by the next version or by the final ``record:`` commit; ``kernelpilot report`` names it.

A version's commit id cannot be inside the files of that commit: ``outcome.json`` is committed without it, then
rewritten with it, and that rewrite goes into the next commit (the next version's, or the final ``record:`` one).
So the only difference ever allowed between a version's ``outcome.json`` and its last commit is the ``commit``
field naming that very commit (:mod:`kernelpilot.app.validate` checks it). Everything else is committed by
:meth:`RunFolderRecorder.finish`.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelpilot.engine.seams import RecorderBase
from kernelpilot.fmt import format_duration_ns
from kernelpilot.records.evaluation import Evaluation, Move, change_label
from kernelpilot.records.cards import PATTERN_TEXTS_FILE, pack_card, read_texts
from kernelpilot.records.checks import CHECKS_FILE, pack_checks, read_checks
from kernelpilot.records.history import RunHistory
from kernelpilot.records.models import SKIPPED_FILE, SkippedRow, VersionConfig
from kernelpilot.records.samples import pack_samples
from kernelpilot.records.seal import note_written, sha256_file
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


class RunFolderRecorder(RecorderBase):
    """Writes each version's folder and commits accepted versions (see the module docstring).

    Args:
        ws: the run folder. kf_sha256: the kernel source's hash. shape: the run's shape. strategy: its name.
        roofline: for the hypothesis' target line. history: the git history (None: no git).
        metrics_of: config key -> ncu metrics, for ``observed`` (None: no profiles).
        log: progress callback.
        guard: a :class:`~kernelpilot.app.interrupt.GracefulStop` whose ``held()`` keeps a signal from cutting a
            version's files and commit in half (None: no guard).

    Attributes:
        elapsed_s: returns the search seconds spent so far (written into ``config.json``); set by the campaign once
            its evaluator exists.
        on_commit: called before each version's commit; writes the run's state (``run.json``) and returns the
            files to commit with the version.
    """

    def __init__(self, ws: Workspace, *, kf_sha256: str, shape: dict[str, Any], strategy: str, roofline: Any,
                 history: RunHistory | None, metrics_of: dict[str, Any] | None = None,
                 log: Any = lambda _m: None, guard: Any = None) -> None:
        self.ws, self.sha, self.shape, self.strategy, self.roofline = ws, kf_sha256, shape, strategy, roofline
        self.history, self.metrics_of, self.log = history, metrics_of if metrics_of is not None else {}, log
        self._parents: dict[int, Evaluation | None] = {}
        #: each version's move as its config.json holds it (outcome.json then leaves it out)
        self._moves: dict[int, Move | None] = {}
        self._held = guard.held if guard is not None else contextlib.nullcontext
        self.elapsed_s: Callable[[], float | None] = lambda: None
        self.on_commit: Callable[[], list[Path]] = lambda: []
        #: files written after the last commit (the last version's outcome.json with its commit id)
        self.pending: list[Path] = self._adopt_commit_ids()
        self.table = ws.root / SKIPPED_FILE
        #: sha256 of every byte of skipped.jsonl this process holds as its own (a resumed run's kept rows included)
        self._table_hash = hashlib.sha256(self.table.read_bytes() if self.table.is_file() else b"")
        self._table_rows = 0
        #: the run's pattern texts (patterns.json), kept once per run instead of in every card
        self._texts = read_texts(ws.root)
        #: the blocks every correctness record repeats (checks.json), kept once per run
        self._checks = read_checks(ws.root)

    def skipped(self, ev: Evaluation) -> Evaluation:
        """Append the row of a config answered without a run to ``skipped.jsonl`` (committed with the next
        commit); returns ``ev`` unchanged."""
        data = SkippedRow.of(ev, self.elapsed_s()).line().encode()
        with self._held():
            with open(self.table, "ab") as f:
                f.write(data)
            self._table_hash.update(data)
            self._table_rows += 1
        return ev

    def _table(self) -> list[Path]:
        """``skipped.jsonl`` to commit when it holds exactly what this process wrote (then noted in the write
        journal), else nothing: a table edited by someone else stays out of the commit and ``report`` names it."""
        if not self.table.is_file() or self._table_rows == 0:
            return []
        if sha256_file(self.table) != self._table_hash.hexdigest():
            self.log(f"{self.table} was changed by another writer: not committed")
            return []
        note_written(self.table)
        return [self.table]

    def _adopt_commit_ids(self) -> list[Path]:
        """The outcome.json files a killed earlier process rewrote with their commit id and did not commit (a
        resumed run): each differs from its last commit only by that id (:func:`kernelpilot.app.validate.
        commit_id_only`), so this process takes it as its own write and commits it with the next version."""
        if self.history is None or not self.history.repo.head.is_valid():
            return []
        from kernelpilot.app.validate import commit_id_only
        from kernelpilot.records.history import committed_blobs
        from kernelpilot.records.seal import git_blob_sha1

        head = committed_blobs(self.history.repo)
        adopted = []
        for i in self.ws.version_indices():
            rel = f"v{i}/outcome.json"
            path = self.ws.root / rel
            if rel in head and path.is_file() and git_blob_sha1(path.read_bytes()) != head[rel][0] \
                    and commit_id_only(self.ws.root, rel):
                note_written(path)
                adopted.append(path)
        return adopted

    def before(self, index: int, config: dict[str, Any], parent: Evaluation | None, move: Move | None,
               incumbent: Evaluation | None) -> None:
        """``config.json`` and ``hypothesis.md`` of version ``index``, written before it runs."""
        self._parents[index] = parent
        self._moves[index] = move
        with self._held():
            vdir = self.ws.version_dir(index)
            write_json(vdir / "config.json", VersionConfig(
                config=config, move=move, parent=parent.index if parent else None,
                incumbent=incumbent.index if incumbent else None, strategy=self.strategy, source_sha256=self.sha,
                shape=self.shape, search_elapsed_s=self.elapsed_s()), compact=True)
            write_text(vdir / "hypothesis.md",
                       render_hypothesis(index, config, move, parent, self.roofline, incumbent))
        base = (f" from v{parent.index}" if parent is not None and parent.index is not None
                and (incumbent is None or parent.index != incumbent.index) else "")  # not the incumbent: say which
        self.log(f"v{index}: {change_label(parent.config if parent else None, config)}{base} — checking")

    def write_metrics(self, ev: Evaluation, metrics: Any, kernel_names: list[str]) -> None:
        """``metrics.json`` of a profiled version (the ncu evidence calls this)."""
        if ev.index is not None:
            write_json(self.ws.version_dir(ev.index) / "metrics.json",
                       {"main_kernel": metrics.model_dump(), "all_kernels": kernel_names}, compact=True)

    def report_path(self, ev: Evaluation) -> Path:
        """Where a version's ncu report goes."""
        return self.ws.version_dir(ev.index or 0) / "profile.ncu-rep"

    def note_profile(self, ev: Evaluation) -> None:
        """Journal what ncu wrote for ``ev`` at this recorder's request (:meth:`report_path`: ``profile.ncu-rep``,
        and ``profile.ncu.log``, the command and ncu's output that
        :func:`kernelpilot.profile.ncu_run.profile_kernel` keeps beside it), so the version's commit, or the final
        one for the final best's profile taken after the search, stages them. Until session 13 only the report was
        journaled, and only in a version's own commit: every ``auto`` run on a GPU ended with its final best's
        ``profile.ncu-rep`` and ``profile.ncu.log`` left out of git, and ``kernelpilot report`` refused the folder
        ("never committed"). Raises OSError when a file cannot be read back."""
        report = self.report_path(ev)
        for path in (report, report.with_name(report.stem + ".ncu.log")):
            if path.is_file():
                note_written(path)

    def after(self, ev: Evaluation, incumbent: Evaluation | None) -> Evaluation:
        """The version's records and its commit; returns ``ev`` (with ``commit``)."""
        with self._held():
            return self._after(ev)

    def _after(self, ev: Evaluation) -> Evaluation:
        assert ev.index is not None
        t0 = time.monotonic()
        vdir = self.ws.version_dir(ev.index)
        records = ev.records or {}
        texts: list[Path] = []
        if records.get("correctness") is not None:
            correctness, changed = pack_checks(records["correctness"], self._checks)
            if changed:  # a block first seen: kept once per run, committed with this version
                texts.append(write_json(self.ws.root / CHECKS_FILE, self._checks, compact=True))
            write_json(vdir / "correctness.json", correctness, compact=True)
        if records.get("timing") is not None:
            write_json(vdir / "timing.json", _packed_timing(records["timing"]), compact=True)
        if ev.card:
            card, changed = pack_card(ev.card, self._texts)
            if changed:  # a pattern's text first seen: kept once per run, committed with this version
                texts.append(write_json(self.ws.root / PATTERN_TEXTS_FILE, self._texts, compact=True))
            write_json(vdir / "verdict.json", card, compact=True)
        self.note_profile(ev)  # what ncu wrote at this command's request (report_path)
        parent = self._parents.get(ev.index)
        if ev.move is not None and parent is not None and ev.key in self.metrics_of and parent.key in self.metrics_of:
            ev = ev.model_copy(update={"observed": observed_change(ev.move.expected_metric,
                                                                   self.metrics_of[parent.key], self.metrics_of[ev.key])})
        # the record phase: writing this version's files (its git commit comes after, outside the record it commits)
        ev = ev.model_copy(update={"phases_s": {**ev.phases_s, "record": time.monotonic() - t0}, "commit": None})
        write_json(vdir / "outcome.json", _stored(ev, self._moves.get(ev.index, ...)), compact=True)
        if self.history is not None:
            speed = (f", {ev.speedup_vs_parent:.3f}x vs v{ev.parent}" if ev.accepted and ev.speedup_vs_parent
                     and ev.parent is not None else "")
            what = change_label(parent.config if parent is not None else None, ev.config)
            status = ev.version_status + ("" if ev.ok else f" ({ev.status})")
            ev = ev.model_copy(update={"commit": self.history.commit(
                [vdir, *texts, *self.pending, *self._table(), *self.on_commit()],
                f"v{ev.index}: {status} — {what}{speed}")})
            write_json(vdir / "outcome.json", _stored(ev, self._moves.get(ev.index, ...)), compact=True)  # with its commit id: committed next
            self.pending = [vdir / "outcome.json"]
        return ev

    def describe(self, ev: Evaluation) -> str:
        """How the evaluator's progress line names a decided version: ``v3: rejected (ok) 81.40 µs``, a skipped
        config ``skipped (pruned) {config}`` (the evaluator adds the progress counts, the best time, the ETA and the
        decision or reason)."""
        if ev.index is None:
            return f"skipped ({ev.status}) {ev.key}"
        return (f"v{ev.index}: {ev.version_status} ({ev.status})"
                + (f" {format_duration_ns(ev.duration_ns)}" if ev.duration_ns else ""))

    def finish(self, versions: list[Evaluation]) -> None:
        """Commit everything left: the reports, the run's final state, the last version's commit id, the skipped
        rows not committed yet; then pack the git objects. ``versions``: the evaluations of the run (skipped ones,
        ``index`` None, are counted apart)."""
        if self.history is None:
            return
        with self._held():
            skipped = (self.table.read_bytes().count(b"\n") if self.table.is_file() else 0)
            versions = [v for v in versions if v.index is not None]
            rejected = [v for v in versions if v.version_status in ("rejected", "failed")]
            self._table()
            self.history.commit([self.ws.root], f"record: final report, benchmark; {len(versions)} versions "
                                f"({len(versions) - len(rejected)} baseline/accepted, {len(rejected)} "
                                f"rejected/failed); {skipped} configs skipped without a run",
                                leave_out=frozenset({"report.html"}))
            self.pending = []
            _exclude(self.history, "report.html")
            pack(self.history)


def _stored(ev: Evaluation, config_move: Any = ...) -> dict[str, Any]:
    """``ev`` as its outcome.json holds it: without ``samples_ns`` when the version's ``timing.json`` holds the same
    samples, without ``card`` (its ``bound`` and ``verdict_summary`` kept) when ``verdict.json`` holds it: one copy
    of each per version; :func:`kernelpilot.app.resume.complete_versions` reads them back from those files. Its
    own samples are packed (:func:`kernelpilot.records.samples.pack_samples`: the timer's float32 milliseconds
    when they give back every sample exactly) and fields at their default are left out (``Evaluation`` reads them
    back as those defaults): about half the bytes of a replayed version. ``config_move``: the move the version's
    config.json holds (``...``: not known): when it is ``ev.move``, outcome.json leaves ``move`` out and readers
    take config.json's (:func:`kernelpilot.records.models.restored`); a differing one is written, ``null``
    included."""
    timing = (ev.records or {}).get("timing") or {}
    update: dict[str, Any] = {"card": None} if ev.card else {}
    samples = ev.samples_ns
    if ev.samples_ns and timing.get("samples_ns") == ev.samples_ns:
        samples = []
    update["samples_ns"] = []
    data = ev.model_copy(update=update).model_dump(mode="json", by_alias=True, exclude_defaults=True)
    if config_move is not ... and config_move == ev.move:
        data.pop("move", None)
    else:
        data["move"] = ev.move.model_dump(mode="json") if ev.move is not None else None
    return {**data, **pack_samples(samples)}


def _packed_timing(timing: dict[str, Any]) -> dict[str, Any]:
    """A worker's timing record (:class:`kernelpilot.measure.timing.TimingResult` as JSON) with its samples packed
    like outcome.json's (:func:`kernelpilot.records.samples.pack_samples`; readers unpack them)."""
    samples = timing.get("samples_ns")
    if not isinstance(samples, list) or not samples:
        return timing
    return {**{k: v for k, v in timing.items() if k != "samples_ns"}, **pack_samples(samples)}


def _exclude(history: RunHistory, rel: str) -> None:
    """Name ``rel`` in the run's ``.git/info/exclude`` so ``git status`` does not list a report kept out of git
    (``kernelpilot report`` compares every file by hashing, whatever git ignores). Raises nothing."""
    path = Path(history.repo.git_dir) / "info" / "exclude"
    with contextlib.suppress(OSError):
        text = path.read_text() if path.is_file() else ""
        if f"/{rel}" not in text.splitlines():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + ("" if text.endswith("\n") or not text else "\n") + f"/{rel}\n")


def pack(history: RunHistory) -> None:
    """Pack the run's git objects into one pack with deltas (``git repack -a -d -f``, then ``git prune-packed``):
    a 1,000-version run stores its growing ``seals.jsonl`` 1,000 times, whole, as loose objects otherwise; then
    remove the reflogs. A git that fails is ignored (the history stays as it was, only larger)."""
    with contextlib.suppress(Exception):
        # -f --window 250: deltas sought anew among 250 objects (git gc --aggressive's): a version's outcome.json
        # finds its rewrite with the commit id, 20 % of the pack; a few seconds at 1,000 versions
        history.repo.git.repack("-a", "-d", "-f", "-q", "--window=250", "--depth=50")
        history.repo.git.prune_packed("-q")
    # the reflogs (two lines a commit: 0.4 KB a version) repeat what the commits and seals.jsonl hold; nothing reads
    # them and a rewrite of the history rewrites them too
    with contextlib.suppress(OSError):
        shutil.rmtree(Path(history.repo.git_dir) / "logs")
