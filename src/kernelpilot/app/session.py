"""One session of ``kernelpilot optimize``: the search and the final report over a run folder already set up.

A fresh run (:func:`kernelpilot.app.optimize.optimize`) and a resumed one (:func:`kernelpilot.app.resume.resume`)
build a :class:`Session` — the prepared kernel, the run folder, run.json, its git history, and for a resumed run
the versions already decided — and hand it to :func:`drive`: the engine evaluates every config the strategy
proposes (each version committed as soon as it is decided, with run.json's count of the search seconds spent),
then the final best is profiled, benchmarked and reported, and ``finished_utc`` is set in the final commit.

SIGINT and SIGTERM stop a session cleanly (:class:`~kernelpilot.app.interrupt.GracefulStop`): the workers are
killed, the version in flight gets ``interrupted.json``, run.json says what was interrupted and what the search had
spent, and an :class:`~kernelpilot.errors.Interrupted` error says how to resume. A ``kill -9`` skips all that and
loses at most the version in flight: ``--resume`` redoes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelpilot.app.interrupt import GracefulStop, RunInterrupted, hold_point, record_interruption
from kernelpilot.engine.evaluator import Evaluator, MaxVersions, StopRule, TargetMet
from kernelpilot.engine.stops import StopRuleBase
from kernelpilot.target import Target
from kernelpilot.progress import Phase, counter
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.records.models import RunInfo, now_utc
from kernelpilot.records.workspace import Workspace, write_json, write_text
from kernelpilot.search.model import Budget, BudgetExhausted

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile
    from kernelpilot.search.worker_child import WorkerOptions
    from kernelpilot.app.recorder import RunFolderRecorder
    from kernelpilot.search.strategies import Strategy

__all__ = ["FirstIncorrect", "NCU_PROFILES_IN_SEARCH", "OptimizeResult", "Session", "drive", "now_utc", "search_first"]

#: Nsight Compute profiles taken during the search: v0's (the starting diagnosis the guided strategy's first moves
#: come from); later incumbents get light cards, and the final best is profiled after the search. One ncu run took
#: 15–17 s on an H100 (docs/device-runs), ten times a whole evaluation, so a profile per accepted version would eat
#: the budget.
NCU_PROFILES_IN_SEARCH = 1

Log = Callable[[str], None]


class OptimizeResult(BaseModel):
    """What :func:`kernelpilot.app.optimize.optimize` returns: the run folder, its records, and the best version;
    ``report_html``: the page written (``RUN/report.html``; empty when it could not be drawn)."""

    out: Path
    run: RunInfo
    versions: list[Evaluation] = []
    report_html: str = ""

    @property
    def best(self) -> Evaluation | None:
        """The fastest accepted version (the incumbent at the end), None when nothing was correct."""
        return next((v for v in self.versions if v.index == self.run.best_version), None)

    def to_dataframe(self) -> Any:
        """The run as a pandas DataFrame: one row per version, failures included (their ``status``, NaN times);
        columns in :data:`kernelpilot.records.frames.EVALUATION_COLUMNS` (``duration_ns``, ``iqr_ns``,
        ``pct_of_roofline``, ``speedup_vs_eager`` from the baselines timed before the search ...) and one
        ``config.NAME`` per tunable.

        Raises:
            MissingDependencyError: pandas is not installed (``pip install 'kernelpilot[dataframe]'``).
        """
        from kernelpilot.records.frames import evaluation_frame

        return evaluation_frame(self.versions, self.run.baselines_ns)


#: A failed first version's status -> the file that says why (as written into the stop line).
_FAILURE_FILE = {"wrong_result": "correctness.json", "nan": "correctness.json"}


def failure_line(ev: Evaluation) -> str:
    """``v0 failed (timeout: no answer within 1 s ...; see v0/outcome.json)``: a failed version's status, the first
    line of its message and the file that holds the evidence (correctness.json for a wrong result or NaN, else
    outcome.json; never a file the version does not have). Raises nothing."""
    where = _FAILURE_FILE.get(ev.status, "outcome.json")
    first = (ev.message or "").strip().splitlines()[0][:160] if (ev.message or "").strip() else ""
    return f"v{ev.index} failed ({ev.status}{': ' + first if first else ''}; see v{ev.index}/{where})"


@dataclass
class FirstIncorrect(StopRuleBase):
    """Stop when the first version ran but was wrong (wrong result, NaN, runtime error): the kernel has a bug that
    no config will fix, and searching would only repeat it."""

    def check(self, evaluator: Evaluator) -> str | None:
        """The stop reason, or None."""
        if evaluator.incumbent is None and evaluator.versions and evaluator.versions[0].status in (
                "wrong_result", "nan", "runtime_error"):
            first = evaluator.versions[0]
            return f"v0 is not correct: {failure_line(first)}: fix the kernel before optimizing"
        return None


@dataclass
class Session:
    """Everything one session of a run needs (see the module docstring).

    Attributes:
        ctx: the prepared :class:`~kernelpilot.app.context.RunContext`. ws: the run folder. info: run.json.
        history: the git history (None: no git). strategy: the strategy object. replayer: a ReplayRunner or None.
        timeout_s: seconds one version may take in its worker. profile / benchmark: ncu and the baselines wanted.
        log: progress callback. t0: ``time.monotonic()`` when the session started.
        prior: the versions decided by earlier sessions (resume), in order.
        bench: the baselines measured before the search (a BenchmarkResult; None until measured).
        metrics_of: config key -> ncu metrics of profiled versions.
        env: the run's :class:`~kernelpilot.measure.env.EnvInfo` (whether ncu may read counters).
        evaluator / recorder / phase: set while the session runs (what an interruption reports).
    """

    ctx: Any
    ws: Workspace
    info: RunInfo
    history: Any
    strategy: Any
    replayer: Any
    timeout_s: float
    profile: bool
    benchmark: bool
    log: Log
    t0: float
    prior: list[Evaluation] = field(default_factory=list)
    bench: Any = None
    metrics_of: dict[str, Any] = field(default_factory=dict)
    env: Any = None
    evaluator: Evaluator | None = None
    recorder: RunFolderRecorder | None = None
    phase: str = "set-up"


def _baselines(runner: Any, shape: dict[str, Any], config: dict[str, Any], log: Log) -> Any:
    """PyTorch eager and torch.compile of the reference (and the kernel at ``config``) on the same inputs, timed once
    in the run's first worker (isolated like every version; torch.compile compiles there once); None when they cannot
    run (the reason is logged)."""
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.report.benchmark import BenchmarkResult

    try:
        return BenchmarkResult.model_validate_json(
            runner.workers[0].call("kernelpilot.app.session:_baselines_in_worker", shape, config))
    except KernelpilotError as exc:  # a baseline that cannot run is reported, not fatal
        log(f"baselines not measured: {exc.message.splitlines()[0][:200]}")
        return None


def search_first(strategy: Strategy) -> bool:
    """True when the strategy wants the GPU for the search alone until it ends (``auto``: its ``search_first``):
    no ncu profile of v0 (light cards during the search; ncu profiles the final best), the baselines timed after the
    search, and no roofline-target stop (only the budget and the space end it). Other strategies: v0 profiled, the
    baselines timed before the search, the target rule on."""
    return bool(strategy.search_first)


def _time_baselines(s: Session, runner: Any, guard: GracefulStop, when: str, config: dict[str, Any]) -> None:
    """Time PyTorch eager and torch.compile of the reference once, round-robin with the kernel at ``config`` (the
    start config before the search, the incumbent after it: :func:`_baselines`), and record them in
    ``baselines.json`` and run.json; ``when`` says where in the run (logged)."""
    with Phase(s.log, "baselines", f"PyTorch eager and torch.compile of the reference, timed once {when}, "
                                   f"round-robin with the kernel"):
        s.bench = _baselines(runner, s.ctx.shape, config, s.log)
    if s.bench is not None:
        s.info.baselines_ns = s.bench.baselines_ns
        with guard.held():
            write_json(s.ws.root / "baselines.json", s.bench)
            write_json(s.ws.root / "run.json", s.info)


def _baselines_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target, shape: dict[str, Any],
                         config: dict[str, Any]) -> str:
    """Worker side of :func:`_baselines`: :func:`kernelpilot.report.benchmark.run_benchmark` at ``shape``, as JSON."""
    from kernelpilot.report.benchmark import run_benchmark

    return run_benchmark(kf, shape, config, target).model_dump_json()


def _evidence(s: Session, recorder: Any) -> Any:
    """The evidence source: ncu on v0 (not again on a resumed run that has v0) and the final best, light cards in
    between; light cards only in a replay; none under the interpreter."""
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence

    ctx, cuda = s.ctx, s.ctx.target.is_gpu
    if not (cuda or s.replayer is not None):
        return None
    why_light = ("replay: light card from the stored time" if s.replayer else
                 "ncu profiles v0 and the final best; incumbents in between get light cards" if s.profile else
                 "profiling off (--no-profile)")
    light = LightEvidence(ctx.kf.path, ctx.shape, ctx.roofline, ctx.gpu, ctx.kf.name, why_light,
                          arch=None if cuda else "sm_90")
    if not (cuda and s.profile):
        return light
    kf = ctx.kf
    evidence = NcuEvidence(kf.path, kf.reference_path if kf.reference_path != kf.path else None, ctx.shape,
                           recorder.report_path, light, on_metrics=recorder.write_metrics,
                           max_profiles=0 if s.prior or search_first(s.strategy) else NCU_PROFILES_IN_SEARCH,
                           log=s.log)
    evidence.metrics = s.metrics_of
    env_ncu = s.env.ncu if s.env is not None else None
    if env_ncu is not None and env_ncu.counters_readable is False:
        evidence.disable(f"profiling disabled: {env_ncu.counters_detail}")
        s.log(evidence.disabled)
    return evidence


def _search(s: Session, guard: GracefulStop) -> Any:
    """The search: workers, compile-ahead, baselines, the evaluator (preloaded with ``s.prior``) and the strategy.
    Sets ``info.stop_reason``; returns the evidence source (for the final profile)."""
    from kernelpilot.app.context import setup_line
    from kernelpilot.app.recorder import RunFolderRecorder
    from kernelpilot.app.tune import make_runner
    from kernelpilot.engine.prune import CompileAhead, compile_order

    ctx, ws, info = s.ctx, s.ws, s.info
    kf, roof, cuda = ctx.kf, ctx.roofline, ctx.target.is_gpu
    recorder = s.recorder = RunFolderRecorder(ws, kf_sha256=kf.source_sha256, shape=ctx.shape, strategy=info.strategy,
                                              roofline=roof, history=s.history, metrics_of=s.metrics_of, log=s.log,
                                              guard=guard)
    evidence = _evidence(s, recorder)
    ahead, runner, interrupted = None, s.replayer, False
    try:
        if s.replayer is None:
            t = time.monotonic()
            if cuda:  # a config list too (issue 25: torchao's 960 compiles were 88 % of its exhaustive tune)
                ahead = CompileAhead(kf.path, compile_order(s.strategy, ctx.space, info.seed, ctx.start), ctx.shape,
                                     arch=None, measure_while_cold=True, timeout_s=s.timeout_s,
                                     compute_unit=kf.compute_unit, domain=kf, shape_seed=ctx.shape_seed,
                                     progress=counter(s.log, "compile-ahead", "configs compiled"))
            info.setup_s["compile_ahead"] = round(time.monotonic() - t, 6)
            t = time.monotonic()
            runner = make_runner(ctx, ref=kf.reference_path if kf.reference_path != kf.path else None,
                                 timeout_s=s.timeout_s)
            info.setup_s["runner"] = round(time.monotonic() - t, 6)
            s.log(setup_line(info.setup_s))
            if cuda and s.benchmark and s.bench is None and not search_first(s.strategy):
                _time_baselines(s, runner, guard, "before the search", ctx.start)
        stop: list[StopRule] = [FirstIncorrect()]  # after the baselines: the target rule reads them
        if roof is not None and not search_first(s.strategy):
            stop.append(TargetMet(roof.target_fraction * 100, dict(info.baselines_ns)))
        if info.iterations is not None:
            stop.append(MaxVersions(info.iterations + 1))
        ev = s.evaluator = Evaluator(
            ctx.space, runner, budget=Budget(max_s=info.budget_s, charged=s.replayer is not None,
                                             spent_before_s=info.search_spent_s),
            pruner=ahead, evidence=evidence, recorder=recorder, stop=stop, roofline=roof,
            ab_samples=0 if s.replayer else (30 if cuda else 8), race=cuda, strategy=info.strategy, log=s.log)
        ev.preload(s.prior)
        recorder.elapsed_s = ev.budget.elapsed_s
        info.space_size = ctx.space.size

        def state() -> list[Path]:
            info.search_spent_s = ev.budget.elapsed_s()
            return [write_json(ws.root / "run.json", info)]

        recorder.on_commit = state
        s.phase = "search"
        try:
            s.strategy.search(ctx.space, ev, seed=info.seed, start=ctx.start)
            info.stop_reason = f"strategy {info.strategy!r} finished: no untried config left that it would propose"
        except BudgetExhausted as exc:
            info.stop_reason = str(exc)
        info.search_spent_s = ev.budget.elapsed_s()
        unknown = sum(1 for e in ev.order if e.status == "not_in_cache")
        if unknown:  # a replay over a space larger than its cache: those configs were skipped, not failed
            note = (f"{unknown} config(s) of the space are not in the replayed cache and were skipped "
                    f"(skipped.jsonl: not_in_cache)")
            info.stop_reason += f"; {note}"
            s.log(f"note: {note}")
        if cuda and s.benchmark and s.bench is None and s.replayer is None and ev.incumbent is not None:
            _time_baselines(s, runner, guard, "after the search", dict(ev.incumbent.config))
    except RunInterrupted:
        interrupted = True
        raise
    finally:
        if runner is not None and s.replayer is None:
            (runner.abort if interrupted else runner.close)()
        if ahead is not None:
            ahead.finish(stop=True)
    return evidence


def _final(s: Session, evidence: Any, guard: GracefulStop) -> OptimizeResult:
    """After the search: ncu on the final best, the stop line, benchmark.md, final_report.md, the final commit."""
    from kernelpilot.engine.evidence import NcuEvidence
    from kernelpilot.report.benchmark import render_benchmark_md
    from kernelpilot.report.final import best_version, render_final_report
    from kernelpilot.report.html import try_write_report_html

    ws, info, ev = s.ws, s.info, s.evaluator
    assert ev is not None
    s.phase = "final report"
    with guard.held():
        write_json(ws.root / "run.json", info)
    hold_point("final", s.log)
    versions = ev.versions
    skipped = [e for e in ev.order if e.index is None]
    best = best_version(versions)
    if best is not None and isinstance(evidence, NcuEvidence) and best.key not in s.metrics_of:
        s.log(f"ncu: the final best v{best.index}")  # the diagnosis of where the run ended
        profiled = evidence.profile(best.model_copy(update={"card": None}))
        versions = [profiled if v is best else v for v in versions]
        best = profiled
        with guard.held():
            s.recorder.note_profile(best)  # committed by the final commit, like the outcome and card below
            write_json(ws.version_dir(best.index) / "outcome.json", best)
            if best.card:
                write_json(ws.version_dir(best.index) / "verdict.json", best.card)
    if best is not None and isinstance(evidence, NcuEvidence):
        _note_counters(s, evidence, best)
    _choose_final(s, best, guard)
    if best is None and not info.stop_reason.startswith("v0 is not correct"):
        failed = next((v for v in versions if not v.ok), None)
        info.stop_reason += "; no version was correct" + (f" ({failure_line(failed)})" if failed else "")
    info.best_version = best.index if best else None
    s.log(f"stopped: {info.stop_reason}")
    bench = _final_benchmark(s, best) if s.benchmark and best is not None else None
    with guard.held():
        if bench is not None:
            write_json(ws.root / "benchmark.json", bench)
            write_text(ws.root / "benchmark.md", render_benchmark_md(bench, info))
        info.finished_utc = now_utc()  # on disk (run.json) only after final_report.md: a run is finished once both are
        info.wall_s = time.monotonic() - s.t0
        write_text(ws.root / "final_report.md", render_final_report(info, versions, s.ctx.roofline, skipped=skipped))
        write_json(ws.root / "run.json", info)
        html = try_write_report_html(ws.root, s.log)
        s.recorder.finish(versions)
    _record_experience(s, versions)
    # the worker's full records live in the version folders; the result carries what outcome.json holds
    return OptimizeResult(out=ws.root, run=info, versions=[v.as_written().model_copy(update={"records": None})
                                                           for v in versions],
                          report_html=html)


def _note_counters(s: Session, evidence: Any, best: Evaluation) -> None:
    """ncu's counter permission as the final best's profile found it, in env.json/env.md: readable (counters read),
    NOT readable (``evidence.refused``), else unchanged (probed at the start, or the profile failed otherwise). A
    separate probe ran here, in the 12-15 s that followed every search of session 15 (docs/search.md)."""
    from kernelpilot.measure.env import render_env_md

    env = s.env
    if env is None or env.gpu is None or env.ncu.counters_readable is not None:
        return
    if evidence.refused is not None:
        readable, detail = False, f"the final best's ncu profile: {evidence.refused}"
    elif best.key in evidence.metrics:
        readable, detail = True, f"read by the final best's ncu profile (v{best.index})"
    else:
        return
    s.env = env.model_copy(update={"ncu": env.ncu.model_copy(update={"counters_readable": readable,
                                                                     "counters_detail": detail})})
    write_json(s.ws.root / "env.json", s.env)
    write_text(s.ws.root / "env.md", render_env_md(s.env))


def _choose_final(s: Session, best: Evaluation | None, guard: GracefulStop) -> None:
    """run.json's ``final`` (:mod:`kernelpilot.app.candidates`): on a GPU with the baselines measured, torch.compile's
    kernel is imported and searched when torch.compile beat the search's best by more than ``MARGIN``, and the final
    is the fastest correct candidate; elsewhere (a replay, the interpreter, no baselines) the search's best. On a GPU
    the final's ratio to torch.compile comes from one round-robin timing (the baselines timed after the search with
    the incumbent, or timed again here with the best when they were timed before it), and the candidate is timed
    round-robin with torch.compile too: the decision compares the two kernels' ratios to torch.compile round by round
    (:func:`kernelpilot.app.candidates.paired_ratios`). The candidate's files (``RUN/inductor/``) are this command's
    writes, committed with the final record."""
    from kernelpilot.app.candidates import (MARGIN, CandidateOutcome, decide_final, inductor_candidate, paired_ratios,
                                            standings, torch_compile_ns)
    from kernelpilot.records.seal import note_written

    ctx, info, kf = s.ctx, s.info, s.ctx.kf
    ref = kf.reference_path if kf.reference_path != kf.path else None
    cand = None
    if (ctx.target.is_gpu and s.replayer is None and best is not None and s.bench is not None
            and _standing_ns(s, best) is None):  # baselines from before the search: time them again with the best
        with Phase(s.log, "baselines", f"v{best.index}, PyTorch eager and torch.compile timed round-robin"):
            again = standings(kf.path, ref, ctx.shape, dict(best.config), interpreted=False, timeout_s=s.timeout_s,
                              log=s.log)
        if again is not None:
            s.bench, info.baselines_ns = again, again.baselines_ns
            with guard.held():
                write_json(s.ws.root / "baselines.json", again)
    compiled_ns = torch_compile_ns(info.baselines_ns)
    if ctx.target.is_gpu and s.replayer is None and best is not None and compiled_ns is not None:
        best_ns = _standing_ns(s, best) or best.duration_ns  # round-robin with torch.compile where it was
        if compiled_ns < best_ns * (1 - MARGIN):  # type: ignore[operator]
            s.phase = "Inductor candidate"
            with Phase(s.log, "Inductor candidate", f"torch.compile ran in {compiled_ns / 1000:.2f} µs, the search's "
                       f"best in {best_ns / 1000:.2f} µs: importing Inductor's kernel"):  # type: ignore[operator]
                cand = inductor_candidate(kf.path, ref, ctx.shape, s.ws.root / "inductor", compiled_ns,
                                          timeout_s=s.timeout_s, log=s.log)
            for path in sorted((s.ws.root / "inductor").rglob("*")):
                if path.is_file():
                    note_written(path)
        else:
            cand = CandidateOutcome(status="not_needed", torch_compile_ns=compiled_ns,
                                    message=f"torch.compile was not faster than the search's best by more than "
                                            f"{MARGIN:.0%}")
    if best is not None:  # a candidate is only sought against the search's best
        best_ratios = paired_ratios(s.bench) if _standing_ns(s, best) is not None else []
        cand_ratios: list[float] = []
        if cand is not None and cand.status == "imported" and cand.kernel:
            with Phase(s.log, "Inductor candidate", "its best, PyTorch eager and torch.compile timed round-robin"):
                # the converted file finds its reference itself (its tune ran with ref=None)
                cand_ratios = paired_ratios(standings(s.ws.root / "inductor" / cand.kernel, None, ctx.shape,
                                                      cand.config, interpreted=False, timeout_s=s.timeout_s, log=s.log))
        info.final = decide_final(best, "kernel.py", cand, best_ratios=best_ratios,
                                  cand_ratios=cand_ratios).model_dump()
        with guard.held():
            write_json(s.ws.root / "run.json", info)
        s.log(f"final: {info.final['source']} at {info.final['duration_ns'] or 0:.0f} ns — {info.final['decision']}")


def _standing_ns(s: Session, best: Evaluation) -> float | None:
    """The best version's median from the baselines' round-robin (ns), when those were timed round-robin with its
    config; None otherwise (baselines timed with another config, a run recorded before round-robin baselines, or
    not measured)."""
    b = s.bench
    if b is None or not b.round_robin or not b.rows or b.rows[0].timing is None:
        return None
    return b.rows[0].timing.median_ns if dict(b.config) == dict(best.config) else None


def _record_experience(s: Session, versions: list[Evaluation]) -> None:
    """Each version that tried a change goes into the experience log (not a replay: its outcomes were recorded
    where they were measured); a log that cannot be written is logged, never fatal."""
    if s.replayer is not None:
        return
    from kernelpilot.experience.from_runs import entries_from_optimize, guess_kernel_type, record_entries

    info = s.info
    added, why = record_entries(entries_from_optimize(
        versions, run=str(s.ws.root.resolve()), kernel=info.kernel_name, kernel_type=guess_kernel_type(info.kernel_name),
        backend=(s.ctx.kf.backend.name if s.ctx.kf.backend is not None else "triton"), gpu=s.ctx.gpu))
    s.log(f"experience log: {added} outcomes added" + (f" ({why})" if why else ""))


def _final_benchmark(s: Session, best: Evaluation) -> Any:
    """benchmark.md's rows: the baselines with the best version timed round-robin with them when they were timed with
    its config (the ``auto`` strategy times them after the search, with the incumbent), else the best version's own
    timing (the record the decision used) beside baselines timed at another moment; under the interpreter everything
    is timed now (cheap at the CPU shape); None in a replay."""
    from kernelpilot.measure.timing import TimingResult

    ctx, kf = s.ctx, s.ctx.kf
    if ctx.target.is_cpu:  # cheap at the CPU shape; the run's workers are gone, so one more isolated call
        from kernelpilot.errors import KernelpilotError
        from kernelpilot.report.benchmark import BenchmarkResult
        from kernelpilot.search.isolated import run_isolated

        try:
            with Phase(s.log, "baselines", f"v{best.index} vs PyTorch eager, timed now under the interpreter"):
                return BenchmarkResult.model_validate_json(run_isolated(
                    kf.path, "kernelpilot.app.session:_baselines_in_worker", ctx.shape, best.config,
                    ref=kf.reference_path if kf.reference_path != kf.path else None, interpreted=True))
        except KernelpilotError as exc:
            s.log(f"benchmark not measured: {exc.message.splitlines()[0][:200]}")
            return None
    timing = (best.records or {}).get("timing")
    timing_file = s.ws.root / f"v{best.index}" / "timing.json"
    if timing is None and timing_file.is_file():  # a version decided by an earlier session of a resumed run
        timing = TimingResult.model_validate_json(timing_file.read_text())
    if s.bench is None or timing is None:
        return None
    if _standing_ns(s, best) is not None:  # the baselines were timed round-robin with this config: keep them whole
        row = s.bench.rows[0]
        return s.bench.model_copy(update={"rows": [row.model_copy(update={
            "name": row.name.replace("best config", f"best config v{best.index}")}), *s.bench.rows[1:]]})
    rows = [s.bench.rows[0].model_copy(update={"name": s.bench.rows[0].name.replace("best config", f"best config v{best.index}"),
                                               "timing": TimingResult.model_validate(timing)}), *s.bench.rows[1:]]
    return s.bench.model_copy(update={"config": best.config, "rows": rows})


def drive(s: Session) -> OptimizeResult:
    """Run the session: the search, then the final report (see the module docstring).

    Raises:
        Interrupted: SIGINT or SIGTERM stopped the session (recorded; the hint says how to resume).
        KernelpilotError: as the engine raises (a kernel that cannot be loaded in a worker, ...).
    """
    guard = GracefulStop()
    with guard:
        try:
            evidence = _search(s, guard)
            return _final(s, evidence, guard)
        except RunInterrupted as exc:
            raise record_interruption(s, exc.signum) from None
        except Exception as exc:
            if guard.received() is None:
                raise
            raise record_interruption(s, guard.received()) from exc  # a failure of the stopping run's helpers
