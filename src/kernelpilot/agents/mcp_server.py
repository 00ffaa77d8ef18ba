"""``kernelpilot mcp``: a Model Context Protocol server (the official ``mcp`` SDK, 2.x, stdio transport) whose tools
are the commands an agent needs (docs/agents.md, "MCP server").

Each tool calls the same :mod:`kernelpilot.api` function as its CLI command, with the same arguments (``--shape
N=64`` becomes ``shape={"N": 64}``), and returns as its one text content the JSON that command prints with
``--json`` (:func:`kernelpilot.cli.common.dump`, the CLI's own serializer). A result that says the kernel failed (a
check that did not pass, a version recorded as invalid) is a result, not an error: the CLI prints it too, then exits
1 or 3. A :class:`~kernelpilot.errors.KernelpilotError` becomes a tool error (``isError``) whose text is the
``{"error", "message", "hint"}`` object the CLI prints; any other exception becomes the same object with
``"error": "InternalError"`` (never a bare traceback); what the SDK refuses before a tool runs (an unknown tool,
arguments that do not fit the tool's schema) is an ``OptionError`` object.

Long tools (check, verify, bench, profile, session start/try/finish) send the API's ``log`` lines as MCP progress
notifications (``progress`` counts the lines; ``message`` is the line) to a client that gave a progress token.
Calls run one at a time, in a worker thread (the API blocks; the event loop keeps answering pings). While serving,
the SDK points fd 1 at stderr, so output of kernels and their workers never reaches the protocol's stream.

This module imports no ``kernelpilot.api``: :func:`build_server` is handed the API facade (``api.mcp_serve`` hands
itself), so the facade can start the server without an import cycle.
"""

# no ``from __future__ import annotations``: the SDK reads each tool's signature with ``eval_str``, and ``Context``
# is a name local to :func:`build_server` (the SDK is imported only when a server is built)
import json
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from kernelpilot.cli.common import dump
from kernelpilot.errors import KernelpilotError, MissingDependencyError, OptionError
from kernelpilot.progress import Phase

__all__ = ["TOOLS", "SERVER_NAME", "build_server", "error_object", "serve"]

SERVER_NAME = "kernelpilot"

#: The tools, in the order they are listed; each is the CLI command of the same name (``session_try`` is
#: ``kernelpilot session try``).
TOOLS = ("env", "roofline", "check", "verify", "bench", "profile", "inspect", "session_start", "session_try",
         "session_status", "session_mask", "session_finish", "experience_recommend", "report")


def error_object(exc: BaseException) -> dict[str, Any]:
    """The JSON error object of a failed call: a KernelpilotError's own :meth:`~kernelpilot.errors.KernelpilotError.
    to_dict` (what ``--json`` prints), else ``{"error": "InternalError", "message": "<type>: <text>", "hint"}``."""
    if isinstance(exc, KernelpilotError):
        return exc.to_dict()
    return {"error": "InternalError", "message": f"{type(exc).__name__}: {exc}",
            "hint": "a bug in kernelpilot, not in your kernel: report it with this message"}


def _sdk() -> tuple[Any, Any, Any, Any]:
    """(MCPServer, Context, CallToolResult, TextContent) from the ``mcp`` SDK.

    Raises:
        MissingDependencyError: the SDK (2.x) is not installed.
    """
    try:
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.types import CallToolResult, TextContent
    except ImportError as exc:
        raise MissingDependencyError(f"the MCP SDK (mcp>=2.3) cannot be imported: {exc}",
                                     "pip install 'kernelpilot[mcp]' (or pip install 'mcp>=2.3,<3')") from exc
    return MCPServer, Context, CallToolResult, TextContent


