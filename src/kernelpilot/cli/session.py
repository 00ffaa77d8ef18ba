"""``kernelpilot session start|try|status|mask|unmask|restart|finish``: versions an author writes, one hypothesis
at a time (:mod:`kernelpilot.versions`).

Exit codes (every command; ``--json`` prints one object on stdout either way):

* 0 — done (for ``start``/``try``: the version ran correctly and was recorded, whatever its outcome);
* 1 — an error; nothing beyond the commits already made was recorded (``{"error", "message", "hint"}``); a time under
  the speed-of-light floor and a v0 that crashed or hung end here too, after that version was recorded and committed;
* 2 — a bad option (no hypothesis, a bad ``--expect``, an unknown version);
* 3 — ``start``/``try`` only: the version was recorded as **invalid** (incorrect, failed, or it changed the check);
* 128 + N — interrupted by signal N.
"""

from __future__ import annotations

from pathlib import Path

import typer

from kernelpilot.cli.common import JsonOpt, QuietOpt, RefOpt, ShapeOpt, kv, out, run_command
from kernelpilot.cli.progress import Reporter
from kernelpilot.fmt import format_duration_ns as dur
from kernelpilot.fmt import format_ratio

__all__ = ["INVALID_EXIT", "register"]

#: Exit code of ``start``/``try`` when the version was recorded but is invalid.
INVALID_EXIT = 3

session_app = typer.Typer(no_args_is_help=True, help="Versions you write, one hypothesis at a time: start, try, "
                          "status, mask, unmask, restart, finish. Exit codes: 0 done, 1 error, 2 bad option, "
                          "3 version recorded as invalid.")
RunArg = typer.Argument(..., help="The session folder (the --out of `session start`).")
NoProfile = typer.Option(False, "--no-profile", help="No Nsight Compute: light cards only.")
StartTimeoutOpt = typer.Option(None, "--timeout-s", help="Seconds one step of a version may take in its worker "
                               "(default 300; the session keeps it for try and finish).")
TimeoutOpt = typer.Option(None, "--timeout-s", help="Seconds one step of a version may take in its worker "
                          "(default: the session's, from start).")


def _tried(result) -> None:
    m = result.memory
    ratio = (m.vs_parent or {}).get("ratio")
    out.print(f"v{m.version}: [bold]{m.outcome}[/]" + (f" ({m.status})" if m.outcome == "invalid" else "")
              + (f" — {dur(m.duration_ns)}" if m.duration_ns else "")
              + (" (interpreted: not a measurement)" if m.duration_ns and not m.measured else "")
              + (f", {format_ratio(1 / ratio, decimals=3)} vs v{m.parent}" if ratio and m.measured else ""))
    for e in m.expectations:
        out.print(f"  expected {e.metric} {e.direction}: {e.verdict}"
                  + (f" ({e.change_rel:+.1%})" if e.change_rel is not None else ""), markup=False)
    for p in m.pitfalls:
        out.print(f"  pitfall: {p}", markup=False)
    out.print(f"incumbent: v{result.incumbent}" + (f"; target {dur(result.target_ns)} "
                                                   + ("met" if result.target_met else "not met")
                                                   if result.target_ns else ""), markup=False)


def _exit_invalid(as_json: bool, fn, progress: Reporter):
    holder = {}

    def call():
        holder["r"] = fn()
        return holder["r"]
    run_command(as_json, call, _tried, ok=lambda r: True, progress=progress)
    if holder.get("r") is not None and holder["r"].memory.outcome == "invalid":
        raise typer.Exit(INVALID_EXIT)


@session_app.command("start")
def start_cmd(kernel: Path = typer.Argument(..., help="v0: the starting kernel file."),
              output: Path = typer.Option(..., "--out", help="The session folder (new or empty)."),
              ref: Path | None = RefOpt, shape: list[str] | None = ShapeOpt,
              gpu: str | None = typer.Option(None, "--gpu", help="GPU spec for the roofline (default: this GPU)."),
              kernel_type: str | None = typer.Option(None, "--kernel-type", help="For the experience log "
                                                     "(default: guessed from the file name)."),
              experience: Path | None = typer.Option(None, "--experience", help="Experience log (default "
                                                     "$KERNELPILOT_EXPERIENCE or ~/.kernelpilot/experience.db)."),
              no_experience: bool = typer.Option(False, "--no-experience", help="Record nothing in a log."),
              no_git: bool = typer.Option(False, "--no-git", help="No git history in the session folder."),
              no_profile: bool = NoProfile, timeout_s: float | None = StartTimeoutOpt, as_json: bool = JsonOpt,
              quiet: bool = QuietOpt) -> None:
    """Freeze the check, write README.md (specs, roofline, stop conditions) and evaluate v0."""
    from kernelpilot import api

    from kernelpilot.options import SessionOptions, build_options

    shp = kv(shape, "--shape", as_json)
    log = Reporter(quiet=quiet)

    def call():
        # the flags as one SessionOptions (a flag not given is left unset: its default)
        options = build_options(SessionOptions, ref=ref, shape=shp or None, gpu=gpu, kernel_type=kernel_type,
                                profile=False if no_profile else None, git=False if no_git else None,
                                timeout_s=timeout_s, experience_db=experience,
                                no_experience=True if no_experience else None)
        return api.session_start(kernel, options, out=output, log=log)

    _exit_invalid(as_json, call, log)


