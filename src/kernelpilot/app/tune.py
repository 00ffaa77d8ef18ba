"""``kernelpilot tune``: the engine + a crash-safe cache + any strategy, over the kernel's search space.

Per search (:func:`tune`): set up once (:func:`kernelpilot.app.context.prepare`: kernel, shape, spec, roofline,
space); compile the space ahead for static pruning (:class:`kernelpilot.engine.prune.CompileAhead`, in parallel with
the measurements); evaluate through :class:`kernelpilot.engine.evaluator.Evaluator` with isolated workers on every
GPU (or Ray actors, or a replay of a cache); keep every answer in the cache before the strategy sees it, so a killed
search run again answers what it measured from the cache. With ``--out DIR`` the search also keeps its own records
while it runs (:mod:`kernelpilot.app.tune_run`: ``tune-run.json``, one line per evaluation in ``evaluations.jsonl``)
and ``kernelpilot tune --resume DIR`` continues it, the budget counting what was spent. SIGINT and SIGTERM stop it
cleanly. The guided and auto strategies read light cards of their incumbents (no ncu in ``tune``).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelpilot.app.interrupt import GracefulStop, RunInterrupted, hold_point, signal_name
from kernelpilot.app.tune_run import TuneRecorder
from kernelpilot.engine.evaluator import Evaluator, IncumbentChange
from kernelpilot.engine.prune import CompileAhead, PruneReport, compile_order
from kernelpilot.errors import OptionError, SearchError
from kernelpilot.options import TuneOptions, build_options, stored_options
from kernelpilot.progress import counter
from kernelpilot.records.evaluation import Evaluation, config_key
from kernelpilot.search.model import Budget, BudgetExhausted

__all__ = ["TuneResult", "make_runner", "resume_tune", "tune", "write_tune_records"]


class TuneResult(BaseModel):
    """Everything one search did (``kernelpilot tune --json`` prints it; ``tune.json`` in ``--out``).

    Attributes:
        kernel, shape, device, gpu, strategy, seed: what was searched where.
        space_size / space_total: valid configs / before constraints.
        constraints: the constraints applied (the kernel's, then automatic device limits).
        best: the incumbent at the end (None when no config ran correctly): the fastest accepted config.
        history: each change of the incumbent.
        evaluations: every evaluation the strategy received, in order (cached ones flagged).
        n_new / n_cached: evaluations run now / answered from the cache.
        failures: status -> count over ``evaluations``.
        prune: static pruning's report (None when off or replaying).
        stopped: why the search ended (``strategy finished``, the budget message or a stop rule).
        wall_s: seconds of the whole search; device_s: wall seconds of new evaluations in the workers.
        floor_ns: the speed-of-light floor used (None without a spec).
        cache_file: the cache file read and appended.
        worker_restarts: workers replaced after a timeout, crash or poisoned context.
        measured: False under the Triton interpreter (times are not measurements).
        triton_config: the best config as the backend exports it (Triton: a ``triton.Config(...)`` line).
        top_configs: the five fastest correct configs (fully timed), fastest first, exported the same way.
        evaluations_total: how many evaluations the search made (``evaluations`` may list fewer: :meth:`listed`).
        not_listed: after :meth:`listed`, the summary lines of the evaluations left out (empty: every one listed).
        setup_s: where the seconds before the search went (:attr:`kernelpilot.app.context.RunContext.setup_s`, then
            ``compile_ahead`` and ``runner``); logged as one ``set-up`` line.
    """

    kernel: str
    shape: dict[str, Any]
    device: str
    gpu: str | None
    strategy: str
    seed: int
    space_size: int
    space_total: int
    constraints: list[str]
    best: Evaluation | None
    history: list[IncumbentChange]
    evaluations: list[Evaluation]
    n_new: int
    n_cached: int
    failures: dict[str, int]
    prune: PruneReport | None
    stopped: str
    wall_s: float
    device_s: float
    floor_ns: float | None
    cache_file: str | None
    worker_restarts: int
    measured: bool
    triton_config: str | None
    top_configs: list[str] = Field(default_factory=list)
    evaluations_total: int = 0
    not_listed: list[str] = Field(default_factory=list)
    setup_s: dict[str, float] = Field(default_factory=dict)

    def listed(self) -> "TuneResult":
        """A copy whose ``evaluations`` are those tune.md lists (:func:`kernelpilot.report.final.listed_view`), the
        rest counted in ``not_listed``: what ``tune --json`` prints unless ``--all`` (an exhaustive search of the
        10,800-config space printed some 12 MB). Raises nothing."""
        from kernelpilot.report.final import listed_view

        kept, rest = listed_view(self.evaluations, "evaluations", "each is in tune.json and, with --out, a line of "
                                 "evaluations.jsonl; `tune --json --all` prints them all")
        return self.model_copy(update={"evaluations": kept, "evaluations_total": len(self.evaluations),
                                       "not_listed": rest})

    def to_dataframe(self) -> Any:
        """The search as a pandas DataFrame: one row per evaluation, in order, failures included (their ``status``,
        NaN times); columns in :data:`kernelpilot.records.frames.EVALUATION_COLUMNS` (``duration_ns``, ``iqr_ns``,
        ``pct_of_roofline`` ...) and one ``config.NAME`` per tunable.

        Raises:
            MissingDependencyError: pandas is not installed (``pip install 'kernelpilot[dataframe]'``).
        """
        from kernelpilot.records.frames import evaluation_frame

        return evaluation_frame(self.evaluations)


def make_runner(ctx: Any, *, ref: str | Path | None, timeout_s: float, devices: list[str] | None = None,
                ray_address: str | None = None) -> Any:
    """The isolated runner for a campaign: a :class:`~kernelpilot.search.worker.WorkerPool` (one worker per GPU, or
    the interpreter) or a :class:`~kernelpilot.search.ray_pool.RayPool`, with the roofline's speed-of-light floor and
    the one timing protocol (:data:`kernelpilot.measure.timing.MIN_SAMPLES` ... ``REP_MS``).

    Raises:
        SearchError: the kernel cannot be loaded in a worker.
    """
    from kernelpilot.search.worker import WorkerOptions, WorkerPool

    roof = ctx.roofline
    spare, ctx.spare = ctx.spare, None
    opts = WorkerOptions(kernel=str(ctx.kf.path), ref=str(ref) if ref else None, shape=ctx.shape,
                         interpreted=ctx.target.interpreted, floor_ns=roof.floor_ns if roof is not None else None,
                         sol_tolerance=roof.sol_tolerance if roof is not None else 0.0,
                         activity=False,  # the profiler pass costs seconds: audited before a config leads instead
                         shape_seed=ctx.shape_seed)
    if ray_address:
        from kernelpilot.search.ray_pool import RayPool

        if spare is not None:
            spare.kill()
        return RayPool(opts, ray_address, timeout_s=timeout_s)
    return WorkerPool(opts, devices, timeout_s=timeout_s, spare=spare)


#: Planned configs measured per worker in one window of :meth:`Evaluator.plan_ahead`: large enough that a window's
#: tail (workers idle while the last config of the window finishes) is a small part of it, small enough that the
#: incumbent the next window races against is recent and an interruption loses little.
PLAN_WINDOW_PER_WORKER = 8


def _prefetch(strat: Any, ev: Evaluator, seed: int, start: dict[str, Any]) -> None:
    """With several workers and a strategy whose order is known up front (``plan``), measure the planned configs in
    parallel a window at a time (:meth:`Evaluator.plan_ahead`), so the strategy's sequential calls are answered
    without waiting."""
    planned = strat.plan(ev.space, seed=seed, start=start) if ev.parallel > 1 else None
    if planned is not None:
        ev.plan_ahead(planned, PLAN_WINDOW_PER_WORKER * ev.parallel)


def tune(kernel: str | Path, options: TuneOptions | None = None, *, out: str | Path | None = None,
         log: Callable[[str], None] | None = None, resume_from: Any = None, **keywords: Any) -> TuneResult:
    """Search a kernel's configs with one strategy (see the module docstring).

    Args:
        kernel: the kernel file (TUNABLES, optional CONSTRAINTS; or a ``@triton.autotune`` kernel).
        options: every option of the search (:class:`kernelpilot.options.TuneOptions`: strategy, budgets, shape,
            seed, ref, gpu, prune, constraints, thresholds, timeout_s, devices, ab_samples, race, cache_root, replay,
            use_cache, start, ray_address); None: built from ``keywords`` (the keyword form, kept for callers that
            name a few options: ``tune(k, strategy="exhaustive", budget_evals=8)``), else the defaults.
        out: the search's folder (must not exist or be empty): ``tune-run.json`` (with ``options``' JSON) and
            ``evaluations.jsonl`` while it runs, ``tune.json`` and ``tune.md`` at the end; ``--resume`` continues
            from it.
        log: progress callback.
        resume_from: (:func:`resume_tune` only) the state of the search to continue, from
            :func:`kernelpilot.app.tune_run.resume_state`.
        keywords: the fields of :class:`~kernelpilot.options.TuneOptions` (only without ``options``).

    Returns:
        A :class:`TuneResult`.

    Raises:
        OptionError: a budget, limit or count out of range (``budget_evals`` < 1, ``timeout_s`` not positive ...),
            an unknown keyword, or ``options`` and ``keywords`` both given.
        SearchError: unknown strategy or prune mode, bad space or constraints, a cache of another kernel version.
        ContractError: the kernel file breaks the contract. SpecError: unknown ``gpu``.
        RunFolderError: ``out`` is not empty or cannot be created. Interrupted: SIGINT/SIGTERM stopped the search.
    """
    if options is None:
        options = build_options(TuneOptions, **keywords)
    elif keywords:
        raise OptionError(f"tune() got options and keywords ({', '.join(sorted(keywords))})",
                          "put them into the TuneOptions (options.model_copy(update=...) then validate)")
    return _tune(kernel, options, out=out, log=log, resume_from=resume_from)


def _tune(kernel: str | Path, o: TuneOptions, *, out: str | Path | None, log: Callable[[str], None] | None,
          resume_from: Any) -> TuneResult:
    """:func:`tune` with its options built (the ranges were checked when ``o`` was built)."""
    from kernelpilot.app.context import prepare, setup_line
    from kernelpilot.engine.evidence import LightEvidence
    from kernelpilot.engine.runner import ReplayRunner
    from kernelpilot.search.strategies import get_strategy

    t0 = time.monotonic()
    log = log or (lambda _m: None)
    strat = get_strategy(o.strategy)
    replayer = ReplayRunner(o.replay, root=o.cache_root) if o.replay is not None else None
    if replayer is not None:  # who vouches for the replayed lines (search/cache_trust.py)
        log(f"replaying {replayer.path}: {replayer.trust}; every decision is made again on the stored samples")
    ctx = prepare(kernel, ref=o.ref, shape=o.shape, config=o.start, gpu=o.gpu, constraints=o.constraints,
                  replay=replayer, spare_worker=True, timeout_s=o.timeout_s or 300.0)
    kf, space, roof = ctx.kf, ctx.space, ctx.roofline
    try:
        folder, prior, spent_s = _folder(kf, out, resume_from, o, ctx)
    except BaseException:
        ctx.discard_spare()
        raise
    if folder is not None and roof is not None:  # report.html draws the search on this roofline
        from kernelpilot.records.workspace import write_json

        write_json(folder.root / "roofline.json", roof)
    setup_s = ctx.setup_s  # the commands' own laps join prepare's (TuneResult.setup_s)
    guard = GracefulStop()
    recorder = TuneRecorder(folder.root, guard) if folder is not None else None
    report: PruneReport | None = None
    ahead: CompileAhead | None = None
    runner: Any = replayer
    cache = None
    ev: Evaluator | None = None
    stopped, restarts = "", 0
    with guard:
        try:
            try:
                if replayer is None:
                    t = time.monotonic()
                    if o.prune:  # a config list too: its compile errors pruned with the reason, Triton's cache filled
                        answered = {e.key for e in prior}  # a resumed search compiles only what is left
                        order = [c for c in compile_order(strat, space, o.seed, ctx.start)
                                 if config_key(c) not in answered]
                        log(f"static pruning: compiling {len(order)} configs in parallel with the measurements"
                            + (f" ({len(answered)} answered before the resume)" if answered else ""))
                        ahead = CompileAhead(kf.path, order, ctx.shape,
                                             arch=None if ctx.target.is_gpu else "sm_90", max_spills=o.max_spills,
                                             min_occupancy_pct=o.min_occupancy_pct, timeout_s=o.timeout_s,
                                             compute_unit=kf.compute_unit, domain=kf, shape_seed=ctx.shape_seed,
                                             progress=counter(log, "compile-ahead", "configs compiled"))
                    setup_s["compile_ahead"], t = round(time.monotonic() - t, 6), time.monotonic()
                    runner = make_runner(ctx, ref=o.ref, timeout_s=o.timeout_s, devices=o.devices,
                                         ray_address=o.ray_address)
                    setup_s["runner"] = round(time.monotonic() - t, 6)
                    log(setup_line(setup_s))
                    if o.use_cache:
                        from kernelpilot.measure.env import collect_env
                        from kernelpilot.search.cache import CacheContext, EvaluationCache

                        cache = EvaluationCache(
                            CacheContext.for_kernel(kf, ctx.shape, collect_env(probe_ncu=False)), root=o.cache_root,
                            roofline=roof)  # a cached answer is held to the floor a live one is
                evidence = (LightEvidence(kf.path, ctx.shape, roof, ctx.gpu, kf.name,
                                          "tune: light card of the incumbent",
                                          arch="sm_90" if not ctx.target.is_gpu else None)
                            if o.strategy in ("guided", "auto") else None)  # the strategies that read cards
                ev = Evaluator(space, runner, cache=cache,
                               budget=Budget(max_evals=o.budget_evals, max_s=o.budget_s, spent_before_s=spent_s,
                                             charged=replayer is not None),  # a replay: stored device seconds
                               pruner=ahead if o.prune is True else None, evidence=evidence, roofline=roof,
                               recorder=recorder, ab_samples=o.ab_samples if replayer is None else 0,
                               race=o.race and replayer is None, strategy=o.strategy, log=log)
                ev.preload(prior)
                if recorder is not None:
                    recorder.elapsed_s = ev.budget.elapsed_s
                try:
                    _prefetch(strat, ev, o.seed, ctx.start)
                    strat.search(space, ev, seed=o.seed, start=ctx.start)
                    stopped = "strategy finished"
                except BudgetExhausted as exc:
                    stopped = str(exc)
                ev.finish_plan()  # a window still measuring, before the workers close
                if replayer is None:  # the best printed is measured in this run (engine/verify_best.py)
                    from kernelpilot.engine.verify_best import remeasure_cached_best

                    remeasure_cached_best(ev, log)
            finally:
                ctx.discard_spare()  # a search that failed before its first worker
                restarts = 0
                if runner is not None and replayer is None:
                    try:
                        restarts = runner.restarts
                    finally:
                        (runner.abort if _interrupting() else runner.close)()
                if ahead is not None:  # "report" wants every config's verdict; a dropping search cancels the rest
                    report = ahead.finish(stop=o.prune is True)
                    log(f"static pruning: {report.n_pruned} of {report.n_compiled} compiled ({report.n_configs} in "
                        f"the space) pruned {report.by_reason}; compiles ran {report.wall_s:.1f} s beside the "
                        f"measurements, the search waited {report.waited_s:.1f} s for them; "
                        f"{len(report.unchecked)} measured before their compile ended")
            hold_point("final", log)
            return _result(kf, ctx, ev, o.strategy, o.seed, report, stopped, t0, cache, replayer, restarts, folder, log)
        except RunInterrupted as exc:
            raise _interrupted(folder, ev, exc.signum, log) from None
        except Exception as exc:
            if guard.received() is None:
                raise
            raise _interrupted(folder, ev, guard.received(), log) from exc  # a failure of the stopping run's helpers


def _interrupting() -> bool:
    """True while a :class:`RunInterrupted` is propagating (inside a ``finally`` on its way out)."""
    return isinstance(sys.exc_info()[1], RunInterrupted)


def _result(kf: Any, ctx: Any, ev: Evaluator, strategy: str, seed: int, report: PruneReport | None, stopped: str,
            t0: float, cache: Any, replayer: Any, restarts: int, folder: Any,
            log: Callable[[str], None] = lambda _m: None) -> TuneResult:
    """The :class:`TuneResult`, written into ``folder`` (``tune.json``, ``tune.md``; ``finished_utc``) when given; its
    outcome added to the experience log (:func:`kernelpilot.experience.from_runs.record_entries`)."""
    from kernelpilot.records.models import now_utc

    space, roof = ctx.space, ctx.roofline
    best = ev.incumbent
    ranked = sorted((e for e in ev.order if e.ok and not e.raced_out), key=lambda e: e.objective)
    result = TuneResult(
        kernel=str(kf.path), shape=ctx.shape, device=ctx.target.record, gpu=ctx.gpu, strategy=strategy, seed=seed,
        space_size=space.size, space_total=space.total_size, constraints=list(space.constraints), best=best,
        history=ev.history, evaluations=ev.order, evaluations_total=len(ev.order), n_new=ev.n_new, n_cached=sum(1 for e in ev.order if e.cached),
        failures=dict(Counter(e.status for e in ev.order if e.status != "ok")), prune=report, stopped=stopped,
        wall_s=time.monotonic() - t0, device_s=ev.device_s, floor_ns=roof.floor_ns if roof is not None else None,
        cache_file=str(cache.path) if cache is not None else (str(replayer.path) if replayer else None),
        worker_restarts=restarts, measured=ctx.target.measured,
        triton_config=kf.backend.export_config(best.config) if best else None,
        top_configs=[kf.backend.export_config(e.config) for e in ranked[:5]], setup_s=dict(ctx.setup_s))
    if folder is not None:
        write_tune_records(result, folder.root, existing=True, log=log)
    if replayer is None:  # a replay's outcomes were recorded where they were measured
        from kernelpilot.experience.from_runs import entry_from_tune, guess_kernel_type, record_entries

        where = str(folder.root.resolve()) if folder is not None else f"{kf.path}@{now_utc()}"
        record_entries([entry_from_tune(ev.order, run=where, kernel=kf.name, kernel_type=guess_kernel_type(kf.name),
                                        strategy=strategy, backend=(kf.backend.name if kf.backend is not None else "triton"),
                                        gpu=ctx.gpu)])
    return result


def write_tune_records(result: TuneResult, out: Path, *, existing: bool = False,
                       log: Callable[[str], None] = lambda _m: None) -> None:
    """Write ``tune.json`` (the whole result, on one line), ``tune.md`` (tables) and ``report.html`` (charts) into
    ``out``; in a folder of ``tune --out`` (``existing``) also mark ``tune-run.json`` finished. ``log`` gets a line
    when report.html cannot be drawn.

    Raises:
        RunFolderError: ``out`` exists and is not empty (nothing in it is touched), unless ``existing``.
    """
    from kernelpilot.records.models import now_utc
    from kernelpilot.app.tune_run import RUN_FILE, TuneRun
    from kernelpilot.records.workspace import Workspace, read_json, write_json, write_text
    from kernelpilot.report.tune_md import render_tune_md

    ws = Workspace(out) if existing else Workspace.create(out)
    write_json(ws.root / "tune.json", result, compact=True)  # 5,717 evaluations: 17 MB indented, 12 MB on one line
    write_text(ws.root / "tune.md", render_tune_md(result))
    if existing and (ws.root / RUN_FILE).is_file():
        run = read_json(ws.root / RUN_FILE, TuneRun)
        write_json(ws.root / RUN_FILE, run.model_copy(update={"finished_utc": now_utc(), "interrupted": None}))
    from kernelpilot.report.html import try_write_report_html

    try_write_report_html(ws.root, log)


def _folder(kf: Any, out: str | Path | None, resume_from: Any, options: TuneOptions,
            ctx: Any) -> tuple[Any, list[Any], float]:
    """(the search's folder or None, the evaluations of earlier sessions, the seconds they spent): a new folder
    with ``tune-run.json`` (``options``: the model's JSON) for ``out``, the resumed one (checked: same kernel
    source) for ``resume_from``."""
    from kernelpilot.app.context import check_same_device
    from kernelpilot.records.models import now_utc
    from kernelpilot.app.tune_run import TuneRun, start_folder

    if resume_from is not None:
        ws, run, prior, spent = resume_from
        if run.source_sha256 != kf.source_sha256:
            raise SearchError(f"{kf.path} changed since the search in {ws.root} started (sha256 "
                              f"{run.source_sha256[:12]} then, {kf.source_sha256[:12]} now)",
                              "start a new search (--out NEW_FOLDER) for the changed kernel")
        check_same_device(ws.root, run.measured_on, ctx, "tune")
        return ws, prior, spent
    if out is None:
        return None, [], 0.0
    run = TuneRun(kernel=str(kf.path), source_sha256=kf.source_sha256, options=options.model_dump(mode="json"),
                  started_utc=now_utc(), measured_on=ctx.measured_on)
    return start_folder(Path(out), run), [], 0.0


def _interrupted(folder: Any, ev: Evaluator | None, signum: int, log: Callable[[str], None]) -> Exception:
    """Record a signal in ``tune-run.json`` (when there is a folder) and return the Interrupted error to raise."""
    from kernelpilot.app.tune_run import RUN_FILE, TuneRun
    from kernelpilot.errors import Interrupted
    from kernelpilot.records.workspace import read_json, write_json

    sig = signal_name(signum)
    n = len(ev.order) if ev is not None else 0
    if folder is not None:
        run = read_json(folder.root / RUN_FILE, TuneRun)
        write_json(folder.root / RUN_FILE, run.model_copy(update={"interrupted": f"{sig} after {n} evaluations"}))
        hint = f"resume with `kernelpilot tune --resume {folder.root}`"
    else:
        hint = "run the same command again: the evaluation cache answers every config measured so far"
    message = f"interrupted by {sig} after {n} evaluations" + (f"; they are recorded in {folder.root}" if folder else "")
    log(f"stopped: {message}; {hint}")
    return Interrupted(message, hint, signum)


#: The options ``tune --resume`` may give new values; every other option is the search's own.
RESUME_OPTIONS = ("timeout_s", "budget_evals", "budget_s")


def resume_tune(folder: str | Path, *, timeout_s: float | None = None, budget_evals: int | None = None,
                budget_s: float | None = None, log: Callable[[str], None] | None = None) -> TuneResult:
    """Continue the search kept in ``folder`` (``kernelpilot tune --resume``; :mod:`kernelpilot.app.tune_run`), with
    its own options (``tune-run.json``'s ``options`` validated back into :class:`~kernelpilot.options.TuneOptions`
    whole); ``timeout_s``, ``budget_evals`` and ``budget_s`` may be given new values (:data:`RESUME_OPTIONS`). A
    finished search is read back, not run again.

    Raises:
        RunFolderError: not a tune folder, a corrupt record, or stored options that are not a TuneOptions (a field
            it does not know, a value of the wrong type or out of range); the search was measured on another device
            (:func:`kernelpilot.app.context.check_same_device`). SearchError: the kernel changed since.
        OptionError: a new value out of range. Interrupted: as :func:`tune`.
    """
    from kernelpilot.records.models import now_utc
    from kernelpilot.app.tune_run import RUN_FILE, resume_state
    from kernelpilot.records.workspace import read_json, write_json

    ws, run, prior, spent = resume_state(folder)
    if run.finished_utc and (ws.root / "tune.json").is_file():
        (log or (lambda _m: None))(f"{ws.root} finished at {run.finished_utc}: nothing to resume")
        return read_json(ws.root / "tune.json", TuneResult)
    stored = stored_options(TuneOptions, run.options, ws.root / RUN_FILE)
    options = build_options(TuneOptions, stored.model_dump(), timeout_s=timeout_s, budget_evals=budget_evals,
                            budget_s=budget_s)
    write_json(ws.root / RUN_FILE, run.model_copy(update={"options": options.model_dump(mode="json"),
                                                         "interrupted": None,
                                                         "resumed_utc": [*run.resumed_utc, now_utc()]}))
    (log or (lambda _m: None))(f"resuming {ws.root}: {len(prior)} evaluations kept, {spent:.1f} s spent")
    return tune(run.kernel, options, log=log, resume_from=(ws, run, prior, spent))
