"""The process a compile for a target runs in: Triton compiles only where it was not imported under its interpreter
(``TRITON_INTERPRET``), so static inspection decides here whether this process can compile and starts child
processes that can (the variable removed before Triton loads there). Back ends that compile nothing with Triton are
unaffected by it; the rules are Triton's (``triton.knobs`` reads ``TRITON_INTERPRET`` as ``env_bool``).
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["compile_mode_unavailable", "compile_worker_init", "interpreter_env_on"]


def interpreter_env_on() -> bool:
    """True when ``TRITON_INTERPRET`` is set to a true value (as Triton's ``env_bool`` reads it)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on", "yes", "y")


def compile_mode_unavailable() -> bool:
    """True when this process's Triton was imported under the interpreter (its ``tl`` helpers are not JITFunctions)
    or ``TRITON_INTERPRET`` is set now; compiling here would then fail or mislead."""
    if interpreter_env_on():
        return True
    std = sys.modules.get("triton.language.standard")
    if std is None:
        return False
    return type(getattr(std, "cdiv", None)).__name__ != "JITFunction"


def compile_worker_init(parent_pid: int | None = None) -> None:
    """Child-process initializer: compile mode for Triton (``TRITON_INTERPRET`` removed before Triton loads); with
    ``parent_pid``, the process follows its parent (:func:`kernelpilot.procguard.guard_child`: it dies with it and
    prints nothing once orphaned; Ctrl-C is left to the parent)."""
    if parent_pid is not None:
        from kernelpilot.procguard import guard_child

        guard_child(parent_pid)
    os.environ.pop("TRITON_INTERPRET", None)
    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