@session_app.command("try")
def try_cmd(run: Path = RunArg, kernel: Path = typer.Argument(..., help="The new version's kernel file."),
            hypothesis: str = typer.Option(..., "--hypothesis", help="The one hypothesis this version tests."),
            expect: list[str] | None = typer.Option(None, "--expect", help="METRIC:up|down, e.g. "
                                                    "dram_throughput_pct:up or duration:down (repeatable)."),
            parent: str | None = typer.Option(None, "--parent", help="vN (default: the incumbent)."),
            no_profile: bool = NoProfile, timeout_s: float | None = TimeoutOpt, as_json: bool = JsonOpt,
            quiet: bool = QuietOpt) -> None:
    """Commit the hypothesis, then check, A/B-time, profile and classify the new version."""
    from kernelpilot import api

    log = Reporter(quiet=quiet)
    _exit_invalid(as_json, lambda: api.session_try(run, kernel, hypothesis=hypothesis, expect=expect, parent=parent,
                                               profile=False if no_profile else None, timeout_s=timeout_s, log=log),
                  log)


def _status(s) -> None:
    out.print(s.table_md, markup=False)
    out.print(f"incumbent: v{s.incumbent}" + (f", {dur(s.incumbent_ns)}" if s.incumbent_ns else "")
              + (f"; target {dur(s.target_ns)} " + ("met" if s.target_met else "not met")
                 if s.target_ns else ""), markup=False)
    for c in s.card_suggests:
        out.print(f"card suggests: {c}", markup=False)
    for r in s.experience_recommends:
        out.print(f"experience: {r}", markup=False)


@session_app.command("status")
def status_cmd(run: Path = RunArg, as_json: bool = JsonOpt) -> None:
    """Versions, incumbent, target; what the card suggests and what the experience log recommends."""
    from kernelpilot import api

    run_command(as_json, lambda: api.session_status(run), _status)


@session_app.command("mask")
def mask_cmd(run: Path = RunArg, version: str = typer.Argument(..., help="vN"),
             why: str = typer.Option(..., "--why", help="Why it must not count."), as_json: bool = JsonOpt) -> None:
    """Mask a version: kept, but skipped by status, recommend, the incumbent and the report (a commit)."""
    from kernelpilot import api

    run_command(as_json, lambda: api.session_mask(run, version, why=why), _status)


@session_app.command("unmask")
def unmask_cmd(run: Path = RunArg, version: str = typer.Argument(..., help="vN"), as_json: bool = JsonOpt) -> None:
    """Count a masked version again (a commit)."""
    from kernelpilot import api

    run_command(as_json, lambda: api.session_unmask(run, version), _status)


@session_app.command("restart")
def restart_cmd(run: Path = RunArg, from_version: str = typer.Option(..., "--from", help="vN to continue from."),
                as_json: bool = JsonOpt) -> None:
    """Partial restart: later versions masked, the incumbent reset to --from, nothing deleted (a commit)."""
    from kernelpilot import api

    run_command(as_json, lambda: api.session_restart(run, from_version=from_version), _status)


@session_app.command("finish")
def finish_cmd(run: Path = RunArg, no_benchmark: bool = typer.Option(False, "--no-benchmark",
                                                                     help="Skip eager / torch.compile."),
               as_json: bool = JsonOpt, quiet: bool = QuietOpt) -> None:
    """Write final_report.md and benchmark.md (the incumbent vs PyTorch eager and torch.compile)."""
    from kernelpilot import api

    log = Reporter(quiet=quiet)
    run_command(as_json, lambda: api.session_finish(run, benchmark=not no_benchmark, log=log), _status, progress=log)


def register(app: typer.Typer) -> None:
    """Add the ``session`` group to ``app``."""
    app.add_typer(session_app, name="session")
