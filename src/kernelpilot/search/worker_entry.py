"""The entry point of an isolated worker process: :func:`kernelpilot.search.worker_child._child_main` behind
:func:`kernelpilot.procguard.guard_child`, so the worker dies with the process that started it and an orphaned
worker prints nothing (a killed ``optimize`` left workers printing ``BrokenPipeError`` tracebacks).
"""

from __future__ import annotations

import os
from typing import Any

from kernelpilot.procguard import guard_child, parent_alive
from kernelpilot.search.worker_child import _child_main

__all__ = ["guarded_child_main"]


def guarded_child_main(conn: Any, opts_json: str, device: str, parent_pid: int, main_thread_parent: bool) -> None:
    """Guard this process (:func:`~kernelpilot.procguard.guard_child`: parent-death signal when started from the
    parent's main thread, watchdog, SIGINT/SIGTERM ignored, quiet once orphaned), then serve requests until told to
    stop. Whatever escapes the request loop after the parent is gone (a closed pipe) ends the process silently."""
    guard_child(parent_pid, main_thread_parent=main_thread_parent, ignore_sigterm=True)
    try:
        _child_main(conn, opts_json, device)
    except BaseException:  # noqa: BLE001 - only a gone parent silences it; anything else is raised as before
        if parent_alive():
            raise
        os._exit(0)
