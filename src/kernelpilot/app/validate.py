"""Validating a run folder (``kernelpilot report``): every file against its schema, the files against each other,
and the files against the run's git history.

Checks, each a :class:`Problem` naming the file (relative to the run) and what to do:

* **schema**: every record with a model (:mod:`kernelpilot.app.schemas`) is read as JSON and validated against it:
  an empty, truncated or garbled file is a problem, not a crash and not a pass;
* **cross-checks** per version: ``outcome.json``'s index is its folder's and its config is ``config.json``'s; a
  version that ran correctly (``ok``) has ``correctness.json`` (passed, same config) and, unless it was raced out or
  replayed, ``timing.json``, whose ``median_ns`` is the median of its own ``samples_ns`` and equals the outcome's
  ``duration_ns`` (the median the decision used); run.json's ``best_version`` names an accepted version;
* **git**: a committed record changed since its last commit, deleted, or a record never committed in a finished
  run. The one change allowed is the version's own commit id in ``outcome.json`` (written right after that commit,
  committed with the next; :mod:`kernelpilot.app.recorder`). ``final_report.md`` and ``report.html`` are rebuilt by
  ``report`` and are not checked.

A version folder without ``outcome.json`` in a run that has not finished is the version in flight when the run was
killed or interrupted: it is listed as such (``--resume`` redoes it), not as a problem.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kernelpilot.app.schemas import model_for

__all__ = ["Problem", "Validation", "validate_run", "validate_tune"]

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
        versions: the valid outcomes read, in version order (an ``Evaluation`` each).
    """

    problems: list[Problem] = []
    in_flight: list[int] = []
    finished: bool = False
    versions: list[Any] = []


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
    if rel.endswith("outcome.json"):
        from kernelpilot.records.models import outcome_from_json

        parse = outcome_from_json  # also the outcome format of runs before the one-record change
    else:
        parse = model.model_validate
    try:
        return parse(data)
    except (ValidationError, ValueError, TypeError, KeyError) as exc:
        first = str(exc).splitlines()
        where = " ".join(first[1:3]).strip() if len(first) > 1 else first[0]
        problems.append(Problem(file=rel, problem=f"does not match the {model.__name__} schema: {where}", fix=fix))
        return None


def _close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-6)


def _check_version(run: Path, i: int, info: Any, problems: list[Problem], tracked: set[str]) -> Any:
    """Read and cross-check version ``i``; returns its outcome or None."""
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
    replayed = getattr(info, "mode", "") == "replay" or out.cached
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
        if timing.samples_ns and not _close(statistics.median(timing.samples_ns), timing.median_ns):
            problems.append(Problem(file=f"{v}/timing.json", problem=(
                f"median_ns {timing.median_ns:.6g} is not the median of its {len(timing.samples_ns)} samples "
                f"({statistics.median(timing.samples_ns):.6g} ns)"), fix=tfix))
        if out.duration_ns is not None and not out.raced_out and not _close(out.duration_ns, timing.median_ns):
            problems.append(Problem(file=f"{v}/outcome.json", problem=(
                f"duration_ns {out.duration_ns:.6g} does not match the median of {v}/timing.json's samples "
                f"({timing.median_ns:.6g} ns)"), fix=fix))
    return out


def _git_state(run: Path) -> tuple[set[str], list[tuple[str, str]]]:
    """(the tracked files, the (status, path) entries of ``git status``) of the run's repository; empty without git."""
    try:
        import git
    except ImportError:
        return set(), []
    try:
        repo = git.Repo(run)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return set(), []
    if not repo.head.is_valid():
        return set(), []
    tracked = set(repo.git.ls_files().splitlines())
    entries: list[tuple[str, str]] = []
    for line in repo.git.status("--porcelain=v1", "--untracked-files=all").splitlines():
        status, rel = line[:2], line[3:].strip().strip('"')
        entries.append((status, rel))
    return tracked, entries


def _commit_only(run: Path, rel: str) -> bool:
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
    tracked, entries = _git_state(run)
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
    if info is not None and info.best_version is not None:
        best = next((v for v in result.versions if v.index == info.best_version), None)
        if best is None or not (best.ok and best.accepted):
            problems.append(Problem(file="run.json", problem=f"best_version v{info.best_version} is not an accepted "
                                    "version of this run", fix=_restore(run, "run.json", "run.json" in tracked)))
    in_flight = {f"v{i}" for i in result.in_flight}
    named = {p.file for p in problems}  # a file already named (unreadable, contradicting) is not named twice
    for status, rel in entries:
        if rel in DERIVED or Path(rel).parts[0] in in_flight or rel in named:
            continue
        if "D" in status:
            problems.append(Problem(file=rel, problem="committed, then deleted", fix=_restore(run, rel, True)))
        elif status == "??":
            if finished:
                problems.append(Problem(file=rel, problem="never committed to the run's git history (not written "
                                        "by the run, or written after it finished)",
                                        fix=f"remove it, or commit it with `git -C {run} add {rel}` if it belongs"))
        elif "M" in status and not (rel.endswith("outcome.json") and _commit_only(run, rel)):
            problems.append(Problem(file=rel, problem="changed since it was committed "
                                    f"(`git -C {run} diff -- {rel}` shows how)", fix=_restore(run, rel, True)))
    result.problems = problems
    return result


def validate_tune(folder: Path) -> tuple[list[Problem], Any, list[Any]]:
    """Validate a ``tune --out`` folder: ``tune-run.json``, every line of ``evaluations.jsonl`` (a torn last line
    is a problem only once the search finished), ``tune.json`` against its schema and the lines, and
    ``roofline.json`` against its schema.

    Returns:
        (problems, the TuneRun or None, the evaluations read from the lines).
    """
    from kernelpilot.app.tune_run import LINES_FILE, RUN_FILE, read_lines

    problems: list[Problem] = []
    run = _read(folder, RUN_FILE, problems, set())
    finished = bool(run is not None and run.finished_utc)
    lines, bad = read_lines(folder / LINES_FILE, strict=finished)
    for why in bad:
        problems.append(Problem(file=LINES_FILE, problem=why, fix="the file was changed by hand or damaged; the "
                                "evaluation cache still holds every evaluation: resume, or run the search again"))
    result = _read(folder, "tune.json", problems, set())
    _read(folder, "roofline.json", problems, set())  # written by tune for report.html (absent without a GPU spec)
    if finished and result is None and not (folder / "tune.json").is_file():
        problems.append(Problem(file="tune.json", problem="missing in a finished search",
                                fix=f"kernelpilot tune --resume {folder} writes it again"))
    if result is not None and len(result.evaluations) != len(lines):
        problems.append(Problem(file="tune.json", problem=f"{len(result.evaluations)} evaluations, but "
                                f"{LINES_FILE} has {len(lines)}", fix=f"remove tune.json and run "
                                f"`kernelpilot tune --resume {folder}` to write it again"))
    return problems, run, [line.evaluation for line in lines]
