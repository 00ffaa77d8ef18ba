"""The typed API of ``kernelpilot session`` (one function per command; re-exported by :mod:`kernelpilot.api`).

Each function calls :mod:`kernelpilot.versions`; see docs/sessions.md for the loop, the frozen check, the outcome
rules and the exit codes.

The commands that go on from what the folder records — ``try`` (its parent and incumbent), ``mask``/``unmask`` and
``restart`` (the incumbent re-derived from every ``memory.json``) and ``finish`` — first validate the folder
(:func:`kernelpilot.app.validate.validate_session`: schemas, medians, every file against git and its seal) and
refuse with a :class:`~kernelpilot.errors.RecordError` naming each file that differs, instead of committing a
decision drawn from a forged record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kernelpilot.options import SessionOptions
from kernelpilot.versions import SessionStatus, TryResult

__all__ = ["check_session_records", "session_finish", "session_mask", "session_restart", "session_start", "session_status", "session_try",
           "session_unmask"]


def check_session_records(run: str | Path, command: str) -> None:
    """Refuse to go on from a session folder whose records differ from their committed or sealed form.

    Args:
        run: the session folder. command: the command refused (``mask``), for the message.

    Raises:
        RunFolderError: not a session folder. RecordError: every problem of
            :func:`kernelpilot.app.validate.validate_session`, each with its file and fix (``problems``).
    """
    from kernelpilot.app.validate import validate_session
    from kernelpilot.errors import RecordError

    found = validate_session(Path(run))
    if not found.problems:
        return
    listed = "\n".join(f"  {p.file}: {p.problem}" for p in found.problems[:12])
    more = f"\n  … and {len(found.problems) - 12} more" if len(found.problems) > 12 else ""
    raise RecordError(f"session {command} refused: {len(found.problems)} record(s) of {run} differ from what was "
                      f"committed and sealed:\n{listed}{more}", f"{found.problems[0].file}: {found.problems[0].fix}",
                      [p.model_dump() for p in found.problems])


def session_start(kernel: str | Path, options: SessionOptions | None = None, *, out: str | Path,
                  log: Callable[[str], None] = lambda _m: None, **keywords: Any) -> TryResult:
    """Start a session and evaluate v0 (:func:`kernelpilot.versions.session.start`; its errors).

    Args:
        kernel: v0's kernel file. out: the session folder (new or empty).
        options: the session's :class:`kernelpilot.options.SessionOptions` (``ref``, ``shape``, ``gpu``,
            ``kernel_type``, ``profile``, ``git``, ``timeout_s`` (seconds), ``experience_db``, ``no_experience``),
            stored in ``session.json`` and read back by every later command. keywords: instead, its fields as
            keywords (a None value means "not given"); the two together are an error.
        log: called with one line per step.

    Raises:
        OptionError: options and keywords both given; an unknown option, a value of the wrong type or out of range.
    """
    from kernelpilot.errors import OptionError
    from kernelpilot.options import build_options
    from kernelpilot.versions import start

    if options is not None and keywords:
        raise OptionError(f"api.session_start got options and keywords ({', '.join(sorted(keywords))})",
                          "give one SessionOptions, or the options as keywords")
    if options is None:
        options = build_options(SessionOptions, **keywords)
    return start(kernel, options, out=out, log=log)


def session_try(run: str | Path, kernel: str | Path, *, hypothesis: str, expect: list[str] | None = None,
                parent: str | None = None, profile: bool | None = None, timeout_s: float | None = None,
                log: Callable[[str], None] = lambda _m: None) -> TryResult:
    """Evaluate the next version (:func:`kernelpilot.versions.session.try_version`; its errors; RecordError from
    :func:`check_session_records`). ``profile`` / ``timeout_s`` (s): None: the session's stored options."""
    from kernelpilot.versions import try_version

    check_session_records(run, "try")
    return try_version(run, kernel, hypothesis=hypothesis, expect=expect, parent=parent, profile=profile,
                       timeout_s=timeout_s, log=log)


def session_status(run: str | Path) -> SessionStatus:
    """The session's versions, incumbent and advice (:func:`kernelpilot.versions.manage.status`)."""
    from kernelpilot.versions import status

    return status(run)


def session_mask(run: str | Path, version: str, *, why: str) -> SessionStatus:
    """Mask one version (:func:`kernelpilot.versions.manage.mask`).

    Raises:
        RecordError: a record of the session differs from its committed or sealed form (:func:`check_session_records`:
            the incumbent would be re-derived from it). OptionError / RunFolderError: as ``mask``.
    """
    from kernelpilot.versions import mask

    check_session_records(run, "mask")
    return mask(run, version, why=why)


def session_unmask(run: str | Path, version: str) -> SessionStatus:
    """Unmask one version (:func:`kernelpilot.versions.manage.unmask`; RecordError as :func:`session_mask`)."""
    from kernelpilot.versions import unmask

    check_session_records(run, "unmask")
    return unmask(run, version)


def session_restart(run: str | Path, *, from_version: str) -> SessionStatus:
    """Partial restart from a version (:func:`kernelpilot.versions.manage.restart`; RecordError as
    :func:`session_mask`)."""
    from kernelpilot.versions import restart

    check_session_records(run, "restart")
    return restart(run, from_version=from_version)


def session_finish(run: str | Path, *, benchmark: bool = True,
                   log: Callable[[str], None] = lambda _m: None) -> SessionStatus:
    """The final report and the baselines (:func:`kernelpilot.versions.manage.finish`; RecordError as
    :func:`session_mask`)."""
    from kernelpilot.versions import finish

    check_session_records(run, "finish")
    return finish(run, benchmark=benchmark, log=log)
