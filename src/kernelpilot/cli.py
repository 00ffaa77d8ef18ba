"""The ``kernelpilot`` command line: a thin Typer layer over :mod:`kernelpilot.api`.

Every command takes ``--json`` (one JSON object on stdout; progress goes to stderr) and exits non-zero on failure,
printing what went wrong and what to do (``{"error", "message", "hint"}`` with ``--json``).
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from kernelpilot.errors import KernelpilotError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evidence-driven GPU kernel optimization: check, time, profile, judge, change, record.")
specs_app = typer.Typer(no_args_is_help=True, help="GPU specs: cited datasheet values and measured ceilings.")
app.add_typer(specs_app, name="specs")
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

JsonOpt = typer.Option(False, "--json", help="Print one JSON object on stdout.")
ShapeOpt = typer.Option(None, "--shape", help="Override a shape value, e.g. --shape M=8192 (repeatable).")
ConfigOpt = typer.Option(None, "--config", help="Override a tunable, e.g. --config BLOCK_SIZE=1024 (repeatable).")
RefOpt = typer.Option(None, "--ref", help="A file defining reference(**inputs), if not in the kernel file.")
TimeoutOpt = typer.Option(300.0, "--timeout-s", help="Seconds the kernel's worker process may take (importing the "
                          "file, then the command's work) before it is killed and the run fails as a timeout.")


def _dump(obj: Any) -> str:
    if isinstance(obj, BaseModel):
        return obj.model_dump_json(by_alias=True)
    return json.dumps(obj, default=lambda o: o.model_dump() if isinstance(o, BaseModel) else str(o))


def _run(as_json: bool, fn: Callable[[], Any], human: Callable[[Any], None], ok: Callable[[Any], bool] = lambda r: True) -> None:
    """Call ``fn``; print its result as JSON or through ``human``; exit 1 on KernelpilotError or when not ``ok``."""
    try:
        result = fn()
    except KernelpilotError as exc:
        if as_json:
            print(json.dumps(exc.to_dict()))
        else:
            err.print(f"[bold red]error:[/] {exc.message}")
            if exc.hint:
                err.print(f"[yellow]hint:[/] {exc.hint}")
        raise typer.Exit(1)
    if as_json:
        print(_dump(result))
    else:
        human(result)
    if not ok(result):
        raise typer.Exit(1)


def _kv(items: Optional[list[str]], what: str) -> dict[str, Any]:
    from kernelpilot.kernels.contract import parse_assignments

    try:
        return parse_assignments(items, what)
    except KernelpilotError as exc:
        err.print(f"[bold red]error:[/] {exc.message}")
        raise typer.Exit(2)


def _log(line: str) -> None:
    err.print(f"[dim]{_dt.datetime.now().strftime('%H:%M:%S')}[/] {line}")


@app.command()
def env(as_json: bool = JsonOpt,
        probe: bool = typer.Option(True, "--probe/--no-probe", help="Run one tiny ncu profile to test counters.")) -> None:
    """Python, torch, triton, CUDA, driver, GPU (SMs, L2, clocks seen), ncu and whether it can read counters."""
    from kernelpilot import api
    from kernelpilot.measure.env import render_env_md

    _run(as_json, lambda: api.env(probe_ncu=probe), lambda r: out.print(render_env_md(r)))


@app.command()
def check(kernel: Path, shape: Optional[list[str]] = ShapeOpt, config: Optional[list[str]] = ConfigOpt,
          ref: Optional[Path] = RefOpt, seeds: int = typer.Option(3, help="Fresh input sets to check."),
          timeout_s: float = TimeoutOpt, as_json: bool = JsonOpt) -> None:
    """Correctness against a float64 reference on fresh seeds (exit 1 when incorrect).

    The kernel runs in an isolated worker process: an exit, crash, hang or exception is a typed failure."""
    from kernelpilot import api

    def human(r: Any) -> None:
        out.print(("[green]PASS[/] " if r.passed else "[red]FAIL[/] ") + r.summary)
        t = Table("seed", "output", "rel L2", "max |Δ|", "mismatched", "NaN/Inf", "result")
        for s in r.seeds:
            if s.error:
                t.add_row(str(s.seed), "—", "—", "—", "—", "—", s.error)
            for o in s.outputs:
                t.add_row(str(s.seed), o.name, f"{o.rel_l2_error:.3g}" if o.rel_l2_error is not None else "—",
                          f"{o.max_abs_error:.3g}" if o.max_abs_error is not None else "—",
                          f"{o.n_mismatched}/{o.n_elements}", str(o.n_nonfinite), o.reason)
        out.print(t)

    _run(as_json, lambda: api.check(kernel, shape=_kv(shape, "--shape"), config=_kv(config, "--config"), ref=ref,
                                    n_seeds=seeds, timeout_s=timeout_s), human, ok=lambda r: r.passed)


@app.command()
def bench(kernel: Path, shape: Optional[list[str]] = ShapeOpt, config: Optional[list[str]] = ConfigOpt,
          ref: Optional[Path] = RefOpt, baselines: bool = typer.Option(False, help="Also time PyTorch eager and torch.compile."),
          gpu: Optional[str] = typer.Option(None, help="GPU spec for the roofline (default: this GPU)."),
          timeout_s: float = TimeoutOpt, as_json: bool = JsonOpt) -> None:
    """Time one config: CUDA events, L2 flushed, median + IQR, % of the roofline.

    The kernel (and the baselines) run in an isolated worker process: an exit, crash, hang or exception is a typed
    failure."""
    from kernelpilot import api
    from kernelpilot.report.benchmark import render_benchmark_md

    def human(r: Any) -> None:
        t = r.timing
        out.print(f"{Path(r.kernel).name} {r.config} at {r.shape}: median {t.median_ns / 1e3:.2f} µs, "
                  f"IQR {t.iqr_ns / 1e3:.2f} µs, {t.n_samples} samples — {t.timer}")
        if r.pct_of_roofline is not None:
            out.print(f"{r.pct_of_roofline:.1f} % of the roofline (floor {r.floor_ns / 1e3:.2f} µs)")
        if r.impossible:
            out.print("[red]impossible: faster than the speed-of-light floor[/]")
        if r.baselines:
            out.print(render_benchmark_md(r.baselines))

    _run(as_json, lambda: api.bench(kernel, shape=_kv(shape, "--shape"), config=_kv(config, "--config"), ref=ref,
                                    baselines=baselines, gpu=gpu, timeout_s=timeout_s), human,
         ok=lambda r: not r.impossible)


@app.command()
def profile(kernel: Optional[Path] = typer.Argument(None), report: Optional[Path] = typer.Option(
        None, "--report", help="Read this .ncu-rep instead of profiling (no GPU needed)."),
        output: Optional[Path] = typer.Option(None, "--out", help="Where to write the new .ncu-rep."),
        shape: Optional[list[str]] = ShapeOpt, config: Optional[list[str]] = ConfigOpt, ref: Optional[Path] = RefOpt,
        light: bool = typer.Option(False, "--light", help="No ncu: timing + roofline + compile metadata card."),
        timeout_s: float = TimeoutOpt, as_json: bool = JsonOpt) -> None:
    """Nsight Compute profile (or a saved report): normalized metrics and the verdict."""
    from kernelpilot import api

    def human(r: Any) -> None:
        m, v = r.main, r.verdict
        if m is None:
            out.print(r.card.to_markdown(), markup=False)
            return
        out.print(f"[bold]{m.kernel_name}[/] on {m.device_name}: {m.duration_ns / 1e3 if m.duration_ns else 0:.2f} µs")
        t = Table("metric", "value")
        for name in ("compute_sol_pct", "memory_sol_pct", "dram_pct", "l1_hit_rate_pct", "l2_hit_rate_pct",
                     "achieved_occupancy_pct", "theoretical_occupancy_pct", "occupancy_limiter", "registers_per_thread",
                     "shared_mem_per_block_bytes", "waves_per_sm", "grid_size", "block_size"):
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

    _run(as_json, lambda: api.profile(kernel, report=report, out=output, shape=_kv(shape, "--shape"),
                                      config=_kv(config, "--config"), ref=ref, light=light, timeout_s=timeout_s),
         human)


@app.command()
def roofline(kernel: Path, gpu: Optional[str] = typer.Option(None, help="GPU spec name, e.g. H100-SXM (default: this GPU)."),
             shape: Optional[list[str]] = ShapeOpt, as_json: bool = JsonOpt) -> None:
    """FLOPs, bytes, arithmetic intensity, ridge point, bound and target, every spec cited. No GPU needed."""
    from kernelpilot import api
    from kernelpilot.hardware.roofline import render_roofline_md

    def human(r: Any) -> None:
        w = r.workload
        out.print(f"FLOPs {w.flops:.6g} ({w.flops_source}); bytes {w.bytes_moved:.6g} ({w.bytes_source})")
        out.print(render_roofline_md(r.roofline) if r.roofline else r.note)

    _run(as_json, lambda: api.roofline(kernel, gpu=gpu, shape=_kv(shape, "--shape")), human)


@app.command()
def optimize(kernel: Optional[Path] = typer.Argument(None, help="Kernel file (default: the bundled softmax example)."),
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
             strategy: str = typer.Option("guided", help="What proposes the next config: guided (the bottleneck "
                                          "card's one-variable moves), exhaustive, random, local or bayes."),
             seed: int = typer.Option(0, help="The strategy's seed."),
             timeout_s: float = typer.Option(300.0, "--timeout-s", help="Seconds one version's check and timing may "
                                             "take in its worker before it is recorded as a timeout (a hang)."),
             replay: Optional[str] = typer.Option(None, "--replay", help="Answer every version from this evaluation "
                                                  "cache (a `tune` cache file or prefix; no GPU)."),
             constraint: Optional[list[str]] = typer.Option(None, "--constraint", help="Extra constraint, e.g. "
                                                            "'GROUP_M == 8' (repeatable)."),
             baseline: Optional[list[str]] = typer.Option(None, "--baseline-ns", help="For --replay: a baseline's "
                                                          "median measured on the cache's GPU, e.g. torch.compile=184000 "
                                                          "(repeatable); the target does not stop the run while one is "
                                                          "faster."),
             as_json: bool = JsonOpt) -> None:
    """The loop: check → time → profile → verdict → one change → repeat; versions, git history, reports.

    Every config tried is a version folder with its hypothesis written first. Versions run in isolated worker
    processes (a crash, hang or illegal memory access is a failed version with a typed failure, and the loop goes on);
    ncu profiles each new incumbent; the search stops at the budget, at --iterations, or at the roofline target once
    no measured baseline (eager, torch.compile) is faster."""
    from kernelpilot import api
    from kernelpilot.report.final import versions_table

    path = kernel or api.bundled_example("softmax")
    folder = output or Path("runs") / f"{path.stem}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"

    def human(r: Any) -> None:
        out.print(versions_table(r.run, r.versions), markup=False)
        best = f"v{r.run.best_version}" if r.run.best_version is not None else "none (no correct version)"
        out.print(f"\nstopped: {r.run.stop_reason}\nbest: {best} — records in {r.out}", markup=False)

    _run(as_json, lambda: api.optimize(path, out=folder, iterations=iterations, budget_s=budget_s,
                                       shape=_kv(shape, "--shape"), config=_kv(config, "--config"), ref=ref, gpu=gpu,
                                       profile=not no_profile, benchmark=not no_benchmark, strategy=strategy,
                                       seed=seed, timeout_s=timeout_s, replay=replay, constraints=constraint,
                                       baselines_ns={k: float(v) for k, v in _kv(baseline, "--baseline-ns").items()},
                                       log=_log),
         human, ok=lambda r: r.run.best_version is not None)


@app.command()
def report(run: Path, as_json: bool = JsonOpt) -> None:
    """Re-read a run folder (validating every record) and rebuild final_report.md."""
    from kernelpilot import api
    from kernelpilot.report.final import versions_table

    _run(as_json, lambda: api.report(run),
         lambda r: (out.print(versions_table(r.run, r.versions), markup=False), out.print(f"wrote {r.final_report}")))


@specs_app.command("list")
def specs_list(as_json: bool = JsonOpt) -> None:
    """Known GPUs, with their aliases, whether measured ceilings exist, and the per-device name of multi-device packages."""
    from rich.markup import escape

    from kernelpilot.hardware.specs import list_specs, per_device_name

    def build() -> dict[str, Any]:
        return {"specs": [{"name": s.name, "aliases": s.aliases, "values": sorted(s.values),
                           "measured": sorted(s.measured), "devices_per_package": s.devices_per_package,
                           "per_device": per_device_name(s) if s.devices_per_package > 1 else None}
                          for s in list_specs()]}

    def human(r: Any) -> None:
        t = Table("name", "aliases", "values", "measured", "one device")
        for s in r["specs"]:
            device = f"{s['per_device']} (1/{s['devices_per_package']})" if s["per_device"] else "—"
            t.add_row(escape(s["name"]), escape(", ".join(s["aliases"])), str(len(s["values"])),
                      escape(", ".join(s["measured"])) or "—", escape(device))
        out.print(t)

    _run(as_json, build, human)


@specs_app.command("show")
def specs_show(name: str, sources: bool = typer.Option(False, "--sources", help="Print each value's source text."),
               as_json: bool = JsonOpt) -> None:
    """Every value of one GPU with its citation; measured ceilings beside the datasheet; ridge points and targets."""
    from rich.markup import escape

    from kernelpilot.hardware.derived import compare_ceilings, derived_points
    from kernelpilot.hardware.specs import find_spec, format_number, per_device_name

    def build() -> dict[str, Any]:
        spec = find_spec(name)
        return {"spec": spec, "conflicts": [v.metric for v in spec.conflicts()],
                "measured_vs_datasheet": compare_ceilings(spec), "derived": derived_points(spec)}

    def human(r: dict[str, Any]) -> None:
        s = r["spec"]
        out.print(f"[bold]{escape(s.name)}[/] — {escape(s.title)} ({escape(s.vendor)}"
                  + (f", compute capability {escape(s.compute_capability)}" if s.compute_capability else "")
                  + (f", {escape(s.arch)}" if s.arch else "") + ")")
        if s.devices_per_package > 1:
            out.print(f"values are for the whole package of {s.devices_per_package} devices; one device "
                      f"({escape(s.device_unit)}) is {escape(per_device_name(s))}: "
                      f"kernelpilot specs show {escape(per_device_name(s))}")
        if s.package_of:
            out.print(f"one {escape(s.device_unit)} of {escape(s.package_of)}: package ceilings divided per device "
                      "(notes say 'derived: package value ... / N'); power and external links left out")
        t = Table("metric", "value", "unit", "citation", "other sources")
        for v in s.values.values():
            others = ", ".join(f"{format_number(a.value)} [{a.source_key}]" for a in v.alternatives)
            flag = " [red]CONFLICT[/]" if v.conflict else ""
            t.add_row(v.metric, format_number(v.value) + (" (derived)" if v.derived else ""), v.unit,
                      escape(f"{v.path}:{v.line} [{v.source_key}]"), escape(others) + flag)
        out.print(t)
        if sources:
            for v in s.values.values():
                out.print(f"  {escape(v.cite())}   [dim]{escape(v.source)}[/]", markup=True)
        if r["conflicts"]:
            out.print(f"[red]sources disagree on:[/] {', '.join(r['conflicts'])} (first line used, never averaged)")
        if r["measured_vs_datasheet"]:
            t = Table("measured ceiling", "vs datasheet metric", "datasheet", "measured", "ratio",
                      "provenance")
            for c in r["measured_vs_datasheet"]:
                t.add_row(c.measured.metric, escape(f"{c.datasheet.metric} [{c.datasheet.source_key}]"),
                          f"{format_number(c.datasheet.value)} {c.datasheet.unit}",
                          f"{format_number(c.measured.value)} {c.measured.unit}", f"{c.ratio:.3f}",
                          escape(c.measured.source.split(";")[0]))
            out.print(t)
        if r["derived"]:
            t = Table("unit", "peak", "BW GB/s", "ridge FLOP/B",
                      "90% peak", "90% BW GB/s", "from")
            for d in r["derived"]:
                t.add_row(d.compute_unit, f"{format_number(d.peak.value)} {d.peak.unit}", format_number(d.bandwidth.value),
                          f"{d.ridge_point_flop_per_byte:.1f}", format_number(round(d.target_peak, 1)),
                          format_number(round(d.target_bandwidth_gbps, 1)), d.source)
            out.print(t)

    _run(as_json, build, human)


@specs_app.command("cite")
def specs_cite(metric: str, gpu: str = typer.Option(..., "--gpu", help="GPU name or alias, e.g. H200 or MI300X."),
               as_json: bool = JsonOpt) -> None:
    """Where one number comes from: every source's citation, conflicts, and the measured value replacing it."""
    from kernelpilot.hardware.derived import cite_metric

    def human(c: Any) -> None:
        for cite, source in zip(c.citations, c.sources):
            out.print(cite, markup=False)
            out.print(f"    {source}", style="dim", markup=False)
        if c.value.note:
            out.print(f"    note: {c.value.note}", style="dim", markup=False)
        if c.conflict:
            out.print("[red]CONFLICT:[/] the sources disagree; the first line is the value used (never averaged)")
        if c.measured is not None:
            out.print(f"measured (used by the roofline instead): {c.measured.cite()}", markup=False)

    _run(as_json, lambda: cite_metric(metric, gpu), human)


