"""``kernelpilot tune`` and ``kernelpilot cache list|show|clear``: the search and its evaluation cache.

Each command calls one :mod:`kernelpilot.api` function and prints the result (JSON, or :mod:`kernelpilot.cli.render`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kernelpilot.cli import render
from kernelpilot.cli.common import JsonOpt, QuietOpt, RefOpt, ShapeOpt, kv, run_command
from kernelpilot.cli.progress import Reporter
from kernelpilot.options import TuneOptions, build_options

#: ``kernelpilot cache``: the group of the cache commands.
cache_app = typer.Typer(no_args_is_help=True, help="The evaluation cache: list, show, clear.")
RootOpt = typer.Option(None, "--root", help="Cache folder (default $KERNELPILOT_CACHE or ~/.kernelpilot/cache).")


def tune_cmd(
    kernel: Path | None = typer.Argument(None, help="Kernel file (TUNABLES, optional CONSTRAINTS)."),
    strategy: str = typer.Option("auto", "--strategy", help="auto (the card's moves while they pay, then TPE "
                                                           "and steps around the best configs until the space or "
                                                           "the budget is spent), guided, "
                                                           "exhaustive, random, local or bayes."),
    budget_evals: int | None = typer.Option(None, "--budget-evals", help="Most new evaluations."),
    budget_s: float | None = typer.Option(None, "--budget-s", help="Most wall seconds (with --replay: the "
                                              "device seconds the replayed evaluations cost when measured)."),
    seed: int = typer.Option(0, "--seed", help="The strategy's seed."),
    shape: list[str] | None = ShapeOpt, ref: Path | None = RefOpt,
    gpu: str | None = typer.Option(None, "--gpu", help="GPU spec for limits and the floor (default: this GPU)."),
    prune: str = typer.Option("drop", "--prune", help="drop: compile the configs in parallel with the "
                              "measurements and skip those that cannot win; report: compile and report, run all; "
                              "off: no compile-ahead."),
    constraint: list[str] | None = typer.Option(None, "--constraint", help="Extra constraint, e.g. "
                                                   "'GROUP_M == 8' (repeatable)."),
    max_spills: int = typer.Option(16, "--max-spills", help="Prune configs spilling more registers than this."),
    min_occupancy: float | None = typer.Option(None, "--min-occupancy", help="Prune below this occupancy, %."),
    timeout_s: float | None = typer.Option(None, "--timeout-s", help="Per-config limit, s (default 120); a hang "
                                           "becomes `timeout`."),
    ab_samples: int = typer.Option(30, "--ab-samples", help="Interleaved samples per side per decision."),
    no_race: bool = typer.Option(False, "--no-race", help="Time every candidate fully (no racing)."),
    replay: str | None = typer.Option(None, "--replay", help="Answer from this cache file (no GPU)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor append the cache."),
    ray: str | None = typer.Option(None, "--ray", help="Evaluate in Ray actors on the cluster at this address "
                                   "(HOST:6379, auto, ray://HOST:10001; local: a fresh one here): one actor per GPU, "
                                   "docs/ray.md."),
    output: Path | None = typer.Option(None, "--out", help="The search's folder: its evaluations as they are "
                                       "decided, tune.json and tune.md at the end; --resume continues from it."),
    resume: Path | None = typer.Option(None, "--resume", help="Continue the search kept in this --out folder "
                                       "(killed or interrupted): its options, the budget counting what was spent."),
    workload: Path | None = typer.Option(None, "--workload", help="Tune for these shapes instead of one: a JSON "
                                         "file [{\"shape\": {\"M\": 512}, \"weight\": 3}, ...]; writes "
                                         "dispatch.json in --out (docs/workloads.md)."),
    workload_range: list[str] | None = typer.Option(None, "--workload-range", help="Instead of --workload: "
                                                    "KEY=LO:HI, powers of two and their midpoints (repeatable)."),
    bucket_rule: str = typer.Option("pow2", "--bucket-rule", help="pow2: one bucket per power-of-two class of "
                                    "each varying key; exact: one per shape."),
    top_k: int = typer.Option(2, "--top-k", help="With a workload: each bucket's fastest configs checked at every "
                              "shape."),
    no_store: bool = typer.Option(False, "--no-store", help="With a workload: do not put the winners into the "
                                  "config store."),
    as_json: bool = JsonOpt, quiet: bool = QuietOpt,
    all_evaluations: bool = typer.Option(False, "--all", help="With --json: every evaluation (default: those "
                                         "tune.md lists, the rest counted in not_listed)."),
) -> None:
    """Search the kernel's configs: static pruning, isolated workers, cache, statistical decisions.

    Progress goes to stderr (a bar with the evaluations done of the budget, the best time and an ETA on a terminal;
    plain lines elsewhere), also with --json; --quiet silences it. Ctrl-C (or SIGTERM) stops it cleanly; with --out,
    `kernelpilot tune --resume DIR` continues it."""
    from kernelpilot import api

    log = Reporter(quiet=quiet)
    shp = kv(shape, "--shape", as_json)
    if workload is not None or workload_range:
        run_command(as_json, lambda: api.tune_workload(
            kernel, out=output or Path(f"kp-workload-{Path(str(kernel)).stem}"), workload=workload,
            ranges=workload_range, rule=bucket_rule, strategy=strategy, budget_s=budget_s, budget_evals=budget_evals,
            top_k=top_k, store=not no_store, log=log, seed=seed, ref=ref, gpu=gpu, prune=prune,
            constraints=constraint or [], timeout_s=timeout_s, replay=replay, use_cache=not no_cache,
            ray_address=ray),
            render.workload, ok=lambda r: bool(r.buckets), progress=log)
        return

    def call() -> Any:
        # the flags as one TuneOptions (a flag not given is left unset: its default; with --resume only the
        # budgets and --timeout-s given here change the search's stored options)
        options = build_options(TuneOptions, strategy=strategy, budget_evals=budget_evals, budget_s=budget_s,
                                shape=shp, seed=seed, ref=ref, gpu=gpu, prune=prune, constraints=constraint,
                                max_spills=max_spills, min_occupancy_pct=min_occupancy, timeout_s=timeout_s,
                                ab_samples=ab_samples, race=not no_race, replay=replay, use_cache=not no_cache,
                                ray_address=ray)
        result = api.tune(kernel, options, resume=resume, out=output, log=log)
        return result if all_evaluations or not as_json else result.listed()

    run_command(as_json, call, render.tune, ok=lambda r: r.best is not None, progress=log)


@cache_app.command("list")
def cache_list(root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
    """Every cache file: kernel, GPU, records, best time."""
    from kernelpilot import api

    run_command(as_json, lambda: api.cache_list(root), render.cache_list)


@cache_app.command("show")
def cache_show(which: str = typer.Argument(..., help="Cache file, file-name prefix or key prefix."),
               root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
    """The records of one cache file, fastest first."""
    from kernelpilot import api

    run_command(as_json, lambda: api.cache_show(which, root=root), render.cache_show)


@cache_app.command("clear")
def cache_clear(which: str | None = typer.Argument(None, help="One cache (prefix); default: all."),
                root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
    """Delete one cache file, or all of them."""
    from kernelpilot import api

    run_command(as_json, lambda: api.cache_clear(which, root=root), render.cache_clear)


def register(app: typer.Typer) -> None:
    """Add ``tune`` and the ``cache`` group to ``app``."""
    app.command("tune")(tune_cmd)
    app.add_typer(cache_app, name="cache")
