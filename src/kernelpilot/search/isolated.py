"""Run one command's kernel code in an isolated worker process (``check``, ``bench``, ``profile``).

The same worker that ``optimize``/``tune`` use (:class:`kernelpilot.search.worker.Worker`: a ``spawn``-ed child,
a pipe, a per-request timeout, crash detection) loads the kernel file and runs a named function there, so nothing
the kernel file does — ``sys.exit``, ``os._exit``, a segfault, an endless loop, an exception — reaches the CLI's
process: each comes back as a :class:`~kernelpilot.errors.KernelpilotError`, a typed
:class:`~kernelpilot.errors.KernelFailed` for the kernel's own faults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.search.worker import Worker, WorkerOptions, default_devices

__all__ = ["DEFAULT_TIMEOUT_S", "IsolatedKernel", "run_isolated"]

#: Default ``--timeout-s``: seconds one request (a check over 3 seeds, a timing with baselines) may take. A
#: torch.compile of the reference takes tens of seconds on first use; interpreted Triton on a CPU is slow too.
DEFAULT_TIMEOUT_S = 300.0


class IsolatedKernel:
    """A kernel file loaded in its own worker process; a context manager (the process stops on exit).

    Args:
        kernel: the kernel file.
        ref: a file defining ``reference`` (None: the kernel file's own).
        interpreted: run under the Triton interpreter on the CPU (no GPU), else on the first visible GPU.
        timeout_s: seconds one :meth:`call` may take, and the kernel file's import, before the worker is killed
            and a ``timeout`` is raised.

    Raises (on entering, when the worker starts):
        ContractError: the kernel file breaks the contract (the worker's message and hint).
        KernelFailed: importing the kernel file exited, crashed, hung or raised.
    """

    def __init__(self, kernel: str | Path, ref: str | Path | None = None, *, interpreted: bool,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        opts = WorkerOptions(kernel=str(kernel), ref=str(ref) if ref else None, shape={}, interpreted=interpreted)
        self.worker = Worker(opts, default_devices(interpreted)[0], timeout_s=timeout_s, start_timeout_s=timeout_s)

    def __enter__(self) -> IsolatedKernel:
        self.worker._start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, target: str, *args: Any) -> Any:
        """``function(kf, opts, device, *args)`` run in the worker, where ``target`` is ``"module:function"``
        (picklable arguments and result). Raises as :meth:`kernelpilot.search.worker.Worker.call`."""
        return self.worker.call(target, *args)

    def close(self) -> None:
        """Stop the worker process."""
        self.worker.close()


def run_isolated(kernel: str | Path, target: str, *args: Any, ref: str | Path | None = None, interpreted: bool,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """One :meth:`IsolatedKernel.call` in a fresh worker that is stopped afterwards (arguments as there)."""
    with IsolatedKernel(kernel, ref, interpreted=interpreted, timeout_s=timeout_s) as iso:
        return iso.call(target, *args)
