"""Child processes that die with their parent and stay quiet when orphaned.

kernelpilot starts helper processes with ``multiprocessing``'s ``spawn``: the isolated workers that run kernel code
(:mod:`kernelpilot.search.worker`) and the compile pools of static pruning (:mod:`kernelpilot.profile.static`).
When the parent dies without stopping them (``kill -9``, an OOM kill, a crash), nothing in ``multiprocessing`` ends
them: a compile worker waits on its queue for ever (two of ~360 MB each stayed alive 14 minutes after a killed
``tune``), and a worker whose answer hits the closed pipe prints a ``BrokenPipeError`` traceback into the user's
terminal.

:func:`guard_child`, called first thing in such a child, makes it follow its parent:

* Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through ctypes) kills the child the moment the
  thread that started it ends; it is set only when that thread is the parent's main thread (a worker restarted
  from a pool thread would otherwise die with that thread);
* a watchdog thread checks every ``poll_s`` seconds whether the parent is still the parent (``os.getppid()``) and
  ends the child silently (``os._exit``) when it is not: every platform, every thread;
* writes to ``sys.stderr``/``sys.stdout`` are dropped once the parent is gone, so a traceback raised in the moment
  between the parent's death and the child's (a closed pipe, an EOF on a queue) never reaches the terminal;
* ``SIGINT`` (and for the isolated workers ``SIGTERM``) is ignored: Ctrl-C in a terminal reaches the whole process
  group, and the parent — which handles it and stops its children itself — must decide what happens to the version
  in flight, not a ``KeyboardInterrupt`` inside kernel code.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["ORPHAN_POLL_S", "guard_child", "parent_alive", "quiet_resource_tracker", "set_parent_death_signal"]

#: Seconds between two checks of the watchdog (a killed parent's children are gone within about this long).
ORPHAN_POLL_S = 0.25
#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1

_parent_pid: int | None = None


def parent_alive() -> bool:
    """True while the parent recorded by :func:`guard_child` is still this process's parent (True when none was
    recorded)."""
    return _parent_pid is None or os.getppid() == _parent_pid


def set_parent_death_signal(signum: int = signal.SIGKILL) -> bool:
    """Ask Linux to send ``signum`` to this process when the thread that created it ends. Returns False where
    ``prctl`` is not available (not Linux, no libc); raises nothing."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class _QuietWhenOrphaned:
    """A text stream that passes writes through while the parent lives and drops them once it is gone."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if not parent_alive():
            return len(text)
        try:
            return self._stream.write(text)
        except (BrokenPipeError, OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        if parent_alive():
            try:
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


#: The warning filter :func:`quiet_resource_tracker` adds (``-W`` syntax: action, message prefix, category).
_TRACKER_FILTER = "ignore:resource_tracker:UserWarning"


def quiet_resource_tracker() -> None:
    """Keep ``multiprocessing``'s resource tracker quiet after this process is killed.

    The tracker is a helper process ``spawn`` starts once per parent; when the parent dies without cleaning up (a
    ``kill -9`` during compile-ahead) it removes the pool's semaphores and prints "There appear to be 5 leaked
    semaphore objects" into the user's terminal. It is started with this process's ``-W`` options
    (``sys.warnoptions``), so adding one filter here before the first process is spawned silences that warning
    there (and nothing else). Idempotent; raises nothing."""
    if _TRACKER_FILTER not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_FILTER)


def _watch(poll_s: float) -> None:
    while True:
        time.sleep(poll_s)
        if not parent_alive():
            os._exit(0)  # silently: the parent that wanted the answer is gone


def guard_child(parent_pid: int, *, main_thread_parent: bool = True, ignore_sigterm: bool = False,
                poll_s: float = ORPHAN_POLL_S) -> None:
    """Make this (child) process follow ``parent_pid`` (see the module docstring). Exits at once, silently, when the
    parent is already gone. Call it first thing in the child; raises nothing.

    Args:
        parent_pid: the pid of the process that started this one (``os.getpid()`` there, passed down).
        main_thread_parent: the parent started this process from its main thread (then the parent-death signal is
            safe to set: the main thread lives as long as the process).
        ignore_sigterm: ignore SIGTERM too (isolated workers: the parent kills them with SIGKILL itself).
        poll_s: seconds between the watchdog's checks.
    """
    global _parent_pid
    _parent_pid = parent_pid
    if main_thread_parent:
        set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent_pid:  # died before the signal was armed
        os._exit(0)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if ignore_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except ValueError:  # not the main thread of the child: keep the default handlers
        pass
    sys.stderr = _QuietWhenOrphaned(sys.stderr)  # type: ignore[assignment]
    sys.stdout = _QuietWhenOrphaned(sys.stdout)  # type: ignore[assignment]
    threading.Thread(target=_watch, args=(poll_s,), name="kp-orphan-watchdog", daemon=True).start()
