"""The typed API of ``kernelpilot session`` (one function per command; re-exported by :mod:`kernelpilot.api`).

Each function calls :mod:`kernelpilot.versions`; see docs/sessions.md for the loop, the frozen check, the outcome
rules and the exit codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kernelpilot.versions import SessionStatus, TryResult

__all__ = ["session_finish", "session_mask", "session_restart", "session_start", "session_status", "session_try",
           "session_unmask"]


def session_start(kernel: str | Path, *, out: str | Path, ref: str | Path | None = None,
                  shape: dict[str, Any] | None = None, gpu: str | None = None, kernel_type: str | None = None,
                  profile: bool = True, git: bool = True, timeout_s: float = 300.0,
                  experience_db: str | Path | None = None, no_experience: bool = False,
                  log: Callable[[str], None] = lambda _m: None) -> TryResult:
    """Start a session and evaluate v0 (:func:`kernelpilot.versions.session.start`; its errors)."""
    from kernelpilot.versions import start

    return start(kernel, out=out, ref=ref, shape=shape, gpu=gpu, kernel_type=kernel_type, profile=profile, git=git,
                 timeout_s=timeout_s, experience_db=experience_db, no_experience=no_experience, log=log)


def session_try(run: str | Path, kernel: str | Path, *, hypothesis: str, expect: list[str] | None = None,
                parent: str | None = None, profile: bool = True, timeout_s: float = 300.0,
                log: Callable[[str], None] = lambda _m: None) -> TryResult:
    """Evaluate the next version (:func:`kernelpilot.versions.session.try_version`; its errors)."""
    from kernelpilot.versions import try_version

    return try_version(run, kernel, hypothesis=hypothesis, expect=expect, parent=parent, profile=profile,
                       timeout_s=timeout_s, log=log)


def session_status(run: str | Path) -> SessionStatus:
    """The session's versions, incumbent and advice (:func:`kernelpilot.versions.manage.status`)."""
    from kernelpilot.versions import status

    return status(run)


def session_mask(run: str | Path, version: str, *, why: str) -> SessionStatus:
    """Mask one version (:func:`kernelpilot.versions.manage.mask`)."""
    from kernelpilot.versions import mask

    return mask(run, version, why=why)


def session_unmask(run: str | Path, version: str) -> SessionStatus:
    """Unmask one version (:func:`kernelpilot.versions.manage.unmask`)."""
    from kernelpilot.versions import unmask

    return unmask(run, version)


def session_restart(run: str | Path, *, from_version: str) -> SessionStatus:
    """Partial restart from a version (:func:`kernelpilot.versions.manage.restart`)."""
    from kernelpilot.versions import restart

    return restart(run, from_version=from_version)


def session_finish(run: str | Path, *, benchmark: bool = True,
                   log: Callable[[str], None] = lambda _m: None) -> SessionStatus:
    """The final report and the baselines (:func:`kernelpilot.versions.manage.finish`)."""
    from kernelpilot.versions import finish

    return finish(run, benchmark=benchmark, log=log)
