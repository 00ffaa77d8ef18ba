"""``kernelpilot workload ranges|capture|buckets``: write a workload file, from ranges or from a real PyTorch
program's calls to the reference, and show how ``tune --workload`` buckets it (docs/workloads.md).

Each command calls one :mod:`kernelpilot.api` function (from :mod:`kernelpilot.api.workload`) and prints its result
(``--json``: the same dict).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from kernelpilot.cli.common import JsonOpt, out, run_command, table

#: ``kernelpilot workload``: the group of the workload-file commands.
workload_app = typer.Typer(no_args_is_help=True, help="Workload files: the shapes a kernel really runs at, with "
                           "weights (tune --workload FILE tunes for them).")
KernelArg = typer.Argument(..., help="The kernel file (its SHAPE fills the keys a shape leaves out).")
OutOpt = typer.Option(None, "--out", help="Write the workload JSON here.")


def _shapes(r: dict[str, Any]) -> None:
    t = table("shape", "weight")
    for e in r["workload"]:
        t.add_row(str(e["shape"]), f"{e['weight']:g}")
    out.print(t)
    out.print(f"{r['shapes']} shapes, total weight {r['total_weight']:g}"
              + (f"; written to {r['file']}" if r.get("file") else ""), markup=False)


def _captured(r: dict[str, Any]) -> None:
    _shapes(r)
    out.print(f"{r['calls']} calls of {r['op']}, mapping {r['mapping']}", markup=False)


def _buckets(r: dict[str, Any]) -> None:
    t = table("bucket", "weight", "shapes", "searched at")
    for b in r["buckets"]:
        t.add_row(b["name"], f"{b['weight']:g}", str(len(b["shapes"])), str(b["representative"]))
    out.print(t)
    out.print(f"keys {r['keys']}, rule {r['rule']}", markup=False)


@workload_app.command("ranges")
def ranges_cmd(kernel: Path = KernelArg,
               ranges: list[str] = typer.Argument(..., help="KEY=LO:HI, e.g. M=1:16384 (several: every combination)."),
               points: str = typer.Option("pow2-mid", "--points", help="pow2-mid (powers of two, their midpoints "
                                          "and both ends), pow2, or all."),
               output: Optional[Path] = OutOpt, as_json: bool = JsonOpt) -> None:
    """A workload from ranges, weight 1 per shape."""
    from kernelpilot import api

    run_command(as_json, lambda: api.workload_ranges(kernel, ranges, points=points, out=output), _shapes)


@workload_app.command("capture")
def capture_cmd(kernel: Path = KernelArg,
                program: Path = typer.Argument(..., help="A Python file whose function runs your model (eager)."),
                function: str = typer.Option("main", "--function", help="The program's function to run."),
                op: Optional[str] = typer.Option(None, "--op", help="The op the kernel replaces, as the profiler "
                                                 "records it (default: observed from the kernel's reference)."),
                mapping: Optional[str] = typer.Option(None, "--map", help="How SHAPE reads off the op's arguments, "
                                                      "e.g. 'M=0.0,N=0.-1' (default: observed)."),
                output: Optional[Path] = OutOpt, as_json: bool = JsonOpt) -> None:
    """Capture a workload from a real PyTorch program: the shapes and counts of its calls to the reference's op."""
    from kernelpilot import api

    run_command(as_json, lambda: api.workload_capture(kernel, program, function=function, op=op, mapping=mapping,
                                                      out=output), _captured)


@workload_app.command("buckets")
def buckets_cmd(kernel: Path = KernelArg, workload: Path = typer.Argument(..., help="The workload JSON file."),
                key: Optional[list[str]] = typer.Option(None, "--key", help="A key to bucket on (repeatable; "
                                                        "default: every key that varies)."),
                rule: str = typer.Option("pow2", "--rule", help="pow2 or exact."), as_json: bool = JsonOpt) -> None:
    """How tune --workload would bucket the file (nothing runs)."""
    from kernelpilot import api

    run_command(as_json, lambda: api.workload_buckets(kernel, workload, keys=key or None, rule=rule), _buckets)


def register(app: typer.Typer) -> None:
    """Add the ``workload`` group to ``app``."""
    app.add_typer(workload_app, name="workload")