@specs_app.command("measure")
def specs_measure(copy_gib: float = typer.Option(2.0, help="Bytes copied per sample, GiB."),
                  gemm_n: int = typer.Option(8192, help="bf16 GEMM size n (n×n×n)."),
                  folder: Optional[Path] = typer.Option(None, help="Where to write (default: the user's specs folder)."),
                  as_json: bool = JsonOpt) -> None:
    """Measure copy bandwidth and a bf16 cuBLAS GEMM on this GPU; store them as measured ceilings."""
    from kernelpilot.hardware import ceilings
    from kernelpilot.hardware.specs import match_device, measured_dir

    def work() -> Any:
        import torch

        if not torch.cuda.is_available():
            from kernelpilot.errors import ToolMissingError
            raise ToolMissingError("specs measure needs a CUDA GPU; none is visible", "run it on the GPU machine")
        spec = match_device(torch.cuda.get_device_name(0))
        ms = [ceilings.measure_copy_bandwidth(size_bytes=int(copy_gib * 2**30)), ceilings.measure_bf16_gemm(n=gemm_n)]
        path = ceilings.write_measured(spec.name, ms, folder or measured_dir())
        return {"gpu": spec.name, "file": str(path), "measurements": [m.model_dump() for m in ms]}

    def human(r: Any) -> None:
        for m in r["measurements"]:
            out.print(f"{m['metric']}: {m['value']:.4g} {m['unit']} (IQR {m['iqr']:.3g}, {len(m['samples'])} samples)")
        out.print(f"wrote {r['file']}")

    _run(as_json, work, human)


from kernelpilot.cli_inspect import register as _register_inspect  # noqa: E402  (needs app and the options above)

_register_inspect(app)

from kernelpilot.cli_search import register as _register_search  # noqa: E402

_register_search(app)


def main() -> None:  # pragma: no cover - console entry
    """Console entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
