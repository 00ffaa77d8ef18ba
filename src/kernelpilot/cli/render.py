"""Human output of the run commands (check, bench, profile, roofline, optimize, report) and of tune and cache: rich
tables and lines on :data:`kernelpilot.cli.common.out`. Each printer takes the result of one :mod:`kernelpilot.api`
call and prints nothing else; ``--json`` bypasses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


from kernelpilot.cli.common import out, table
from kernelpilot.fmt import format_duration_ns as dur

#: Most versions rows ``optimize``/``report`` print to the terminal (final_report.md keeps every row).
MAX_VERSION_ROWS = 25
#: Rows kept for the last versions even when the accepted versions alone fill :data:`MAX_VERSION_ROWS`.
MIN_LAST_ROWS = 5


def check(r: Any) -> None:
    """``check``: PASS/FAIL and one row per seed and output (relative L2 error, max |Δ|, mismatches, NaN/Inf)."""
    out.print(("[green]" if r.passed else "[red]") + r.summary.replace("[", "\\[") + "[/]")  # summary: PASS/FAIL ...
    t = table("seed", "output", "rel L2", "max |Δ|", "mismatched", "NaN/Inf", "result")
    for s in r.seeds:
        if s.error:
            t.add_row(str(s.seed), "—", "—", "—", "—", "—", s.error)
        for o in s.outputs:
            t.add_row(str(s.seed), o.name, f"{o.rel_l2_error:.3g}" if o.rel_l2_error is not None else "—",
                      f"{o.max_abs_error:.3g}" if o.max_abs_error is not None else "—",
                      f"{o.n_mismatched}/{o.n_elements}", str(o.n_nonfinite), o.reason)
    out.print(t)


def verify(r: Any) -> None:
    """``verify``: ACCEPTED (by every stage, or by the stages that ran), or REFUSED at a stage with why; the stages
    that ran and those skipped with why; the screen's flags; the time when it got that far."""
    head = ("[green]ACCEPTED[/]" if r.accepted and not r.stages_skipped else "[yellow]ACCEPTED[/] (partly checked)"
            if r.accepted else f"[red]REFUSED[/] at [bold]{r.stage}[/] ({r.status})")
    out.print(f"{head} {Path(r.kernel).name}: {r.message}", markup=True)
    if r.stages_run:
        out.print(f"  stages run: {', '.join(r.stages_run)}", markup=False)
    for name, why in r.stages_skipped.items():
        out.print(f"  skipped: {name} — {why}", markup=False)
    if r.evaluation is not None and r.evaluation.duration_ns:
        out.print(f"median {dur(r.evaluation.duration_ns)}" + ("" if r.evaluation.measured else
                                                                     " (interpreted — not a measurement)"))
    for flag in r.screen_flags[:10]:
        out.print(f"  screen flag: {flag}")
    for line in (r.records or {}).get("settings_restored", [])[:10]:  # measure/settings.py
        out.print(f"  torch setting the file changed, put back: {line}")


def bench(r: Any) -> None:
    """``bench``: median and IQR (each in the unit that fits it), % of the roofline, the impossible flag, the
    baselines table."""
    from kernelpilot.report.benchmark import render_benchmark_md

    t = r.timing
    out.print(f"{Path(r.kernel).name} {r.config} at {r.shape}: median {dur(t.median_ns)}, "
              f"IQR {dur(t.iqr_ns)}, {t.n_samples} samples — {t.timer}", markup=False)
    if r.pct_of_roofline is not None:
        out.print(f"{r.pct_of_roofline:.1f} % of the roofline (floor {dur(r.floor_ns)})")
    if r.impossible:
        out.print("[red]impossible: faster than the speed-of-light floor[/]")
    for name, why in r.stages_skipped.items():
        out.print(f"  stage skipped: {name} — {why}", markup=False)
    if r.baselines:
        out.print(render_benchmark_md(r.baselines))


#: The profile metrics ``profile`` prints, in order.
PROFILE_METRICS = ("compute_sol_pct", "memory_sol_pct", "dram_pct", "l1_hit_rate_pct", "l2_hit_rate_pct",
                   "achieved_occupancy_pct", "theoretical_occupancy_pct", "occupancy_limiter", "registers_per_thread",
                   "shared_mem_per_block_bytes", "waves_per_sm", "grid_size", "block_size")


