"""``kernelpilot experience add|recommend|search|list|stats|merge|export|import|mask|guide``: the experience log.

Each command calls one :mod:`kernelpilot.api` function (from :mod:`kernelpilot.api.experience`) and prints its
result (JSON with ``--json``, else the tables and lines below). Exit codes (every command): 0 done; 1 the log or a
file cannot be used (``error:``/``hint:``, or ``{"error", "message", "hint"}`` with ``--json``); 2 a bad option
value. docs/experience.md lists each command's JSON keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from kernelpilot.cli.common import JsonOpt, kv, numbers, out, run_command, table
from kernelpilot.fmt import format_ratio

EXIT_CODES = ("Exit codes: 0 done; 1 the log or a file cannot be used (error: and hint: on stderr, or "
              "{\"error\", \"message\", \"hint\"} with --json); 2 a bad option value.")

#: ``kernelpilot experience``: the group of the experience-log commands.
experience_app = typer.Typer(
    no_args_is_help=True,
    help="The experience log: what every change tried did, ranked for the next kernel; the strategy guide. "
         "The log is a SQLite file: --db, else $KERNELPILOT_EXPERIENCE, else ~/.kernelpilot/experience.db. "
         + EXIT_CODES)
DbOpt = typer.Option(None, "--db", help="The log file (default $KERNELPILOT_EXPERIENCE or "
                     "~/.kernelpilot/experience.db; created if missing).")
MaskedOpt = typer.Option(False, "--include-masked", help="Count masked entries too.")


def _x(v: Optional[float]) -> str:
    return format_ratio(v, decimals=3)


def _entries_table(entries: list[dict[str, Any]]) -> None:
    if not entries:
        out.print("no entries")
        return
    t = table("recorded (UTC)", "kernel", "change", "outcome", "speedup", "source")
    for e in entries:
        where = ", ".join(x for x in (e["kernel_type"], e["backend"], e["arch"], e["bottleneck"]) if x)
        flags = (("" if e["measured"] else " (interpreted)") + (" [masked]" if e["masked"] else "")
                 + (" [user's claim]" if e.get("claim") else ""))
        t.add_row(e["recorded_utc"][:16].replace("T", " "), escape(f"{e['kernel']} ({where})"),
                  escape(e["change"]) + (f"\n[dim]{escape(', '.join(e['tags']))}[/]" if e["tags"] else ""),
                  e["outcome"] + flags, _x(e["speedup"]), escape(e["source"]))
    out.print(t)


@experience_app.command("add")
def add_cmd(
    kernel: Optional[str] = typer.Option(None, "--kernel", help="Kernel name (file stem)."),
    kernel_type: str = typer.Option("other", "--kernel-type", help="softmax, layer_norm, matmul, vector_add, "
                                    "attention, other, ..."),
    backend: str = typer.Option("triton", "--backend", help="triton or cuda."),
    arch: Optional[str] = typer.Option(None, "--arch", help="GPU arch, e.g. sm_90."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU name."),
    bottleneck: Optional[str] = typer.Option(None, "--bottleneck", help="Class of the version the change "
                                             "started from: memory, compute, latency, occupancy, balanced, "
                                             "small-grid, unknown."),
    change: Optional[str] = typer.Option(None, "--change", help="The change, in words."),
    tag: Optional[list[str]] = typer.Option(None, "--tag", help="A tag (repeatable; default: derived from "
                                            "--change)."),
    outcome: Optional[str] = typer.Option(None, "--outcome", help="improved, regressed, neutral, mixed or invalid."),
    speedup: Optional[float] = typer.Option(None, "--speedup", help="Parent time / new time."),
    metric: Optional[list[str]] = typer.Option(None, "--metric", help="Relative change of a metric, e.g. "
                                               "--metric duration_ns=-0.31 (repeatable)."),
    source: str = typer.Option("manual", "--source", help="Where it comes from, e.g. session:RUN/v3."),
    measured: bool = typer.Option(True, "--measured/--not-measured", help="A GPU measurement (default) or an "
                                  "interpreter run."),
    file: Optional[Path] = typer.Option(None, "--file", help="Read the entry from this JSON file instead of "
                                        "the flags."),
    db: Optional[Path] = DbOpt, as_json: bool = JsonOpt,
) -> None:
    """Add one entry, from flags (--kernel, --change and --outcome at least) or from --file entry.json. It is a
    lesson on record only when --source names a run, session or tune folder whose records validate and hold its
    numbers (optimize:RUN/vN, session:RUN/vN, tune:RUN); anything else is stored as your claim, ranked below.

    An entry already there (same key) is not added again: "added" is false, exit 0. Exit codes: 0 done; 1 the
    log or the file cannot be used; 2 a bad or missing option."""
    from kernelpilot import api

    fields: Optional[dict[str, Any]] = None
    flags = any(v is not None for v in (kernel, change, outcome, speedup, arch, gpu, bottleneck)) or tag or metric
    if file is None or flags:  # both --file and flags: the API refuses it
        fields = {"kernel": kernel, "kernel_type": kernel_type, "backend": backend, "arch": arch, "gpu": gpu,
                  "bottleneck": bottleneck, "change": change, "tags": list(tag or []), "outcome": outcome,
                  "speedup": speedup, "metrics_moved": numbers(kv(metric, "--metric", as_json), "--metric", as_json),
                  "source": source, "measured": measured}
        fields = {k: v for k, v in fields.items() if v is not None}

    def human(r: dict[str, Any]) -> None:
        e = r["entry"]
        word = "added" if r["added"] else "already in the log, not added again:"
        out.print(f"{word} {e['key'][:12]} ({escape(e['kernel'])}: {escape(e['change'])} → {e['outcome']}, "
                  f"tags {escape(', '.join(e['tags'])) or '—'}) in {escape(r['db'])}")
        if e.get("claim"):
            out.print(f"[yellow]stored as your claim, not a lesson on record:[/] {escape(e['claim'])} (claims rank "
                      "below lessons whose source validates)")

    run_command(as_json, lambda: api.experience_add(fields, file=file, db=db), human)


@experience_app.command("recommend")
def recommend_cmd(
    kernel_type: Optional[str] = typer.Option(None, "--kernel-type", help="The kernel's type, e.g. softmax."),
    backend: Optional[str] = typer.Option(None, "--backend", help="triton or cuda."),
    arch: Optional[str] = typer.Option(None, "--arch", help="GPU arch, e.g. sm_90."),
    bottleneck: Optional[str] = typer.Option(None, "--bottleneck", help="The kernel's bottleneck class."),
    limit: int = typer.Option(10, "--limit", help="Most recommendations."),
    include_masked: bool = MaskedOpt, db: Optional[Path] = DbOpt, as_json: bool = JsonOpt,
) -> None:
    """Past changes ranked by how often and how much they helped on similar kernels; warns about changes that
    mostly failed and about interpreter-only evidence. The ranking rule is kernelpilot's own (docs/experience.md).

    Exit codes: 0 done (also when nothing is recorded yet); 1 the log cannot be used; 2 a bad option."""
    from kernelpilot import api

    def human(r: dict[str, Any]) -> None:
        recs = r["recommendations"]
        if not recs:
            out.print(f"no past changes in {escape(r['db'])}"
                      + (f"; the curated guide: kernelpilot experience guide --bottleneck {bottleneck}"
                         if bottleneck else ""))
            return
        for i, c in enumerate(recs, start=1):
            out.print(f"{i}. [bold]{escape(c['tag'] or c['change'])}[/]  score {c['score']:+.3f}: "
                      f"{c['n_improved']} of {c['n_tried']} improved, {c['n_failed']} failed, median "
                      f"{_x(c['median_speedup'])}, best {_x(c['best_speedup'])}, similarity {c['similarity']:.2f}")
            out.print(f"   change: {escape(' | '.join(c['changes']))}   (from {escape(', '.join(c['examples']))})")
            if c["warning"]:
                out.print(f"   [yellow]warning:[/] {escape(c['warning'])}")
            if c["guide"]:
                out.print(f"   guide: {escape(', '.join(c['guide']))}", style="dim")

    run_command(as_json, lambda: api.experience_recommend(
        kernel_type=kernel_type, backend=backend, arch=arch, bottleneck=bottleneck, limit=limit,
        include_masked=include_masked, db=db), human)


@experience_app.command("search")
def search_cmd(
    text: list[str] = typer.Argument(..., help="Words that must all appear (change, tags, kernel, source, ...)."),
    limit: int = typer.Option(50, "--limit", help="Most entries."),
    include_masked: bool = MaskedOpt, db: Optional[Path] = DbOpt, as_json: bool = JsonOpt,
) -> None:
    """Entries containing every word given, newest first. Exit codes: 0 done; 1 the log cannot be used; 2 a bad
    option."""
    from kernelpilot import api

    run_command(as_json, lambda: api.experience_search(" ".join(text), limit=limit,
                                                                  include_masked=include_masked, db=db),
                lambda r: _entries_table(r["entries"]))


@experience_app.command("list")
def list_cmd(
    kernel: Optional[str] = typer.Option(None, "--kernel"),
    kernel_type: Optional[str] = typer.Option(None, "--kernel-type"),
    backend: Optional[str] = typer.Option(None, "--backend"), arch: Optional[str] = typer.Option(None, "--arch"),
    bottleneck: Optional[str] = typer.Option(None, "--bottleneck"),
    outcome: Optional[str] = typer.Option(None, "--outcome", help="improved, regressed, neutral, mixed, invalid."),
    source: Optional[str] = typer.Option(None, "--source"), tag: Optional[str] = typer.Option(None, "--tag"),
    limit: int = typer.Option(100, "--limit", help="Most entries."),
    include_masked: bool = MaskedOpt, db: Optional[Path] = DbOpt, as_json: bool = JsonOpt,
) -> None:
    """Entries matching every filter given, newest first. Exit codes: 0 done; 1 the log cannot be used; 2 a bad
    option."""
    from kernelpilot import api

    run_command(as_json, lambda: api.experience_list(
        limit=limit, include_masked=include_masked, db=db, kernel=kernel, kernel_type=kernel_type, backend=backend,
        arch=arch, bottleneck=bottleneck, outcome=outcome, source=source, tag=tag),
        lambda r: _entries_table(r["entries"]))


@experience_app.command("stats")
def stats_cmd(include_masked: bool = MaskedOpt, db: Optional[Path] = DbOpt, as_json: bool = JsonOpt) -> None:
    """Counts by outcome, kernel type, back end, bottleneck and tag; measured against interpreted. Exit codes: 0
    done; 1 the log cannot be used."""
    from kernelpilot import api

    def human(r: dict[str, Any]) -> None:
        out.print(f"{escape(r['db'])}: {r['total']} entries ({r['measured']} measured, {r['unmeasured']} "
                  f"interpreted; {r['masked']} masked in the file), {r['sources']} sources")
        for key in ("by_outcome", "by_kernel_type", "by_backend", "by_bottleneck", "by_tag"):
            counts = ", ".join(f"{k} {v}" for k, v in r[key].items()) or "—"
            out.print(f"  {key[3:].replace('_', ' ')}: {escape(counts)}")

    run_command(as_json, lambda: api.experience_stats(include_masked=include_masked, db=db), human)


@experience_app.command("merge")
def merge_cmd(other: Path = typer.Argument(..., help="Another experience log (.db)."),
              db: Optional[Path] = DbOpt, as_json: bool = JsonOpt) -> None:
    """Add the entries of another log that this one lacks (no duplicates; merging twice adds nothing). Exit codes:
    0 done; 1 either file cannot be used."""
    from kernelpilot import api

    run_command(as_json, lambda: api.experience_merge(other, db=db),
                lambda r: out.print(f"added {r['added']} entries from {escape(r['other'])} "
                                    f"({r['total']} in {escape(r['db'])})"))


@experience_app.command("export")
def export_cmd(file: Path = typer.Argument(..., help="JSON Lines file to write (replaced)."),
               db: Optional[Path] = DbOpt, as_json: bool = JsonOpt) -> None:
    """Write every entry as JSON Lines (sorted, stable: keep it in a repository). Exit codes: 0 done; 1 the log
    cannot be used or the file written."""
    from kernelpilot import api

    run_command(as_json, lambda: api.experience_export(file, db=db),
                lambda r: out.print(f"wrote {r['written']} entries to {escape(r['file'])}"))


@experience_app.command("import")
def import_cmd(file: Path = typer.Argument(..., help="JSON Lines file written by export."),
               db: Optional[Path] = DbOpt, as_json: bool = JsonOpt) -> None:
    """Add the entries of a JSON Lines file that the log lacks; every line is checked before any is added. Exit
    codes: 0 done; 1 the file is missing or a line is invalid (FILE:LINE), or the log cannot be used."""
    from kernelpilot import api

    run_command(as_json, lambda: api.experience_import(file, db=db),
                lambda r: out.print(f"added {r['added']} of {r['read']} entries from {escape(r['file'])}"))


@experience_app.command("mask")
def mask_cmd(source: str = typer.Argument(..., help="The source whose entries to mask, e.g. session:RUN/v3."),
             unmask: bool = typer.Option(False, "--unmask", help="Unmask instead."),
             db: Optional[Path] = DbOpt, as_json: bool = JsonOpt) -> None:
    """Mask (or unmask) every entry of one source: masked entries are left out of recommend, search, list and
    stats. Exit codes: 0 done (also when nothing matched: "entries" is 0); 1 the log cannot be used."""
    from kernelpilot import api

    run_command(as_json, lambda: api.experience_mask(source, unmask=unmask, db=db),
                lambda r: out.print(f"{'masked' if r['masked'] else 'unmasked'} {r['entries']} entries of "
                                    f"{escape(r['source'])}"))


@experience_app.command("guide")
def guide_cmd(bottleneck: str = typer.Option(..., "--bottleneck", help="memory, compute, latency, occupancy "
                                             "(small-grid: the grid-size entries)."),
              backend: str = typer.Option("triton", "--backend", help="triton or cuda."),
              as_json: bool = JsonOpt) -> None:
    """The curated strategy guide for a bottleneck class: the change, when it applies, what should move, and its
    source. Exit codes: 0 done; 2 an unknown class or back end."""
    from kernelpilot import api

    def human(r: dict[str, Any]) -> None:
        for g in r["entries"]:
            out.print(f"[bold]{escape(g['title'])}[/] ({g['id']}; {escape(', '.join(g['tags']))})")
            out.print(f"  change: {escape(g['change'])}")
            out.print(f"  when:   {escape(g['when'])}")
            out.print(f"  moves:  {escape(g['metric'])}")
            out.print(f"  source: {escape(g['source_title'])} — {escape(g['source'])}", style="dim")
        if not r["entries"]:
            out.print(f"no guide entries for {escape(r['bottleneck'])}")

    run_command(as_json, lambda: api.experience_guide(bottleneck, backend), human)


def register(app: typer.Typer) -> None:
    """Add the ``experience`` group to ``app``."""
    app.add_typer(experience_app, name="experience")
