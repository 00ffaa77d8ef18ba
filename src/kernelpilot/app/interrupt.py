"""Stopping a run cleanly on SIGINT (Ctrl-C) or SIGTERM.

:class:`GracefulStop` turns either signal into :class:`RunInterrupted`, raised in the main thread where the run is
(usually waiting for a worker's answer), so the campaign can mark the version in flight as interrupted, record what
the search spent and say how to resume. While records are being written or committed (:meth:`GracefulStop.held`)
the signal is only noted and raised when the block ends: a version's files and its git commit are never cut in
half by Ctrl-C. A second signal while the run is already stopping is ignored (the first one is being handled).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["HOLD_ENV", "GracefulStop", "RunInterrupted", "hold_point", "record_interruption", "signal_name"]

#: Environment variable naming a point where a run pauses (tests kill it there: ``final`` = after the search,
#: before the final report). Unset in normal use; ``KERNELPILOT_HOLD_S`` is how long the pause lasts (default 60 s).
HOLD_ENV = "KERNELPILOT_HOLD_AT"


def hold_point(name: str, log: Any = None) -> None:
    """Pause here for ``$KERNELPILOT_HOLD_S`` seconds when ``$KERNELPILOT_HOLD_AT`` names this point (``name``), so a
    test can send a signal or ``kill -9`` at a known place in a real run; a no-op otherwise. A signal during the
    pause is handled as anywhere else."""
    if os.environ.get(HOLD_ENV) != name:
        return
    if log is not None:
        log(f"holding at {name} ({HOLD_ENV})")
    time.sleep(float(os.environ.get("KERNELPILOT_HOLD_S", "60")))

#: The signals a run stops on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    """``SIGINT`` for 2, ``SIGTERM`` for 15, ``signal N`` for an unknown number."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class RunInterrupted(BaseException):
    """The run got SIGINT or SIGTERM (a BaseException, so no ``except Exception`` on the way swallows it).

    Args:
        signum: the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal_name(signum)}")
        self.signum = signum


class GracefulStop:
    """A context manager: while inside, SIGINT and SIGTERM raise :class:`RunInterrupted` (deferred while
    :meth:`held`). The previous handlers come back on exit. Off the main thread (where Python cannot install signal
    handlers) it does nothing.
    """

    def __init__(self) -> None:
        self.pending: int | None = None
        self.signum: int | None = None
        self._holds = 0
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signum is not None:  # already stopping: the first signal is being handled
            return
        if self._holds:
            self.pending = self.pending or signum
            return
        self.signum = signum
        raise RunInterrupted(signum)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A block that a signal does not cut: one arriving inside is raised when the block ends, also when the
        block ends by an exception (the signal is what happened; the exception is kept as its context)."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            if not self._holds and self.pending is not None and self.signum is None:
                self.signum, self.pending = self.pending, None
                raise RunInterrupted(self.signum)

    def received(self) -> int | None:
        """The stop signal this run got (raised or still pending), or None. A run that fails while it is stopping
        reports the signal, not the failure: ``timeout`` sends its signal to the whole process group, so the run's
        helpers (compilers, an Inductor capture) die with it, and a closed pipe is how the run learns of that
        (session 11: ``BrokenPipeError`` came out of an optimize that a SIGTERM had stopped)."""
        return self.signum if self.signum is not None else self.pending

    def check(self) -> None:
        """Raise a signal noted while held, if any (call at a safe point)."""
        if self.pending is not None and self.signum is None and not self._holds:
            self.signum, self.pending = self.pending, None
            raise RunInterrupted(self.signum)


def record_interruption(s: Any, signum: int) -> Exception:
    """Record the interruption of an ``optimize`` session ``s`` (a :class:`kernelpilot.app.session.Session`): the
    version in flight gets ``interrupted.json``, run.json says what was interrupted and what the search spent, both
    are committed; returns the :class:`~kernelpilot.errors.Interrupted` error to raise (its hint: how to resume)."""
    from kernelpilot.errors import Interrupted
    from kernelpilot.records.models import Interruption, now_utc
    from kernelpilot.records.workspace import write_json

    ws, info, ev = s.ws, s.info, s.evaluator
    sig = signal_name(signum)
    resume = f"kernelpilot optimize --resume {ws.root}"
    n_done = len(ev.versions) if ev is not None else len([p for p in s.prior if p.index is not None])
    where = f"during the {s.phase}" if s.phase != "search" else "between versions"
    flight = ws.root / f"v{n_done}"
    if s.phase == "search" and (flight / "config.json").is_file() and not (flight / "outcome.json").is_file():
        where = f"during v{n_done}"
        write_json(flight / "interrupted.json", Interruption(signal=sig, at_utc=now_utc(), resume=resume))
    info.interrupted = f"{sig} {where}"
    if ev is not None:
        info.search_spent_s = ev.budget.elapsed_s()
    write_json(ws.root / "run.json", info)
    if s.history is not None:
        pending = list(s.recorder.pending) if s.recorder is not None else []
        s.history.commit([ws.root / "run.json", *pending], f"run: interrupted by {sig} {where}")
    kept = f"v0–v{n_done - 1} are recorded and committed" if n_done else "no version was decided yet"
    message = f"interrupted by {sig} {where}: {kept} in {ws.root}"
    s.log(f"stopped: {message}; resume with `{resume}`")
    return Interrupted(message, f"resume with `{resume}`", signum)
