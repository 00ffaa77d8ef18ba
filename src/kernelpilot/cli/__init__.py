"""The ``kernelpilot`` command line: a thin Typer layer over :mod:`kernelpilot.api`.

Every command takes ``--json`` (one JSON object on stdout; progress goes to stderr) and exits non-zero on failure,
printing what went wrong and what to do (``{"error", "message", "hint"}`` with ``--json``). Each command calls
exactly one :mod:`kernelpilot.api` function and prints its result.

Layout: this module builds the app from the command modules (:mod:`.run`, :mod:`.static`, :mod:`.search`,
:mod:`.specs`, :mod:`.bundle`, ...), which share :mod:`.common` and print through :mod:`.render` / :mod:`.render_static`; none of them
imports this module.
"""

from __future__ import annotations

import typer

from kernelpilot.cli import bundle, configs, experience, run, search, session, specs, static, workload

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evidence-driven GPU kernel optimization: check, time, profile, judge, change, record.")
run.register(app)
specs.register(app)
static.register(app)
search.register(app)
session.register(app)
experience.register(app)
configs.register(app)
bundle.register(app)
workload.register(app)
from kernelpilot.cli import inductor as _inductor; _inductor.register(app)  # noqa: E402,E702
from kernelpilot.cli import skill as _skill; _skill.register(app)  # noqa: E402,E702
from kernelpilot.cli import mcp as _mcp; _mcp.register(app)  # noqa: E402,E702
from kernelpilot.cli import kernelbench as _kernelbench; _kernelbench.register(app)  # noqa: E402,E702


def main() -> None:  # pragma: no cover - console entry
    """Console entry point."""
    app()
