"""``kernelpilot export`` and the ``kernelpilot bundle`` group (``verify``, ``bench``): native code bundles
(docs/bundles.md). Each command calls one :mod:`kernelpilot.api` function and prints it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from kernelpilot.cli.common import ConfigOpt, JsonOpt, kv, out, run_command, table

__all__ = ["bundle_app", "register"]

#: ``kernelpilot bundle``: the group of the bundle commands.
bundle_app = typer.Typer(no_args_is_help=True, help="Native code bundles: verify (no GPU), bench (GPU).")


def _manifest(m: Any) -> None:
    out.print(f"[bold]{m.kernel}[/] ({m.kernel_function}) for {m.arch}: {len(m.entries)} entr"
              f"{'y' if len(m.entries) == 1 else 'ies'}; Triton {m.triton_version}, {m.ptxas_version or 'ptxas ?'}; "
              f"needs a CUDA {m.min_driver_cuda} driver")
    t = table("#", "shape", "config", "grid", "smem B", "regs", "spills")
    for i, e in enumerate(m.entries):
        t.add_row(str(i), _kv(e.shape), _kv(e.config), "x".join(map(str, e.grid)), str(e.shared_mem_bytes),
                  str(e.n_regs), f"[red]{e.n_spills}[/]" if e.spills else "0")
    out.print(t)
    for i, e in enumerate(m.entries):
        out.print(f"[dim]{i}: {e.cubin}[/]")


def _kv(d: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())


def _verify(v: Any) -> None:
    out.print(f"[green]ok[/] {v.bundle}: {v.kernel} for {v.arch}, {v.n_entries} entries, {v.n_files} files, "
              f"hashes match; needs a CUDA {v.min_driver_cuda} driver")
    if getattr(v, "bundle_id", ""):
        out.print(f"bundle_id {v.bundle_id} (pin it: kernelpilot bundle verify --expect-id, load(..., expect_id=))")


def _bench(b: Any) -> None:
    out.print(f"{b.kernel}: load {b.load_s * 1e3:.2f} ms, first call (module load + launch) {b.first_call_s * 1e3:.2f} ms")
    t = table("shape", "config", "identical", "JIT ns", "bundle ns", "bundle/JIT")
    for e in b.entries:
        t.add_row(_kv(e.shape), _kv(e.config), "yes" if e.identical else f"[red]no: {', '.join(e.differing_outputs)}[/]",
                  f"{e.jit_median_ns:.0f}", f"{e.bundle_median_ns:.0f}", f"{e.ratio:.3f}")
    out.print(t)


def export_cmd(source: Path = typer.Argument(..., help="A kernel .py file, or a `tune --out` folder (its best config)."),
               out_dir: Path = typer.Option(..., "--out", help="The new bundle folder (absent or empty)."),
               config: Optional[list[str]] = ConfigOpt,
               arch: str = typer.Option("auto", "--arch", help="Target, e.g. sm_90 or sm_90a; auto: this GPU "
                                        "(no GPU: an error; there is no default target)."),
               shapes: Optional[list[str]] = typer.Option(None, "--shapes", help="A declared shape, e.g. "
                                                         "--shapes N=4096,dtype=float32 (repeatable; default SHAPE)."),
               timeout_s: float = typer.Option(300.0, "--timeout-s", help="Seconds one entry may take."),
               as_json: bool = JsonOpt) -> None:
    """Write a bundle: one cubin per declared shape for the chosen config, plus manifest.json (no GPU needed with
    --arch)."""
    from kernelpilot import api

    cfg = kv(config, "--config", as_json)
    shp = [kv([p for p in s.split(",") if p], "--shapes", as_json) for s in shapes] if shapes else None
    run_command(as_json, lambda: api.export(source, out=out_dir, config=cfg, arch=arch, shapes=shp,
                                            timeout_s=timeout_s), _manifest)


@bundle_app.command("verify")
def verify_cmd(bundle: Path, expect_id: Optional[str] = typer.Option(
        None, "--expect-id", help="the bundle_id recorded at export: refuse a bundle whose manifest hashes to another"),
        as_json: bool = JsonOpt) -> None:
    """Check a bundle without a GPU: its identity, manifest schema, every file's sha256, the arch list, coverage."""
    from kernelpilot import api

    run_command(as_json, lambda: api.bundle_verify(bundle, expect_id=expect_id), _verify)


@bundle_app.command("bench")
def bench_cmd(bundle: Path, kernel: Path, as_json: bool = JsonOpt) -> None:
    """On a GPU: outputs identical to the JIT kernel's at the same config, launch times, load time."""
    from kernelpilot import api

    run_command(as_json, lambda: api.bundle_bench(bundle, kernel), _bench, ok=lambda r: r.ok)


def register(app: typer.Typer) -> None:
    """Add ``export`` and the ``bundle`` group to ``app``."""
    app.command("export")(export_cmd)
    app.add_typer(bundle_app, name="bundle")
