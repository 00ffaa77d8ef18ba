"""``kernelpilot configs list|lookup|export|import|merge|conflicts``: the config store of decided configs.

Each command calls one :mod:`kernelpilot.api` function (from :mod:`kernelpilot.api.configs`) and prints its result
(JSON with ``--json``: the same dict the Python function returns; else the tables and lines below). Exit codes
(every command): 0 done (a lookup that finds nothing too: ``found`` is false, with the reason); 1 the store or a
file cannot be used (``error:``/``hint:``, or ``{"error", "message", "hint"}`` with ``--json``); 2 a bad option
value. docs/workloads.md lists each command's JSON keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from kernelpilot.cli.common import JsonOpt, fail, kv, out, run_command, table
from kernelpilot.errors import OptionError

EXIT_CODES = ("Exit codes: 0 done; 1 the store or a file cannot be used (error: and hint: on stderr, or "
              "{\"error\", \"message\", \"hint\"} with --json); 2 a bad option value.")

#: ``kernelpilot configs``: the group of the config-store commands.
configs_app = typer.Typer(
    no_args_is_help=True,
    help="The config store: decided configs keyed by kernel source hash, arch, toolchain, dtype, stride pattern "
         "and shape range; export/import/merge for a team's repository. The store is a SQLite file: --store, else "
         "$KERNELPILOT_CONFIG_STORE, else $KERNELPILOT_HOME/configs.db (~/.kernelpilot/configs.db). " + EXIT_CODES)
StoreOpt = typer.Option(None, "--store", help="The store file (default $KERNELPILOT_CONFIG_STORE or "
                        "~/.kernelpilot/configs.db). A path given must exist, except for import and merge, which "
                        "create it.")


def _shape(items: Optional[list[str]], as_json: bool) -> dict[str, Any]:
    """``--shape`` values, each ``M=512,N=4096`` or a JSON object, merged in order (exit 2 on bad syntax)."""
    shape: dict[str, Any] = {}
    for item in items or []:
        if item.lstrip().startswith("{"):
            try:
                value = json.loads(item)
            except ValueError as exc:
                fail(as_json, OptionError(f"--shape {item!r} is not valid JSON: {exc}",
                                          "e.g. --shape '{\"M\": 512, \"N\": 4096}' or --shape M=512,N=4096"))
            if not isinstance(value, dict):
                fail(as_json, OptionError(f"--shape {item!r} is not a JSON object", "e.g. --shape '{\"M\": 512}'"))
            shape.update(value)
        else:
            shape.update(kv([item], "--shape", as_json))
    return shape


def _toolchain(text: Optional[str], as_json: bool) -> Optional[dict[str, str]]:
    """``--toolchain triton=3.5.0,torch=2.9.0`` (versions kept as text) or a JSON object (exit 2 on bad syntax)."""
    if text is None:
        return None
    if text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            fail(as_json, OptionError(f"--toolchain is not valid JSON: {exc}", "e.g. --toolchain triton=3.5.0"))
        if not isinstance(value, dict):
            fail(as_json, OptionError("--toolchain is not a JSON object", "e.g. --toolchain triton=3.5.0"))
        return value
    tools: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, version = part.partition("=")
        if not sep or not name.strip() or not version.strip():
            fail(as_json, OptionError(f"--toolchain {part!r} is not of the form tool=version",
                                      "e.g. --toolchain triton=3.5.0,torch=2.9.0,cuda=12.8"))
        tools[name.strip()] = version.strip()
    return tools


def _j(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _entries_table(entries: list[dict[str, Any]]) -> None:
    if not entries:
        out.print("no configs stored")
        return
    t = table("kernel", "arch", "dtype / strides", "shape range", "config", "ns", "origin", "toolchain")
    for e in entries:
        tools = ", ".join(f"{k} {v}" for k, v in e["toolchain"].items()) or "—"
        t.add_row(e["kernel_hash"][:12], e["arch"], escape(f"{e['dtype']} / {e['strides']}"),
                  escape(_j(e["shape_range"])), escape(_j(e["config"])), f"{e['duration_ns']:.0f}",
                  escape(e["origin"]), escape(tools))
    out.print(t)


@configs_app.command("list")
def list_cmd(kernel: Optional[str] = typer.Option(None, "--kernel", help="Only this kernel's: its file, or its "
                                                  "source hash (or the hash's first digits)."),
             arch: Optional[str] = typer.Option(None, "--arch", help="Only this arch's, e.g. sm_90."),
             store: Optional[Path] = StoreOpt, as_json: bool = JsonOpt) -> None:
    """Every stored config (kernel hash, arch, dtype, stride pattern, shape range, config, time, origin). Exit
    codes: 0 done (also when nothing is stored); 1 the store cannot be used; 2 a bad option."""
    from kernelpilot import api

    def human(r: dict[str, Any]) -> None:
        _entries_table(r["entries"])
        out.print(f"{r['count']} configs in {escape(r['store'])}", style="dim")

    run_command(as_json, lambda: api.configs_list(kernel=kernel, arch=arch, store=store), human)


@configs_app.command("lookup")
def lookup_cmd(
    kernel: str = typer.Argument(..., help="The kernel file (.py or .cu), or its source hash."),
    shape: Optional[list[str]] = typer.Option(None, "--shape", help="The shape: M=512,N=4096 or a JSON object "
                                              "(repeatable); keys left out take the kernel's SHAPE."),
    ref: Optional[Path] = typer.Option(None, "--ref", help="The kernel's reference file, if not in the kernel file."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Default: this machine's GPU (cpu without one)."),
    toolchain: Optional[str] = typer.Option(None, "--toolchain", help="tool=version,... or JSON (default: this "
                                            "interpreter's torch, triton and torch's CUDA)."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Default: the shape's dtype key."),
    strides: Optional[str] = typer.Option(None, "--strides", help="The stride pattern (default contiguous)."),
    store: Optional[Path] = StoreOpt, as_json: bool = JsonOpt,
) -> None:
    """The decided config for a kernel at a shape, as library code would get it: every key part equal (an entry of
    another arch or toolchain is never used), the shape inside the range; nothing is measured. A miss prints why.
    Exit codes: 0 done (found or not); 1 the store or the kernel file cannot be used; 2 a bad option."""
    from kernelpilot import api

    given = _shape(shape, as_json)
    tools = _toolchain(toolchain, as_json)

    def human(r: dict[str, Any]) -> None:
        tools_text = ", ".join(f"{k} {v}" for k, v in r["toolchain"].items()) or "none"
        out.print(f"kernel {r['kernel_hash'][:12]}  {r['arch']}  {escape(r['dtype'])}  {escape(r['strides'])}  "
                  f"({escape(tools_text)}) at {escape(_j(r['shape']))}")
        if r["found"]:
            e = r["entry"]
            out.print(f"[bold]config {escape(_j(r['config']))}[/]  ({e['duration_ns']:.0f} ns, range "
                      f"{escape(_j(e['shape_range']))}, origin {escape(e['origin'])})")
        else:
            out.print(f"[yellow]no stored config:[/] {escape(r['reason'])}")

    run_command(as_json, lambda: api.configs_lookup(kernel, given, ref=ref, arch=arch, toolchain=tools, dtype=dtype,
                                                    strides=strides, store=store), human)


@configs_app.command("export")
def export_cmd(file: Path = typer.Argument(..., help="JSON Lines file to write (replaced)."),
               store: Optional[Path] = StoreOpt, as_json: bool = JsonOpt) -> None:
    """Write every stored config as JSON Lines (sorted, stable: the same store gives the same bytes; keep it in a
    repository). Exit codes: 0 done; 1 the store cannot be used or the file written."""
    from kernelpilot import api

    run_command(as_json, lambda: api.configs_export(file, store=store),
                lambda r: out.print(f"wrote {r['written']} configs to {escape(r['file'])}"))


def _taken(r: dict[str, Any], source: str) -> None:
    out.print(f"from {escape(source)}: added {r['added']}, improved {r['improved']}, kept {r['kept']}; "
              f"{r['conflicts']} new conflicts ({r['total']} configs in {escape(r['store'])})")
    if r["conflicts"]:
        out.print("[yellow]keys with more than one config:[/] kernelpilot configs conflicts")


@configs_app.command("import")
def import_cmd(file: Path = typer.Argument(..., help="JSON Lines file written by export."),
               store: Optional[Path] = StoreOpt, as_json: bool = JsonOpt) -> None:
    """Take in an export: a different config for a key is kept beside the stored one, the same config keeps the
    better measurement (one made here before one taken in). Every line is checked before any is taken: a bad file
    changes nothing. Exit codes: 0 done; 1 the file is missing or a line is invalid (FILE:LINE), or the store
    cannot be used."""
    from kernelpilot import api

    run_command(as_json, lambda: api.configs_import(file, store=store), lambda r: _taken(r, r["file"]))


@configs_app.command("merge")
def merge_cmd(other: Path = typer.Argument(..., help="Another store file (configs.db), read only."),
              store: Optional[Path] = StoreOpt, as_json: bool = JsonOpt) -> None:
    """Take in every config of another store file, under import's rule. Exit codes: 0 done; 1 either file cannot
    be used."""
    from kernelpilot import api

    run_command(as_json, lambda: api.configs_merge(other, store=store), lambda r: _taken(r, r["other"]))


@configs_app.command("conflicts")
def conflicts_cmd(store: Optional[Path] = StoreOpt, as_json: bool = JsonOpt) -> None:
    """The keys that hold more than one config, each config in the order a lookup ranks them (measured here,
    then fastest): the first answers. Exit codes: 0 done (also when there is none); 1 the store cannot be used."""
    from kernelpilot import api

    def human(r: dict[str, Any]) -> None:
        if not r["conflicts"]:
            out.print(f"no conflicts in {escape(r['store'])}")
            return
        for c in r["conflicts"]:
            k = c["key"]
            out.print(f"[bold]kernel {k['kernel_hash'][:12]} {k['arch']} {escape(k['dtype'])} "
                      f"{escape(k['strides'])} {escape(_j(k['shape_range']))}[/]")
            for i, e in enumerate(c["entries"]):
                out.print(f"  {'→' if i == 0 else ' '} {escape(_j(e['config']))}  {e['duration_ns']:.0f} ns  "
                          f"{escape(e['origin'])}")

    run_command(as_json, lambda: api.configs_conflicts(store=store), human)


def register(app: typer.Typer) -> None:
    """Add the ``configs`` group to ``app``."""
    app.add_typer(configs_app, name="configs")
