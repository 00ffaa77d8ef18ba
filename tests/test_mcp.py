"""``kernelpilot mcp`` (issue 27, "Agents in"): the SDK's own stdio client starts ``python -m kernelpilot.cli mcp``
as a subprocess, lists the tools and calls them on the bundled examples under the interpreter; each result is the
JSON the same command prints with ``--json``, long calls report progress, and a failure is an ``isError`` result
whose text is the CLI's ``{"error", "message", "hint"}`` object.

One MCP session (module fixture) makes every call; the tests read what it got back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLES, ROOT

pytest.importorskip("mcp.client.stdio", reason="the MCP SDK (pip install 'kernelpilot[mcp]')")

from kernelpilot.agents.mcp_server import TOOLS  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}  # TRITON_INTERPRET=1 and the temp experience log (conftest)
MATMUL, VECTOR_ADD = EXAMPLES / "matmul.py", EXAMPLES / "vector_add.py"


def _cli(*args: str) -> tuple[int, Any]:
    """``kernelpilot ARGS --json`` in a subprocess: (exit code, the JSON object on stdout)."""
    proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", *args, "--json"], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=ENV)
    return proc.returncode, json.loads(proc.stdout)


async def _session(folder: Path) -> dict[str, Any]:
    from mcp import StdioServerParameters
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    got: dict[str, Any] = {}
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelpilot.cli", "mcp"], env=ENV, cwd=ROOT)
    v1 = folder / "vector_add_v1.py"
    v1.write_text(VECTOR_ADD.read_text().replace('DEFAULT_CONFIG = {"BLOCK_SIZE": 128',
                                                 'DEFAULT_CONFIG = {"BLOCK_SIZE": 256'))
    with open(folder / "server.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                got["tools"] = {t.name: t for t in (await session.list_tools()).tools}

                async def call(key: str, name: str, arguments: dict[str, Any]) -> None:
                    progress: list[tuple[float, Any, Any]] = []

                    async def on_progress(value: float, total: Any, message: Any) -> None:
                        progress.append((value, total, message))

                    res = await session.call_tool(name, arguments, progress_callback=on_progress)
                    assert len(res.content) == 1 and res.content[0].type == "text"
                    got[key] = {"is_error": bool(res.is_error), "json": json.loads(res.content[0].text),
                                "progress": progress}

                await call("env", "env", {"probe": False})
                await call("roofline", "roofline", {"kernel": str(MATMUL), "gpu": "H100-SXM"})
                await call("check", "check", {"kernel": str(VECTOR_ADD), "seeds": 2})
                await call("bench", "bench", {"kernel": str(VECTOR_ADD)})
                await call("missing", "check", {"kernel": str(folder / "no_such_kernel.py")})
                await call("bad_gpu", "roofline", {"kernel": str(MATMUL), "gpu": "NO-SUCH-GPU"})
                await call("no_kernel", "check", {"seeds": 2})
                await call("bad_seeds", "check", {"kernel": str(VECTOR_ADD), "seeds": "many"})
                await call("no_tool", "optimise", {"kernel": str(VECTOR_ADD)})
                run = folder / "run"
                await call("start", "session_start", {"kernel": str(VECTOR_ADD), "out": str(run), "profile": False,
                                                      "no_experience": True})
                await call("try", "session_try", {"run": str(run), "kernel": str(v1), "profile": False,
                                                  "hypothesis": "twice the block: fewer programs to launch"})
                await call("status", "session_status", {"run": str(run)})
    got["stderr"] = (folder / "server.stderr").read_text()
    return got


@pytest.fixture(scope="module")
def mcp_session(tmp_path_factory) -> dict[str, Any]:
    import anyio

    return anyio.run(_session, tmp_path_factory.mktemp("mcp"))


def test_every_tool_is_listed_with_its_arguments(mcp_session):
    tools = mcp_session["tools"]
    assert set(TOOLS) <= set(tools), set(TOOLS) - set(tools)
    assert {"env", "roofline", "check", "verify", "bench", "profile", "inspect", "session_start", "session_try",
            "session_status", "session_mask", "session_finish", "experience_recommend", "report"} <= set(tools)
    check = tools["check"].input_schema
    assert check["required"] == ["kernel"] and {"shape", "config", "ref", "seeds"} <= set(check["properties"])
    assert tools["session_try"].input_schema["required"] == ["run", "kernel", "hypothesis"]


def test_roofline_is_the_json_of_the_cli(mcp_session):
    res = mcp_session["roofline"]
    assert not res["is_error"]
    code, cli = _cli("roofline", str(MATMUL), "--gpu", "H100-SXM")
    assert code == 0 and res["json"] == cli
    assert res["json"]["shape"]["M"] == 4096 and res["json"]["workload"]["flops"] == 2 * 4096 ** 3


def test_check_is_the_json_of_the_cli_and_reports_progress(mcp_session):
    res = mcp_session["check"]
    assert not res["is_error"] and res["json"]["passed"] is True and "on 2 seeds" in res["json"]["summary"]
    code, cli = _cli("check", str(VECTOR_ADD), "--seeds", "2")
    # the derived shapes are drawn fresh on every run (unseen sizes); the rest of the object is the CLI's, and so
    # is every check on the main shape
    assert code == 0 and set(res["json"]) == set(cli)
    assert {k: v for k, v in res["json"].items() if k not in ("seeds", "shapes_checked", "summary")} == \
        {k: v for k, v in cli.items() if k not in ("seeds", "shapes_checked", "summary")}
    main = [s for s in res["json"]["seeds"] if s["shape"] == res["json"]["shape"]]
    assert len(main) == 2 and main == [s for s in cli["seeds"] if s["shape"] == cli["shape"]]
    values = [p[0] for p in res["progress"]]
    assert values == sorted(values) and len(values) >= 2 and values[0] > 0  # increasing, as MCP requires
    assert res["progress"][0][2].startswith("check:") and "done in" in res["progress"][-1][2]


def test_env_is_the_json_of_the_cli(mcp_session):
    res = mcp_session["env"]
    code, cli = _cli("env", "--no-probe")
    assert code == 0 and not res["is_error"]
    assert set(res["json"]) == set(cli) and res["json"]["mode"] == cli["mode"] == "interpreter"
    assert {k: v for k, v in res["json"].items() if k != "date_utc"} == {k: v for k, v in cli.items()
                                                                         if k != "date_utc"}


def test_bench_times_under_the_interpreter_with_progress(mcp_session):
    res = mcp_session["bench"]
    assert not res["is_error"] and res["json"]["timing"]["is_measurement"] is False
    assert res["json"]["config"] == {"BLOCK_SIZE": 128, "num_warps": 4}
    assert [p[2].split(":")[0] for p in res["progress"]] == ["bench", "bench"]


def test_a_failure_is_a_tool_error_holding_the_cli_error_object(mcp_session, tmp_path):
    for key, args in (("missing", ("check", str(tmp_path / "no_such_kernel.py"))),
                      ("bad_gpu", ("roofline", str(MATMUL), "--gpu", "NO-SUCH-GPU"))):
        res = mcp_session[key]
        assert res["is_error"] and set(res["json"]) == {"error", "message", "hint"}, res
        code, cli = _cli(*args)
        assert code == 1 and res["json"]["error"] == cli["error"] and res["json"]["hint"] == cli["hint"]
    assert mcp_session["missing"]["json"]["error"] == "ContractError"
    # what the SDK refuses before kernelpilot runs is typed too: a bad option, as on the command line
    for key, word in (("no_kernel", "kernel"), ("bad_seeds", "seeds"), ("no_tool", "optimise")):
        res = mcp_session[key]
        assert res["is_error"] and res["json"]["error"] == "OptionError" and word in res["json"]["message"], res
        assert "tools/list" in res["json"]["hint"]
    assert "no_such_kernel.py" in mcp_session["missing"]["json"]["message"]


def test_session_start_and_try_record_versions_through_mcp(mcp_session):
    start, tried, status = mcp_session["start"], mcp_session["try"], mcp_session["status"]
    assert not start["is_error"] and start["json"]["memory"]["version"] == 0
    assert not tried["is_error"] and tried["json"]["memory"]["version"] == 1, tried
    assert tried["json"]["memory"]["outcome"] != "invalid"
    assert tried["progress"] and all(isinstance(p[2], str) and p[2] for p in tried["progress"])
    assert [v["version"] for v in status["json"]["versions"]] == [0, 1]


def test_the_protocol_stream_carries_only_protocol_messages(mcp_session):
    # the summary the command prints when the client has gone lands on stderr, never on the client's pipe
    assert "kernelpilot mcp: served 9 tool calls" in mcp_session["stderr"]
