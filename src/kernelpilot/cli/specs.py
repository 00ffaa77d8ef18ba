"""``kernelpilot specs list|show|cite|measure``: GPU specs, cited datasheet values and measured ceilings.

Each command calls one :mod:`kernelpilot.api` function (``specs_list``, ``specs_show``, ``specs_cite``,
``specs_measure``) and prints the result, JSON or the tables below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from kernelpilot.cli.common import JsonOpt, out, run_command, table

#: ``kernelpilot specs``: the group of the specs commands.
specs_app = typer.Typer(no_args_is_help=True, help="GPU specs: cited datasheet values and measured ceilings.")


def _human_list(r: dict[str, Any]) -> None:
    t = table("name", "aliases", "values", "measured", "one device")
    for s in r["specs"]:
        device = f"{s['per_device']} (1/{s['devices_per_package']})" if s["per_device"] else "—"
        t.add_row(escape(s["name"]), escape(", ".join(s["aliases"])), str(len(s["values"])),
                  escape(", ".join(s["measured"])) or "—", escape(device))
    out.print(t)


@specs_app.command("list")
def specs_list(as_json: bool = JsonOpt) -> None:
    """Known GPUs, with their aliases, whether measured ceilings exist, and the per-device name of multi-device packages."""
    from kernelpilot import api

    run_command(as_json, api.specs_list, _human_list)


def _human_show(r: dict[str, Any], sources: bool) -> None:
    from kernelpilot.hardware.specs import format_number, per_device_name

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
    t = table("metric", "value", "unit", "citation", "other sources")
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
        t = table("measured ceiling", "vs datasheet metric", "datasheet", "measured", "ratio", "provenance")
        for c in r["measured_vs_datasheet"]:
            t.add_row(c.measured.metric, escape(f"{c.datasheet.metric} [{c.datasheet.source_key}]"),
                      f"{format_number(c.datasheet.value)} {c.datasheet.unit}",
                      f"{format_number(c.measured.value)} {c.measured.unit}", f"{c.ratio:.3f}",
                      escape(c.measured.source.split(";")[0]))
        out.print(t)
    if r["derived"]:
        t = table("unit", "peak", "BW GB/s", "ridge FLOP/B", "90% peak", "90% BW GB/s", "from")
        for d in r["derived"]:
            t.add_row(d.compute_unit, f"{format_number(d.peak.value)} {d.peak.unit}", format_number(d.bandwidth.value),
                      f"{d.ridge_point_flop_per_byte:.1f}", format_number(round(d.target_peak, 1)),
                      format_number(round(d.target_bandwidth_gbps, 1)), d.source)
        out.print(t)


@specs_app.command("show")
def specs_show(name: str, sources: bool = typer.Option(False, "--sources", help="Print each value's source text."),
               as_json: bool = JsonOpt) -> None:
    """Every value of one GPU with its citation; measured ceilings beside the datasheet; ridge points and targets."""
    from kernelpilot import api

    run_command(as_json, lambda: api.specs_show(name), lambda r: _human_show(r, sources))


def _human_cite(c: Any) -> None:
    for cite, source in zip(c.citations, c.sources):
        out.print(cite, markup=False)
        out.print(f"    {source}", style="dim", markup=False)
    if c.value.note:
        out.print(f"    note: {c.value.note}", style="dim", markup=False)
    if c.conflict:
        out.print("[red]CONFLICT:[/] the sources disagree; the first line is the value used (never averaged)")
    if c.measured is not None:
        out.print(f"measured (used by the roofline instead): {c.measured.cite()}", markup=False)


@specs_app.command("cite")
def specs_cite(metric: str, gpu: str = typer.Option(..., "--gpu", help="GPU name or alias, e.g. H200 or MI300X."),
               as_json: bool = JsonOpt) -> None:
    """Where one number comes from: every source's citation, conflicts, and the measured value replacing it."""
    from kernelpilot import api

    run_command(as_json, lambda: api.specs_cite(metric, gpu), _human_cite)


def _human_measure(r: dict[str, Any]) -> None:
    for m in r["measurements"]:
        out.print(f"{m['metric']}: {m['value']:.4g} {m['unit']} (IQR {m['iqr']:.3g}, {len(m['samples'])} samples)")
    out.print(f"wrote {r['file']}")


@specs_app.command("measure")
def specs_measure(copy_gib: float = typer.Option(2.0, help="Bytes copied per sample, GiB."),
                  gemm_n: int = typer.Option(8192, help="bf16 GEMM size n (n×n×n)."),
                  folder: Optional[Path] = typer.Option(None, help="Where to write (default: the user's specs folder)."),
                  as_json: bool = JsonOpt) -> None:
    """Measure copy bandwidth and a bf16 cuBLAS GEMM on this GPU; store them as measured ceilings."""
    from kernelpilot import api

    run_command(as_json, lambda: api.specs_measure(copy_gib=copy_gib, gemm_n=gemm_n, folder=folder), _human_measure)


def register(app: typer.Typer) -> None:
    """Add the ``specs`` group to ``app``."""
    app.add_typer(specs_app, name="specs")
