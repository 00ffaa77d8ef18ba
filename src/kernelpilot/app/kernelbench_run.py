"""``kernelpilot kernelbench run PROBLEMS/ SOLUTIONS/``: a folder of KernelBench solutions, each checked and timed
in its own isolated worker, with fast_p over the lot (docs/kernelbench.md, "kernelbench run").

For each pair (:func:`kernelpilot.app.kernelbench_pairs.pair_folder`) a fresh
:class:`~kernelpilot.search.isolated.IsolatedKernel` (the worker ``check`` and ``bench`` use: a spawned process, a
per-request time limit, crash detection) loads the solution with its problem as the reference and runs
:func:`evaluate_in_worker`: on a GPU the ``bench`` subset of the stage table (every defence: correctness on fresh
seeds against a float64 reference, the launch count of the solution's own kernels, timing with new values per launch,
the re-check, the device activity), then PyTorch eager and ``torch.compile`` of the problem's ``Model`` on the same
inputs with the same timer (:func:`kernelpilot.report.benchmark.run_benchmark`); without a GPU the ``check`` subset
under the Triton interpreter, and no time at all (a speedup is ``None``, never a number from the interpreter).

A solution that hangs or kills its worker is that row's ``timeout`` / ``worker_crash``; the next pair gets a new
worker. Every file of the run is hashed before it starts; a pair after which a file changed on disk is refused
(``files_changed``) and so is every later pair whose files no longer match (a solution may not rewrite a problem
or another solution).

fast_p is KernelBench's (``src/kernelbench/score.py``, ``fastp``): the fraction of *all* rows that are correct and
whose speedup (baseline time over solution time) is over ``p``; ``None`` when a correct row's speedup was not
measured.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelpilot.app.kernelbench_pairs import Pair, pair_folder
from kernelpilot.errors import ContractError, KernelFailed, KernelpilotError, ToolMissingError
from kernelpilot.target import Target

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile
    from kernelpilot.search.worker_child import WorkerOptions

__all__ = ["EXCESSIVE_SPEEDUP", "INCORRECT", "P_VALUES", "KernelBenchResult", "KernelBenchRow", "evaluate_in_worker",
           "fast_p", "fast_p_table", "run_kernelbench"]

#: The thresholds reported (KernelBench's analysis script prints 0, 0.5, 0.8, 1, 1.5, 2; the issue asks for these).
P_VALUES: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
#: KernelBench flags (never refuses) a speedup over this (``eval.py``: ``excessive_speedup_threshold = 10``).
EXCESSIVE_SPEEDUP = 10.0
#: Failure statuses of kernelpilot's stages that mean "the result is wrong": the row's status is ``incorrect`` and
#: its ``failure`` names which. Every other failure is the row's status itself (``kernel_not_launched``, ...).
INCORRECT: frozenset[str] = frozenset({"nan", "wrong_result", "wrong_at_shape", "wrong_when_timed", "stale_result",
                                       "aliased", "inputs_mutated", "tolerance_refused"})
#: Where the worker function lives (``"module:function"`` for :meth:`IsolatedKernel.call`).
WORKER_TARGET = "kernelpilot.app.kernelbench_run:evaluate_in_worker"


class KernelBenchRow(BaseModel):
    """One solution with its problem.

    ``status``: ``correct``; ``incorrect`` (``failure`` names the check that failed: ``wrong_result``, ``nan``, ...);
    or the refusal or fault by name: ``kernel_not_launched`` (the solution's own kernels did not run: it computed
    with the reference's library ops), ``contract_error`` (refused at load, e.g. no kernel of its own),
    ``needs_gpu`` (a ``load_inline`` CUDA solution without a GPU), ``timeout``, ``worker_crash``,
    ``compile_error``, ``runtime_error``, ``files_changed``, ``timer_tampered``, ``off_timer_work``, ...
    ``durations_ns``: medians (ns) of ``solution``, ``eager`` and ``compile`` (``None``: not measured, ``notes``
    says why). ``speedup_vs_*``: baseline median over the solution's (``None`` unless correct and both measured).
    ``excessive_speedup``: a speedup over :data:`EXCESSIVE_SPEEDUP` (a flag, as KernelBench's; not a refusal).
    ``files``: role (``problem``, ``solution``) -> ``{"path", "sha256"}``, hashed before the run.
    ``peak_device_bytes``: the most device memory the worker's PyTorch allocator had allocated over the pair
    (``torch.cuda.max_memory_allocated``, bytes; ``None`` without a GPU or when the worker did not answer).
    """

    level: int | None
    problem_id: int
    problem: str
    sample_id: int
    files: dict[str, dict[str, str]]
    status: str
    correct: bool
    failure: str | None = None
    message: str = ""
    stage: str | None = None
    device: str | None = None
    measured: bool = False
    timer: str | None = None
    durations_ns: dict[str, float | None] = {"solution": None, "eager": None, "compile": None}
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    excessive_speedup: bool = False
    notes: dict[str, str] = {}
    wall_s: float = 0.0
    peak_device_bytes: int | None = None


class KernelBenchResult(BaseModel):
    """``kernelpilot kernelbench run``: every row, fast_p (baseline ``eager``/``compile`` -> ``f"{p:g}"`` ->
    fraction, ``None`` when not measured), the counts, what was left unpaired (path -> why) and the files written
    (``json``, ``csv``, ``html`` -> path; ``html`` empty when plotly is missing: ``notes`` says so)."""

    problems: str
    solutions: str
    level: int | None
    device: str | None
    measured: bool
    n_problems: int
    n_correct: int
    fast_p: dict[str, dict[str, float | None]]
    rows: list[KernelBenchRow]
    unpaired_solutions: dict[str, str] = {}
    unpaired_problems: dict[str, str] = {}
    files: dict[str, str] = {}
    notes: list[str] = []

    def to_dataframe(self) -> Any:
        """The rows as a pandas DataFrame, one row per solution, columns :data:`CSV_COLUMNS` (the CSV's).

        Raises:
            MissingDependencyError: pandas is not installed (``pip install 'kernelpilot[dataframe]'``).
        """
        from kernelpilot.records.frames import _pandas

        pd = _pandas()
        return pd.DataFrame([csv_row(r) for r in self.rows], columns=list(CSV_COLUMNS))


#: The CSV's columns (and the DataFrame's), in order; times in ns, empty when not measured.
CSV_COLUMNS: tuple[str, ...] = (
    "level", "problem_id", "problem", "sample_id", "solution", "status", "correct", "failure", "solution_ns",
    "eager_ns", "compile_ns", "speedup_vs_eager", "speedup_vs_compile", "excessive_speedup", "measured", "device",
    "problem_sha256", "solution_sha256", "message")


def csv_row(r: KernelBenchRow) -> dict[str, Any]:
    """One row of the CSV / DataFrame (:data:`CSV_COLUMNS`): ``None`` for what was not measured."""
    return {"level": r.level, "problem_id": r.problem_id, "problem": r.problem, "sample_id": r.sample_id,
            "solution": Path(r.files["solution"]["path"]).name, "status": r.status, "correct": r.correct,
            "failure": r.failure, "solution_ns": r.durations_ns.get("solution"), "eager_ns": r.durations_ns.get("eager"),
            "compile_ns": r.durations_ns.get("compile"), "speedup_vs_eager": r.speedup_vs_eager,
            "speedup_vs_compile": r.speedup_vs_compile, "excessive_speedup": r.excessive_speedup,
            "measured": r.measured, "device": r.device, "problem_sha256": r.files["problem"]["sha256"],
            "solution_sha256": r.files["solution"]["sha256"], "message": r.message[:300]}


def fast_p(rows: Sequence[KernelBenchRow], p: float, baseline: str = "eager") -> float | None:
    """KernelBench's fast_p (``score.py``, ``fastp``): the number of rows that are correct and whose speedup over
    ``baseline`` (``eager`` or ``compile``) is strictly over ``p``, divided by the number of rows (every row counts,
    the incorrect and refused ones too). ``None`` when a correct row has no measured speedup over that baseline
    (without a GPU: nothing is timed, and a fraction would be made up); 0.0 when there is no row or none is correct.

    Raises:
        ValueError: ``baseline`` is neither ``eager`` nor ``compile``.
    """
    if baseline not in ("eager", "compile"):
        raise ValueError(f"baseline {baseline!r}: eager or compile")
    correct = [r for r in rows if r.correct]
    speedups = [r.speedup_vs_eager if baseline == "eager" else r.speedup_vs_compile for r in correct]
    if any(s is None for s in speedups):
        return None
    return sum(1 for s in speedups if s is not None and s > p) / len(rows) if rows else 0.0


def fast_p_table(rows: Sequence[KernelBenchRow]) -> dict[str, dict[str, float | None]]:
    """:func:`fast_p` for every ``p`` of :data:`P_VALUES`, per baseline: ``{"eager": {"0": f, "1": f, "1.5": f,
    "2": f}, "compile": {...}}``."""
    return {b: {f"{p:g}": fast_p(rows, p, b) for p in P_VALUES} for b in ("eager", "compile")}


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "missing"


def evaluate_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target,
                       fresh_baselines: bool = False) -> dict[str, Any]:
    """Worker side of one pair (through :meth:`IsolatedKernel.call`): on a GPU the ``bench`` subset of the stage
    table, then eager and ``torch.compile`` of ``Model`` timed on the same inputs by the same timer; without one the
    ``check`` subset under the interpreter and nothing timed.

    Returns:
        ``{"failure", "message", "stage", "device", "measured", "timer", "durations_ns", "notes",
        "peak_device_bytes"}`` (picklable; ``failure`` None when every stage passed; the peak is
        ``torch.cuda.max_memory_allocated`` over the pair, None without a GPU).
    """
    from kernelpilot.kernels.contract import resolve_config, resolve_shape
    from kernelpilot.search.stages import run_command

    shape, config = resolve_shape(kf, None), resolve_config(kf, None)
    wopts = opts.model_copy(update={"shape": shape})
    durations: dict[str, float | None] = {"solution": None, "eager": None, "compile": None}
    notes: dict[str, str] = {}
    out = {"device": target.label, "measured": False, "timer": None, "durations_ns": durations, "notes": notes}
    if not target.is_gpu:
        failure, ctx = run_command("check", kf, wopts, target, config)
        notes["timing"] = "not measured: no GPU (the check ran under the Triton interpreter; its times are no speed)"
    else:
        failure, ctx = run_command("bench", kf, wopts, target, config)
    out.update(failure=failure.status if failure else None, message=failure.message[:2000] if failure else "",
               stage=ctx.failed_stage, peak_device_bytes=_peak_device_bytes(target))
    if failure is not None or not target.is_gpu:
        return out
    from kernelpilot.report.benchmark import run_benchmark

    timing = ctx.results["timing"]
    ctx.case = ctx.fn = None  # the bench's inputs and refresh pool freed: the baselines make their own (memory)
    bench = run_benchmark(kf, shape, config, target, kernel_timing=timing, use_cache=not fresh_baselines)
    out.update(measured=bool(timing.is_measurement), timer=timing.timer)
    for key, row in zip(("solution", "eager", "compile"), bench.rows):
        durations[key] = row.timing.median_ns if row.timing is not None else None
        if row.skipped or row.note:
            notes[key] = row.skipped or row.note
    out["peak_device_bytes"] = _peak_device_bytes(target)
    return out


def _peak_device_bytes(target: Target) -> int | None:
    """``torch.cuda.max_memory_allocated()`` on a GPU (this worker's peak so far, bytes), else None."""
    if not target.is_gpu:
        return None
    import torch

    return int(torch.cuda.max_memory_allocated())


def _row(pair: Pair, files: dict[str, dict[str, str]], data: dict[str, Any]) -> KernelBenchRow:
    """The row of one pair from the worker's answer (or the parent's failure)."""
    failure = data.get("failure")
    correct = failure is None
    status = "correct" if correct else ("incorrect" if failure in INCORRECT else str(failure))
    d = dict(data.get("durations_ns") or {})
    sol = d.get("solution")
    measured = bool(data.get("measured"))

    def speedup(base: float | None) -> float | None:
        if not (correct and measured and sol and base) or not math.isfinite(sol) or not math.isfinite(base):
            return None
        return base / sol

    vs_eager, vs_compile = speedup(d.get("eager")), speedup(d.get("compile"))
    return KernelBenchRow(
        level=pair.problem.level, problem_id=pair.problem.problem_id, problem=pair.problem.name,
        sample_id=pair.sample_id, files=files, status=status, correct=correct, failure=failure,
        message=str(data.get("message") or ""), stage=data.get("stage"), device=data.get("device"),
        measured=measured, timer=data.get("timer"),
        durations_ns={k: d.get(k) for k in ("solution", "eager", "compile")}, speedup_vs_eager=vs_eager,
        speedup_vs_compile=vs_compile,
        excessive_speedup=any(s is not None and s > EXCESSIVE_SPEEDUP for s in (vs_eager, vs_compile)),
        notes=dict(data.get("notes") or {}), wall_s=float(data.get("wall_s") or 0.0),
        peak_device_bytes=data.get("peak_device_bytes"))


def _evaluate(pair: Pair, timeout_s: float, fresh_baselines: bool) -> dict[str, Any]:
    """One pair in a fresh isolated worker; a refusal at load, a crash or a hang is the answer's ``failure``."""
    from kernelpilot.search.isolated import IsolatedKernel

    try:
        with IsolatedKernel(pair.solution, pair.problem.path, interpreted=None, timeout_s=timeout_s) as iso:
            return iso.call(WORKER_TARGET, fresh_baselines)
    except KernelFailed as exc:
        return {"failure": exc.failure, "message": f"{exc.message} ({exc.hint})" if exc.hint else exc.message}
    except ContractError as exc:
        return {"failure": "contract_error", "message": f"{exc.message} ({exc.hint})"}
    except ToolMissingError as exc:
        return {"failure": "needs_gpu", "message": f"{exc.message} ({exc.hint})"}
    except KernelpilotError as exc:
        return {"failure": "error", "message": f"{type(exc).__name__}: {exc.message}"}


def run_kernelbench(problems: Path, solutions: Path, out: Path, *, level: int | None = None,
                    timeout_s: float = 300.0, fresh_baselines: bool = False,
                    log: Callable[[str], None] = lambda _m: None) -> KernelBenchResult:
    """Pair the folders, evaluate every pair in its own worker (module docstring), compute fast_p and write
    ``kernelbench.json``, ``kernelbench.csv`` and ``report.html`` into ``out`` (created).

    Raises:
        OptionError: a folder missing, no problem file, or no solution paired.
        OSError: ``out`` cannot be written.
    """
    import time

    from kernelpilot.errors import OptionError

    pairing = pair_folder(problems, solutions, level)
    if not pairing.pairs:
        raise OptionError(f"{solutions}: no solution file pairs with a problem under {problems}"
                          + "".join(f"\n  {Path(k).name}: {v}" for k, v in list(pairing.unpaired_solutions.items())[:10]),
                          "name a solution level_{N}_problem_{id}_sample_{k}_kernel.py (KernelBench's naming) or like "
                          "its problem file")
    watched = {p: _sha256(p) for pair in pairing.pairs for p in (pair.problem.path, pair.solution)}
    rows: list[KernelBenchRow] = []
    for i, pair in enumerate(pairing.pairs):
        files = {"problem": {"path": str(pair.problem.path), "sha256": watched[pair.problem.path]},
                 "solution": {"path": str(pair.solution), "sha256": watched[pair.solution]}}
        changed = [p.name for p in (pair.problem.path, pair.solution) if _sha256(p) != watched[p]]
        t0 = time.monotonic()
        if changed:
            data: dict[str, Any] = {"failure": "files_changed", "message": f"{', '.join(changed)} changed on disk "
                                    "since the run started (an earlier solution rewrote it?): not evaluated"}
        else:
            data = _evaluate(pair, timeout_s, fresh_baselines)
            after = [str(p) for p, h in watched.items() if _sha256(p) != h]
            if after:
                data = {"failure": "files_changed", "message": "files changed on disk while this solution ran: "
                        + ", ".join(after)}
        data["wall_s"] = time.monotonic() - t0
        row = _row(pair, files, data)
        rows.append(row)
        log(f"[{i + 1}/{len(pairing.pairs)}] level {row.level} problem {row.problem_id} sample {row.sample_id}: "
            f"{row.status}" + (f" ({row.failure})" if row.status == "incorrect" else "")
            + (f", {row.speedup_vs_eager:.2f}x eager" if row.speedup_vs_eager is not None else ""))
    measured = any(r.measured for r in rows)
    notes = [] if measured else ["no time was measured (no GPU): the speedups and fast_p are not measured (null); "
                                 "correctness is (n_correct)"]
    for base in ("eager", "compile"):
        missing = [f"level {r.level} problem {r.problem_id} sample {r.sample_id}" for r in rows if r.correct
                   and (r.speedup_vs_eager if base == "eager" else r.speedup_vs_compile) is None]
        if measured and missing:
            notes.append(f"fast_p vs {base} is null: no {base} speedup for the correct " + "; ".join(missing[:10])
                         + (" ..." if len(missing) > 10 else "") + " (the row's notes say why)")
    result = KernelBenchResult(
        problems=str(problems), solutions=str(solutions), level=level,
        device=next((r.device for r in rows if r.device), None), measured=measured, n_problems=len(rows),
        n_correct=sum(r.correct for r in rows), fast_p=fast_p_table(rows), rows=rows,
        unpaired_solutions=pairing.unpaired_solutions, unpaired_problems=pairing.unpaired_problems, notes=notes)
    return write_outputs(result, Path(out))


def write_outputs(result: KernelBenchResult, out: Path) -> KernelBenchResult:
    """Write ``kernelbench.json``, ``kernelbench.csv`` (:data:`CSV_COLUMNS`) and ``report.html`` (when plotly is
    installed: :func:`kernelpilot.report.kernelbench_html.render_kernelbench_html`) into ``out``; returns the result
    with ``files`` filled. Raises OSError: ``out`` cannot be written."""
    import csv
    import importlib.util
    import io

    from kernelpilot.records.workspace import write_json, write_text

    out.mkdir(parents=True, exist_ok=True)
    files = {"json": str(out / "kernelbench.json"), "csv": str(out / "kernelbench.csv")}
    if importlib.util.find_spec("plotly") is not None:
        files["html"] = str(out / "report.html")
    else:
        result = result.model_copy(update={"notes": [*result.notes, "report.html not written: plotly is not "
                                                                   "installed (python3 -m pip install plotly)"]})
    result = result.model_copy(update={"files": files})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for r in result.rows:
        writer.writerow({k: ("" if v is None else v) for k, v in csv_row(r).items()})
    write_text(Path(files["csv"]), buf.getvalue())
    write_json(Path(files["json"]), result)
    if "html" in files:
        from kernelpilot.report.kernelbench_html import render_kernelbench_html

        write_text(Path(files["html"]), render_kernelbench_html(result.model_dump(mode="json")))
    return result
