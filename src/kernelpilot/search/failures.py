"""Failures of kernel code in a worker process, as data: classified, described in the child, raised in the parent.

The child side (:func:`describe_exception`) turns anything the kernel file raises — also ``SystemExit`` and
``KeyboardInterrupt``, which are not ``Exception`` — into a picklable dict; the parent side
(:func:`raise_described`) turns that dict back into a :class:`~kernelpilot.errors.KernelpilotError`: the same class
for kernelpilot's own errors (a contract error stays a :class:`~kernelpilot.errors.ContractError` with its hint),
else a :class:`~kernelpilot.errors.KernelFailed` with the typed failure (:data:`kernelpilot.search.model.Status`).
:func:`exit_text` names a dead process's exit code or signal.
"""

from __future__ import annotations

import os
import signal
import traceback
from typing import Any

from kernelpilot.search.model import Status

__all__ = ["POISONING_MARKERS", "classify_exception", "describe_exception", "exit_text", "raise_described"]

#: Substrings of CUDA error messages after which the CUDA context is unusable (CUDA Runtime API,
#: cudaErrorIllegalAddress / cudaErrorMisalignedAddress / cudaErrorLaunchFailure / cudaErrorIllegalInstruction
#: / cudaErrorHardwareStackError): the worker that saw one is replaced.
POISONING_MARKERS: tuple[str, ...] = (
    "illegal memory access", "an illegal memory access", "misaligned address", "unspecified launch failure",
    "illegal instruction", "hardware stack error", "cudaerrorillegaladdress", "cuda_error_illegal_address",
    "device-side assert",
)
#: Exception class names (and message fragments) that mean the config did not compile or cannot launch.
_COMPILE_TYPES = ("CompilationError", "OutOfResources", "CompileTimeAssertionFailure", "PTXASError",
                  "MLIRCompilationError", "UnsupportedLanguageConstruct", "CompileError")


def classify_exception(exc: BaseException) -> Status:
    """The failure status of an exception raised while compiling or running a config.

    Returns ``illegal_memory_access`` for CUDA errors that poison the context (:data:`POISONING_MARKERS`),
    ``compile_error`` for Triton compile/resource errors and ``ValueError`` (``run_kernel`` refusing a config,
    the kernel-file contract's way to say "this config cannot run"), else ``runtime_error``.

    Under the Triton interpreter nothing is compiled: a config that would not compile fails at launch with an
    ``InterpreterError`` wrapping the front end's own error (raised in ``triton/language``: a ``tl.arange`` range
    that is not a power of two, incompatible shapes) or a failed ``tl.static_assert`` (a bare ``AssertionError``
    raised by the interpreter's ``_new_static_assert``). Compiled for a GPU the same fault is a
    ``CompilationError``, so these are ``compile_error`` too; faults of the interpreted program itself (a
    failed ``tl.assume``, numpy errors) stay ``runtime_error``. Raises nothing.
    """
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(marker in text for marker in POISONING_MARKERS):
        return "illegal_memory_access"
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "KernelNotLaunched" in names:  # a KernelBench solution whose own kernels did not run (kernels.kernelbench)
        return "kernel_not_launched"
    if names & set(_COMPILE_TYPES) or isinstance(exc, ValueError) or "out of resource" in text:
        return "compile_error"
    if "InterpreterError" in names and exc.__cause__ is not None:
        try:
            frames = traceback.extract_tb(exc.__cause__.__traceback__)
        except Exception:  # noqa: BLE001 - an unreadable traceback: not a front-end fault we can name
            frames = []
        if frames and ("/triton/language/" in frames[-1].filename.replace(os.sep, "/")
                       or frames[-1].name == "_new_static_assert"):
            return "compile_error"
    return "runtime_error"


def exit_text(exitcode: int | None) -> str:
    """How a process ended, from :attr:`multiprocessing.Process.exitcode`: ``"exit code 3"``, ``"exit code -11:
    killed by signal SIGSEGV (11)"`` (a negative exit code is the signal number), or ``"exit code unknown"``.
    Raises nothing."""
    if exitcode is None:
        return "exit code unknown"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "signal"
        return f"exit code {exitcode}: killed by signal {name} ({-exitcode})"
    return f"exit code {exitcode}"


def _exit_code(exc: SystemExit) -> int:
    """The process exit code ``sys.exit(arg)`` asks for (Python's rule: None -> 0, an int as is, else 1)."""
    return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1


def describe_exception(exc: BaseException, where: str) -> dict[str, Any]:
    """A picklable description of ``exc``, raised by kernel code in a worker while ``where`` (e.g. "importing the
    kernel file", "run_kernel/check"); the parent raises it again with :func:`raise_described`.

    Returns:
        ``{"error": class name, "message", "hint", "failure": Status or "kernelpilot"}``: ``SystemExit`` is a
        ``worker_crash`` ("exited with code N": the worker caught the exit the kernel asked for),
        ``KeyboardInterrupt`` a ``runtime_error``, a :class:`~kernelpilot.errors.KernelpilotError` keeps its class
        name, message and hint (failure ``"kernelpilot"``, or a KernelFailed's own), anything else goes through
        :func:`classify_exception`. Raises nothing.
    """
    from kernelpilot.errors import KernelpilotError

    if isinstance(exc, SystemExit):
        return {"error": "SystemExit", "failure": "worker_crash",
                "message": f"the kernel code called sys.exit({exc.code!r}) while {where}: the process would have "
                           f"exited with code {_exit_code(exc)}",
                "hint": "a kernel file must not exit the process: raise an exception instead of calling sys.exit"}
    if isinstance(exc, KernelpilotError):
        return {"error": type(exc).__name__, "failure": getattr(exc, "failure", "kernelpilot"),
                "message": exc.message, "hint": exc.hint}
    status = "runtime_error" if isinstance(exc, KeyboardInterrupt) else classify_exception(exc)
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4))
    return {"error": type(exc).__name__, "failure": status,
            "message": f"{type(exc).__name__} while {where}: {exc}\n{tb}"[:4000],
            "hint": "fix the kernel file (the traceback above is from the worker process)"}


def raise_described(d: dict[str, Any]) -> None:
    """Raise the error :func:`describe_exception` described: kernelpilot's own class when ``d["error"]`` names one
    (message and hint kept), else :class:`~kernelpilot.errors.KernelFailed` with ``d["failure"]``.

    Raises:
        KernelpilotError: always (a subclass of it).
    """
    from kernelpilot import errors

    cls = getattr(errors, d.get("error", ""), None)
    if (isinstance(cls, type) and issubclass(cls, errors.KernelpilotError)
            and not issubclass(cls, errors.KernelFailed)):
        raise cls(d.get("message", ""), d.get("hint", ""))
    raise errors.KernelFailed(d.get("message", ""), d.get("hint", ""), d.get("failure", "runtime_error"))
