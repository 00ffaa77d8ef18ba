"""``kernelpilot tune``: the engine + a crash-safe cache + any strategy, over the kernel's search space.

Per search (:func:`tune`): set up once (:func:`kernelpilot.app.context.prepare`: kernel, shape, spec, roofline,
space); compile the space ahead for static pruning (:class:`kernelpilot.engine.prune.CompileAhead`, in parallel with
the measurements); evaluate through :class:`kernelpilot.engine.evaluator.Evaluator` with isolated workers on every
GPU (or Ray actors, or a replay of a cache); keep every answer in the cache before the strategy sees it, so a killed
search resumes where it stopped. The guided strategy reads light cards of its incumbents (no ncu in ``tune``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelpilot.engine.evaluator import Evaluator, IncumbentChange
from kernelpilot.engine.prune import DEFAULT_MAX_SPILLS, CompileAhead, PruneReport, compile_order
from kernelpilot.errors import SearchError
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.search.model import Budget, BudgetExhausted

__all__ = ["TuneResult", "make_runner", "tune"]


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
    opts = WorkerOptions(kernel=str(ctx.kf.path), ref=str(ref) if ref else None, shape=ctx.shape,
                         interpreted=ctx.interpreted, floor_ns=roof.floor_ns if roof is not None else None,
                         sol_tolerance=roof.sol_tolerance if roof is not None else 0.0,
                         activity=False)  # the profiler pass costs seconds: audited before a config leads instead
    if ray_address:
        from kernelpilot.search.ray_pool import RayPool

        return RayPool(opts, ray_address, timeout_s=timeout_s)
    return WorkerPool(opts, devices, timeout_s=timeout_s)


def _prefetch(strat: Any, ev: Evaluator, seed: int, start: dict[str, Any]) -> None:
    """With several workers and a strategy whose order is known up front (``plan``), measure the planned configs in
    parallel (:meth:`Evaluator.measure_ahead`), so the strategy's sequential calls are answered without waiting."""
    plan = getattr(strat, "plan", None)
    if plan is not None and ev.parallel > 1:
        ev.measure_ahead(plan(ev.space, seed=seed, start=start))