def profile(r: Any) -> None:
    """``profile``: the main kernel's metrics and stalls, the verdict, ncu's rules, the bottleneck card (a light
    profile: the card only)."""
    m, v = r.main, r.verdict
    if m is None:
        out.print(r.card.to_markdown(), markup=False)
        return
    out.print(f"[bold]{m.kernel_name}[/] on {m.device_name}: "
              + (dur(m.duration_ns) if m.duration_ns else "no duration in the report"))
    t = table("metric", "value")
    for name in PROFILE_METRICS:
        val = getattr(m, name, None)
        t.add_row(name, "—" if val is None else (f"{val:.4g}" if isinstance(val, float) else str(val)))
    for s in m.top_stalls:
        t.add_row(f"stall {s.reason}", f"{s.ratio:.3g} ({s.share_pct:.0f} %)")
    out.print(t)
    out.print(f"[bold]verdict:[/] {v.bound} ({v.rule}) — {v.summary}")
    for rule in v.ncu_rules[:6]:
        out.print(f"  ncu {rule.identifier}: {rule.title}")
    out.print("\n[bold]bottleneck card[/]", markup=True)
    out.print(r.card.to_markdown(), markup=False)


def roofline(r: Any) -> None:
    """``roofline``: FLOPs and bytes with their sources, then the cited roofline (or why there is none)."""
    from kernelpilot.hardware.roofline import render_roofline_md

    w = r.workload
    out.print(f"FLOPs {w.flops:.6g} ({w.flops_source}); bytes {w.bytes_moved:.6g} ({w.bytes_source})")
    out.print(render_roofline_md(r.roofline) if r.roofline else r.note)


def shown_versions(versions: list[Any], max_rows: int = MAX_VERSION_ROWS) -> list[Any]:
    """The versions a terminal table shows: all when they fit in ``max_rows``; else every accepted version (the
    baseline included; the latest ones when they alone would fill the table, keeping :data:`MIN_LAST_ROWS` rows)
    plus the last versions up to ``max_rows`` rows, in version order."""
    if len(versions) <= max_rows:
        return list(versions)
    accepted = [i for i, v in enumerate(versions) if v.accepted]
    accepted = accepted[max(0, len(accepted) - (max_rows - MIN_LAST_ROWS)):]
    keep = set(accepted)
    for i in range(len(versions) - 1, -1, -1):
        if len(keep) >= max_rows:
            break
        keep.add(i)
    return [versions[i] for i in sorted(keep)]


def versions(run: Any, all_versions: list[Any], folder: str | Path) -> None:
    """The versions table of a run (:func:`kernelpilot.report.final.versions_table`), at most
    :data:`MAX_VERSION_ROWS` rows (:func:`shown_versions`), saying how many rows were left out and where they all
    are (one folder ``vN/`` per version in ``folder``; ``final_report.md`` there lists the top ones)."""
    from kernelpilot.report.final import versions_table

    all_versions = [v for v in all_versions if v.index is not None]  # configs skipped without a run: no version
    shown = shown_versions(all_versions)
    out.print(versions_table(run, shown, all_versions), markup=False)
    left_out = len(all_versions) - len(shown)
    if left_out:
        out.print(f"… {left_out} of {len(all_versions)} versions not shown (shown: every accepted version and the "
                  f"last ones); each has its folder vN/ in {Path(folder)}, summarized in "
                  f"{Path(folder) / 'final_report.md'}", markup=False)


def optimize(r: Any) -> None:
    """``optimize``: the versions table (capped), why the run stopped, the best version, where the records are."""
    versions(r.run, r.versions, r.out)
    best = f"v{r.run.best_version}" if r.run.best_version is not None else "none (no correct version)"
    out.print(f"\nstopped: {r.run.stop_reason}\nbest: {best} — records in {r.out}", markup=False)


