"""The records of one folder, read for ``report.html`` (:mod:`kernelpilot.report.html`): a run folder of
``kernelpilot optimize`` (``run.json``), a search folder of ``kernelpilot tune --out`` (``tune.json`` or, before it
finished, ``tune-run.json`` + ``evaluations.jsonl``) or a session folder of ``kernelpilot session`` (``session.json``).

Nothing is measured or recomputed here: every number is a record's (medians, IQRs, samples, the roofline, the
baselines' medians). What each kind records differently is mapped onto one :class:`PageData` with one
:class:`Entry` per version or evaluation, in the order they were decided. Times that are not measurements (the
Triton interpreter) are kept out of :attr:`Entry.median_ns`, and :attr:`PageData.timing_note` says why.

Every string here comes from a record and may come from a kernel file or an author (a hypothesis, a config value, a
kernel name): it is raw text, escaped where the page is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelpilot.errors import RunFolderError
from kernelpilot.fmt import format_duration_ns
from kernelpilot.hardware.roofline import Roofline
from kernelpilot.records.cards import read_texts, unpack_card
from kernelpilot.records.evaluation import Evaluation, version_change
from kernelpilot.records.samples import unpack_samples
from kernelpilot.records.workspace import read_json, read_record

__all__ = ["Entry", "Kind", "PageData", "folder_kind", "read_folder"]

Kind = Literal["optimize", "tune", "session"]

#: The note when a run's times came from the Triton interpreter.
INTERPRETED = ("no GPU times: the kernels ran under the Triton interpreter on the CPU, whose times are not "
               "measurements of GPU speed (they only ordered configs under the interpreter), so none is plotted")


@dataclass
class Entry:
    """One version (optimize, session) or evaluation (tune), as its records hold it.

    Attributes:
        label: ``v3`` (a version) or ``#3`` (the third evaluation of a search).
        order: 1-based position in the order the run decided them.
        status: ``ok`` or the failure status (``compile_error``, ``wrong_result``, ``timeout``, ``check_changed`` ...).
        outcome: what the run made of it: ``baseline``/``accepted``/``rejected`` (optimize, tune), the session's
            classes (``improved``, ``neutral`` ...), ``raced out`` (timing stopped early), or the failure status.
        config: tunable name -> value (empty for a session's versions: their change is code).
        median_ns / iqr_ns: the record's median and IQR, ns; None when it has no measured time.
        samples_ns: the raw samples behind the median (ns), when recorded.
        q1_ns / q3_ns: the recorded quartiles (a version's timing.json), when known.
        accepted: it became the incumbent. masked: a session version masked by its author.
        incumbent: the label of the incumbent once this entry was judged (None before the first correct one).
        change: what the entry changed, in a few words (the move, or the hypothesis' first line).
        hypothesis: the hypothesis text (hypothesis.md, the move's reason, or the author's sentence).
        expectations: what should have moved and what did (one line each).
        decision: the decision or failure message. pct_of_roofline: the record's percent of the roofline.
        card: the bottleneck card (verdict.json or the evaluation's card), None without one.
        ncu_reports: Nsight Compute reports of this entry, paths relative to the folder.
    """

    label: str
    order: int
    status: str
    outcome: str
    config: dict[str, Any] = field(default_factory=dict)
    median_ns: float | None = None
    iqr_ns: float | None = None
    samples_ns: list[float] = field(default_factory=list)
    q1_ns: float | None = None
    q3_ns: float | None = None
    accepted: bool = False
    masked: bool = False
    incumbent: str | None = None
    change: str = ""
    hypothesis: str = ""
    expectations: list[str] = field(default_factory=list)
    decision: str = ""
    pct_of_roofline: float | None = None
    card: dict[str, Any] | None = None
    ncu_reports: list[str] = field(default_factory=list)

    @property
    def timed(self) -> bool:
        """True when the entry has a measured median to plot."""
        return self.median_ns is not None and self.median_ns > 0


@dataclass
class PageData:
    """What ``report.html`` shows, read from one folder (see the module docstring).

    Attributes:
        kind: ``optimize``, ``tune`` or ``session``. folder: the folder read.
        title: the kernel's name. kernel: its file. shape: the problem shape. device: where it ran.
        mode: ``cuda``, ``interpreter`` or ``replay``. measured: the times are GPU measurements.
        timing_note: why there are no times (empty when there are).
        roofline: the roofline at the shape (roofline.json), None with ``roofline_note`` saying why.
        baselines_ns: PyTorch eager / torch.compile medians (ns) measured on the same GPU; empty when none were.
        baselines_note: where the baselines came from, or why there are none.
        stop_reason: why the run or search ended (empty for a session). best: the best entry's label.
        entries: every version or evaluation, in order (the charts plot them all).
        listed: the labels whose cards the page lists (None: every entry); an optimize run lists v0, every
            incumbent, the fastest correct versions and the last (:func:`kernelpilot.report.final.shown_versions`).
        summary: lines counting what is not listed: the other versions by outcome, the configs skipped without
            a run (``skipped.jsonl``) by status and reason, one example each.
        documents: the folder's other reports present (relative path -> what it is).
        ncu_reports: every ``.ncu-rep`` in the folder, relative paths.
    """

    kind: Kind
    folder: Path
    title: str
    kernel: str
    shape: dict[str, Any]
    device: str
    mode: str
    measured: bool
    timing_note: str = ""
    roofline: Roofline | None = None
    roofline_note: str = ""
    baselines_ns: dict[str, float] = field(default_factory=dict)
    baselines_note: str = ""
    stop_reason: str = ""
    best: str | None = None
    entries: list[Entry] = field(default_factory=list)
    listed: set[str] | None = None
    summary: list[str] = field(default_factory=list)
    documents: dict[str, str] = field(default_factory=dict)
    ncu_reports: list[str] = field(default_factory=list)


_DOCUMENTS = {"final_report.md": "final report", "tune.md": "search report", "benchmark.md": "benchmark",
              "roofline.md": "roofline and cited specs", "README.md": "session task, specs and stop conditions",
              "env.md": "environment"}


def folder_kind(folder: Path) -> Kind:
    """Which command wrote ``folder``: ``session`` (session.json), ``optimize`` (run.json) or ``tune``
    (tune.json or tune-run.json).

    Raises:
        RunFolderError: none of those records is there.
    """
    if (folder / "session.json").is_file():
        return "session"
    if (folder / "run.json").is_file():
        return "optimize"
    if (folder / "tune.json").is_file() or (folder / "tune-run.json").is_file():
        return "tune"
    raise RunFolderError(f"{folder} holds no kernelpilot records (no run.json, tune.json, tune-run.json or "
                         "session.json)", "pass the folder of `kernelpilot optimize --out`, `kernelpilot tune --out` "
                         "or `kernelpilot session start --out`")


def read_folder(folder: str | Path) -> PageData:
    """Read the records of ``folder`` (any of the three kinds, :func:`folder_kind`) into a :class:`PageData`.

    Raises:
        RunFolderError: not a folder of kernelpilot records, or a record is missing or does not match its schema
            (the message names the file).
    """
    root = Path(folder)
    kind = folder_kind(root)
    data = {"optimize": _read_optimize, "tune": _read_tune, "session": _read_session}[kind](root)
    data.documents = {name: what for name, what in _DOCUMENTS.items() if (root / name).is_file()}
    data.ncu_reports = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.ncu-rep")
                              if ".git" not in p.relative_to(root).parts)
    current = None
    for entry in data.entries:
        if data.kind != "session":  # a session records its incumbent per version (memory.json)
            current = entry.label if entry.accepted else current
            entry.incumbent = current
        if entry.label.startswith("v"):
            entry.ncu_reports = [r for r in data.ncu_reports if r.startswith(f"{entry.label}/")]
    return data


def _roofline(root: Path) -> Roofline | None:
    path = root / "roofline.json"
    return read_json(path, Roofline) if path.is_file() else None


def _json(path: Path) -> Any:
    """A JSON file's content, None when absent (RunFolderError naming it when it is not JSON)."""
    return read_record(path, json.loads) if path.is_file() else None


def _timing(path: Path) -> dict[str, Any]:
    """The fields of a ``timing.json`` the page uses (samples, quartiles), empty when absent."""
    data = _json(path)
    try:
        data = unpack_samples(data)  # samples kept as the event timer's whole ns (kernelpilot.records.samples)
    except (TypeError, OverflowError):
        data = {k: v for k, v in data.items() if k != "samples_event_ns"}
    return data if isinstance(data, dict) else {}


def _from_evaluation(ev: Evaluation, label: str, order: int, measured: bool, timing: dict[str, Any],
                     versions: dict[int, Evaluation]) -> Entry:
    """An entry from one :class:`Evaluation` (optimize's outcome.json, tune's evaluations); its change is computed
    from its config and its recorded parent's in ``versions`` (evaluations by index), not taken from the move."""
    if not ev.ok:
        outcome = ev.status
    elif ev.raced_out:
        outcome = "raced out"
    elif ev.accepted:
        outcome = "baseline" if ev.version_status == "baseline" else "accepted"
    else:
        outcome = "rejected"
    timed = ev.ok and measured and ev.measured
    hypothesis = (f"{version_change(ev, versions, counted=True)}: {ev.move.why} (rule {ev.move.rule})"
                  if ev.move is not None else "")
    expected = [f"{ev.move.expected_metric}: {ev.move.expected}"] if ev.move is not None else []
    if ev.observed:
        expected.append(f"observed: {ev.observed}")
    return Entry(label=label, order=order, status=ev.status, outcome=outcome, config=dict(ev.config),
                 median_ns=ev.duration_ns if timed else None, iqr_ns=ev.iqr_ns if timed else None,
                 samples_ns=list(ev.samples_ns or timing.get("samples_ns") or []) if timed else [],
                 q1_ns=timing.get("q1_ns") if timed else None, q3_ns=timing.get("q3_ns") if timed else None,
                 accepted=bool(ev.ok and ev.accepted), hypothesis=hypothesis, expectations=expected,
                 change=version_change(ev, versions) if ev.move is not None or ev.parent is not None else "",
                 decision=ev.decision or ev.message, pct_of_roofline=ev.pct_of_roofline if timed else None,
                 card=ev.card)


def _read_optimize(root: Path) -> PageData:
    from kernelpilot.records.models import RunInfo, outcome_from_json, restored
    from kernelpilot.records.workspace import Workspace

    info = read_json(root / "run.json", RunInfo)
    measured = info.mode != "interpreter"
    entries, versions = [], {}
    texts = read_texts(root)
    for i in Workspace(root).version_indices():
        path = root / f"v{i}" / "outcome.json"
        if not path.is_file():  # the version in flight of an unfinished run
            continue
        ev = restored(root / f"v{i}", read_record(path, lambda text: outcome_from_json(json.loads(text))))
        versions[i] = ev
        entry = _from_evaluation(ev, f"v{i}", len(entries) + 1, measured, _timing(root / f"v{i}" / "timing.json"),
                                 versions)
        hyp = root / f"v{i}" / "hypothesis.md"
        if hyp.is_file():
            entry.hypothesis = hyp.read_text(errors="replace")
        card = unpack_card(_json(root / f"v{i}" / "verdict.json"), texts)
        entry.card = card if isinstance(card, dict) else entry.card
        entries.append(entry)
    listed, summary = _listed(root, list(versions.values()))
    _points_only(entries, listed)
    roof = _roofline(root)
    baselines = dict(info.baselines_ns) if measured else {}
    where = ("timed before the search on this GPU (baselines.json)" if info.mode == "cuda" else
             "given with --baseline-ns: measured on the GPU the replayed cache came from")
    note = (f"PyTorch baselines: {where}" if baselines else
            "no baselines: the kernel ran under the Triton interpreter (its times are not GPU times)"
            if not measured else "no baselines were measured (--no-benchmark, or they could not run)")
    return PageData(kind="optimize", folder=root, title=info.kernel_name, kernel=info.kernel, shape=info.shape,
                    device=info.device_name, mode=info.mode, measured=measured,
                    timing_note="" if measured else INTERPRETED, roofline=roof,
                    roofline_note="" if roof else "no roofline.json: no GPU spec for this run (on a CPU-only machine "
                    "pass --gpu NAME for a roofline)", baselines_ns=baselines, baselines_note=note,
                    stop_reason=info.stop_reason or ("" if info.finished_utc else "the run has not finished"),
                    best=f"v{info.best_version}" if info.best_version is not None else None, entries=entries,
                    listed=listed, summary=summary)


def _points_only(entries: list[Entry], listed: set[str]) -> None:
    """Strip the entries not listed to what a chart's point needs: its hover text says what it was, in short."""
    for entry in entries:
        if entry.label not in listed:
            entry.decision, entry.hypothesis, entry.card = "", "", None


def _listed(root: Path, versions: list[Evaluation]) -> tuple[set[str], list[str]]:
    """The labels of the versions an optimize page lists and the summary lines of the rest and of the skipped
    configs (the final report's selection, :mod:`kernelpilot.report.final`). A table that cannot be read is named in
    the summary (``kernelpilot report`` validates it)."""
    from kernelpilot.records.models import SKIPPED_FILE, read_skipped
    from kernelpilot.report.final import rest_summary, shown_versions, skipped_summary

    shown = shown_versions(versions)
    summary = [line.removeprefix("- ") for line in rest_summary(versions, shown)]
    table = root / SKIPPED_FILE
    if table.is_file():
        rows, bad = read_skipped(table.read_text(errors="replace"))
        summary += [line.removeprefix("- ") for line in skipped_summary(rows) if line]
        summary += [f"{SKIPPED_FILE} {why}" for why in bad[:3]]
    return {f"v{v.index}" for v in shown}, summary


def _read_tune(root: Path) -> PageData:
    from kernelpilot.app.tune_run import LINES_FILE, RUN_FILE, TuneRun, read_lines

    result = _json(root / "tune.json")
    if isinstance(result, dict):
        evaluations = [Evaluation.model_validate(e) for e in result.get("evaluations", [])]
        measured = bool(result.get("measured", True))
        kernel, shape = str(result.get("kernel", "")), dict(result.get("shape") or {})
        device = str(result.get("gpu") or ("CPU (Triton interpreter)" if result.get("device") == "cpu"
                                           else result.get("device") or ""))
        mode = {"cpu": "interpreter"}.get(str(result.get("device")), str(result.get("device") or ""))
        stopped = str(result.get("stopped", ""))
        best = result.get("best")
    else:
        run = read_json(root / RUN_FILE, TuneRun)
        lines, _ = read_lines(root / LINES_FILE)
        evaluations = [line.evaluation for line in lines]
        measured = not any(not e.measured for e in evaluations)
        kernel, shape = run.kernel, dict(run.options.get("shape") or {})
        mode = "interpreter" if not measured else "cuda"
        device = str(run.options.get("gpu") or mode)
        stopped, best = f"the search has not finished ({run.interrupted or 'killed'})", None
    by_index = {ev.index: ev for ev in evaluations if ev.index is not None}
    entries = [_from_evaluation(ev, f"#{n}", n, measured, {}, by_index) for n, ev in enumerate(evaluations, 1)]
    best_key = json.dumps(best.get("config"), sort_keys=True) if isinstance(best, dict) else None
    # a finished search names its best; an unfinished one's best so far is its last incumbent
    best_label = next((e.label for e in reversed(entries) if e.accepted
                       and (best_key is None or json.dumps(e.config, sort_keys=True) == best_key)), None)
    listed, summary = _tune_listed(evaluations)
    _points_only(entries, listed)
    roof = _roofline(root)
    return PageData(kind="tune", folder=root, title=Path(kernel).stem, kernel=kernel, shape=shape, device=device,
                    mode=mode, measured=measured, timing_note="" if measured else INTERPRETED, roofline=roof,
                    roofline_note="" if roof else "no roofline.json in this search folder (no GPU spec, or a "
                    "folder written before tune kept one)",
                    baselines_note="no baselines: `kernelpilot tune` does not time PyTorch eager or torch.compile "
                    "(`kernelpilot bench --baselines` and `kernelpilot optimize` do)",
                    stop_reason=stopped, best=best_label, entries=entries, listed=listed, summary=summary)


def _tune_listed(evaluations: list[Evaluation]) -> tuple[set[str], list[str]]:
    """The labels (``#n``) of the evaluations a tune page lists — the final report's selection
    (:func:`~kernelpilot.report.final.shown_versions`) and the first of each failure status — and the summary lines
    of the rest, the skipped configs (pruned, invalid: no index) counted by reason with an example each. A search
    of 5,667 configs drew a 7.7 MB page when it listed them all (2.5 MB now, 1.8 MB of it the embedded plotly.js)."""
    from kernelpilot.report.final import listed_view

    kept, summary = listed_view(evaluations, "evaluations", "each is a line of evaluations.jsonl")
    ids = {id(ev) for ev in kept}
    return {f"#{n}" for n, ev in enumerate(evaluations, 1) if id(ev) in ids}, summary


def _change(metric: str, before: float, after: float) -> str:
    """``before → after`` in the metric's unit (durations for ``*_ns``), with the relative change."""
    show = format_duration_ns if metric.endswith("_ns") else (lambda v: f"{v:.4g}")
    rel = f", {100 * (after - before) / before:+.1f} %" if before else ""
    return f"{show(before)} → {show(after)}{rel}"


def _session_entry(root: Path, mem: Any, order: int) -> Entry:
    """An entry from one version's ``memory.json`` (and its timing.json and verdict.json)."""
    vdir = root / f"v{mem.version}"
    timed = mem.measured and mem.duration_ns is not None and mem.status == "ok"
    timing = _timing(vdir / "timing.json") if timed else {}
    card = _json(vdir / "verdict.json")
    expect = [f"{e.metric} {e.direction}: {e.verdict}" + (f" ({_change(e.metric, e.before, e.after)})"
                                                          if e.before is not None and e.after is not None else "")
              for e in mem.expectations]
    expect += [f"pitfall: {p}" for p in mem.pitfalls]
    if mem.masked:
        expect.append(f"masked: {mem.mask_reason or 'no reason given'}")
    ab = mem.vs_parent or {}
    return Entry(label=f"v{mem.version}", order=order, status=mem.status,
                 outcome=mem.status if mem.outcome == "invalid" else mem.outcome,
                 median_ns=mem.duration_ns if timed else None, iqr_ns=mem.iqr_ns if timed else None,
                 samples_ns=list(timing.get("samples_ns") or []), q1_ns=timing.get("q1_ns"),
                 q3_ns=timing.get("q3_ns"), accepted=mem.incumbent_after == mem.version, masked=mem.masked,
                 incumbent=f"v{mem.incumbent_after}" if mem.incumbent_after is not None else None,
                 hypothesis=mem.hypothesis + (f"\n\nparent: v{mem.parent}; change: {mem.change}"
                                              if mem.parent is not None else ""),
                 expectations=expect, decision=str(ab.get("reason") or mem.message or ""),
                 change=(mem.hypothesis.strip().splitlines() or [""])[0],
                 pct_of_roofline=mem.pct_of_roofline if timed else None,
                 card=card if isinstance(card, dict) else None)


def _session_baselines(root: Path, measured: bool) -> tuple[dict[str, float], str]:
    """The eager / torch.compile medians of benchmark.json (``session finish``), with where they came from."""
    if not measured:
        return {}, ("no baselines: the versions ran under the Triton interpreter (their times are not GPU times, "
                    "so a speedup over PyTorch on the CPU would compare nothing)")
    bench = _json(root / "benchmark.json")
    rows = bench.get("rows", []) if isinstance(bench, dict) else []
    found = {str(r["name"]): float(r["timing"]["median_ns"]) for r in rows[1:]
             if isinstance(r, dict) and isinstance(r.get("timing"), dict) and r["timing"].get("is_measurement")}
    if found:
        return found, "PyTorch baselines: benchmark.json (`session finish`, same inputs, same timer)"
    return {}, "no baselines: benchmark.json is absent (written by `kernelpilot session finish`) or holds none"


def _read_session(root: Path) -> PageData:
    from kernelpilot.versions.records import load_memories, load_state

    state = load_state(root)
    memories = load_memories(root, state)
    measured = state.device == "cuda"
    entries = [_session_entry(root, m, n) for n, m in enumerate(memories, 1)]
    baselines, note = _session_baselines(root, measured)
    roof = _roofline(root)
    v0 = sorted((root / "v0").glob("kernel.*"))
    return PageData(kind="session", folder=root, title=state.kernel_name,
                    kernel=v0[0].relative_to(root).as_posix() if v0 else state.kernel_name, shape=dict(state.shape),
                    device=state.device_name or "CPU (Triton interpreter)",
                    mode="cuda" if measured else "interpreter", measured=measured,
                    timing_note="" if measured else INTERPRETED, roofline=roof,
                    roofline_note="" if roof else "no roofline.json: no GPU spec for this session",
                    baselines_ns=baselines, baselines_note=note,
                    stop_reason="finished" if state.finished_utc else "in progress (`kernelpilot session finish` "
                    "writes the final report)",
                    best=f"v{state.incumbent}" if state.incumbent is not None else None, entries=entries)
