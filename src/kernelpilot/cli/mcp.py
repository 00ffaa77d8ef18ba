"""``kernelpilot mcp``: serve kernelpilot's agent tools over the Model Context Protocol on stdin/stdout
(:func:`kernelpilot.api.mcp_serve`; the tools and their JSON: docs/agents.md, "MCP server")."""

from __future__ import annotations

from typing import Any

import typer

from kernelpilot.cli.common import JsonOpt, out, run_command


def mcp(as_json: bool = JsonOpt) -> None:
    """MCP server on stdio (the official `mcp` SDK): tools env, roofline, check, verify, bench, profile, inspect,
    session_start/try/status/mask/finish, experience_recommend, report, each returning the JSON of the command's
    --json; a failure is a tool error holding {"error", "message", "hint"}. Runs until the client closes stdin,
    then prints how many calls it served (on stderr: stdout is the client's pipe). Needs the package's `mcp` extra
    (the SDK: pip install 'mcp>=2.3,<3'). docs/agents.md, "MCP server"."""
    from kernelpilot import api

    def human(r: dict[str, Any]) -> None:
        out.print(f"kernelpilot mcp: served {r['calls']} tool calls over {r['transport']} "
                  f"({len(r['tools'])} tools)", markup=False)

    run_command(as_json, api.mcp_serve, human)


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to ``app``."""
    app.command("mcp")(mcp)
