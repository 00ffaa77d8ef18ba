"""``kernelpilot inductor``: import torch.compile's (Inductor's) Triton kernels for a kernel file's reference as a
kernel file of their own. Calls :func:`kernelpilot.api.import_inductor` (:mod:`kernelpilot.api.inductor`) and prints
what it wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from kernelpilot.cli.common import JsonOpt, RefOpt, ShapeOpt, kv, out, run_command, table

__all__ = ["inductor_cmd", "register"]


def _human(r: Any) -> None:
    out.print(f"[bold]{r.out}[/]: {len(r.kernels)} Inductor kernel{'s' if len(r.kernels) != 1 else ''} of "
              f"{Path(r.kernel).name}'s reference (torch {r.torch_version}, Triton {r.triton_version}, mode {r.mode}, "
              f"{r.device_name}); shape {r.shape}, fixed")
    t = table("#", "kernel", "default from")
    for i, k in enumerate(r.kernels):
        t.add_row(str(i), k, r.default_sources.get(k, "?"))
    out.print(t)
    out.print("TUNABLES " + " ".join(f"{k}={v}" for k, v in r.tunables.items()) + f" ({r.n_configs} configs"
              + (f"; constraints {r.constraints}" if r.constraints else "") + ")")
    out.print("DEFAULT_CONFIG " + " ".join(f"{k}={v}" for k, v in r.default_config.items()))
    for name, handed in r.handed_over.items():
        out.print(f"output {name}: " + ("written in place (Inductor's buffer)" if handed else "copied from the returned value"))
    for flag in r.screen_flags:
        out.print(f"[dim]screen: {flag}[/]")
    out.print(f"next: kernelpilot check {r.out}; kernelpilot tune {r.out}")


def inductor_cmd(kernel: Path = typer.Argument(..., help="The kernel file whose reference torch.compile compiles."),
                 out_file: Path = typer.Option(..., "--out", help="The kernel file to write."),
                 mode: str = typer.Option("default", "--mode", help="torch.compile mode: default, max-autotune, ..."),
                 ref: Optional[Path] = RefOpt, shape: Optional[list[str]] = ShapeOpt,
                 spread: int = typer.Option(1, "--spread", help="Powers of two each side of Inductor's block sizes "
                                            "and warps in TUNABLES (0: Inductor's config only)."),
                 from_capture: Optional[Path] = typer.Option(None, "--from-capture", help="Convert a capture saved "
                                                             "with --save-capture instead of compiling (no GPU)."),
                 save_capture: Optional[Path] = typer.Option(None, "--save-capture", help="Also save the capture "
                                                             "(Inductor's output code and what was observed) as JSON."),
                 no_validate: bool = typer.Option(False, "--no-validate", help="Do not load the written file "
                                                  "through the kernel contract."),
                 timeout_s: float = typer.Option(600.0, "--timeout-s", help="Seconds the capture may take."),
                 as_json: bool = JsonOpt) -> None:
    """Write torch.compile's Triton kernels for KERNEL's reference as a kernel file (launch parameters as TUNABLES).

    Needs a GPU (Inductor writes Triton only for CUDA), except with --from-capture. Exits 1 when Inductor made no
    Triton kernel (the graph went to cuBLAS or aten: nothing to import)."""
    from kernelpilot import api

    shp = kv(shape, "--shape", as_json) or None
    run_command(as_json, lambda: api.import_inductor(kernel, out=out_file, ref=ref, shape=shp, mode=mode, spread=spread,
                                                 from_capture=from_capture, save_capture=save_capture,
                                                 validate=not no_validate, timeout_s=timeout_s), _human)


def register(app: typer.Typer) -> None:
    """Add ``inductor`` to ``app``."""
    app.command("inductor")(inductor_cmd)
