"""``kernelpilot optimize``: the engine + the run-folder recorder + the guided strategy, end to end.

check → time → profile → verdict → next change → (repeat) → report. Every config the strategy proposes is one version
folder (its hypothesis written before it runs), evaluated by :class:`kernelpilot.engine.evaluator.Evaluator` — the
same pipeline as ``kernelpilot tune``: isolated workers (a compile error, wrong result, NaN, illegal memory access,
hang or crash is a failed version with a typed status and the run goes on), static pruning compiled ahead in
parallel, racing, the one A/B decision rule and the speed-of-light floor. Nsight Compute runs only where its card is
used: on v0 (the starting diagnosis the guided strategy's first moves come from) and on the final best; the incumbents
in between get light cards (timing + roofline + compile metadata), as when ncu is missing or may not read counters. PyTorch eager and torch.compile are timed once, before the search: the run does not stop at the
roofline target while one of them is still faster than the incumbent.

Defaults (:data:`DEFAULT_BUDGET_S`): the guided strategy with a wall-clock budget for the search, so that
``kernelpilot optimize KERNEL`` with no option reaches the best of the kernel's space on the bundled examples (the
bound was chosen from replays of exhaustive H100 caches and checked live; see docs/device-runs/).
"""

from __future__ import annotations

import datetime as _dt
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kernelpilot.engine.evaluator import Evaluator, MaxVersions, StopRule, TargetMet
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.records.models import RunInfo
from kernelpilot.search.model import Budget, BudgetExhausted

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_BUDGET_S_INTERPRETED", "OptimizeResult", "now_utc", "optimize"]

#: Default wall-clock budget of the search on a GPU, seconds: the guided strategy reached the exhaustive best of the
#: examples' spaces within 3 % in at most 30 evaluations in replays of the H100 caches (docs/device-runs), at a few
#: seconds per evaluation; the whole run (set-up, baselines, search, reports) stays under 5 minutes.
DEFAULT_BUDGET_S = 200.0
#: Under the Triton interpreter (no GPU) the times are not measurements: a short demonstration run.
DEFAULT_BUDGET_S_INTERPRETED = 45.0
#: Nsight Compute profiles taken during the search: v0's (the starting diagnosis the guided strategy's first moves
#: come from); later incumbents get light cards, and the final best is profiled after the search. One ncu run took
#: 15–17 s on an H100 (docs/device-runs), ten times a whole evaluation, so a profile per accepted version would eat
#: the budget.
NCU_PROFILES_IN_SEARCH = 1

Log = Callable[[str], None]


