"""The commands that run the kernel or read its runs: env, check, bench, profile, roofline, optimize, report.

Each parses its options, calls one :mod:`kernelpilot.api` function through
:func:`kernelpilot.cli.common.run_command` and prints the result (JSON, or :mod:`kernelpilot.cli.render`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from kernelpilot.cli import render
from kernelpilot.cli.common import (ConfigOpt, JsonOpt, PtrSizeOpt, QuietOpt, RefOpt, ShapeOpt, TimeoutOpt, kv,
                                    numbers, out, run_command, with_ptr_size)
from kernelpilot.cli.progress import Reporter
from kernelpilot.options import OptimizeOptions, build_options


def env(as_json: bool = JsonOpt,
        probe: bool = typer.Option(True, "--probe/--no-probe", help="Run one tiny ncu profile to test counters.")) -> None:
    """Python, torch, triton, CUDA, driver, GPU (SMs, L2, clocks seen), ncu and whether it can read counters."""
    from kernelpilot import api
    from kernelpilot.measure.env import render_env_md

    run_command(as_json, lambda: api.env(probe_ncu=probe), lambda r: out.print(render_env_md(r)))


def check(kernel: Path, shape: Optional[list[str]] = ShapeOpt, config: Optional[list[str]] = ConfigOpt,
          ref: Optional[Path] = RefOpt, seeds: int = typer.Option(3, help="Fresh input sets to check."),
          strict: bool = typer.Option(False, "--strict", help="Refuse loosened tolerances and skipped derived shapes."),
          timeout_s: float = TimeoutOpt, ptr_size: Optional[int] = PtrSizeOpt, as_json: bool = JsonOpt) -> None:
    """Correctness against a float64 reference on fresh seeds (exit 1 when incorrect).

    The kernel runs in an isolated worker process: an exit, crash, hang or exception is a typed failure."""
    from kernelpilot import api

    shp, cfg = with_ptr_size(kv(shape, "--shape", as_json), ptr_size), kv(config, "--config", as_json)
    run_command(as_json, lambda: api.check(kernel, shape=shp, config=cfg, ref=ref, n_seeds=seeds, timeout_s=timeout_s,
                                           strict=strict),
                render.check, ok=lambda r: r.passed)


def verify(kernel: Path, shape: Optional[list[str]] = ShapeOpt, config: Optional[list[str]] = ConfigOpt,
           ref: Optional[Path] = RefOpt,
           strict: bool = typer.Option(False, "--strict", help="Refuse loosened tolerances and skipped derived shapes."),
           timeout_s: float = TimeoutOpt, as_json: bool = JsonOpt) -> None:
    """One config through every defence: static screen, declared work, timer guard, check over seeds and derived
    shapes, timing on refreshed inputs, re-check on unseen values, device activity on all streams, speed-of-light
    floor. Prints the stage that refused the kernel (exit 1), or that it was accepted, with the stages that ran and
    those skipped and why (on a CPU: device activity needs a GPU; the floor needs a measured time)."""
    from kernelpilot import api

    shp, cfg = kv(shape, "--shape"), kv(config, "--config")
    run_command(as_json, lambda: api.verify(kernel, shape=shp, config=cfg, ref=ref, strict=strict,
                                            timeout_s=timeout_s), render.verify, ok=lambda r: r.accepted)


def bench(kernel: Path, shape: Optional[list[str]] = ShapeOpt, config: Optional[list[str]] = ConfigOpt,
          ref: Optional[Path] = RefOpt, baselines: bool = typer.Option(False, help="Also time PyTorch eager and torch.compile."),
          gpu: Optional[str] = typer.Option(None, help="GPU spec for the roofline (default: this GPU)."),
          fresh_baselines: bool = typer.Option(False, "--fresh-baselines", help="Compile and time torch.compile "
                                               "now; never reuse a cached timing of the last day."),
          timeout_s: float = TimeoutOpt, ptr_size: Optional[int] = PtrSizeOpt, as_json: bool = JsonOpt,
          quiet: bool = QuietOpt) -> None:
    """Time one config: CUDA events, L2 flushed, median + IQR, % of the roofline.

    The kernel (and the baselines) run in an isolated worker process: an exit, crash, hang or exception is a typed
    failure. Progress on stderr (--quiet: none)."""
    from kernelpilot import api
    from kernelpilot.progress import Phase

    shp, cfg = with_ptr_size(kv(shape, "--shape", as_json), ptr_size), kv(config, "--config", as_json)
    log = Reporter(quiet=quiet)

    def call() -> Any:
        with Phase(log, "baselines" if baselines else "bench", "timing the kernel" + (
                ", PyTorch eager and torch.compile (compiled unless reused from the baseline cache)"
                if baselines else "")):
            return api.bench(kernel, shape=shp, config=cfg, ref=ref, baselines=baselines, gpu=gpu,
                             timeout_s=timeout_s, fresh_baselines=fresh_baselines)

    run_command(as_json, call, render.bench, ok=lambda r: not r.impossible, progress=log)


def profile(kernel: Optional[Path] = typer.Argument(None), report: Optional[Path] = typer.Option(
        None, "--report", help="Read this .ncu-rep instead of profiling (no GPU needed)."),
        output: Optional[Path] = typer.Option(None, "--out", help="Where to write the new .ncu-rep."),
        shape: Optional[list[str]] = ShapeOpt, config: Optional[list[str]] = ConfigOpt, ref: Optional[Path] = RefOpt,
        light: bool = typer.Option(False, "--light", help="No ncu: timing + roofline + compile metadata card."),
        timeout_s: float = TimeoutOpt, as_json: bool = JsonOpt, quiet: bool = QuietOpt) -> None:
    """Nsight Compute profile (or a saved report): normalized metrics and the verdict. Progress on stderr while ncu
    runs (--quiet: none)."""
    from kernelpilot import api
    from kernelpilot.progress import Phase

    shp, cfg = kv(shape, "--shape", as_json), kv(config, "--config", as_json)
    log = Reporter(quiet=quiet)

    def call() -> Any:
        if report is not None:  # reading a saved report takes a moment: no progress
            return api.profile(kernel, report=report, out=output, shape=shp, config=cfg, ref=ref, light=light,
                               timeout_s=timeout_s)
        with Phase(log, "light card" if light else "ncu", "timing, roofline and compile metadata" if light else
                   "profiling the kernel (one ncu run: 15–17 s on an H100)"):
            return api.profile(kernel, report=report, out=output, shape=shp, config=cfg, ref=ref, light=light,
                               timeout_s=timeout_s)

    run_command(as_json, call, render.profile, progress=log)


def roofline(kernel: Path, gpu: Optional[str] = typer.Option(None, help="GPU spec name, e.g. H100-SXM (default: this GPU)."),
             shape: Optional[list[str]] = ShapeOpt, as_json: bool = JsonOpt) -> None:
    """FLOPs, bytes, arithmetic intensity, ridge point, bound and target, every spec cited. No GPU needed."""
    from kernelpilot import api

    shp = kv(shape, "--shape", as_json)
    run_command(as_json, lambda: api.roofline(kernel, gpu=gpu, shape=shp), render.roofline)


def optimize(kernel: Optional[Path] = typer.Argument(None, help="Kernel file (default: the bundled softmax example)."),
             resume: Optional[Path] = typer.Option(None, "--resume", help="Continue this killed or interrupted run "
                                                   "folder: complete versions are kept, the one in flight is redone, "
                                                   "the budget counts what was spent (only --timeout-s, --budget-s and "
                                                   "--iterations may be given again)."),
             iterations: Optional[int] = typer.Option(None, help="Cap on the versions after v0 (default: the budget "
                                                      "decides)."),
             budget_s: Optional[float] = typer.Option(None, "--budget-s", help="Seconds for the search (default 200 on "
                                                      "a GPU and in a replay, where the stored device seconds count; 45 "
                                                      "under the interpreter)."),
             output: Optional[Path] = typer.Option(None, "--out", help="Run folder (default runs/<kernel>-<time>)."),
             shape: Optional[list[str]] = ShapeOpt, config: Optional[list[str]] = ConfigOpt, ref: Optional[Path] = RefOpt,
             gpu: Optional[str] = typer.Option(None, help="GPU spec for the roofline (default: this GPU)."),
             no_profile: bool = typer.Option(False, "--no-profile", help="Skip ncu (light cards from timing + "
                                             "roofline + compile metadata)."),
             no_benchmark: bool = typer.Option(False, "--no-benchmark", help="Skip the eager/torch.compile baselines "
                                               "and benchmark.md."),
             strategy: Optional[str] = typer.Option(None, help="What proposes the next config: auto (the "
                                                    "default: the bottleneck card's moves while they pay, then "
                                                    "Optuna's TPE over the rest of the space, every other config a "
                                                    "step around the best so far, until the space or the "
                                                    "budget is spent), guided (the card's moves only), exhaustive, "
                                                    "random, local or bayes."),
             seed: Optional[int] = typer.Option(None, help="The strategy's seed (default 0)."),
             timeout_s: Optional[float] = typer.Option(None, "--timeout-s", help="Seconds one version's check and "
                                                       "timing may take in its worker before it is recorded as a "
                                                       "timeout (a hang; default 300)."),
             replay: Optional[str] = typer.Option(None, "--replay", help="Answer every version from this evaluation "
                                                  "cache (a `tune` cache file or prefix; no GPU)."),
             constraint: Optional[list[str]] = typer.Option(None, "--constraint", help="Extra constraint, e.g. "
                                                            "'GROUP_M == 8' (repeatable)."),
             baseline: Optional[list[str]] = typer.Option(None, "--baseline-ns", help="For --replay: a baseline's "
                                                          "median measured on the cache's GPU, e.g. torch.compile=184000 "
                                                          "(repeatable); the target does not stop the run while one is "
                                                          "faster."),
             workload: Optional[Path] = typer.Option(None, "--workload", help="Optimize for these shapes instead of "
                                                     "one (a JSON workload file): the search per bucket of `tune "
                                                     "--workload`, a dispatch table in --out (docs/workloads.md)."),
             workload_range: Optional[list[str]] = typer.Option(None, "--workload-range", help="Instead of "
                                                                "--workload: KEY=LO:HI (repeatable)."),
             as_json: bool = JsonOpt, quiet: bool = QuietOpt) -> None:
    """The loop: check → time → profile → verdict → one change → repeat; versions, git history, reports.

    Every config tried is a version folder with its hypothesis written first. Versions run in isolated worker
    processes (a crash, hang or illegal memory access is a failed version with a typed failure, and the loop goes on);
    ncu profiles v0 and the final best (light cards in between); the search stops at the budget, at --iterations,
    when the strategy has nothing left, or at 90 % of the roofline once no measured baseline (eager, torch.compile)
    is more than 3 % faster. The best version is the fastest accepted one.

    Every version is committed to the run folder's git history when it is decided. Ctrl-C (or SIGTERM) stops the run
    cleanly and says how to continue it: `kernelpilot optimize --resume RUN` (also after a kill -9). Progress on
    stderr (a bar with versions done, the best time and an ETA on a terminal; plain lines elsewhere), also with
    --json; --quiet silences it."""
    from kernelpilot import api

    shp, cfg = kv(shape, "--shape", as_json), kv(config, "--config", as_json)
    log = Reporter(quiet=quiet)
    baselines_ns = numbers(kv(baseline, "--baseline-ns", as_json), "--baseline-ns", as_json)
    if workload is not None or workload_range:
        run_command(as_json, lambda: api.tune_workload(
            kernel, out=output or Path(f"kp-workload-{Path(str(kernel)).stem}"), workload=workload,
            ranges=workload_range, strategy=strategy or "auto", budget_s=budget_s, log=log, seed=seed or 0, ref=ref,
            gpu=gpu, constraints=constraint or [], timeout_s=timeout_s, replay=replay),
            render.workload, ok=lambda r: bool(r.buckets), progress=log)
        return

    def call() -> Any:
        # the flags as one OptimizeOptions (a flag not given is left unset: its default, or with --resume the run's)
        options = build_options(OptimizeOptions, iterations=iterations, budget_s=budget_s, shape=shp or None,
                                config=cfg or None, ref=ref, gpu=gpu, profile=False if no_profile else None,
                                benchmark=False if no_benchmark else None, strategy=strategy, seed=seed,
                                timeout_s=timeout_s, replay=replay, constraints=constraint,
                                baselines_ns=baselines_ns or None)
        return api.optimize(kernel, options, out=output, resume=resume, log=log)

    run_command(as_json, call, render.optimize, ok=lambda r: r.run.best_version is not None, progress=log)


def report(run: Path, as_json: bool = JsonOpt,
           all_versions: bool = typer.Option(False, "--all", help="with --json: every version or evaluation (default: "
                                             "those the final report lists, the rest counted in not_listed)")) -> None:
    """Re-read a run folder (validating every record) and rebuild final_report.md."""
    from kernelpilot import api

    run_command(as_json, lambda: (lambda r: r if all_versions or not as_json else r.listed())(api.report(run)),
                render.report)


def register(app: typer.Typer) -> None:
    """Add env, check, verify, bench, profile, roofline, optimize and report to ``app`` (the ``kernelpilot`` app)."""
    for command in (env, check, verify, bench, profile, roofline, optimize, report):
        app.command(command.__name__)(command)
