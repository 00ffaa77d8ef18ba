"""``kernelpilot tune`` and ``kernelpilot cache list|show|clear``: the search from the command line.

Registered on the main Typer app by :func:`register` (``kernelpilot.cli`` calls it); same conventions as the
other commands (``--json`` prints one JSON object; a KernelpilotError exits 1 with a message and a hint).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table


def _us(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e3:.2f}"


def register(app: typer.Typer) -> None:
    """Add ``tune`` and the ``cache`` group to ``app``."""
    from kernelpilot.cli import JsonOpt, RefOpt, ShapeOpt, _kv, _run, out

    @app.command("tune")
    def tune_cmd(
        kernel: Path = typer.Argument(..., help="Kernel file (TUNABLES, optional CONSTRAINTS)."),
        strategy: str = typer.Option("guided", "--strategy", help="guided, exhaustive, random, local or bayes."),
        budget_evals: int | None = typer.Option(None, "--budget-evals", help="Most new evaluations."),
        budget_s: float | None = typer.Option(None, "--budget-s", help="Most wall seconds."),
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
        timeout_s: float = typer.Option(120.0, "--timeout-s", help="Per-config limit; a hang becomes `timeout`."),
        ab_samples: int = typer.Option(30, "--ab-samples", help="Interleaved samples per side per decision."),
        no_race: bool = typer.Option(False, "--no-race", help="Time every candidate fully (no racing)."),
        replay: str | None = typer.Option(None, "--replay", help="Answer from this cache file (no GPU)."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor append the cache."),
        ray: str | None = typer.Option(None, "--ray", help="Evaluate on a Ray cluster at this address."),
        output: Path | None = typer.Option(None, "--out", help="Write tune.json and tune.md here."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Search the kernel's configs: static pruning, isolated workers, cache, statistical decisions."""
        from kernelpilot.search.tune import tune

        log = (lambda msg: None) if as_json else (lambda msg: out.print(msg, markup=False))

        def human(r: Any) -> None:
            if r.best is None:
                out.print(f"[red]no config ran correctly[/] ({r.failures})")
            else:
                out.print(f"[bold]best[/] {r.best.config}: {_us(r.best.duration_ns)} µs"
                          + ("" if r.measured else " (interpreted: not a measurement)"))
                out.print(r.triton_config, markup=False)
            out.print(f"stopped: {r.stopped}; {len(r.evaluations)} evaluations ({r.n_new} new, {r.n_cached} cached); "
                      f"failures {r.failures or 'none'}; worker restarts {r.worker_restarts}")
            if r.prune is not None:
                out.print(f"static pruning: {r.prune.n_pruned} of {r.prune.n_compiled} compiled "
                          f"({r.prune.n_configs} in the space) pruned {r.prune.by_reason}")
            if r.cache_file:
                out.print(f"cache: {r.cache_file}")

        _run(as_json, lambda: tune(kernel, strategy=strategy, budget_evals=budget_evals, budget_s=budget_s,
                                   shape=_kv(shape, "--shape"), seed=seed, ref=ref, gpu=gpu,
                                   prune={"drop": True, "report": "report", "off": False}.get(prune, prune),
                                   constraints=constraint,
                                   max_spills=max_spills, min_occupancy_pct=min_occupancy, timeout_s=timeout_s,
                                   ab_samples=ab_samples, race=not no_race, replay=replay, use_cache=not no_cache,
                                   ray_address=ray, out=output, log=log),
             human, ok=lambda r: r.best is not None)

    cache_app = typer.Typer(no_args_is_help=True, help="The evaluation cache: list, show, clear.")
    app.add_typer(cache_app, name="cache")
    RootOpt = typer.Option(None, "--root", help="Cache folder (default $KERNELPILOT_CACHE or ~/.kernelpilot/cache).")

    @cache_app.command("list")
    def cache_list(root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
        """Every cache file: kernel, GPU, records, best time."""
        from kernelpilot.search.cache import list_caches

        def human(rows: Any) -> None:
            t = Table("file", "kernel", "gpu", "shape", "configs", "ok", "best µs")
            for s in rows["caches"]:
                t.add_row(Path(s.file).name, s.kernel, s.context.gpu, str(s.context.shape), str(s.configs), str(s.ok),
                          _us(s.best_duration_ns))
            out.print(t)

        _run(as_json, lambda: {"caches": list_caches(root)}, human)

    @cache_app.command("show")
    def cache_show(which: str = typer.Argument(..., help="Cache file, file-name prefix or key prefix."),
                   root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
        """The records of one cache file, fastest first."""
        from kernelpilot.search.cache import show_cache

        def human(r: Any) -> None:
            s = r["summary"]
            out.print(f"[bold]{Path(s.file).name}[/]: {s.kernel} on {s.context.gpu}, shape {s.context.shape}; "
                      f"{s.configs} configs, {s.ok} ok, statuses {s.statuses}")
            t = Table("config", "status", "median µs", "IQR µs", "message")
            for ev in sorted(r["evaluations"], key=lambda e: e.objective):
                t.add_row(ev.key, ev.status, _us(ev.duration_ns), _us(ev.iqr_ns), ev.message[:80])
            out.print(t)

        def work() -> dict[str, Any]:
            summary, evals = show_cache(which, root=root)
            return {"summary": summary, "evaluations": evals}

        _run(as_json, work, human)

    @cache_app.command("clear")
    def cache_clear(which: str | None = typer.Argument(None, help="One cache (prefix); default: all."),
                    root: Path | None = RootOpt, as_json: bool = JsonOpt) -> None:
        """Delete one cache file, or all of them."""
        from kernelpilot.search.cache import clear_cache

        _run(as_json, lambda: {"deleted": [str(p) for p in clear_cache(which, root=root)]},
             lambda r: out.print(f"deleted {len(r['deleted'])} cache file(s)"))
