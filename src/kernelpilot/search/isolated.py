"""Run one command's kernel code in an isolated worker process (``check``, ``bench``, ``profile``).

The same worker that ``optimize``/``tune`` use (:class:`kernelpilot.search.worker.Worker`: a ``spawn``-ed child,
a pipe, a per-request timeout, crash detection) loads the kernel file and runs a named function there, so nothing
the kernel file does — ``sys.exit``, ``os._exit``, a segfault, an endless loop, an exception — reaches the CLI's
process: each comes back as a :class:`~kernelpilot.errors.KernelpilotError`, a typed
:class:`~kernelpilot.errors.KernelFailed` for the kernel's own faults.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.search.worker import Worker, WorkerOptions, default_devices
from kernelpilot.target import Target

__all__ = ["DEFAULT_TIMEOUT_S", "InProcessKernel", "IsolatedKernel", "run_isolated"]

#: Default ``--timeout-s``: seconds one request (a check over 3 seeds, a timing with baselines) may take. A
#: torch.compile of the reference takes tens of seconds on first use; interpreted Triton on a CPU is slow too.
DEFAULT_TIMEOUT_S = 300.0


class IsolatedKernel:
    """A kernel file loaded in its own worker process(es); a context manager (the processes stop on exit).

    Args:
        kernel: the kernel file.
        ref: a file defining ``reference`` (None: the kernel file's own).
        interpreted: run under the Triton interpreter on the CPU (no GPU), else on the first visible GPU (or, with
            ``device="cpu"``, in compile mode on the CPU: static inspection); None: the first worker decides as it
            starts (the first GPU its torch sees, else the interpreter), so this process never imports torch —
            read :attr:`interpreted` and :attr:`device` after entering.
        timeout_s: seconds one :meth:`call` may take, and the kernel file's import, before the worker is killed
            and a ``timeout`` is raised.
        max_workers: processes for :meth:`map` (default 1); the first starts on entering, the others on demand.
        device: ``"cpu"`` or ``"cuda:<i>"`` (default: the first of :func:`~kernelpilot.search.worker.default_devices`).
        env: a context manager held while workers may (re)start, e.g. one removing ``TRITON_INTERPRET`` (they
            inherit the environment).

    Raises (on entering, when the first worker starts):
        ContractError: the kernel file breaks the contract (the worker's message and hint).
        KernelFailed: importing the kernel file exited, crashed, hung or raised.
    """

    def __init__(self, kernel: str | Path, ref: str | Path | None = None, *, interpreted: bool | None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, max_workers: int = 1, device: str | None = None,
                 env: contextlib.AbstractContextManager[Any] | None = None) -> None:
        self.opts = WorkerOptions(kernel=str(kernel), ref=str(ref) if ref else None, shape={}, interpreted=interpreted)
        self.device = device or default_devices(bool(interpreted))[0]
        self.timeout_s, self.max_workers = timeout_s, max(1, max_workers)
        self._env = env or contextlib.nullcontext()
        self._entered = False
        self.workers: list[Worker] = [self._new()]
        self.worker = self.workers[0]

    def _new(self) -> Worker:
        return Worker(self.opts, self.device, timeout_s=self.timeout_s, start_timeout_s=self.timeout_s)

    def __enter__(self) -> IsolatedKernel:
        self._env.__enter__()
        self._entered = True
        try:
            self.worker._start()
        except BaseException:
            self.close()
            raise
        self.device, self.opts = self.worker.device, self.worker.opts  # settled by the worker when auto
        return self

    @property
    def interpreted(self) -> bool:
        """True when the kernel runs under the Triton interpreter (known once entered)."""
        return bool(self.opts.interpreted)

    def __exit__(self, exc_type: Any = None, *exc: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            for w in self.workers:  # Ctrl-C: the worker (which ignores SIGINT) is killed, not waited for
                w._kill()
        self.close()

    def call(self, target: str, *args: Any) -> Any:
        """``function(kf, opts, device, *args)`` (``device`` the worker's :class:`~kernelpilot.target.Target`) run
        in the first worker, where ``target`` is ``"module:function"`` (picklable arguments and result). Raises as
        :meth:`kernelpilot.search.worker.Worker.call`."""
        return self.worker.call(target, *args)

    def map(self, target: str, items: list[Any], on_failure: Callable[[Any, KernelpilotError], Any]
            ) -> Iterator[tuple[int, Any]]:
        """``function(kf, opts, device, item)`` (``device`` the worker's Target) for every item, spread over up to
        ``max_workers`` workers (threads hand them out in list order); yields ``(index, result)`` in completion
        order. An item whose call raised a KernelpilotError (the kernel exited, crashed, hung, raised) yields
        ``on_failure(item, error)`` instead: one bad item never loses the others (its worker is replaced)."""
        n = min(self.max_workers, len(items))
        while len(self.workers) < n:
            self.workers.append(self._new())
        todo: queue.Queue[int] = queue.Queue()
        for i in range(len(items)):
            todo.put(i)
        done: queue.Queue[tuple[int, Any]] = queue.Queue()

        def run(worker: Worker) -> None:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    done.put((i, worker.call(target, items[i])))
                except KernelpilotError as exc:
                    done.put((i, on_failure(items[i], exc)))
                except BaseException as exc:  # noqa: BLE001 - a bug here must not hang the caller
                    done.put((i, on_failure(items[i], KernelpilotError(f"{type(exc).__name__}: {exc}"))))

        threads = [threading.Thread(target=run, args=(w,), daemon=True) for w in self.workers[:n]]
        for t in threads:
            t.start()
        for _ in range(len(items)):
            yield done.get()
        for t in threads:
            t.join()

    def close(self) -> None:
        """Stop the worker processes."""
        for w in self.workers:
            w.close()
        if self._entered:
            self._entered = False
            self._env.__exit__(None, None, None)


class InProcessKernel:
    """:class:`IsolatedKernel`'s interface with no isolation: the kernel file is loaded and the named functions run
    in this process (no timeout, no crash detection). For tests that replace kernelpilot internals in this process
    (a pretend GPU) and for debugging with a Python debugger; commands never use it.

    Raises:
        ContractError: the kernel file breaks the contract (on construction).
    """

    def __init__(self, kernel: str | Path, ref: str | Path | None = None, *, interpreted: bool,
                 timeout_s: float = DEFAULT_TIMEOUT_S, **_: Any) -> None:
        from kernelpilot.kernels.contract import load_kernel

        self.opts = WorkerOptions(kernel=str(kernel), ref=str(ref) if ref else None, shape={}, interpreted=interpreted)
        self.device_target = Target.cpu() if interpreted else Target.gpu(0)
        self.device = self.device_target.label
        self.kf = load_kernel(kernel, ref, interpreted=interpreted)

    def __enter__(self) -> InProcessKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def call(self, target: str, *args: Any) -> Any:
        """``function(kf, opts, target, *args)`` run here (``target`` the :class:`~kernelpilot.target.Target` a worker
        would have: the CPU interpreted, or ``cuda:0``); raises whatever it raises."""
        import importlib

        module, name = target.split(":", 1)
        return getattr(importlib.import_module(module), name)(self.kf, self.opts, self.device_target, *args)


def run_isolated(kernel: str | Path, target: str, *args: Any, ref: str | Path | None = None, interpreted: bool,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """One :meth:`IsolatedKernel.call` in a fresh worker that is stopped afterwards (arguments as there)."""
    with IsolatedKernel(kernel, ref, interpreted=interpreted, timeout_s=timeout_s) as iso:
        return iso.call(target, *args)
