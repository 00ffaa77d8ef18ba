"""Validating a run folder (``kernelpilot report``): every file against its schema, the files against each other,
and the files against the run's git history.

Checks, each a :class:`Problem` naming the file (relative to the run) and what to do:

* **schema**: every record with a model (:mod:`kernelpilot.app.schemas`) is read as JSON and validated against it:
  an empty, truncated or garbled file is a problem, not a crash and not a pass;
* **cross-checks** per version: ``outcome.json``'s index is its folder's and its config is ``config.json``'s; a
  version that ran correctly (``ok``) has ``correctness.json`` (passed, same config) and, unless it was raced out or
  replayed, ``timing.json``, whose ``median_ns`` is the median of its own ``samples_ns`` and equals the outcome's
  ``duration_ns`` (the median the decision used); run.json's ``best_version`` names an accepted version;
* **the skipped table** (``skipped.jsonl``, configs answered without a run): every line a valid row with a failure
  status; no config both a version and a skipped row; the ``seq`` of versions and rows each used once (their
  evaluation order); like every file, it is compared with its last commit and seal below;
* **git and seals** (:mod:`kernelpilot.records.integrity`): every file on disk is hashed and compared with the blob
  of the last commit and with the last seal that covered it, whatever ``git status`` says (a file marked
  assume-unchanged or skip-worktree, or ignored, is compared all the same); each commit is compared with its seal.
  Each difference is named: ``changed since it was committed (edited after commit …)``, ``committed, then deleted``,
  ``never committed`` (in a finished run), ``differs from the seal written at `v3: …```, and the history's own
  (a commit amended, rebased or made by hand). The one change allowed is the version's own commit id in
  ``outcome.json`` (written right after that commit, committed with the next; :mod:`kernelpilot.app.recorder`).
  ``final_report.md`` and ``report.html`` are rebuilt by ``report`` and are not compared with the last commit.

Session folders (:func:`validate_session`) get the same: ``session.json`` and each version's ``memory.json``,
``timing.json`` ... against their schemas and each other, and against git and the seals. Tune folders
(:func:`validate_tune`, no git) get their lines, their medians and ``tune.json`` checked against each other.

A version folder without ``outcome.json`` in a run that has not finished is the version in flight when the run was
killed or interrupted: it is listed as such (``--resume`` redoes it), not as a problem.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from kernelpilot.app.schemas import model_for
from kernelpilot.errors import OptionError, SearchError

if TYPE_CHECKING:
    from kernelpilot.records.models import RunInfo
from kernelpilot.records.cards import read_texts, unpack_card
from kernelpilot.records.checks import read_checks, unpack_checks
from kernelpilot.records.integrity import HistoryCheck, check_history
from kernelpilot.records.samples import unpack_samples

__all__ = ["Problem", "Validation", "commit_id_only", "validate_run", "validate_session", "validate_tune"]

#: Rebuilt by ``kernelpilot report`` itself: never compared with git.
DERIVED = ("final_report.md", "report.html")
#: Relative tolerance when comparing medians written as JSON floats.
REL_TOL = 1e-9


class Problem(BaseModel):
    """One thing wrong with a run folder: the file (relative to the run), what is wrong, and what to do."""

    file: str
    problem: str
    fix: str


class Validation(BaseModel):
    """What :func:`validate_run` found.

    Attributes:
        problems: every problem (empty: the records are valid).
        in_flight: version folders without an outcome in an unfinished run (killed or interrupted there).
        finished: run.json says the run finished (its final report was written and committed).
        versions: the valid outcomes read, in version order (an ``Evaluation`` each; a session's ``MemoryRecord``).
        skipped: the valid rows of ``skipped.jsonl`` (:class:`~kernelpilot.records.models.SkippedRow`), in order.
        sealed / seal_head: the history holds seals, and the sha256 of the last one (compare it with a copy kept
            elsewhere: a full rewrite of history and seals together is not detectable from the folder alone).
    """

    problems: list[Problem] = []
    in_flight: list[int] = []
    finished: bool = False
    versions: list[Any] = []
    skipped: list[Any] = []
    sealed: bool = False
    seal_head: str | None = None


def _restore(run: Path, rel: str, tracked: bool) -> str:
    if tracked:
        return f"restore the recorded file with `git -C {run} checkout -- {rel}`"
    return (f"the file was never committed: re-run the version (remove {Path(rel).parts[0]}/ and "
            f"`kernelpilot optimize --resume {run}`), or start a new run")


def _read(run: Path, rel: str, problems: list[Problem], tracked: set[str]) -> Any:
    """The record at ``rel`` validated against its model (or plain JSON when it has none), None with a problem
    added when it is not valid; None without a problem when the file does not exist."""
    path = run / rel
    if not path.is_file():
        return None
    fix = _restore(run, rel, rel in tracked)
    text = path.read_text(errors="replace")
    if not text.strip():
        problems.append(Problem(file=rel, problem="empty file (0 bytes of JSON)", fix=fix))
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        problems.append(Problem(file=rel, problem=f"not valid JSON ({exc}; {len(text)} bytes: truncated or garbled)",
                                fix=fix))
        return None
    model = model_for(rel)
    if model is None:
        return data
    if rel.endswith("verdict.json"):  # the patterns' text kept once per run (kernelpilot.records.cards)
        data = unpack_card(data, read_texts(run))
    if rel.endswith("correctness.json"):  # the blocks every version repeats, once per run (records/checks.py)
        data = unpack_checks(data, read_checks(run))
    try:
        data = unpack_samples(data)  # samples as the event timer's whole ns (kernelpilot.records.samples)
    except (TypeError, OverflowError) as exc:
        problems.append(Problem(file=rel, problem=f"does not match the {model.__name__} schema: {exc}", fix=fix))
        return None
    if rel.endswith("outcome.json"):
        from kernelpilot.records.models import outcome_from_json

        parse = outcome_from_json  # also the outcome format of runs before the one-record change
    else:
        parse = model.model_validate
    try:
        return parse(data)
    except (ValidationError, ValueError, TypeError, KeyError, OptionError, SearchError) as exc:
        # OptionError / SearchError: a stored option out of range (the options models' own range checks)
        first = str(exc).splitlines()
        where = exc.message if isinstance(exc, (OptionError, SearchError)) else (
            " ".join(first[1:3]).strip() if len(first) > 1 else first[0])
        problems.append(Problem(file=rel, problem=f"does not match the {model.__name__} schema: {where}", fix=fix))
        return None


def _close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-6)


def _check_median(rel: str, median_ns: float | None, samples_ns: list[float], field: str, problems: list[Problem],
                  fix: str) -> None:
    """A problem when ``median_ns`` (the ``field`` of the record ``rel``) is not the median of its own samples."""
    if samples_ns and median_ns is not None and not _close(statistics.median(samples_ns), median_ns):
        problems.append(Problem(file=rel, problem=(
            f"{field} {median_ns:.6g} is not the median of its {len(samples_ns)} samples "
            f"({statistics.median(samples_ns):.6g} ns)"), fix=fix))


def _check_version(run: Path, i: int, info: RunInfo | None, problems: list[Problem], tracked: set[str]) -> Any:
    """Read and cross-check version ``i``; returns its outcome (with the samples and card its folder keeps in
    ``timing.json`` and ``verdict.json``: :func:`kernelpilot.records.models.restored`) or None."""
    v = f"v{i}"
    files = {name: _read(run, f"{v}/{name}", problems, tracked)
             for name in ("config.json", "outcome.json", "correctness.json", "timing.json", "verdict.json",
                          "metrics.json", "interrupted.json")}
    out, cfg, corr, timing = files["outcome.json"], files["config.json"], files["correctness.json"], files["timing.json"]
    if out is None:
        return None
    fix = _restore(run, f"{v}/outcome.json", f"{v}/outcome.json" in tracked)
    if out.index != i:
        problems.append(Problem(file=f"{v}/outcome.json", problem=f"index {out.index} in the folder of v{i}", fix=fix))
    if cfg is None and not (run / v / "config.json").is_file():
        problems.append(Problem(file=f"{v}/config.json", problem="missing (written before every version runs)",
                                fix=_restore(run, f"{v}/config.json", f"{v}/config.json" in tracked)))
    elif cfg is not None and cfg.config != out.config:
        problems.append(Problem(file=f"{v}/outcome.json", problem=f"config {out.config} is not config.json's "
                                f"{cfg.config}", fix=fix))
    replayed = (info is not None and info.mode == "replay") or out.cached
    if out.ok and not replayed:
        if corr is None and not (run / v / "correctness.json").is_file():
            problems.append(Problem(file=f"{v}/correctness.json", problem="missing for a version that ran correctly",
                                    fix=_restore(run, f"{v}/correctness.json", f"{v}/correctness.json" in tracked)))
        elif corr is not None and (not corr.passed or corr.config != out.config):
            problems.append(Problem(file=f"{v}/correctness.json", problem="says " + (
                "FAIL" if not corr.passed else f"config {corr.config}") + " for a version recorded as ok",
                fix=_restore(run, f"{v}/correctness.json", f"{v}/correctness.json" in tracked)))
        if timing is None and not out.raced_out and not (run / v / "timing.json").is_file():
            problems.append(Problem(file=f"{v}/timing.json", problem="missing for a version that ran correctly",
                                    fix=_restore(run, f"{v}/timing.json", f"{v}/timing.json" in tracked)))
    if timing is not None:
        tfix = _restore(run, f"{v}/timing.json", f"{v}/timing.json" in tracked)
        _check_median(f"{v}/timing.json", timing.median_ns, timing.samples_ns, "median_ns", problems, tfix)
        if out.duration_ns is not None and not out.raced_out and not _close(out.duration_ns, timing.median_ns):
            problems.append(Problem(file=f"{v}/outcome.json", problem=(
                f"duration_ns {out.duration_ns:.6g} does not match the median of {v}/timing.json's samples "
                f"({timing.median_ns:.6g} ns)"), fix=fix))
    from kernelpilot.records.models import restored

    return restored(run / v, out)


def _history_problems(run: Path, checked: HistoryCheck, finished: bool, skip: Any) -> list[Problem]:
    """The differences :func:`~kernelpilot.records.integrity.check_history` found, as problems with their fix.
    Files in ``skip`` (reports rebuilt, a version in flight) are left out, except for the history's own
    differences; an untracked file counts only once the run ``finished``. A file whose content a check already
    named is named again here: both say what differs."""
    flagged = "git -C {run} update-index --no-assume-unchanged --no-skip-worktree -- {rel} && "
    out: list[Problem] = []
    for d in checked.differences:
        if d.kind not in ("history", "seal") and skip(d.file):
            continue
        if d.kind == "untracked":
            if finished:
                out.append(Problem(file=d.file, problem=d.problem, fix=f"remove it, or commit it with "
                                   f"`git -C {run} add {d.file}` if it belongs"))
        elif d.kind in ("edited", "deleted"):
            fix = _restore(run, d.file, True)
            if "hidden from `git status`" in d.problem:
                fix = fix.replace("`git -C", "`" + flagged.format(run=run, rel=d.file) + "git -C", 1)
            out.append(Problem(file=d.file, problem=d.problem, fix=fix))
        else:
            out.append(Problem(file=d.file, problem=d.problem, fix=(
                "the records and their history no longer agree: do not trust this folder; run the work again "
                f"(`git -C {run} log --stat` shows the commits)")))
    return out


def commit_id_only(run: Path, rel: str) -> bool:
    """True when ``rel`` (an outcome.json) differs from its committed copy only by its ``commit`` field, and that
    field names the last commit that touched the file (the rewrite that goes into the next commit)."""
    import git

    repo = git.Repo(run)
    try:
        committed = json.loads(repo.git.show(f"HEAD:{rel}"))
        working = json.loads((run / rel).read_text())
    except (git.GitCommandError, ValueError, OSError):
        return False
    last = repo.git.log("-1", "--format=%H", "--", rel).strip()
    return ({k: v for k, v in committed.items() if k != "commit"} == {k: v for k, v in working.items() if k != "commit"}
            and working.get("commit") == last and committed.get("commit") in (None, last))


def _check_skipped(run: Path, versions: list[Any], problems: list[Problem], tracked: set[str]) -> list[Any]:
    """Read and cross-check ``skipped.jsonl`` against the versions (see the module docstring); returns its valid
    rows (none without the file)."""
    from kernelpilot.records.models import SKIPPED_FILE, read_skipped

    path = run / SKIPPED_FILE
    if not path.is_file():
        return []
    fix = _restore(run, SKIPPED_FILE, SKIPPED_FILE in tracked)
    rows, bad = read_skipped(path.read_text(errors="replace"))
    problems += [Problem(file=SKIPPED_FILE, problem=why, fix=fix) for why in bad]
    measured = {v.key: v.index for v in versions}
    seqs: dict[int, str] = {v.seq: f"v{v.index}" for v in versions if v.seq is not None}
    for row in rows:
        key = next((v.key for v in versions if v.config == row.config), None) if row.config else None
        if key is not None:
            problems.append(Problem(file=SKIPPED_FILE, problem=(
                f"seq {row.seq}: config {row.config} is recorded as skipped ({row.status}) and as version "
                f"v{measured[key]}"), fix=fix))
        if row.seq in seqs:
            problems.append(Problem(file=SKIPPED_FILE, problem=(
                f"seq {row.seq} is used twice ({seqs[row.seq]} and config {row.config})"), fix=fix))
        seqs.setdefault(row.seq, f"skipped config {row.config}")
    return rows


def validate_run(run: Path) -> Validation:
    """Validate every record of the run folder ``run`` (see the module docstring). Raises nothing for the records'
    content: every fault is a :class:`Problem`.

    Raises:
        RunFolderError: ``run`` is not a run folder (no run.json).
    """
    from kernelpilot.records.workspace import Workspace

    ws = Workspace.open(run)
    run = ws.root
    problems: list[Problem] = []
    checked = check_history(run, skip=lambda rel: rel in DERIVED,
                            commit_only=lambda rel: rel.endswith("outcome.json") and commit_id_only(run, rel))
    tracked = checked.tracked
    info = _read(run, "run.json", problems, tracked)
    finished = bool(info is not None and info.finished_utc)
    for rel in ("env.json", "roofline.json", "baselines.json", "benchmark.json"):
        _read(run, rel, problems, tracked)
    result = Validation(finished=finished)
    for i in ws.version_indices():
        out = _check_version(run, i, info, problems, tracked)
        if out is None and not (run / f"v{i}" / "outcome.json").is_file():
            if finished:
                problems.append(Problem(file=f"v{i}/outcome.json", problem="missing in a finished run",
                                        fix=_restore(run, f"v{i}/outcome.json", f"v{i}/outcome.json" in tracked)))
            else:
                result.in_flight.append(i)
        elif out is not None:
            result.versions.append(out)
    result.skipped = _check_skipped(run, result.versions, problems, tracked)
    if info is not None and info.best_version is not None:
        best = next((v for v in result.versions if v.index == info.best_version), None)
        if best is None or not (best.ok and best.accepted):
            problems.append(Problem(file="run.json", problem=f"best_version v{info.best_version} is not an accepted "
                                    "version of this run", fix=_restore(run, "run.json", "run.json" in tracked)))
    in_flight = {f"v{i}" for i in result.in_flight}
    problems += _history_problems(run, checked, finished, lambda rel: rel in DERIVED or Path(rel).parts[0] in in_flight)
    result.problems, result.sealed, result.seal_head = problems, checked.sealed, checked.seal_head
    return result


def validate_tune(folder: Path) -> tuple[list[Problem], Any, list[Any]]:
    """Validate a ``tune --out`` folder: ``tune-run.json``, every line of ``evaluations.jsonl`` (a torn last line
    is a problem only once the search finished; each line's ``prev_sha256`` is the hash of the line before it; the
    ``duration_ns`` of each correct, fully timed evaluation must be
    the median of its own ``samples_ns``), ``tune.json`` against its schema and the lines (the same evaluations in
    the same order, with the same medians; its ``best`` one of them, and in a finished search the last one
    accepted: the incumbent at the end), and ``roofline.json`` against its schema.

    Returns:
        (problems, the TuneRun or None, the evaluations read from the lines).
    """
    from kernelpilot.app.tune_run import LINES_FILE, RUN_FILE, chain_breaks, read_lines

    problems: list[Problem] = []
    run = _read(folder, RUN_FILE, problems, set())
    finished = bool(run is not None and run.finished_utc)
    lines, bad = read_lines(folder / LINES_FILE, strict=finished)
    for why in bad:
        problems.append(Problem(file=LINES_FILE, problem=why, fix="the file was changed by hand or damaged; the "
                                "evaluation cache still holds every evaluation: resume, or run the search again"))
    for why in chain_breaks(folder / LINES_FILE) if not bad else []:
        problems.append(Problem(file=LINES_FILE, problem=why, fix="the file was changed by hand: do not trust this "
                                "search; run it again"))
    result = _read(folder, "tune.json", problems, set())
    _read(folder, "roofline.json", problems, set())  # written by tune for report.html (absent without a GPU spec)
    if finished and result is None and not (folder / "tune.json").is_file():
        problems.append(Problem(file="tune.json", problem="missing in a finished search",
                                fix=f"kernelpilot tune --resume {folder} writes it again"))
    redo = f"remove tune.json and run `kernelpilot tune --resume {folder}` to write it again"
    gone = ("the line was changed by hand: do not trust this search; run it again (the evaluation cache answers "
            "what was measured honestly)")
    for n, line in enumerate(lines, 1):
        ev = line.evaluation
        if ev.ok and not ev.raced_out:
            _check_median(LINES_FILE, ev.duration_ns, ev.samples_ns, f"line {n}: duration_ns", problems, gone)
    if result is not None and len(result.evaluations) != len(lines):
        problems.append(Problem(file="tune.json", problem=f"{len(result.evaluations)} evaluations, but "
                                f"{LINES_FILE} has {len(lines)}", fix=redo))
    elif result is not None:
        for n, (ev, line) in enumerate(zip(result.evaluations, lines), 1):
            if ev.key != line.evaluation.key or ev.status != line.evaluation.status or not (
                    ev.duration_ns == line.evaluation.duration_ns or _close(ev.duration_ns, line.evaluation.duration_ns)):
                problems.append(Problem(file="tune.json", problem=(
                    f"evaluation {n} ({ev.key}: {ev.status}, {ev.duration_ns} ns) is not line {n} of {LINES_FILE} "
                    f"({line.evaluation.key}: {line.evaluation.status}, {line.evaluation.duration_ns} ns)"), fix=redo))
                break
        best = result.best
        last = next((line.evaluation for line in reversed(lines) if line.evaluation.accepted), None)
        if best is not None and not any(best.key == line.evaluation.key and line.evaluation.ok and _close(
                best.duration_ns, line.evaluation.duration_ns) for line in lines):
            problems.append(Problem(file="tune.json", problem=(
                f"best {best.key} at {best.duration_ns} ns is no evaluation of {LINES_FILE}"), fix=redo))
        elif best is not None and finished and last is not None and (
                best.key != last.key or not _close(best.duration_ns, last.duration_ns)):
            # the incumbent at the end is the last evaluation accepted: another measured config named as the best
            # (an export ships the best's config) is a claim the lines do not make
            problems.append(Problem(file="tune.json", problem=(
                f"best {best.key} at {best.duration_ns} ns is not the search's last accepted evaluation "
                f"({last.key} at {last.duration_ns} ns in {LINES_FILE})"), fix=redo))
    return problems, run, [line.evaluation for line in lines]


def validate_session(folder: Path) -> Validation:
    """Validate a session folder (``kernelpilot session``): ``session.json`` and each version's records against
    their schemas; each ``memory.json`` names its own folder, each ``timing.json`` median is the median of its
    samples and the memory's ``duration_ns`` (for a correct version) is that median; every file against git and
    the seals (:func:`~kernelpilot.records.integrity.check_history`; ``report.html`` is rebuilt by ``report`` and
    skipped). A version folder not in ``session.json``'s versions is the one in flight when the session was killed.
    Raises nothing for the records' content: every fault is a :class:`Problem`.

    Raises:
        RunFolderError: ``folder`` is not a session folder (no session.json).
    """
    from kernelpilot.errors import RunFolderError
    from kernelpilot.versions.records import SESSION_FILE

    root = Path(folder)
    if not (root / SESSION_FILE).is_file():
        raise RunFolderError(f"{root} is not a kernelpilot session folder (no {SESSION_FILE})",
                             "pass the --out folder of `kernelpilot session start`")
    problems: list[Problem] = []
    checked = check_history(root, skip=lambda rel: rel == "report.html")
    tracked = checked.tracked
    state = _read(root, SESSION_FILE, problems, tracked)
    result = Validation(finished=bool(state is not None and state.finished_utc))
    recorded = set(state.versions) if state is not None else set()
    folders = sorted(int(p.name[1:]) for p in root.glob("v*") if p.is_dir() and p.name[1:].isdigit())
    for i in sorted(set(folders) | recorded):
        if i not in recorded:
            result.in_flight.append(i)
            continue
        v = f"v{i}"
        files = {name: _read(root, f"{v}/{name}", problems, tracked)
                 for name in ("memory.json", "correctness.json", "timing.json", "verdict.json", "metrics.json",
                              "ab.json")}
        mem, timing = files["memory.json"], files["timing.json"]
        fix = _restore(root, f"{v}/memory.json", f"{v}/memory.json" in tracked)
        if mem is None:
            if not (root / v / "memory.json").is_file():
                problems.append(Problem(file=f"{v}/memory.json", problem=f"missing for {v}, a version "
                                        f"{SESSION_FILE} lists", fix=fix))
            continue
        if mem.version != i:
            problems.append(Problem(file=f"{v}/memory.json", problem=f"version {mem.version} in the folder of {v}",
                                    fix=fix))
        if timing is not None:
            tfix = _restore(root, f"{v}/timing.json", f"{v}/timing.json" in tracked)
            _check_median(f"{v}/timing.json", timing.median_ns, timing.samples_ns, "median_ns", problems, tfix)
            if mem.status == "ok" and mem.duration_ns is not None and not _close(mem.duration_ns, timing.median_ns):
                problems.append(Problem(file=f"{v}/memory.json", problem=(
                    f"duration_ns {mem.duration_ns:.6g} does not match the median of {v}/timing.json's samples "
                    f"({timing.median_ns:.6g} ns)"), fix=fix))
        result.versions.append(mem)
    if state is not None and state.incumbent is not None and state.incumbent not in recorded:
        problems.append(Problem(file=SESSION_FILE, problem=f"incumbent v{state.incumbent} is not a version of the "
                                "session", fix=_restore(root, SESSION_FILE, SESSION_FILE in tracked)))
    in_flight = {f"v{i}" for i in result.in_flight}
    problems += _history_problems(root, checked, True, lambda rel: rel == "report.html" or Path(rel).parts[0]
                                  in in_flight)
    result.problems, result.sealed, result.seal_head = problems, checked.sealed, checked.seal_head
    return result
