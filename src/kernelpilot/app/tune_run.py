"""The records of ``kernelpilot tune --out DIR`` while it runs, and ``kernelpilot tune --resume DIR``.

``tune-run.json`` (:class:`TuneRun`) is written when the search starts: the kernel, its source hash and every
option, so that ``--resume`` runs the same search. ``evaluations.jsonl`` gets one line per evaluation the strategy
received, the skipped ones (pruned, invalid, a compile that timed out) included (:class:`TuneLine`: the evaluation
and the search seconds spent when it was decided), appended and
fsync'ed as each is decided, so a killed search loses at most the evaluation in flight (a torn last line is
skipped when read back); each line carries the sha256 of the line before it (``prev_sha256``). ``tune.json`` and ``tune.md`` are written at the end, and ``finished_utc`` with them.

``--resume DIR`` reads the lines back and hands them to the evaluator (:meth:`Evaluator.preload`): the strategy
walks the same path, answered from them, and goes on where the search stopped; the budget counts the evaluations
and seconds already spent. (Without ``--out`` a killed search can still be run again cheaply: every evaluation is
also in the evaluation cache.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from kernelpilot.engine.seams import RecorderBase
from kernelpilot.errors import RunFolderError
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.records.seal import sha256_bytes
from kernelpilot.records.workspace import Workspace, read_json, write_json

__all__ = ["LINES_FILE", "RUN_FILE", "TuneLine", "TuneRecorder", "TuneRun", "chain_breaks", "last_line_sha256",
           "read_lines", "resume_state"]

RUN_FILE = "tune-run.json"
LINES_FILE = "evaluations.jsonl"


class TuneRun(BaseModel):
    """``tune-run.json``: what one ``tune --out`` search was asked to do, and how far it got.

    Attributes:
        kernel: the kernel file. source_sha256: its source hash (kernel + reference) when the search started.
        options: the search's :class:`kernelpilot.options.TuneOptions` as JSON (strategy, seed, budgets, shape,
            limits ...); ``--resume`` validates it back into the model whole.
        started_utc / resumed_utc / finished_utc: when it started, each resume, when tune.json was written.
        interrupted: the signal and place when a signal stopped the last session, else None.
        measured_on: what its times are measured on (:attr:`kernelpilot.app.context.RunContext.measured_on`: ``cuda
            NVIDIA H200``, ``cpu``, ``replay``); ``--resume`` refuses another device. None in folders written before
            it was recorded.
    """

    kernel: str
    source_sha256: str
    options: dict[str, Any] = Field(default_factory=dict)
    started_utc: str
    resumed_utc: list[str] = Field(default_factory=list)
    finished_utc: str | None = None
    interrupted: str | None = None
    measured_on: str | None = None


class TuneLine(BaseModel):
    """One line of ``evaluations.jsonl``: an evaluation as the strategy received it (judged, in order), the
    search's seconds spent (``spent_s``, the budget's clock) when it was decided, and ``prev_sha256``: the sha256
    (hex) of the previous line's bytes without its newline (None on the first line, and in folders written before
    the lines were chained). The chain makes a line edited after the next one was written detectable
    (:func:`kernelpilot.app.validate.validate_tune`); the last line is covered by ``tune.json`` only."""

    evaluation: Evaluation
    spent_s: float = 0.0
    prev_sha256: str | None = None


def read_lines(path: Path, *, strict: bool = False) -> tuple[list[TuneLine], list[str]]:
    """The lines of an ``evaluations.jsonl``, and one problem per line that is not a :class:`TuneLine`.

    A torn last line (no newline: the process died while writing it) is skipped without a problem unless
    ``strict``. Raises nothing for the content; a missing file reads as empty.
    """
    if not path.is_file():
        return [], []
    data = path.read_bytes()
    raw = data.split(b"\n")
    torn = raw.pop() if raw else b""
    lines: list[TuneLine] = []
    problems: list[str] = []
    for n, chunk in enumerate(raw, 1):
        if not chunk.strip():
            continue
        try:
            lines.append(TuneLine.model_validate_json(chunk))
        except (ValidationError, ValueError) as exc:
            problems.append(f"line {n}: {str(exc).splitlines()[0][:200]}")
    if torn.strip() and strict:
        problems.append(f"line {len(raw) + 1}: torn (no newline: written when the search was killed)")
    return lines, problems


class TuneRecorder(RecorderBase):
    """The evaluator's :class:`~kernelpilot.engine.evaluator.Recorder` for ``tune --out``: appends each decided
    evaluation, measured or skipped, to ``evaluations.jsonl`` (durable on return).

    Args:
        folder: the tune folder. guard: a GracefulStop whose ``held()`` keeps a signal from tearing a line.

    Attributes:
        elapsed_s: returns the search seconds spent (set once the evaluator exists).
    """

    def __init__(self, folder: Path, guard: Any = None) -> None:
        import contextlib

        self.path = Path(folder) / LINES_FILE
        self._held = guard.held if guard is not None else contextlib.nullcontext
        self.elapsed_s: Any = lambda: 0.0
        self._prev = last_line_sha256(self.path)

    def before(self, index: int, config: dict[str, Any], parent: Any, move: Any, incumbent: Any) -> None:
        """Nothing is written before an evaluation runs."""

    def after(self, ev: Evaluation, incumbent: Evaluation | None) -> Evaluation:
        """Append ``ev`` (one JSON line chained to the previous one, fsync'ed); returns it unchanged."""
        return self._append(ev)

    def skipped(self, ev: Evaluation) -> Evaluation:
        """Append a config answered without a run (``pruned``, ``invalid_config``, a compile-ahead ``timeout``; its
        ``index`` None) like a measured one: ``tune.json`` lists every evaluation the strategy received, and a
        resumed search must not compile a pruned config again. On the H200, a resume of the 10,800-config space
        that had not recorded its 1,562 pruned configs compiled them all again, 31 of them until their 120 s
        compile limit (docs/device-runs/2026-11-27-s10). Returns ``ev`` unchanged."""
        return self._append(ev)

    def _append(self, ev: Evaluation) -> Evaluation:
        text = TuneLine(evaluation=ev, spent_s=float(self.elapsed_s()), prev_sha256=self._prev).model_dump_json()
        self._prev = sha256_bytes(text.encode())
        line = text + "\n"
        with self._held():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        return ev


def last_line_sha256(path: Path) -> str | None:
    """sha256 (hex) of the last complete line of ``path`` without its newline (None: no file, or no complete
    line): the ``prev_sha256`` of the next line appended."""
    if not path.is_file():
        return None
    lines = path.read_bytes().split(b"\n")[:-1]  # the part after the last newline is a torn line, or empty
    lines = [line for line in lines if line.strip()]
    return sha256_bytes(lines[-1]) if lines else None


def chain_breaks(path: Path) -> list[str]:
    """One problem per complete line of ``path`` whose ``prev_sha256`` is not the hash of the line before it, once
    any line carries one (a folder written before the lines were chained has none). Raises nothing."""
    lines = [line for line in path.read_bytes().split(b"\n")[:-1] if line.strip()] if path.is_file() else []
    prevs = []
    for line in lines:
        try:
            prevs.append(json.loads(line).get("prev_sha256"))
        except (ValueError, AttributeError):
            prevs.append(None)
    if not any(prevs):
        return []
    return [f"line {n}: its prev_sha256 is not the hash of line {n - 1} (a line edited, removed or inserted)"
            for n, (prev, want) in enumerate(zip(prevs, [None] + [sha256_bytes(x) for x in lines[:-1]]), 1)
            if prev != want]


def resume_state(folder: str | Path) -> tuple[Workspace, TuneRun, list[Evaluation], float]:
    """What ``tune --resume`` continues from: the folder, tune-run.json, the evaluations decided so far (in order)
    and the seconds they spent.

    Raises:
        RunFolderError: not a tune folder (no tune-run.json, or it is corrupt); a line of evaluations.jsonl other
            than a torn last one is corrupt (the message names it).
    """
    ws = Workspace(Path(folder))
    if not (ws.root / RUN_FILE).is_file():
        raise RunFolderError(f"{ws.root} is not a folder of `kernelpilot tune --out` (no {RUN_FILE})",
                             "pass the --out folder of the tune search to resume")
    run = read_json(ws.root / RUN_FILE, TuneRun)
    lines, problems = read_lines(ws.root / LINES_FILE)
    if problems:
        raise RunFolderError(f"{ws.root / LINES_FILE}: {problems[0]}" + (f" (and {len(problems) - 1} more)"
                                                                          if len(problems) > 1 else ""),
                             "the file was changed by hand or damaged; remove the bad lines (the evaluation cache "
                             "still answers those configs) and resume again")
    spent = lines[-1].spent_s if lines else 0.0
    return ws, run, [line.evaluation for line in lines], spent


def start_folder(out: Path, run: TuneRun) -> Workspace:
    """Create the tune folder and write ``tune-run.json``.

    Raises:
        RunFolderError: ``out`` exists and is not empty, or cannot be created.
    """
    ws = Workspace.create(out)
    write_json(ws.root / RUN_FILE, run)
    return ws