def report(r: Any) -> None:
    """``report``: the records were valid; the versions table (capped) and the rebuilt final_report.md's path (a tune
    folder: its evaluation count and tune.md); for an unfinished run, how to resume it."""
    if r.kind == "tune":
        out.print(f"records valid: {r.versions_total or len(r.versions)} evaluations", markup=False)
    elif r.kind not in ("session", "workload"):
        versions(r.run, r.versions, Path(r.final_report).parent)
        out.print(f"records valid: {len(r.versions)} versions", markup=False)
    if r.note:
        out.print(f"note: {r.note}", markup=False)
    for path in (r.final_report, r.report_html):
        if path:
            out.print(f"wrote {path}", markup=False)


def tune(r: Any) -> None:
    """``tune``: the best config and its median, why it stopped, counts, pruning and the cache file."""
    if r.best is None:
        out.print(f"[red]no config ran correctly[/] ({r.failures})")
    else:
        out.print(f"[bold]best[/] {r.best.config}: {dur(r.best.duration_ns)}"
                  + ("" if r.measured else " (interpreted: not a measurement)"))
        out.print(r.triton_config, markup=False)
    out.print(f"stopped: {r.stopped}; {len(r.evaluations)} evaluations ({r.n_new} new, {r.n_cached} cached); "
              f"failures {r.failures or 'none'}; worker restarts {r.worker_restarts}")
    if r.prune is not None:
        out.print(f"static pruning: {r.prune.n_pruned} of {r.prune.n_compiled} compiled "
                  f"({r.prune.n_configs} in the space) pruned {r.prune.by_reason}")
    if r.cache_file:
        out.print(f"cache: {r.cache_file}")


def workload(r: Any) -> None:
    """``tune --workload``: one row per shape (bucket, table, single config, library default), the weighted totals
    and the files written."""
    t = table("shape", "weight", "bucket", "table", "single config", "library default")
    for row in r.rows:
        t.add_row(str(row.shape), f"{row.weight:g}", row.bucket, dur(row.table_ns), dur(row.single_ns),
                  dur(row.default_ns))
    out.print(t)
    pct = lambda x: f" ({x:+.1f} %)" if x is not None else ""  # noqa: E731
    out.print(f"weighted: table {dur(r.table_ns)}, single config {dur(r.single_ns)}{pct(r.single_loss_pct)}, "
              f"library default {dur(r.default_ns)}{pct(r.default_loss_pct)}"
              + ("" if r.measured else " (interpreted: not measurements)"))
    for b in r.buckets:
        out.print(f"{b.name}: {b.config}", markup=False)
    out.print(f"files: {', '.join(r.files.values())}; store: {r.store}", markup=False)


def cache_list(rows: dict[str, Any]) -> None:
    """``cache list``: one row per readable cache file; a warning on stderr for each file skipped."""
    from rich.markup import escape

    from kernelpilot.cli.common import err

    for warning in rows.get("skipped", []):
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    t = table("file", "kernel", "gpu", "shape", "configs", "ok", "best")
    for s in rows["caches"]:
        t.add_row(Path(s.file).name, s.kernel, s.context.gpu, str(s.context.shape), str(s.configs), str(s.ok),
                  dur(s.best_duration_ns))
    out.print(t)


def cache_show(r: dict[str, Any]) -> None:
    """``cache show``: the file's summary, then its records fastest first (a message's first line)."""
    s = r["summary"]
    out.print(f"[bold]{Path(s.file).name}[/]: {s.kernel} on {s.context.gpu}, shape {s.context.shape}; "
              f"{s.configs} configs, {s.ok} ok, statuses {s.statuses}; lines {s.trust}")
    for line in s.refused:  # a forged or inconsistent line: no run answers it
        out.print(f"[red]refused:[/] {line}", highlight=False)
    t = table("config", "status", "median", "IQR", "message")
    for ev in sorted(r["evaluations"], key=lambda e: e.objective):
        t.add_row(ev.key, ev.status, dur(ev.duration_ns), dur(ev.iqr_ns), (ev.message or "").split("\n")[0])
    out.print(t)


def cache_clear(r: dict[str, Any]) -> None:
    """``cache clear``: how many files were deleted."""
    out.print(f"deleted {len(r['deleted'])} cache file(s)")
