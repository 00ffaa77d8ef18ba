"""What every ``kernelpilot`` command shares: the consoles, the common options, and :func:`run_command`, which calls
one :mod:`kernelpilot.api` function and prints its result.

Conventions (every command): ``--json`` prints one JSON object on stdout (progress goes to stderr); a
:class:`~kernelpilot.errors.KernelpilotError` exits 1 printing its message and hint (with ``--json``: the object
``{"error", "message", "hint"}``); a bad option (:class:`~kernelpilot.errors.OptionError`, bad ``--shape``/``--config``
syntax) exits 2; an interrupted run exits 128 + the signal's number.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Callable, Optional

import typer
from pydantic import BaseModel
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.table import Table

from kernelpilot.errors import Interrupted, KernelpilotError, OptionError

#: Columns of output that is not a terminal (a pipe, a file, CI) when ``$COLUMNS`` does not say: wide enough for
#: the tables, which wrap their cells rather than cut them.
PIPE_WIDTH = 120


class FitConsole(Console):
    """A Rich console as wide as the terminal it writes to; not writing to a terminal: ``$COLUMNS`` wide, else
    :data:`PIPE_WIDTH` (Rich alone would use 80 columns there, and tables would fold every cell). A width given to
    the console (``Console(width=...)``, ``console.width = ...``) wins; ``$COLUMNS`` is read when printing, not
    when the console is made."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if kwargs.get("width") is None:
            self._width = None  # Rich read $COLUMNS here, at import time; :attr:`size` reads it when printing

    @property
    def size(self) -> ConsoleDimensions:
        """The console's (width, height) in characters (see the class docstring)."""
        dims = Console.size.fget(self)  # type: ignore[attr-defined]
        if self._width is not None or (self.is_terminal and not self.is_dumb_terminal):
            return dims
        columns = os.environ.get("COLUMNS", "")
        return ConsoleDimensions(int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH, dims.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


#: Progress, errors and hints (stderr, so ``--json`` keeps stdout to one object).
err = FitConsole(stderr=True, soft_wrap=True)
#: Human output (stdout).
out = FitConsole(soft_wrap=True)

JsonOpt = typer.Option(False, "--json", help="Print one JSON object on stdout.")
QuietOpt = typer.Option(False, "--quiet", "-q", help="No progress on stderr (errors still print; stdout unchanged).")
ShapeOpt = typer.Option(None, "--shape", help="Override a shape value, e.g. --shape M=8192 (repeatable).")
ConfigOpt = typer.Option(None, "--config", help="Override a tunable, e.g. --config BLOCK_SIZE=1024 (repeatable).")
PtrSizeOpt = typer.Option(None, "--ptr-size", help="CUDA .cu files with synthesized inputs: elements of every "
                          "buffer (the same as --shape ptr_size=N; default by the seed rule, docs/cuda.md).")
RefOpt = typer.Option(None, "--ref", help="A file defining reference(**inputs), if not in the kernel file.")
TimeoutOpt = typer.Option(300.0, "--timeout-s", help="Seconds the kernel's worker process may take (importing the "
                          "file, then the command's work) before it is killed and the run fails as a timeout.")


def dump(obj: Any) -> str:
    """``obj`` as one line of JSON: a pydantic model by its aliases; anything else through :func:`json.dumps`, with
    nested models dumped by field name and other unknown objects (paths) as strings."""
    if isinstance(obj, BaseModel):
        return obj.model_dump_json(by_alias=True)
    return json.dumps(obj, default=lambda o: o.model_dump() if isinstance(o, BaseModel) else str(o))


def run_command(as_json: bool, fn: Callable[[], Any], human: Callable[[Any], None],
                ok: Callable[[Any], bool] = lambda r: True, progress: Any = None) -> None:
    """Call ``fn`` (one :mod:`kernelpilot.api` call); print its result as JSON (``as_json``) or through ``human``.

    ``progress``: the command's :class:`~kernelpilot.cli.progress.Reporter` (``fn`` hands it to the API as ``log``):
    its display lives while ``fn`` runs and is gone before the result prints.

    Raises:
        typer.Exit: the error's ``exit_code`` (1; 2 for a bad option; 128 + the signal for an interrupted run)
            when ``fn`` raised a KernelpilotError or was interrupted (printed by :func:`fail`), or code 1 when
            ``ok(result)`` is False (the result is printed first).
    """
    try:
        with progress if progress is not None else contextlib.nullcontext():
            result = fn()
    except KernelpilotError as exc:
        fail(as_json, exc)
    except KeyboardInterrupt:  # Ctrl-C outside a run that handles it itself (set-up, a check, a bench)
        fail(as_json, Interrupted("interrupted (Ctrl-C)", "nothing was recorded by this command; run it again"))
    if as_json:
        print(dump(result))
    else:
        human(result)
    if not ok(result):
        raise typer.Exit(1)


def fail(as_json: bool, exc: KernelpilotError) -> None:
    """Print ``exc`` (``error:``/``hint:`` lines on stderr, or its JSON object on stdout) and exit with its
    :attr:`~kernelpilot.errors.KernelpilotError.exit_code`.

    Raises:
        typer.Exit: always.
    """
    if as_json:
        print(json.dumps(exc.to_dict()))
    else:
        err.print(f"[bold red]error:[/] {escape(exc.message)}", markup=True, highlight=False)
        if exc.hint:
            err.print(f"[yellow]hint:[/] {escape(exc.hint)}", markup=True, highlight=False)
    raise typer.Exit(exc.exit_code)


def kv(items: Optional[list[str]], what: str, as_json: bool = False) -> dict[str, Any]:
    """Repeated ``NAME=VALUE`` options (``--shape``, ``--config``) as a dict, values parsed as Python literals.

    Raises:
        typer.Exit: code 2 (a usage error) when an item is not ``NAME=VALUE`` (printed by :func:`fail`).
    """
    from kernelpilot.kernels.contract import parse_assignments

    try:
        return parse_assignments(items, what)
    except KernelpilotError as exc:
        fail(as_json, OptionError(exc.message, exc.hint))
    return {}


def numbers(values: dict[str, Any], what: str, as_json: bool = False) -> dict[str, float]:
    """``values`` (from :func:`kv`) as floats.

    Raises:
        typer.Exit: code 2 (printed by :func:`fail`) when a value is not a number.
    """
    try:
        return {k: float(v) for k, v in values.items()}
    except (TypeError, ValueError):
        bad = next(f"{k}={v}" for k, v in values.items() if not isinstance(v, (int, float)))
        fail(as_json, OptionError(f"{what} {bad}: not a number", f"e.g. {what} torch.compile=184000"))
    return {}


def table(*headers: str, **options: Any) -> Table:
    """A Rich table for the CLI whose cells wrap to the console's width: words wrap, and a word longer than its
    column (a config key, a number) folds onto the next line — nothing is cut or ellipsized (``…``).

    Args:
        headers: the column headers. options: :class:`rich.table.Table`'s keywords (``title``, ``box`` ...).
    """
    t = Table(**options)
    for header in headers:
        t.add_column(header, overflow="fold")
    return t


def with_ptr_size(shape: dict[str, Any], ptr_size: Optional[int]) -> dict[str, Any]:
    """``shape`` with ``ptr_size`` set when ``--ptr-size`` was given (a ``.cu`` file's synthesized inputs)."""
    return {**shape, "ptr_size": ptr_size} if ptr_size is not None else shape