class _Caller:
    """Runs one API call per tool call: serialized by a lock, in a worker thread, with its ``log`` lines sent to
    the client as progress; returns the CLI's JSON text, or a ``CallToolResult`` with ``is_error`` whose one text
    content is the error object (returned, not raised: the SDK prefixes a raised ToolError's text with
    ``Error executing tool NAME:``, which would no longer be JSON)."""

    def __init__(self, result_type: Any, text_type: Any) -> None:
        self.result_type, self.text_type = result_type, text_type
        self.lock = anyio.Lock()
        self.calls = 0

    async def __call__(self, ctx: Any, fn: Callable[[Callable[[str], None]], Any]) -> Any:
        token = anyio.lowlevel.current_token()
        count = [0]
        count_lock = threading.Lock()

        def log(message: str) -> None:
            with count_lock:
                count[0] += 1
                n = count[0]
            try:
                anyio.from_thread.run(ctx.report_progress, float(n), None, str(message), token=token)
            except Exception:  # noqa: BLE001 - a lost progress line must never fail the call
                pass

        async with self.lock:
            self.calls += 1
            try:
                result = await anyio.to_thread.run_sync(fn, log)
            except Exception as exc:  # noqa: BLE001 - every failure becomes the typed error object
                return self.result_type(content=[self.text_type(type="text", text=json.dumps(error_object(exc)))],
                                        is_error=True)
        return dump(result)


def _p(path: Optional[str]) -> Optional[Path]:
    return None if path is None else Path(path)


