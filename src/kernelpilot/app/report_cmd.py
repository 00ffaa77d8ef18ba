"""``kernelpilot report FOLDER``: validate a run folder (``optimize``) or a search folder (``tune --out``) and
rebuild its reports (``final_report.md`` / ``tune.md``, and ``report.html``) from the records; a session folder
(``kernelpilot session``) is validated the same way and gets its ``report.html`` rebuilt.

Validation (:mod:`kernelpilot.app.validate`) comes first: any problem — a record that does not match its schema,
records that contradict each other, a file that differs from its committed blob or its seal, a rewritten history — is a
:class:`~kernelpilot.errors.RecordError` naming every file and what to do, and nothing is rebuilt. A run that has
not finished (killed or interrupted) is reported as far as it got, with the command that resumes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from kernelpilot.app.tune_run import RUN_FILE as TUNE_RUN_FILE
from kernelpilot.app.tune_run import TuneRun
from kernelpilot.app.validate import Problem, validate_run, validate_session, validate_tune
from kernelpilot.errors import RecordError, RunFolderError
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.records.models import RunInfo
from kernelpilot.records.workspace import read_json, write_text

__all__ = ["ReportResult", "check_records", "report"]

#: Problems listed in the error's message (``--json`` lists them all).
MAX_LISTED = 12


class ReportResult(BaseModel):
    """What ``kernelpilot report`` found and rebuilt.

    Attributes:
        kind: ``optimize`` (a run folder), ``tune`` (a ``tune --out`` folder) or ``session`` (a session folder:
            only report.html is rebuilt; ``kernelpilot session status`` lists its versions).
        run: run.json (optimize). tune: tune-run.json (tune; None for a folder written before it existed).
        versions: the valid outcomes (optimize: one per version; tune: one per evaluation), in order.
        final_report: the report file rebuilt (``final_report.md`` or ``tune.md``; empty when there was nothing to
            rebuild it from).
        report_html: the page rebuilt (``report.html``: charts and one card per version).
        finished: the run finished; False for a killed or interrupted one (``note`` says how to resume).
        in_flight: version folders of the unfinished run without an outcome (redone by ``--resume``).
        note: one line on the state of an unfinished run.
        seal_head: sha256 of the last line of the folder's ``seals.jsonl`` (None when unsealed): compare it with a
            copy kept elsewhere to tell a rewritten history (docs/records.md).
        versions_total: how many outcomes the folder holds (``versions`` may list fewer: :meth:`listed`).
        not_listed: after :meth:`listed`, the summary lines of the outcomes left out (empty: every one is listed).
    """

    kind: Literal["optimize", "tune", "session", "workload"] = "optimize"
    run: RunInfo | None = None
    tune: TuneRun | None = None
    versions: list[Evaluation] = []
    final_report: str = ""
    report_html: str = ""
    finished: bool = True
    in_flight: list[int] = []
    note: str = ""
    seal_head: str | None = None
    versions_total: int = 0
    not_listed: list[str] = []

    def listed(self) -> "ReportResult":
        """A copy whose ``versions`` are those the final report lists (the first, every incumbent, the fastest, the
        first of each failure status, the last: :func:`~kernelpilot.report.final.shown_versions`), the rest counted
        in ``not_listed`` (by outcome; skipped configs by reason with an example). ``report --json`` prints this
        unless ``--all``: the 9,000 evaluations of an exhaustive search printed 19.6 MB of JSON
        (docs/device-runs/2026-11-27-s10). Raises nothing."""
        from kernelpilot.report.final import listed_view

        where = ("each is a line of evaluations.jsonl" if self.kind == "tune"
                 else "every version has its folder `vN/`; `report --json --all` prints them all")
        kept, rest = listed_view(self.versions, "evaluations" if self.kind == "tune" else "versions", where)
        return self.model_copy(update={"versions": kept, "versions_total": len(self.versions), "not_listed": rest})

    def to_dataframe(self) -> Any:
        """The records as a pandas DataFrame: one row per version (optimize) or evaluation (tune), as
        :meth:`kernelpilot.app.session.OptimizeResult.to_dataframe` builds it.

        Raises:
            MissingDependencyError: pandas is not installed (``pip install 'kernelpilot[dataframe]'``).
        """
        from kernelpilot.records.frames import evaluation_frame

        return evaluation_frame(self.versions, self.run.baselines_ns if self.run is not None else None)


def _raise(folder: Path, problems: list[Problem]) -> None:
    """Raise the RecordError listing ``problems`` (the first :data:`MAX_LISTED` in the message)."""
    lines = [f"  {p.file}: {p.problem}" for p in problems[:MAX_LISTED]]
    more = f"\n  … and {len(problems) - MAX_LISTED} more (--json lists them all)" if len(problems) > MAX_LISTED else ""
    noun = "problem" if len(problems) == 1 else "problems"
    raise RecordError(f"{len(problems)} {noun} in the records of {folder}:\n" + "\n".join(lines) + more,
                      f"{problems[0].file}: {problems[0].fix}" + ("; the others likewise (--json gives each fix)"
                                                                   if len(problems) > 1 else ""),
                      [p.model_dump() for p in problems])


def _report_tune(folder: Path) -> ReportResult:
    from kernelpilot.app.tune import TuneResult
    from kernelpilot.report.html import write_report_html
    from kernelpilot.report.tune_md import render_tune_md

    problems, run, evaluations = validate_tune(folder)
    if problems:
        _raise(folder, problems)
    path = ""
    if (folder / "tune.json").is_file():
        result = read_json(folder / "tune.json", TuneResult)
        path = str(write_text(folder / "tune.md", render_tune_md(result)))
        evaluations = evaluations or list(result.evaluations)
    finished = run is None or bool(run.finished_utc)
    note = "" if finished else (f"the search has not finished ({run.interrupted or 'killed'}): {len(evaluations)} "
                                f"evaluations recorded; resume with `kernelpilot tune --resume {folder}`")
    return ReportResult(kind="tune", tune=run, versions=evaluations, versions_total=len(evaluations),
                        final_report=path, finished=finished, note=note,
                        report_html=str(write_report_html(folder)))


def _workload_problems(folder: Path) -> list[Problem]:
    """A ``tune --workload`` folder's problems: every bucket search and cross-check validated as the tune folder it
    is (:func:`kernelpilot.app.validate.validate_tune`), ``dispatch.json`` read with its integrity checks and every
    row held against the evaluation it cites (:func:`kernelpilot.dispatch.evidence_problems`)."""
    from kernelpilot.app.workload_out import resolve_record
    from kernelpilot.dispatch import evidence_problems, read_dispatch
    from kernelpilot.errors import DispatchError

    problems: list[Problem] = []
    for sub in sorted(d for kind in ("buckets", "shapes") if (folder / kind).is_dir()
                      for d in (folder / kind).iterdir() if d.is_dir()):
        rel = sub.relative_to(folder).as_posix()  # each search and cross-check is a tune folder: validated as one
        problems += [Problem(file=f"{rel}/{p.file}", problem=p.problem, fix=p.fix) for p in validate_tune(sub)[0]]
    if (folder / "dispatch.json").is_file():
        try:
            d = read_dispatch(folder / "dispatch.json")
            problems += [Problem(**p) for p in evidence_problems(d, lambda rid: resolve_record(folder, rid))]
        except DispatchError as exc:
            problems.append(Problem(file="dispatch.json", problem=exc.message, fix=exc.hint))
    return problems


def _report_workload(folder: Path) -> ReportResult:
    """A ``tune --workload`` folder (:func:`_workload_problems`), then report.html rebuilt from the records."""
    from kernelpilot.report.workload_html import write_workload_html

    problems = _workload_problems(folder)
    if problems:
        _raise(folder, problems)
    return ReportResult(kind="workload", report_html=str(write_workload_html(folder)),
                        note="a workload folder: dispatch.json's rows held against their records, report.html rebuilt")


def _is_tune_folder(root: Path) -> bool:
    """A ``tune --out`` folder: tune-run.json or tune.json, and no run.json."""
    return not (root / "run.json").is_file() and ((root / TUNE_RUN_FILE).is_file() or (root / "tune.json").is_file())


def check_records(folder: str | Path) -> None:
    """Validate the records of a folder whose contents another command is about to trust (``export`` of a tune
    folder's best config, an optimize run's best version, a workload folder's dispatch table) as ``report`` does,
    without rebuilding any report: a hand-edited ``tune.json`` naming a best that was never measured, or a
    ``run.json`` naming another best version, is refused before anything is shipped. Anything that is not such a
    folder is left alone.

    Raises:
        RecordError: a record is invalid or contradicts another or git (every problem named, with its fix).
    """
    root = Path(folder)
    if not root.is_dir():
        return
    if (root / "workload.json").is_file():
        problems = _workload_problems(root)
    elif _is_tune_folder(root):
        problems = validate_tune(root)[0]
    elif (root / "run.json").is_file():
        problems = validate_run(root).problems
    else:
        return
    if problems:
        _raise(root, problems)


def report(folder: str | Path) -> ReportResult:
    """Validate the records in ``folder`` and rebuild its report (see the module docstring).

    Raises:
        RunFolderError: ``folder`` is neither a run folder (run.json), a tune folder (tune-run.json/tune.json) nor a
            session folder (session.json); a session record is corrupt.
        RecordError: a record is invalid or contradicts another or git (every problem named, with its fix).
    """
    from kernelpilot.hardware.roofline import Roofline
    from kernelpilot.report.final import render_final_report
    from kernelpilot.report.html import write_report_html

    root = Path(folder)
    if (root / "workload.json").is_file():
        return _report_workload(root)
    if (root / "session.json").is_file() and not (root / "run.json").is_file():
        found = validate_session(root)
        if found.problems:
            _raise(root, found.problems)
        return ReportResult(kind="session", report_html=str(write_report_html(root)), seal_head=found.seal_head,
                            note="a session folder: its records validated, report.html rebuilt from them")
    if _is_tune_folder(root):
        return _report_tune(root)
    if not root.is_dir():
        raise RunFolderError(f"{root} does not exist or is not a folder",
                             "pass the --out folder of `kernelpilot optimize` or `kernelpilot tune`")
    found = validate_run(root)
    if found.problems:
        _raise(root, found.problems)
    info = read_json(root / "run.json", RunInfo)
    roof = read_json(root / "roofline.json", Roofline) if (root / "roofline.json").is_file() else None
    path = write_text(root / "final_report.md",
                      render_final_report(info, found.versions, roof, skipped=found.skipped))
    note = ""
    if not found.finished:
        where = f" (v{', v'.join(map(str, found.in_flight))} in flight)" if found.in_flight else ""
        note = (f"the run has not finished ({info.interrupted or 'killed'}{where}): {len(found.versions)} versions "
                f"recorded; resume with `kernelpilot optimize --resume {root}`")
    return ReportResult(run=info, versions=found.versions, versions_total=len(found.versions),
                        final_report=str(path), finished=found.finished,
                        in_flight=found.in_flight, note=note, report_html=str(write_report_html(root)),
                        seal_head=found.seal_head)
