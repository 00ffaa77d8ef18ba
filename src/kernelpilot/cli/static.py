"""``kernelpilot inspect`` and ``kernelpilot pipeline``: compile for a target GPU without one.

The kernel file runs only in isolated worker processes. Each command calls one :mod:`kernelpilot.api` function
(``inspect``, ``inspect_space`` for ``--all-configs``, ``pipeline``) and prints it (:mod:`kernelpilot.cli.render_static`);
a config whose worker exited, crashed or hung makes the command exit 1, while compile and resource failures are
results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kernelpilot.cli import render_static
from kernelpilot.cli.common import ConfigOpt, JsonOpt, QuietOpt, ShapeOpt, fail, kv, run_command
from kernelpilot.cli.progress import Reporter

ArchOpt = typer.Option(None, "--arch", help="Target GPU arch, e.g. sm_90 (default: this GPU, else sm_90).")
TimeoutOpt = typer.Option(300.0, "--timeout-s", help="Seconds one config (the kernel file's setup and run_kernel, "
                          "the compile) may take in its isolated worker before it fails as a timeout.")


def inspect_cmd(kernel: Path, config: Optional[list[str]] = ConfigOpt, shape: Optional[list[str]] = ShapeOpt,
                arch: Optional[str] = ArchOpt,
                all_configs: bool = typer.Option(False, "--all-configs",
                                                 help="Inspect the whole TUNABLES space in parallel (a table)."),
                limit: Optional[int] = typer.Option(None, "--limit",
                                                    help="With --all-configs: at most N configs (DEFAULT_CONFIG "
                                                         "plus a seeded sample)."),
                workers: Optional[int] = typer.Option(None, "--workers", help="Processes (default: CPU cores)."),
                save: Optional[Path] = typer.Option(None, "--save", help="Also write the cubin, PTX and SASS here."),
                timeout_s: float = TimeoutOpt, as_json: bool = JsonOpt, quiet: bool = QuietOpt) -> None:
    """Compile for a target GPU without one: registers, spills, shared memory, occupancy, SASS mix.

    The kernel file runs only in isolated worker processes: a config whose run_kernel exits, crashes or hangs
    is a typed failure (one row of the --all-configs table; exit 1). --all-configs shows its progress on stderr
    (--quiet: none)."""
    from kernelpilot import api

    cfg, shp = kv(config, "--config", as_json), kv(shape, "--shape", as_json)
    if not all_configs:
        run_command(as_json, lambda: api.inspect(kernel, config=cfg, shape=shp, arch=arch, save=save,
                                                 timeout_s=timeout_s), render_static.static)
        return
    log = Reporter(quiet=quiet)
    run_command(as_json, lambda: api.inspect_space(kernel, shape=shp, arch=arch, workers=workers, limit=limit,
                                                   progress=log.counter("inspect", "configs inspected"),
                                                   timeout_s=timeout_s),
                render_static.space, ok=lambda r: render_static.no_worker_failure(r.results), progress=log)


def pipeline_cmd(kernel: Path, config: Optional[list[str]] = typer.Option(
        None, "--config", help="One config to analyse, e.g. --config BLOCK_K=64 --config num_stages=3 (default: "
                               "DEFAULT_CONFIG and its num_stages and BLOCK_K variants)."),
        shape: Optional[list[str]] = ShapeOpt, arch: Optional[str] = ArchOpt, timeout_s: float = TimeoutOpt,
        tile: Optional[str] = typer.Option(None, "--tile", help="BM,BN,BK of a CUDA .cu kernel's tile (default: "
                                           "its TILE or BM/BN/BK tunables)."),
        as_json: bool = JsonOpt) -> None:
    """Software pipelining of a tiled kernel (tl.dot, or a CUDA .cu K loop): ratio, stages, occupancy cliff, SASS
    main loop.

    The kernel file runs only in isolated worker processes; a requested --config that fails is an error."""
    from kernelpilot import api
    from kernelpilot.errors import OptionError

    cfg, shp = kv(config, "--config", as_json), kv(shape, "--shape", as_json)
    dims = None
    if tile is not None:
        try:
            dims = tuple(int(x) for x in tile.split(","))
            assert len(dims) == 3 and min(dims) > 0
        except (ValueError, AssertionError):
            fail(as_json, OptionError(f"--tile {tile!r} is not three positive integers", "e.g. --tile 128,128,32"))
    run_command(as_json, lambda: api.pipeline(kernel, config=cfg, shape=shp, arch=arch, timeout_s=timeout_s,
                                              **({"tile": dims} if dims else {})),
                render_static.pipelines, ok=lambda r: render_static.no_worker_failure(r["reports"]))


def register(app: typer.Typer) -> None:
    """Add ``inspect`` and ``pipeline`` to ``app`` (the ``kernelpilot`` app, or any Typer app in a test)."""
    app.command("inspect")(inspect_cmd)
    app.command("pipeline")(pipeline_cmd)