def build_server(api: ModuleType) -> Any:
    """The MCP server with the tools of :data:`TOOLS`, each calling ``api`` (:mod:`kernelpilot.api`).

    Returns:
        ``mcp.server.mcpserver.MCPServer``; its ``kernelpilot_calls`` attribute is a callable giving the number of
        tool calls served so far.

    Raises:
        MissingDependencyError: the ``mcp`` SDK is missing.
    """
    MCPServer, Context, CallToolResult, TextContent = _sdk()
    import kernelpilot

    from mcp.server.mcpserver.exceptions import ToolError

    class _Server(MCPServer):
        """The SDK's server, with the failures the SDK itself finds before a tool runs (an unknown tool, arguments
        that do not fit its schema) answered as kernelpilot's typed ``OptionError`` object, like a bad option on
        the command line (exit 2 there)."""

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:  # our tools return their failures; what raises here is the SDK's refusal
                typed = error_object(exc if type(exc) is not ToolError else OptionError(
                    str(exc), f"the tools and their arguments: tools/list ({', '.join(TOOLS)})"))
                return CallToolResult(content=[TextContent(type="text", text=json.dumps(typed))], is_error=True)

    server = _Server(SERVER_NAME, version=kernelpilot.__version__, log_level="WARNING",
                       instructions="kernelpilot: check, time, profile and record GPU kernels against a PyTorch "
                                    "reference. Every tool returns the JSON of `kernelpilot <command> --json`.")
    call = _Caller(CallToolResult, TextContent)
    tool = lambda: server.tool(structured_output=False)  # noqa: E731 - the text content is the CLI's JSON

    @tool()
    async def env(ctx: Context, probe: bool = True) -> Any:
        """`kernelpilot env`: Python, torch, triton, CUDA, driver, GPU, ncu and whether it can read counters."""
        return await call(ctx, lambda log: api.env(probe_ncu=probe))

    @tool()
    async def roofline(ctx: Context, kernel: str, gpu: Optional[str] = None,
                       shape: Optional[dict[str, Any]] = None) -> Any:
        """`kernelpilot roofline`: FLOPs, bytes, intensity, ridge point, bound and target (GPU spec e.g. H100-SXM)."""
        return await call(ctx, lambda log: api.roofline(Path(kernel), gpu=gpu, shape=dict(shape or {})))

    @tool()
    async def check(ctx: Context, kernel: str, shape: Optional[dict[str, Any]] = None,
                    config: Optional[dict[str, Any]] = None, ref: Optional[str] = None, seeds: int = 3,
                    strict: bool = False, timeout_s: float = 300.0) -> Any:
        """`kernelpilot check`: correctness against a float64 reference on fresh seeds, in an isolated worker."""
        def run(log: Callable[[str], None]) -> Any:
            with Phase(log, "check", f"checking on {seeds} seeds"):
                return api.check(Path(kernel), shape=dict(shape or {}), config=dict(config or {}), ref=_p(ref),
                                 n_seeds=seeds, timeout_s=timeout_s, strict=strict)
        return await call(ctx, run)

    @tool()
    async def verify(ctx: Context, kernel: str, shape: Optional[dict[str, Any]] = None,
                     config: Optional[dict[str, Any]] = None, ref: Optional[str] = None, strict: bool = False,
                     timeout_s: float = 300.0) -> Any:
        """`kernelpilot verify`: one config through every defence; the stage that refused it, or accepted."""
        def run(log: Callable[[str], None]) -> Any:
            with Phase(log, "verify", "every defence on one config"):
                return api.verify(Path(kernel), shape=dict(shape or {}), config=dict(config or {}), ref=_p(ref),
                                  strict=strict, timeout_s=timeout_s)
        return await call(ctx, run)

    @tool()
    async def bench(ctx: Context, kernel: str, shape: Optional[dict[str, Any]] = None,
                    config: Optional[dict[str, Any]] = None, ref: Optional[str] = None, baselines: bool = False,
                    gpu: Optional[str] = None, fresh_baselines: bool = False, timeout_s: float = 300.0) -> Any:
        """`kernelpilot bench`: check, then time one config (median + IQR, % of the roofline)."""
        def run(log: Callable[[str], None]) -> Any:
            with Phase(log, "baselines" if baselines else "bench", "timing the kernel"
                       + (", PyTorch eager and torch.compile" if baselines else "")):
                return api.bench(Path(kernel), shape=dict(shape or {}), config=dict(config or {}), ref=_p(ref),
                                 baselines=baselines, gpu=gpu, timeout_s=timeout_s, fresh_baselines=fresh_baselines)
        return await call(ctx, run)

    @tool()
    async def profile(ctx: Context, kernel: Optional[str] = None, report: Optional[str] = None,
                      out: Optional[str] = None, shape: Optional[dict[str, Any]] = None,
                      config: Optional[dict[str, Any]] = None, ref: Optional[str] = None, light: bool = False,
                      timeout_s: float = 300.0) -> Any:
        """`kernelpilot profile`: the bottleneck card (ncu, a saved --report, or light: timing + roofline)."""
        def run(log: Callable[[str], None]) -> Any:
            def profile_it() -> Any:
                return api.profile(_p(kernel), report=_p(report), out=_p(out), shape=dict(shape or {}),
                                   config=dict(config or {}), ref=_p(ref), light=light, timeout_s=timeout_s)
            if report is not None:  # reading a saved report takes a moment: no progress (as the CLI)
                return profile_it()
            with Phase(log, "light card" if light else "ncu", "timing, roofline and compile metadata" if light
                       else "profiling the kernel (one ncu run)"):
                return profile_it()
        return await call(ctx, run)

    @tool()
    async def inspect(ctx: Context, kernel: str, config: Optional[dict[str, Any]] = None,
                      shape: Optional[dict[str, Any]] = None, arch: Optional[str] = None,
                      timeout_s: float = 300.0) -> Any:
        """`kernelpilot inspect`: compile one config for an arch (e.g. sm_90) without a GPU; registers, spills,
        shared memory, occupancy, instruction mix."""
        return await call(ctx, lambda log: api.inspect(Path(kernel), config=dict(config or {}),
                                                       shape=dict(shape or {}), arch=arch,
                                                       timeout_s=timeout_s))

    @tool()
    async def session_start(ctx: Context, kernel: str, out: str, ref: Optional[str] = None,
                            shape: Optional[dict[str, Any]] = None, gpu: Optional[str] = None,
                            kernel_type: Optional[str] = None, experience: Optional[str] = None,
                            no_experience: bool = False, git: bool = True, profile: bool = True,
                            timeout_s: float = 300.0) -> Any:
        """`kernelpilot session start`: freeze the check, write README.md and evaluate v0."""
        return await call(ctx, lambda log: api.session_start(
            Path(kernel), out=Path(out), ref=_p(ref), shape=dict(shape or {}), gpu=gpu, kernel_type=kernel_type,
            profile=profile, git=git, timeout_s=timeout_s, experience_db=_p(experience),
            no_experience=no_experience, log=log))

    @tool()
    async def session_try(ctx: Context, run: str, kernel: str, hypothesis: str,
                          expect: Optional[list[str]] = None, parent: Optional[str] = None,
                          profile: Optional[bool] = None, timeout_s: Optional[float] = None) -> Any:
        """`kernelpilot session try`: commit the hypothesis, then check, A/B-time, profile and classify a version
        (expect: METRIC:up|down, e.g. duration:down; profile / timeout_s: None keeps the session's, from start)."""
        return await call(ctx, lambda log: api.session_try(Path(run), Path(kernel), hypothesis=hypothesis,
                                                           expect=expect, parent=parent, profile=profile,
                                                           timeout_s=timeout_s, log=log))

    @tool()
    async def session_status(ctx: Context, run: str) -> Any:
        """`kernelpilot session status`: versions, incumbent, target, card and experience suggestions."""
        return await call(ctx, lambda log: api.session_status(Path(run)))

    @tool()
    async def session_mask(ctx: Context, run: str, version: str, why: str) -> Any:
        """`kernelpilot session mask`: keep a version (vN) but stop counting it (a commit)."""
        return await call(ctx, lambda log: api.session_mask(Path(run), version, why=why))

    @tool()
    async def session_finish(ctx: Context, run: str, benchmark: bool = True) -> Any:
        """`kernelpilot session finish`: final_report.md and benchmark.md (incumbent vs eager, torch.compile)."""
        return await call(ctx, lambda log: api.session_finish(Path(run), benchmark=benchmark, log=log))

    @tool()
    async def experience_recommend(ctx: Context, kernel_type: Optional[str] = None, backend: Optional[str] = None,
                                   arch: Optional[str] = None, bottleneck: Optional[str] = None, limit: int = 10,
                                   include_masked: bool = False, db: Optional[str] = None) -> Any:
        """`kernelpilot experience recommend`: past changes ranked by how often and how much they helped."""
        return await call(ctx, lambda log: api.experience_recommend(
            kernel_type=kernel_type, backend=backend, arch=arch, bottleneck=bottleneck, limit=limit,
            include_masked=include_masked, db=_p(db)))

    @tool()
    async def report(ctx: Context, run: str, all_versions: bool = False) -> Any:
        """`kernelpilot report`: re-read a run folder (validating every record) and rebuild final_report.md; the
        versions the final report lists, the rest counted in not_listed (all_versions: every one)."""
        return await call(ctx, lambda log: (lambda r: r if all_versions else r.listed())(api.report(Path(run))))

    server.kernelpilot_calls = lambda: call.calls
    return server


def serve(api: ModuleType) -> dict[str, Any]:
    """Serve :data:`TOOLS` over stdio until the client closes stdin; afterwards the process's fd 1 points at
    stderr (the client's pipe carries protocol messages only).

    Returns:
        ``{"server": "kernelpilot", "transport": "stdio", "tools": [names], "calls": tool calls served}``.

    Raises:
        MissingDependencyError: the ``mcp`` SDK is missing.
    """
    import os

    server = build_server(api)
    server.run("stdio")
    # stdout is the client's pipe, and the client may still read it: nothing but protocol messages goes there, so
    # after the session fd 1 stays on stderr (where the command's own summary line then lands)
    os.dup2(2, 1)
    return {"server": SERVER_NAME, "transport": "stdio", "tools": list(TOOLS), "calls": server.kernelpilot_calls()}
