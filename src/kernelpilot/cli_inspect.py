"""``kernelpilot inspect`` and ``kernelpilot pipeline``: static compile for a target GPU, without a GPU.

Registered on the main Typer app by :func:`register` (``kernelpilot.cli`` calls it). Same conventions as the other
commands: ``--json`` prints one JSON object on stdout, a :class:`~kernelpilot.errors.KernelpilotError` exits 1 with
the message and a hint, bad ``--config``/``--shape`` syntax exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

ArchOpt = typer.Option(None, "--arch", help="Target GPU arch, e.g. sm_90 (default: this GPU, else sm_90).")
TimeoutOpt = typer.Option(300.0, "--timeout-s", help="Seconds one config (the kernel file's setup and run_kernel, "
                          "the compile) may take in its isolated worker before it fails as a timeout.")


def _no_worker_failure(results: list[Any]) -> bool:
    """False when a config's worker exited, crashed or hung (the kernel file misbehaved: the command exits 1);
    compile and resource failures are results, not faults of the command."""
    return not any(getattr(r, "stage", None) == "worker" for r in results)


def _fmt_widths(widths: dict[Any, int]) -> str:
    return " ".join(f"{k}B×{v}" for k, v in sorted(widths.items(), key=lambda kv: int(kv[0]))) or "—"


def _occ(r: Any) -> tuple[str, str]:
    if r.occupancy is None:
        return "—", "—"
    return f"{r.occupancy.occupancy_pct:.1f}", r.occupancy.limiter


def _config_text(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def _human_static(r: Any) -> None:
    from kernelpilot.cli import out

    occ_pct, limiter = _occ(r)
    out.print(f"[bold]{r.kernel_name}[/] ({Path(r.kernel_file).name}) for {r.arch} — Triton {r.triton_version}, "
              f"compiled in {r.compile_s:.2f} s")
    out.print(f"config {_config_text(r.config)}; shape {r.shape}; grid {r.grid}")
    t = Table("quantity", "value")
    rows = [
        ("threads per block", f"{r.threads_per_block} ({r.num_warps} warps)"),
        ("max threads per block", (f"{r.max_threads_per_block} (what {r.registers_per_thread} registers/thread "
                                   f"allow)" if r.max_threads_per_block is not None else "— (arch limits unknown)")),
        ("num_stages", str(r.num_stages)),
        ("registers / thread", str(r.registers_per_thread)),
        ("spills", (f"{r.n_spills} (local {r.local_mem_bytes_per_thread} B/thread; spill stores/loads "
                    f"{r.spill_stores_bytes}/{r.spill_loads_bytes} B)")),
        ("shared memory / block", f"{r.shared_mem_bytes} B (limit {r.shared_mem_limit_bytes} B)"),
        ("theoretical occupancy", (f"{occ_pct} % (limiter {limiter}"
                                   + (f", {r.occupancy.blocks_per_sm} blocks/SM)" if r.occupancy else ")"))),
        ("tensor cores", "yes" if r.uses_tensor_cores else "no"),
        ("global load widths", _fmt_widths(r.global_load_widths_bytes)),
        ("async copy widths", _fmt_widths(r.async_copy_widths_bytes)),
        ("global store widths", _fmt_widths(r.global_store_widths_bytes)),
        ("SASS instructions", str(r.n_instructions)),
    ]
    for k, v in rows:
        t.add_row(k, v)
    out.print(t)
    mix = Table("SASS group", "count (static)")
    for k, v in r.instruction_mix.items():
        if v:
            mix.add_row(k, str(v))
    out.print(mix)
    for note in r.notes:
        out.print(f"[dim]note:[/] {note}")


#: Short names of occupancy limiters and failure reasons for the ``--all-configs`` table (100 columns).
_LIMITER_ABBR = {"registers": "regs", "shared_mem": "smem", "warps": "warps", "blocks": "blocks"}


def _failure_code(r: Any) -> str:
    """A short status for a failed config: ``OOR smem``, ``OOR threads``, ``OOR regs``, ``rejected``, ``compile``."""
    if r.stage == "resources":
        msg = r.message or ""
        what = "smem" if "shared memory" in msg else "threads" if "threads" in msg else "regs"
        return f"OOR {what}"
    if r.stage == "capture":
        return "rejected"
    if r.stage == "worker":
        return r.failure or "worker"
    return r.stage


def _human_space(space: Any) -> None:
    """The ``--all-configs`` table: one row per config, narrow enough for 100 columns; failures listed below it."""
    from rich import box

    from kernelpilot.cli import out

    names = list(space.results[0].config) if space.results else []
    rows_values = [",".join(str(r.config.get(n)) for n in names) for r in space.results]
    t = Table(title=f"{Path(space.kernel_file).name} for {space.arch}", box=box.SIMPLE_HEAD, pad_edge=False,
              collapse_padding=True)
    # The config column never folds (the rest may): values joined by commas, named in the legend below.
    t.add_column("config", no_wrap=True, min_width=max([len("config"), *map(len, rows_values)]))
    for header in ("regs", "spill", "smem B", "max thr", "occ %", "limit", "hg/hm/ff", "LDG widths", "status"):
        t.add_column(header)
    failures = []
    for values, r in zip(rows_values, space.results):
        if r.status == "ok":
            occ_pct, limiter = _occ(r)
            mix = r.instruction_mix
            t.add_row(values, str(r.registers_per_thread), str(r.n_spills), str(r.shared_mem_bytes),
                      str(r.max_threads_per_block or "—"), occ_pct, _LIMITER_ABBR.get(limiter, limiter),
                      f"{mix.get('HGMMA', 0)}/{mix.get('HMMA', 0)}/{mix.get('FFMA', 0)}",
                      _fmt_widths(r.global_load_widths_bytes), "[green]ok[/]")
        else:
            code = _failure_code(r)
            failures.append((values, r))
            t.add_row(values, str(r.registers_per_thread or "—"), "—", str(r.shared_mem_bytes or "—"), "—", "—",
                      "—", "—", "—", f"[red]{code}[/]")
    out.print(t)
    for line in (f"config = {','.join(names)}",
                 "spill = local memory in 4-byte words; max thr = largest block the registers allow",
                 "hg/hm/ff = HGMMA/HMMA/FFMA instructions in the SASS; limit = occupancy limiter",
                 "OOR = OutOfResources (Triton raises it at load); rejected = run_kernel refused the config"):
        out.print(f"[dim]{line}[/]")
    if failures:
        out.print(f"[bold]failed configs[/] ({','.join(names)}):")
        for values, r in failures:
            first = r.message.splitlines()[0] if r.message else ""
            out.print(f"  {values}: {r.stage} {r.error_type}: {first}", overflow="ellipsis", no_wrap=True,
                      crop=True)
    what = (f"a sample of {space.n_inspected} of {space.n_configs_total} configs (seed {space.sample_seed}; "
            f"--limit)" if space.sampled else f"all {space.n_inspected} configs")
    counts: dict[str, int] = {}
    for _, r in failures:
        code = _failure_code(r)
        counts[code] = counts.get(code, 0) + 1
    detail = f" ({', '.join(f'{n} {code}' for code, n in sorted(counts.items()))})" if counts else ""
    out.print(f"inspected {what}:")
    out.print(f"  {space.n_ok} ok, {space.n_failed} failed{detail}; {space.max_workers} processes, "
              f"{space.wall_s:.1f} s")


def _human_pipelines(result: dict[str, Any]) -> None:
    from kernelpilot.cli import out

    for r in result["reports"]:
        if getattr(r, "status", None) == "failed":
            out.print(f"[bold]{_config_text(r.config)}[/]: [red]{r.stage} failed[/] {r.error_type}: "
                      f"{r.message.splitlines()[0] if r.message else ''}")
            continue
        out.print(f"[bold]{_config_text(r.config)}[/]  ({r.operand_dtype}, {r.bytes_per_element} B/element, {r.arch})")
        t = Table("quantity", "value")
        t.add_row("compute/load ratio", f"{r.compute_load_ratio:.4g} FLOP/B "
                  f"(2·{r.block_m}·{r.block_n}·{r.block_k} / {r.bytes_per_tile} B)")
        t.add_row("shared / stage", f"{r.stage_bytes} B")
        t.add_row(f"shared at S={r.num_stages}", f"model {r.shared_model_bytes} B, compiled {r.compiled_shared_bytes} B")
        t.add_row("largest S under limit", f"{r.max_stages_under_limit} ({r.shared_limit_bytes} B/block)")
        row = next((s for s in r.stages if s.stages == r.num_stages), None)
        t.add_row("blocks/SM at S", f"{row.blocks_per_sm} ({row.occupancy_pct:.1f} %, {row.limiter})" if row else "—")
        t.add_row("occupancy cliffs (S)", ", ".join(map(str, r.occupancy_cliffs)) or "none")
        t.add_row("next cliff", str(r.next_cliff_stages) if r.next_cliff_stages else "none up to the limit")
        t.add_row("rule", r.rule)
        t.add_row("recommendation", r.recommendation)
        t.add_row("num_stages to measure", ", ".join(map(str, r.stages_to_measure)))
        if r.main_loop is not None:
            t.add_row("SASS main loop", r.main_loop.verdict)
        out.print(t)


def register(app: typer.Typer) -> None:
    """Add the ``inspect`` and ``pipeline`` commands to ``app`` (the main ``kernelpilot`` Typer app)."""
    from kernelpilot.cli import ConfigOpt, JsonOpt, ShapeOpt

    @app.command("inspect")
    def inspect_cmd(kernel: Path, config: Optional[list[str]] = ConfigOpt, shape: Optional[list[str]] = ShapeOpt,
                    arch: Optional[str] = ArchOpt,
                    all_configs: bool = typer.Option(False, "--all-configs",
                                                     help="Inspect the whole TUNABLES space in parallel (a table)."),
                    limit: Optional[int] = typer.Option(None, "--limit",
                                                        help="With --all-configs: at most N configs (DEFAULT_CONFIG "
                                                             "plus a seeded sample)."),
                    workers: Optional[int] = typer.Option(None, "--workers", help="Processes (default: CPU cores)."),
                    save: Optional[Path] = typer.Option(None, "--save", help="Also write the cubin, PTX and SASS here."),
                    timeout_s: float = TimeoutOpt, as_json: bool = JsonOpt) -> None:
        """Compile for a target GPU without one: registers, spills, shared memory, occupancy, SASS mix.

        The kernel file runs only in isolated worker processes: a config whose run_kernel exits, crashes or hangs
        is a typed failure (one row of the --all-configs table; exit 1)."""
        from kernelpilot.cli import _kv, _run
        from kernelpilot.profile import static

        cfg, shp = _kv(config, "--config"), _kv(shape, "--shape")
        if all_configs:
            import time

            from kernelpilot.cli import err

            start = time.monotonic()

            def progress(done: int, total: int) -> None:
                # stderr, so --json keeps one object on stdout; about 20 lines for a large space.
                if done == total or done % max(1, total // 20) == 0:
                    err.print(f"[dim]inspected {done}/{total} configs, {time.monotonic() - start:.0f} s[/]")

            _run(as_json, lambda: static.inspect_space(kernel, shape=shp or None, arch=arch, max_workers=workers,
                                                       limit=limit, progress=progress, timeout_s=timeout_s),
                 _human_space, ok=lambda r: _no_worker_failure(r.results))
        else:
            _run(as_json, lambda: static.inspect_config(kernel, cfg, shape=shp or None, arch=arch, save_dir=save,
                                                        timeout_s=timeout_s), _human_static)

    @app.command("pipeline")
    def pipeline_cmd(kernel: Path, config: Optional[list[str]] = typer.Option(
            None, "--config", help="One config to analyse, e.g. --config BLOCK_K=64 --config num_stages=3 (default: "
                                   "DEFAULT_CONFIG and its num_stages and BLOCK_K variants)."),
            shape: Optional[list[str]] = ShapeOpt, arch: Optional[str] = ArchOpt, timeout_s: float = TimeoutOpt,
            as_json: bool = JsonOpt) -> None:
        """Software pipelining of a tiled tl.dot kernel: ratio, stages, occupancy cliff, SASS main loop.

        The kernel file runs only in isolated worker processes; a requested --config that fails is an error."""
        from kernelpilot.cli import _kv, _run
        from kernelpilot.profile import pipeline as pl

        cfg, shp = _kv(config, "--config"), _kv(shape, "--shape")

        def work() -> dict[str, Any]:
            if cfg:
                reports: list[Any] = [pl.analyze_pipeline(kernel, cfg, shape=shp or None, arch=arch,
                                                          timeout_s=timeout_s)]
            else:
                reports = pl.analyze_pipelines(kernel, None, shape=shp or None, arch=arch, timeout_s=timeout_s)
            return {"kernel_file": str(Path(kernel).resolve()), "n_configs": len(reports), "reports": reports}

        _run(as_json, work, _human_pipelines, ok=lambda r: _no_worker_failure(r["reports"]))
