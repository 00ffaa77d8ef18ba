"""``kernelpilot export`` and the ``kernelpilot bundle`` group (``verify``, ``bench``): native code bundles
(docs/bundles.md). Each command calls one :mod:`kernelpilot.api` function and prints it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from kernelpilot.cli.common import ConfigOpt, JsonOpt, kv, out, run_command, table

if TYPE_CHECKING:
    from kernelpilot.bundle.bench import BundleBench
    from kernelpilot.bundle.manifest import BundleManifest, BundleVerify
    from kernelpilot.bundle.manifest2 import CudaManifest, RangeManifest

__all__ = ["bundle_app", "register"]

#: ``kernelpilot bundle``: the group of the bundle commands.
bundle_app = typer.Typer(no_args_is_help=True, help="Native code bundles: verify (no GPU), bench (GPU).")


def _manifest(m: BundleManifest | RangeManifest | CudaManifest) -> None:
    from kernelpilot.bundle.manifest2 import CudaManifest, RangeManifest

    if isinstance(m, CudaManifest):
        out.print(f"[bold]{m.kernel}[/] (.cu, solve) for {m.arch}: {len(m.libraries)} librar"
                  f"{'y' if len(m.libraries) == 1 else 'ies'} for {len(m.buckets)} buckets over {m.dispatch.keys}; "
                  f"{m.nvcc_version or 'nvcc ?'}; needs a CUDA {m.min_driver_cuda} driver")
        t = table("bucket", "ranges", "config", "library")
        for b in m.buckets:
            t.add_row(b.name, _ranges(b.ranges), _kv(b.config), m.libraries[b.library].file)
        out.print(t)
        return
    if isinstance(m, RangeManifest):
        from kernelpilot.bundle.rules import rule_text

        out.print(f"[bold]{m.kernel}[/] ({m.kernel_function}) for {m.arch}: {len(m.entries)} cubins for "
                  f"{len(m.buckets)} buckets over {m.dispatch.keys}; Triton {m.triton_version}; needs a CUDA "
                  f"{m.min_driver_cuda} driver")
        t = table("bucket", "ranges", "config", "grid", "cubins", "shape rules")
        for b in m.buckets:
            t.add_row(b.name, _ranges(b.ranges), _kv(b.config), ", ".join(rule_text(r) for r in b.grid),
                      str(len(b.entries)), " ".join(f"{p}={rule_text(r)}" for p, r in b.params.items()
                                                     if "const" not in r))
        out.print(t)
        return
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


def _ranges(r: dict[str, Any]) -> str:
    return " ".join(f"{k}=[{lo}, {hi}]" for k, (lo, hi) in r.items())


def _kv(d: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())


def _verify(v: BundleVerify) -> None:
    kind = v.kind
    out.print(f"[green]ok[/] {v.bundle}: {v.kernel} for {v.arch}, {v.n_entries} "
              f"{'libraries' if kind == 'cuda-so' else 'entries'}, {v.n_files} files, hashes match"
              f"{', coverage holds at every bucket sample and range corner' if kind == 'triton' else ''}; "
              f"needs a CUDA {v.min_driver_cuda} driver")
    if v.bundle_id:
        out.print(f"bundle_id {v.bundle_id} (pin it: kernelpilot bundle verify --expect-id, load(..., expect_id=))")


def _bench(b: BundleBench) -> None:
    out.print(f"{b.kernel}: load {b.load_s * 1e3:.2f} ms, first call (module load + launch) {b.first_call_s * 1e3:.2f} ms")
    t = table("shape", "config", "identical", "JIT ns", "bundle ns", "bundle/JIT")
    for e in b.entries:
        t.add_row(_kv(e.shape), _kv(e.config), "yes" if e.identical else f"[red]no: {', '.join(e.differing_outputs)}[/]",
                  f"{e.jit_median_ns:.0f}", f"{e.bundle_median_ns:.0f}", f"{e.ratio:.3f}")
    out.print(t)


def export_cmd(source: Path = typer.Argument(..., help="A kernel .py file, a `tune --out` folder (its best config), or "
                                            "a workload run folder holding dispatch.json (a bundle of its ranges)."),
               out_dir: Path = typer.Option(..., "--out", help="The new bundle folder (absent or empty)."),
               config: Optional[list[str]] = ConfigOpt,
               arch: str = typer.Option("auto", "--arch", help="Target, e.g. sm_90 or sm_90a; auto: this GPU "
                                        "(no GPU: an error; there is no default target)."),
               shapes: Optional[list[str]] = typer.Option(None, "--shapes", help="A declared shape, e.g. "
                                                         "--shapes N=4096,dtype=float32 (repeatable; default SHAPE)."),
               timeout_s: float = typer.Option(300.0, "--timeout-s", help="Seconds one entry (or sampled shape) may take."),
               dispatch: Optional[Path] = typer.Option(None, "--dispatch", help="A dispatch.json (tune --workload) to "
                                                       "bundle for the kernel file SOURCE: every bucket's shape range "
                                                       "(Triton cubins or .cu shared libraries)."),
               as_json: bool = JsonOpt) -> None:
    """Write a bundle: one cubin per declared shape for the chosen config, plus manifest.json (no GPU needed with
    --arch); or, from a dispatch table, a workload bundle serving its shape ranges."""
    from kernelpilot import api

    cfg = kv(config, "--config", as_json)
    shp = [kv([p for p in s.split(",") if p], "--shapes", as_json) for s in shapes] if shapes else None
    extra = {"dispatch": dispatch} if dispatch is not None else {}
    run_command(as_json, lambda: api.export(source, out=out_dir, config=cfg, arch=arch, shapes=shp,
                                            timeout_s=timeout_s, **extra), _manifest)


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
