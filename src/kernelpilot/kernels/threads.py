"""Work a kernel file leaves running in another thread: waited for inside the launch, or refused when it never ends.

A timer brackets ``run_kernel``: a kernel file that hands its work to a thread and returns at once is timed for the
hand-over alone, and on a GPU the thread's launches land after the end event (the background-thread trick of the
integrity table: DeepReinforce's thread injection; SOL-ExecBench counts threads before and after). The static
screen only flags ``threading`` imports, and a thread pool from any library starts threads without one.

Two rules, on what the threads run (their code, not a declaration):

* **Inside a launch** (:func:`settle`, called by :func:`kernelpilot.kernels.contract.run_kernel` after the
  backend's launch): while another thread is executing code of the kernel's own files, or is a thread whose target
  is such code and has not ended, the launch has not returned; it waits for them (polling), up to
  :data:`SETTLE_S`. Their work then lies inside the timed launch, and the check sees its results, as if it had run
  in ``run_kernel`` itself. Cost when the process has no thread besides the ones that were there before: one
  ``threading.active_count()`` per launch.
* **Between stages** (:func:`running`, called with the timer guard after the import and after every stage): a
  thread of the kernel file's code still alive there (a worker started at import that waits for a signal from
  ``run_kernel``), or any thread the file's code started (``Thread.start`` is wrapped before the import and
  attributes each thread to the first caller outside the standard library: a ``ThreadPoolExecutor`` the file
  submits to is the file's), is the failure ``timer_tampered``: work queued to it is not timed, and no wait
  inside a launch can tell when a queue is done. A pool the file shuts down before ``run_kernel`` returns is
  gone by then.

Threads that run library code only (Triton's or Inductor's compile pools, an idle executor) are left alone.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any

__all__ = ["ENDING_S", "SETTLE_S", "add_paths", "install", "running", "settle"]

#: Seconds a launch waits for the kernel file's threads before it gives up and raises.
SETTLE_S = 30.0
#: Seconds, all threads together, that :func:`running` gives the kernel's threads whose work is done to end before
#: it names them: such a thread (its ``run`` returned, so ``Thread.run`` dropped its target) is alive until the
#: interpreter has torn it down, which on a loaded host can come after the next stage begins (seen on a 2-core CI
#: machine running two test suites: the adversarial suite's ``thread_per_launch`` case refused as
#: ``timer_tampered``). A thread that still holds its target (still working, or an idle pool's worker) gets no
#: grace. Threads without a target (a subclass's own ``run``) get it too: they are named once it is spent.
ENDING_S = 1.0

_PATHS: frozenset[str] = frozenset()
_QUIET = 0  # threads alive when install() ran: fewer or as many, and nothing can be the kernel's
_REAL: dict[str, str] = {}
_MADE: weakref.WeakSet[threading.Thread] = weakref.WeakSet()  # threads the kernel's code started
#: Where the standard library lives (site-packages under it is not the standard library).
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"])


def install(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Remember the kernel's own files (the kernel file and the reference file; :func:`add_paths` adds the
    companions once they are known) and the number of threads alive now (kernelpilot's own), and attribute every
    thread started from now on (:func:`_started`). The worker calls it before it imports the kernel file. Raises
    nothing."""
    global _PATHS, _QUIET
    _PATHS = frozenset(os.path.realpath(p) for p in paths)
    _QUIET = threading.active_count()
    if not getattr(threading.Thread.start, "_kp_attributes", False):
        threading.Thread.start = _attributing(threading.Thread.start)  # type: ignore[method-assign]


def add_paths(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Add files of the kernel (a ``.cu`` file's sidecar, ``ref.py``) to those :func:`install` named."""
    global _PATHS
    _PATHS = _PATHS | {os.path.realpath(p) for p in paths}


def _library(filename: str) -> bool:
    """True for a file of the standard library (threading, concurrent.futures, queue ...), not site-packages."""
    real = os.path.realpath(filename)
    return real.startswith(_STDLIB + os.sep) and "-packages" + os.sep not in real


def _attributing(start: Any) -> Any:
    """``Thread.start`` that remembers a thread whose start the kernel's code asked for: the first caller outside
    the standard library (a pool's ``submit`` starts its threads for whoever called it) is a file of the kernel.
    Triton's or Inductor's own pools are started by their code and are not the kernel's."""
    def started(self: threading.Thread) -> None:
        f = sys._getframe(1)
        while f is not None and _library(f.f_code.co_filename):
            f = f.f_back
        if f is not None and _mine(f.f_code.co_filename):
            _MADE.add(self)
        start(self)

    started._kp_attributes = True  # type: ignore[attr-defined]
    started.__doc__ = start.__doc__
    return started


def _mine(filename: str) -> bool:
    real = _REAL.get(filename)
    if real is None:
        real = _REAL[filename] = os.path.realpath(filename) if not filename.startswith("<") else filename
    return real in _PATHS


def _busy() -> list[str]:
    """One line per other thread that executes the kernel's code now, or whose target is that code and that has
    not ended."""
    me = threading.get_ident()
    out: dict[int, str] = {}
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        f = frame
        while ident != me and f is not None:
            if _mine(f.f_code.co_filename):
                out[ident] = (f"thread {names.get(ident, ident)!r} runs {f.f_code.co_name} at "
                              f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}")
                break
            f = f.f_back
    for t in threading.enumerate():
        if t.ident == me or t.ident in out or not t.is_alive():
            continue
        for fn in (getattr(t, "_target", None), getattr(t, "function", None),
                   type(t).run if type(t).run is not threading.Thread.run else None):
            code = getattr(fn, "__code__", None)
            if code is not None and _mine(code.co_filename):
                out[t.ident or 0] = f"thread {t.name!r} started for {code.co_name} of {os.path.basename(code.co_filename)}"
                break
    return list(out.values())


def settle(timeout_s: float = SETTLE_S) -> None:
    """Wait, inside a launch, for the kernel file's threads to finish (see the module docstring). Nothing installed,
    or no thread beyond those alive at :func:`install`: returns at once.

    Raises:
        RuntimeError: a thread of the kernel's code is still busy after ``timeout_s`` (the launch's failure, as
            any exception ``run_kernel`` raises).
    """
    if not _PATHS or threading.active_count() <= _QUIET:
        return
    deadline = time.monotonic() + timeout_s
    busy = _busy()
    while busy:
        if time.monotonic() > deadline:
            raise RuntimeError(f"run_kernel returned while work of the kernel file still ran in another thread after "
                               f"{timeout_s:.0f} s ({'; '.join(busy[:3])}): finish the work before run_kernel returns")
        time.sleep(0.0001)
        busy = _busy()


def running() -> list[str]:
    """The kernel file's threads alive between stages (see the module docstring): those executing its code or
    started for it, and every thread its code started (a pool's, idle or not), a thread whose work is done once
    :data:`ENDING_S` has not seen it end; empty when none or nothing is installed. Raises nothing."""
    if not _PATHS:
        return []
    busy = _busy()
    named = {line.split("'")[1] for line in busy if "'" in line}
    deadline = time.monotonic() + ENDING_S
    left = []
    for t in list(_MADE):
        if t.is_alive() and t.name not in named:
            if getattr(t, "_target", None) is None:  # its run() returned (Thread.run drops the target): ending
                t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                left.append(f"thread {t.name!r} was started by the kernel file's code")
    return busy + left
