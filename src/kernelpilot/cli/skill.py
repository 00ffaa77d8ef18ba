"""``kernelpilot skill show|install``: the agent skill shipped in the package (docs/agents.md).

Each command calls one :mod:`kernelpilot.api` function (from :mod:`kernelpilot.api.skill`) and prints its result
(``--json``: the same dict). ``install`` exits 1 with ``error:``/``hint:`` when a different file is in the way and
``--force`` was not given, 2 for an unknown ``--for``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from kernelpilot.cli.common import JsonOpt, out, run_command

#: ``kernelpilot skill``: the group of the agent-skill commands.
skill_app = typer.Typer(no_args_is_help=True, help="The agent skill (SKILL.md): when to use kernelpilot, the loop, "
                        "when to stop, what never to do. Show it, or install it where Claude Code or Codex reads it.")


def _show(r: dict[str, Any]) -> None:
    out.print(r["text"], markup=False, highlight=False, end="")


def _installed(r: dict[str, Any]) -> None:
    said = {"written": "written to", "replaced": "replaced", "unchanged": "already up to date:"}[r["action"]]
    out.print(f"skill {said} {r['path']} (sha256 {r['sha256'][:12]}…)", markup=False, highlight=False)


@skill_app.command("show")
def show_cmd(as_json: bool = JsonOpt) -> None:
    """Print the shipped SKILL.md (--json: with its name, description, sha256 and where each agent reads it)."""
    from kernelpilot import api

    run_command(as_json, lambda: api.skill_show(), _show)


@skill_app.command("install")
def install_cmd(agent: str = typer.Option(..., "--for", help="claude (.claude/skills/kernelpilot/SKILL.md) or "
                                          "codex (.agents/skills/kernelpilot/SKILL.md)."),
                folder: Optional[Path] = typer.Option(None, "--dir", help="The project folder to install under "
                                                      "(default: the current one); your home folder installs it "
                                                      "for every project."),
                force: bool = typer.Option(False, "--force", help="Replace a different file already there."),
                as_json: bool = JsonOpt) -> None:
    """Write the skill where the agent reads it; an identical file is left as it is, a different one only with
    --force."""
    from kernelpilot import api

    run_command(as_json, lambda: api.skill_install(agent, dir=folder, force=force), _installed)


def register(app: typer.Typer) -> None:
    """Add the ``skill`` group to ``app``."""
    app.add_typer(skill_app, name="skill")