def now_utc() -> str:
    """The current UTC time, ISO 8601, seconds."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class OptimizeResult(BaseModel):
    """What :func:`optimize` returns: the run folder, its records, and the best version."""

    out: Path
    run: RunInfo
    versions: list[Evaluation] = []

    @property
    def best(self) -> Evaluation | None:
        """The fastest accepted version (the incumbent at the end), None when nothing was correct."""
        return next((v for v in self.versions if v.index == self.run.best_version), None)


@dataclass
class FirstIncorrect:
    """Stop when the first version ran but was wrong (wrong result, NaN, runtime error): the kernel has a bug that
    no config will fix, and searching would only repeat it."""

    def check(self, evaluator: Evaluator) -> str | None:
        """The stop reason, or None."""
        if evaluator.incumbent is None and evaluator.order and evaluator.order[0].status in (
                "wrong_result", "nan", "runtime_error"):
            first = evaluator.order[0]
            where = "v0/correctness.json" if first.status in ("wrong_result", "nan") else "v0/outcome.json"
            return f"v0 is not correct ({first.status}): fix the kernel (see {where}) before optimizing"
        return None


def _baselines(runner: Any, shape: dict[str, Any], config: dict[str, Any], log: Log) -> Any:
    """PyTorch eager and torch.compile of the reference (and the kernel at ``config``) on the same inputs, timed once
    in the run's first worker (isolated like every version; torch.compile compiles there once); None when they cannot
    run (the reason is logged)."""
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.report.benchmark import BenchmarkResult

    try:
        return BenchmarkResult.model_validate_json(
            runner.workers[0].call("kernelpilot.app.optimize:_baselines_in_worker", shape, config))
    except KernelpilotError as exc:  # a baseline that cannot run is reported, not fatal
        log(f"baselines not measured: {exc.message.splitlines()[0][:200]}")
        return None


def _baselines_in_worker(kf: Any, opts: Any, device: str, shape: dict[str, Any], config: dict[str, Any]) -> str:
    """Worker side of :func:`_baselines`: :func:`kernelpilot.report.benchmark.run_benchmark` at ``shape``, as JSON."""
    from kernelpilot.report.benchmark import run_benchmark

    return run_benchmark(kf, shape, config, "cuda" if device.startswith("cuda") else "cpu").model_dump_json()


def optimize(kernel: str | Path, *, out: str | Path, iterations: int | None = None, budget_s: float | None = None,
             shape: dict[str, Any] | None = None, config: dict[str, Any] | None = None, ref: str | Path | None = None,
             gpu: str | None = None, profile: bool = True, git: bool = True, benchmark: bool = True,
             strategy: str = "guided", seed: int = 0, timeout_s: float = 300.0, replay: str | Path | None = None,
             cache_root: str | Path | None = None, constraints: list[str] | None = None,
             baselines_ns: dict[str, float] | None = None, log: Log = lambda s: None) -> OptimizeResult:
    """Run the evidence loop on a kernel file and write the run folder (see the module docstring).

    Args:
        kernel: the kernel file. out: the run folder (must not exist or be empty).
        iterations: the most versions after v0 (None: only the budget limits them).
        budget_s: seconds for the search (default :data:`DEFAULT_BUDGET_S` on a GPU and in a replay,
            :data:`DEFAULT_BUDGET_S_INTERPRETED` under the interpreter); a replay counts the device seconds each
            replayed evaluation cost when it was measured, so it stops where the live run would have.
        shape / config: overrides of SHAPE (CPU_SHAPE without a GPU) and of the starting config.
        ref: a separate reference file. gpu: spec name for the roofline (default: the current GPU); unknown: error.
        profile: ncu on each new incumbent (GPU only). git: a git history in the run folder.
        benchmark: write benchmark.md (best vs PyTorch eager vs torch.compile).
        strategy: what proposes the next config (``guided``, ``exhaustive``, ``random``, ``local``, ``bayes``).
        seed: the strategy's seed. timeout_s: seconds one version may take in its worker before it is a ``timeout``.
        replay: answer every version from this evaluation cache (no GPU; ``kernelpilot tune``'s cache files).
        cache_root: folder searched for a replay prefix.
        constraints: extra constraint expressions, added to the kernel file's CONSTRAINTS.
        baselines_ns: medians (ns) of PyTorch eager / torch.compile measured elsewhere — for a replay, on the GPU
            the cache came from (a live run on a GPU measures its own and ignores these).
        log: called with one line per step (the CLI prints them).

    Returns:
        :class:`OptimizeResult`.

    Raises:
        ContractError: the kernel file breaks the contract. RunFolderError: ``out`` is not empty.
        ToolMissingError: git requested but unavailable. SearchError: unknown strategy, or a cache of another kernel.
        SpecError: unknown ``gpu``.
    """
    from kernelpilot.app.context import prepare
    from kernelpilot.app.recorder import RunFolderRecorder
    from kernelpilot.app.tune import make_runner
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence
    from kernelpilot.engine.prune import CompileAhead, compile_order
    from kernelpilot.engine.runner import ReplayRunner
    from kernelpilot.hardware.roofline import render_roofline_md
    from kernelpilot.measure.env import collect_env, render_env_md
    from kernelpilot.records.history import RunHistory
    from kernelpilot.records.workspace import Workspace, write_json, write_text
    from kernelpilot.report.benchmark import render_benchmark_md
    from kernelpilot.report.final import best_version, render_final_report
    from kernelpilot.search.strategies import get_strategy

    t0 = time.monotonic()
    strat = get_strategy(strategy)  # an unknown name fails before the run folder exists
    if iterations is not None and iterations < 0:
        from kernelpilot.errors import SearchError

        raise SearchError(f"--iterations {iterations} is negative", "give the most versions to try after v0 (>= 0)")
    if budget_s is not None and not budget_s > 0:
        from kernelpilot.errors import SearchError

        raise SearchError(f"--budget-s {budget_s} is not a positive number of seconds", "e.g. --budget-s 120")
    replayer = ReplayRunner(replay, root=cache_root) if replay is not None else None
    ctx = prepare(kernel, ref=ref, shape=shape, config=config, gpu=gpu, constraints=constraints, replay=replayer)
    kf, roof, cuda = ctx.kf, ctx.roofline, ctx.device == "cuda"
    if budget_s is None:
        budget_s = DEFAULT_BUDGET_S_INTERPRETED if ctx.interpreted else DEFAULT_BUDGET_S
    ws = Workspace.create(Path(out))
    shutil.copy2(kf.path, ws.root / "kernel.py")
    if kf.reference_path != kf.path:
        shutil.copy2(kf.reference_path, ws.root / "ref.py")
    log(f"run folder {ws.root} — {kf.name} at {ctx.shape} on {ctx.device}"
        + (" (Triton interpreter: timings are not measurements)" if ctx.interpreted else "")
        + (f"; search budget {budget_s:.0f} s" if budget_s else ""))
    env = collect_env(probe_ncu=profile and cuda)
    write_json(ws.root / "env.json", env)
    write_text(ws.root / "env.md", render_env_md(env))
    head = (f"Shape: {ctx.shape}\n\nFLOPs: {ctx.work.flops:.6g} ({ctx.work.flops_source})\n\n"
            f"Bytes: {ctx.work.bytes_moved:.6g} ({ctx.work.bytes_source})\n\n")
    write_text(ws.root / "roofline.md", f"{render_roofline_md(roof)}\n\n## Workload\n\n{head}" if roof is not None
               else f"# Roofline\n\n{head}{ctx.roofline_note}\n")
    if roof is not None:
        write_json(ws.root / "roofline.json", roof)
    history = RunHistory(ws.root) if git else None
    info = RunInfo(kernel=str(kf.path), kernel_name=kf.name, reference=str(kf.reference_path),
                   source_sha256=kf.source_sha256, shape=ctx.shape, tunables=kf.tunables, compute_unit=kf.compute_unit,
                   mode="cuda" if cuda else ("replay" if replayer else "interpreter"),
                   device_name=(env.gpu.name if env.gpu else ("CPU (Triton interpreter)" if ctx.interpreted
                                                                else f"replay of {ctx.gpu}")),
                   gpu_spec=roof.gpu if roof else None, iterations=iterations,
                   profile=profile and cuda, started_utc=now_utc(), strategy=strategy, seed=seed, budget_s=budget_s,
                   floor_ns=roof.floor_ns if roof else None, target_ns=roof.target_ns if roof else None)
    write_json(ws.root / "run.json", info)
    if history is not None:
        history.commit([ws.root / n for n in ("kernel.py", "ref.py", "env.json", "env.md", "roofline.md",
                                               "roofline.json", "run.json")], "run: kernel, environment, roofline")
    bench = None
    info.baselines_ns = dict(baselines_ns or {}) if not cuda else {}
    metrics_of: dict[str, Any] = {}
    recorder = RunFolderRecorder(ws, kf_sha256=kf.source_sha256, shape=ctx.shape, strategy=strategy, roofline=roof,
                                 history=history, metrics_of=metrics_of, log=log)
    evidence: Any = None
    if cuda or replayer is not None:
        why_light = ("replay: light card from the stored time" if replayer else
                     "ncu profiles v0 and the final best; incumbents in between get light cards" if profile else
                     "profiling off (--no-profile)")
        light = LightEvidence(kf.path, ctx.shape, roof, ctx.gpu, kf.name, why_light, arch=None if cuda else "sm_90")
        evidence = light
        if cuda and profile:
            evidence = NcuEvidence(kf.path, kf.reference_path if kf.reference_path != kf.path else None, ctx.shape,
                                   recorder.report_path, light, on_metrics=recorder.write_metrics,
                                   max_profiles=NCU_PROFILES_IN_SEARCH, log=log)
            evidence.metrics = metrics_of
            if env.ncu.counters_readable is False:
                evidence.disable(f"profiling disabled: {env.ncu.counters_detail}")
                log(evidence.disabled)
    ahead = None
    runner: Any = replayer
    try:
        if replayer is None:
            if cuda and not kf.extras.get("autotuner"):
                ahead = CompileAhead(kf.path, compile_order(strat, ctx.space, seed, ctx.start), ctx.shape, arch=None,
                                     measure_while_cold=True)
            runner = make_runner(ctx, ref=ref, timeout_s=timeout_s)
            if cuda and benchmark:
                log("baselines: PyTorch eager and torch.compile of the reference, timed once before the search")
                bench = _baselines(runner, ctx.shape, ctx.start, log)
                if bench is not None:
                    info.baselines_ns = {r.name: r.timing.median_ns for r in bench.rows[1:] if r.timing is not None}
                    write_json(ws.root / "run.json", info)
        stop: list[StopRule] = [FirstIncorrect()]  # after the baselines: the target rule reads them
        if roof is not None:
            stop.append(TargetMet(roof.target_fraction * 100, dict(info.baselines_ns)))
        if iterations is not None:
            stop.append(MaxVersions(iterations + 1))
        ev = Evaluator(ctx.space, runner, budget=Budget(max_s=budget_s, charged=replayer is not None), pruner=ahead, evidence=evidence,
                       recorder=recorder, stop=stop, roofline=roof, ab_samples=0 if replayer else (30 if cuda else 8),
                       race=cuda, strategy=strategy)
        try:
            strat.search(ctx.space, ev, seed=seed, start=ctx.start)
            info.stop_reason = f"strategy {strategy!r} finished: no untried config left that it would propose"
        except BudgetExhausted as exc:
            info.stop_reason = str(exc)
    finally:
        if runner is not None and replayer is None:
            runner.close()
        if ahead is not None:
            ahead.finish(stop=True)
    versions = ev.order
    best = best_version(versions)
    if best is not None and isinstance(evidence, NcuEvidence) and best.key not in metrics_of:
        log(f"ncu: the final best v{best.index}")  # the diagnosis of where the run ended
        profiled = evidence.profile(best.model_copy(update={"card": None}))
        versions = [profiled if v is best else v for v in versions]
        best = profiled
        write_json(ws.version_dir(best.index) / "outcome.json", best)
        if best.card:
            write_json(ws.version_dir(best.index) / "verdict.json", best.card)
    if best is None and not info.stop_reason.startswith("v0 is not correct"):
        info.stop_reason += "; no version was correct"
    info.best_version = best.index if best else None
    info.finished_utc = now_utc()
    info.wall_s = time.monotonic() - t0
    write_json(ws.root / "run.json", info)
    log(f"stopped: {info.stop_reason}")
    if benchmark and best is not None:
        bench = _final_benchmark(bench, kf, ctx, best, log)
        if bench is not None:
            write_json(ws.root / "benchmark.json", bench)
            write_text(ws.root / "benchmark.md", render_benchmark_md(bench, info))
    write_text(ws.root / "final_report.md", render_final_report(info, versions, roof))
    recorder.finish(versions)
    # the worker's full records live in the version folders; the result carries what outcome.json holds
    return OptimizeResult(out=ws.root, run=info, versions=[v.model_copy(update={"records": None}) for v in versions])


def _final_benchmark(bench: Any, kf: Any, ctx: Any, best: Evaluation, log: Log) -> Any:
    """benchmark.md's rows: the best version's own timing (the record the decision used) beside the baselines timed
    before the search; under the interpreter everything is timed now (cheap at the CPU shape); None in a replay."""
    from kernelpilot.measure.timing import TimingResult

    if ctx.device == "cpu":  # cheap at the CPU shape; the run's workers are gone, so one more isolated call
        from kernelpilot.errors import KernelpilotError
        from kernelpilot.report.benchmark import BenchmarkResult
        from kernelpilot.search.isolated import run_isolated

        try:
            return BenchmarkResult.model_validate_json(run_isolated(
                kf.path, "kernelpilot.app.optimize:_baselines_in_worker", ctx.shape, best.config,
                ref=kf.reference_path if kf.reference_path != kf.path else None, interpreted=True))
        except KernelpilotError as exc:
            log(f"benchmark not measured: {exc.message.splitlines()[0][:200]}")
            return None
    timing = (best.records or {}).get("timing")
    if bench is None or timing is None:
        return None
    rows = [bench.rows[0].model_copy(update={"name": f"{kf.name} (Triton, best config v{best.index})",
                                             "timing": TimingResult.model_validate(timing)}), *bench.rows[1:]]
    return bench.model_copy(update={"config": best.config, "rows": rows})