def tune(kernel: str | Path, *, strategy: str = "guided", budget_evals: int | None = None,
         budget_s: float | None = None, shape: dict[str, Any] | None = None, seed: int = 0,
         ref: str | Path | None = None, gpu: str | None = None, prune: bool | str = True,
         constraints: list[str] | None = None, max_spills: int = DEFAULT_MAX_SPILLS,
         min_occupancy_pct: float | None = None, timeout_s: float = 120.0, devices: list[str] | None = None,
         ab_samples: int = 30, race: bool = True, cache_root: str | Path | None = None,
         replay: str | Path | None = None, use_cache: bool = True, start: dict[str, Any] | None = None,
         ray_address: str | None = None, out: str | Path | None = None,
         log: Callable[[str], None] | None = None) -> TuneResult:
    """Search a kernel's configs with one strategy (see the module docstring).

    Args:
        kernel: the kernel file (TUNABLES, optional CONSTRAINTS; or a ``@triton.autotune`` kernel).
        strategy: ``guided``, ``exhaustive``, ``random``, ``local`` or ``bayes``.
        budget_evals / budget_s: stop after this many new evaluations / wall seconds (None: no limit).
        shape: overrides of SHAPE (CPU_SHAPE under the interpreter).
        seed: the strategy's seed. ref: a separate reference file.
        gpu: spec name for limits and the speed-of-light floor (default: the GPU present); unknown: SpecError.
        prune: True: compile every config ahead and drop those that cannot win; ``"report"``: compile and report
            but run every config; False: no compile-ahead.
        constraints: extra constraint expressions, added to the kernel file's CONSTRAINTS.
        max_spills / min_occupancy_pct: pruning thresholds.
        timeout_s: per-config limit in a worker (a hang becomes ``timeout``).
        devices: workers' devices (default: every visible GPU, else the interpreter on the CPU).
        ab_samples: interleaved samples per side for each replacement decision.
        race: stop clearly slower candidates early.
        cache_root: cache folder (default ``$KERNELPILOT_CACHE`` or ``~/.kernelpilot/cache``).
        replay: answer from this cache file (or prefix) instead of running anything (no GPU needed).
        use_cache: read and append the cache (False: every config runs, nothing is stored).
        start: the starting config (default: DEFAULT_CONFIG).
        ray_address: evaluate on a Ray cluster instead of local workers.
        out: folder to write ``tune.json`` and ``tune.md`` (must not exist or be empty).
        log: progress callback.

    Returns:
        A :class:`TuneResult`.

    Raises:
        SearchError: unknown strategy, bad space or constraints, a cache of another kernel version.
        ContractError: the kernel file breaks the contract. SpecError: unknown ``gpu``.
    """
    from kernelpilot.app.context import prepare
    from kernelpilot.engine.evidence import LightEvidence
    from kernelpilot.engine.runner import ReplayRunner
    from kernelpilot.search.strategies import get_strategy

    if prune not in (True, False, "report"):
        raise SearchError(f"--prune {prune!r} is not one of drop, report, off",
                          "drop skips configs that cannot win; report only reports them; off compiles nothing ahead")
    t0 = time.monotonic()
    log = log or (lambda _m: None)
    strat = get_strategy(strategy)
    replayer = ReplayRunner(replay, root=cache_root) if replay is not None else None
    ctx = prepare(kernel, ref=ref, shape=shape, config=start, gpu=gpu, constraints=constraints, replay=replayer)
    kf, space, roof = ctx.kf, ctx.space, ctx.roofline
    report: PruneReport | None = None
    ahead: CompileAhead | None = None
    runner: Any = replayer
    cache = None
    try:
        if replayer is None:
            if prune and not kf.extras.get("autotuner"):
                log(f"static pruning: compiling {space.size} configs in parallel with the measurements")
                ahead = CompileAhead(kf.path, compile_order(strat, space, seed, ctx.start), ctx.shape,
                                     arch=None if ctx.device == "cuda" else "sm_90", max_spills=max_spills,
                                     min_occupancy_pct=min_occupancy_pct)
            runner = make_runner(ctx, ref=ref, timeout_s=timeout_s, devices=devices, ray_address=ray_address)
            if use_cache:
                from kernelpilot.measure.env import collect_env
                from kernelpilot.search.cache import CacheContext, EvaluationCache

                cache = EvaluationCache(CacheContext.for_kernel(kf, ctx.shape, collect_env(probe_ncu=False)),
                                        root=cache_root)
        evidence = (LightEvidence(kf.path, ctx.shape, roof, ctx.gpu, kf.name, "tune: light card of the incumbent",
                                  arch="sm_90" if ctx.device != "cuda" else None) if strategy == "guided" else None)
        ev = Evaluator(space, runner, cache=cache, budget=Budget(max_evals=budget_evals, max_s=budget_s),
                       pruner=ahead if prune is True else None, evidence=evidence, roofline=roof,
                       ab_samples=ab_samples if replayer is None else 0, race=race and replayer is None,
                       strategy=strategy, log=log)
        try:
            _prefetch(strat, ev, seed, ctx.start)
            strat.search(space, ev, seed=seed, start=ctx.start)
            stopped = "strategy finished"
        except BudgetExhausted as exc:
            stopped = str(exc)
    finally:
        restarts = 0
        if runner is not None and replayer is None:
            try:
                restarts = runner.restarts
            finally:
                runner.close()
        if ahead is not None:  # "report" wants every config's verdict; a dropping search cancels what it no longer needs
            report = ahead.finish(stop=prune is True)
            log(f"static pruning: {report.n_pruned} of {report.n_compiled} compiled ({report.n_configs} in the space) "
                f"pruned {report.by_reason}; compiles ran {report.wall_s:.1f} s beside the measurements, the search "
                f"waited {report.waited_s:.1f} s for them; {len(report.unchecked)} measured before their compile ended")
    best = ev.incumbent
    ranked = sorted((e for e in ev.order if e.ok and not e.raced_out), key=lambda e: e.objective)
    result = TuneResult(
        kernel=str(kf.path), shape=ctx.shape, device=ctx.device, gpu=ctx.gpu, strategy=strategy, seed=seed,
        space_size=space.size, space_total=space.total_size, constraints=list(space.constraints), best=best,
        history=ev.history, evaluations=ev.order, n_new=ev.n_new, n_cached=sum(1 for e in ev.order if e.cached),
        failures=dict(Counter(e.status for e in ev.order if e.status != "ok")), prune=report, stopped=stopped,
        wall_s=time.monotonic() - t0, device_s=ev.device_s, floor_ns=roof.floor_ns if roof is not None else None,
        cache_file=str(cache.path) if cache is not None else (str(replayer.path) if replayer else None),
        worker_restarts=restarts, measured=not ctx.interpreted,
        triton_config=kf.backend.export_config(best.config) if best else None,
        top_configs=[kf.backend.export_config(e.config) for e in ranked[:5]])
    if out is not None:
        write_tune_records(result, Path(out))
    return result


def write_tune_records(result: TuneResult, out: Path) -> None:
    """Write ``tune.json`` (the whole result) and ``tune.md`` (tables) into ``out``.

    Raises:
        RunFolderError: ``out`` exists and is not empty (nothing in it is touched).
    """
    from kernelpilot.records.workspace import Workspace, write_json, write_text
    from kernelpilot.report.tune_md import render_tune_md

    ws = Workspace.create(out)
    write_json(ws.root / "tune.json", result)
    write_text(ws.root / "tune.md", render_tune_md(result))
