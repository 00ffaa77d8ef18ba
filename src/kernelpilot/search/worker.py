"""Isolated evaluation: every candidate config runs in a worker process, and a failure becomes data.

A worker is a fresh Python process (``spawn``) bound to one device (``cuda:<i>`` through
``CUDA_VISIBLE_DEVICES``, or ``cpu`` for the Triton interpreter). It loads the kernel file once and answers
requests over a pipe: evaluate a config (first launch → correctness over 3 seeds → timing → speed-of-light
check), take interleaved A/B samples of two configs, or run a named function on the loaded kernel
(:meth:`Worker.call`: how ``check``, ``bench``, ``profile``, ``inspect`` and ``pipeline`` run kernel code, through
:mod:`kernelpilot.search.isolated`). The parent never runs kernel code, so:

* an exception is classified (:func:`classify_exception`) into ``compile_error``, ``illegal_memory_access``
  or ``runtime_error`` and returned;
* a CUDA error that poisons the context (illegal address, misaligned address, launch failure) is returned as
  ``illegal_memory_access`` and the worker is replaced before the next config (its context is unusable);
* a hang is caught by the parent's per-request timeout: the worker is killed and replaced, the config is
  recorded as ``timeout``;
* a worker that dies (segfault, ``os._exit``, OOM kill) is recorded as ``worker_crash`` (its exit code or signal
  named) and replaced; a ``sys.exit`` in kernel code is caught in the child (``SystemExit`` is a BaseException)
  and reported as a ``worker_crash`` too (:func:`kernelpilot.search.failures.describe_exception`).

This is the runner layer of Kernel Tuner's strategy → runner → device → back end: strategies never see a
process, only :class:`kernelpilot.search.model.Evaluation` objects.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, get_args


from kernelpilot.facts import nvml_device_count
from kernelpilot.procguard import quiet_resource_tracker
from kernelpilot.search.failures import POISONING_MARKERS, classify_exception, exit_text, raise_described
from kernelpilot.search.model import Evaluation, Status
from kernelpilot.search.runner_base import RunnerBase
from kernelpilot.search.worker_child import LOADED_FIELDS, WorkerOptions
from kernelpilot.search.worker_entry import guarded_child_main
from kernelpilot.target import Target

__all__ = [
    "POISONING_MARKERS",
    "SpareWorker",
    "Worker",
    "WorkerOptions",
    "WorkerPool",
    "classify_exception",
]

#: Seconds a fresh worker may take to import torch, Triton and kernelpilot before loading the kernel file (the
#: start timeout then applies to the kernel file's import alone). Generous: a loaded 2-core machine takes ~10 s.
BOOT_TIMEOUT_S = 180.0


class Worker:
    """One worker process bound to one device; replaced transparently after a crash, hang or poisoned context.

    Args:
        opts: the search's :class:`WorkerOptions`.
        device: ``"cuda:<index>"`` or ``"cpu"``.
        timeout_s: seconds one request may take before the worker is killed and the config is a ``timeout``.
        start_timeout_s: seconds to wait for the worker to load the kernel.
        spare: a :class:`SpareWorker` already booting; the first start takes it over when it matches ``opts``
            and ``device`` (else kills it).

    Raises:
        kernelpilot.errors.ContractError: the kernel file breaks the contract (the child's message and hint).
        kernelpilot.errors.KernelFailed: importing the kernel file exited, crashed, hung (over ``start_timeout_s``)
            or raised; the failure is ``worker_crash``, ``timeout`` or the exception's class.
    """

    def __init__(self, opts: WorkerOptions, device: str, *, timeout_s: float = 120.0, start_timeout_s: float = 120.0,
                 spare: SpareWorker | None = None):
        self.opts, self.device, self.timeout_s, self.start_timeout_s = opts, device, timeout_s, start_timeout_s
        self.restarts = 0
        self._proc: Any = None
        self._conn: Any = None
        self._spare = spare
        self._lock = threading.RLock()  # one request at a time: a window measuring beside the main thread's A/B

    # -- process management
    def _start(self) -> None:
        from kernelpilot.errors import KernelFailed

        spare, self._spare = self._spare, None
        if spare is not None and spare.matches(self.opts, self.device) and spare.ready:
            self.device, self.opts = spare.device, self.opts.model_copy(update={"interpreted": spare.opts.interpreted})
            self._proc, self._conn = spare.take()  # started and answering already (SpareWorker.call)
            self._conn.send(("options", self.opts.model_dump_json()))
            return
        if spare is not None and spare.matches(self.opts, self.device):
            proc, parent = spare.take()  # already booting: the wait below is what is left of its start
        else:
            if spare is not None:
                spare.kill()
            proc, parent = _spawn(self.opts, self.device)
        what = f"the worker on {self.device} loading {self.opts.kernel}"
        kind, payload = "", None
        for stage, limit_s in (("booted", max(self.start_timeout_s, BOOT_TIMEOUT_S)), ("ready", self.start_timeout_s)):
            if not parent.poll(limit_s):
                proc.kill()
                proc.join(timeout=10)
                raise KernelFailed(f"{what}: no answer within {limit_s:.0f} s "
                                   + ("(the kernel file hangs while imported?)" if stage == "ready" else
                                      "(kernelpilot did not even start)"),
                                   "make the kernel file import quickly (no work at import time); raise --timeout-s",
                                   "timeout")
            try:
                kind, payload = parent.recv()
            except (EOFError, OSError):
                proc.join(timeout=10)
                raise KernelFailed(f"{what}: the process died ({exit_text(proc.exitcode)})",
                                   "run the kernel file with python to see the crash (a segfault in an extension, "
                                   "os._exit at import?)", "worker_crash") from None
            if kind != stage:
                break
            if kind == "booted" and isinstance(payload, dict):  # the device the worker settled on
                self.device = payload["device"]
                self.opts = self.opts.model_copy(update={"interpreted": payload["interpreted"]})
        if kind != "ready":
            proc.kill()
            proc.join(timeout=10)
            raise_described(payload)
        parent.send(("options", self.opts.model_dump_json()))  # a spare started before the floor was known
        self._proc, self._conn = proc, parent

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(timeout=10)
        self._proc, self._conn = None, None

    def close(self) -> None:
        """Stop the worker process (politely, then by force)."""
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop",))
                self._proc.join(timeout=5)
            except (OSError, BrokenPipeError):
                pass
        self._kill()

    def _request(self, msg: tuple) -> tuple[str, Any]:
        """Send one request; returns (kind, payload) or ("timeout"|"crash", text). Restarts the worker as needed.
        Requests from several threads take turns (the pipe carries one exchange at a time)."""
        with self._lock:
            return self._exchange(msg)

    def _exchange(self, msg: tuple) -> tuple[str, Any]:
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self.restarts += 1
            self._kill()
            self._start()
        try:
            self._conn.send(msg)
            if not self._conn.poll(self.timeout_s):
                self._kill()
                self.restarts += 1
                return "timeout", f"no answer within {self.timeout_s:.0f} s: worker killed (a hang, or far too slow)"
            return self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            if self._proc is not None:
                self._proc.join(timeout=5)  # the pipe closes a moment before the exit code is known
            code = self._proc.exitcode if self._proc is not None else None
            self._kill()
            self.restarts += 1
            return "crash", f"worker process died ({exit_text(code)})"

    # -- requests
    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """Evaluate one config in this worker; every outcome (also a hang or a crash) is an :class:`Evaluation`."""
        t0 = time.monotonic()
        kind, payload = self._request(("eval", config, race_against_ns))
        if kind == "eval":
            ev = self._answered(Evaluation.model_validate_json(payload["evaluation"]))
            ev.records = {k: payload.get(k) for k in ("correctness", "timing")}
            return ev
        return self._failed(config, kind, payload, t0)

    def version(self, config: dict[str, Any]) -> tuple[Evaluation, dict[str, Any] | None, dict[str, Any] | None]:
        """Evaluate one config with its full records (``kernelpilot optimize``'s versions); no racing.

        Returns:
            (the :class:`Evaluation`, the correctness record or None, the timing record or None): the records as
            far as the evaluation got — none after a hang or a crash, correctness only after a wrong result.
        """
        t0 = time.monotonic()
        kind, payload = self._request(("version", config))
        if kind == "version":
            ev = self._answered(Evaluation.model_validate_json(payload["evaluation"]))
            return ev, payload.get("correctness"), payload.get("timing")
        return self._failed(config, kind, payload, t0), None, None

    def call(self, target: str, *args: Any) -> Any:
        """Run ``target`` (``"module:function"``) in the worker as ``function(kf, opts, device, *args)``, ``device``
        the worker's :class:`~kernelpilot.target.Target`, and return what it returned (picklable). The function runs
        kernel code; the worker is replaced after any failure.

        Raises:
            KernelpilotError: the class the function raised (a ContractError keeps its message and hint), else
                :class:`~kernelpilot.errors.KernelFailed` with the failure: ``timeout`` (no answer within
                ``timeout_s``), ``worker_crash`` (the process died: its exit code or signal is named; or the
                kernel called ``sys.exit``), or the exception's class (:func:`classify_exception`).
        """
        from kernelpilot.errors import KernelFailed

        kind, payload = self._request(("call", target, args))
        if kind == "call":
            return payload
        if kind == "raised" and payload.get("failure") != "kernelpilot":
            self._kill()  # the kernel misbehaved: its process state (CUDA context, globals) is not trusted again
        if kind == "raised":
            raise_described(payload)
        where = f"{self.opts.kernel} in its worker process"
        if kind == "timeout":
            raise KernelFailed(f"{where}: {payload}", "the kernel hangs or is far too slow: fix it, or raise "
                               "--timeout-s", "timeout")
        if kind == "crash":
            raise KernelFailed(f"{where}: {payload}: a segfault, os._exit, or the OS killed it",
                               "run the kernel under compute-sanitizer or python -X faulthandler to find the crash",
                               "worker_crash")
        raise KernelFailed(f"{where}: {str(payload)[:2000]}", "", "runtime_error")

    def _answered(self, ev: Evaluation) -> Evaluation:
        """An answer from the worker; after an illegal memory access the worker is replaced (its context is poisoned)."""
        if ev.status == "illegal_memory_access":
            self._kill()  # the next request starts a fresh worker
            self.restarts += 1
        return ev

    def _failed(self, config: dict[str, Any], kind: str, payload: Any, t0: float) -> Evaluation:
        """The :class:`Evaluation` of a request that got no answer (a hang, a dead worker, an unexpected error)."""
        status: Status = {"timeout": "timeout", "crash": "worker_crash"}.get(kind, "runtime_error")  # type: ignore[assignment]
        if kind == "raised":  # the request raised in the worker (e.g. sys.exit in run_kernel): typed, worker replaced
            status = payload["failure"] if payload.get("failure") in get_args(Status) else "runtime_error"
            payload = payload["message"]
            self._kill()
        return Evaluation(config=config, status=status, message=str(payload)[:2000], wall_s=time.monotonic() - t0,
                          worker=self.device, measured=not self.opts.interpreted)

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """``n`` interleaved samples each of configs ``a`` and ``b`` (ns), or None when the worker failed."""
        kind, payload = self._request(("ab", a, b, n))
        if kind != "ab":
            return None
        return payload["a"], payload["b"]

    def audit(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """The device-activity audit of ``config`` (:func:`kernelpilot.search.worker_child._child_audit`):
        ``{"status", "message"}`` of an integrity failure (or of the worker's own failure); when clean
        ``{"phases_s"}``, the seconds of each audit stage."""
        return _audit_answer(*self._request(("audit", config)))


def _audit_answer(kind: str, payload: Any) -> dict[str, Any] | None:
    if kind == "audit":
        return payload
    message = payload.get("message", "") if isinstance(payload, dict) else str(payload)
    return {"status": payload.get("failure", "runtime_error") if isinstance(payload, dict) else "runtime_error",
            "message": f"the activity audit failed: {message}"[:2000]}


def _spawn(opts: WorkerOptions, device: str) -> tuple[Any, Any]:
    """Start a worker process for ``opts`` on ``device`` without waiting for it: (process, the parent's pipe end)."""
    quiet_resource_tracker()  # before the first spawn starts multiprocessing's tracker
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    # guarded: the worker dies with this process and stays quiet if orphaned (kernelpilot.procguard)
    proc = ctx.Process(target=guarded_child_main, daemon=True,
                       args=(child, opts.model_dump_json(), device, os.getpid(),
                             threading.current_thread() is threading.main_thread()))
    proc.start()
    child.close()
    return proc, parent


class SpareWorker:
    """A worker process started before its caller knows every option, so that its boot (importing torch, Triton
    and the kernel file, creating the CUDA context: 4-5 s on an H100 machine) overlaps the caller's own set-up:
    :func:`kernelpilot.app.context.prepare` starts one, then counts the reference's FLOPs (whose first use
    imports Dynamo, seconds) while it boots.

    The first :class:`Worker` whose kernel, reference, shape, interpretation and device match takes it over and
    sends it its final options (the speed-of-light floor) once it is ready; anything else kills it. An unused spare
    is killed when this object is collected, and in any case dies with this process.
    """

    def __init__(self, opts: WorkerOptions, device: str):
        self.opts, self.device = opts, device
        self.ready = False  # True once a call() waited for its boot: a taker skips the boot messages
        self._proc, self._conn = _spawn(opts, device)
        self._finalizer = weakref.finalize(self, _kill_process, self._proc)

    def call(self, target: str, *args: Any, timeout_s: float = 120.0) -> Any:
        """Run ``target`` (``"module:function"``) in the spare before any worker takes it, as
        :meth:`Worker.call` does (waiting for its boot first): a campaign's set-up asks it for the roles observed at
        the shape while nothing else needs the process. The process stays the spare's unless the call killed it (a
        fault of the kernel code: the taker then starts a fresh one).

        Raises:
            KernelpilotError: as :meth:`Worker.call` (a typed error of kernelpilot keeps its class).
        """
        worker = Worker(self.opts, self.device, timeout_s=timeout_s, start_timeout_s=timeout_s, spare=self)
        try:
            return worker.call(target, *args)
        finally:
            proc, conn = worker._proc, worker._conn
            worker._proc = worker._conn = None
            if proc is not None and proc.is_alive():
                self.opts, self.device, self.ready = worker.opts, worker.device, True
                self._proc, self._conn = proc, conn
                self._finalizer = weakref.finalize(self, _kill_process, proc)

    @staticmethod
    def _key(opts: WorkerOptions, device: str) -> tuple[Any, ...]:
        """The :data:`~kernelpilot.search.worker_child.LOADED_FIELDS` (paths resolved) and the device."""
        paths = {k: str(Path(getattr(opts, k)).resolve()) for k in ("kernel", "ref") if getattr(opts, k)}
        return (*(paths.get(k, getattr(opts, k)) for k in LOADED_FIELDS), device)

    def matches(self, opts: WorkerOptions, device: str) -> bool:
        """True when a worker with ``opts`` on ``device`` may take this process over (all but the floor agree)."""
        return self._proc is not None and self._key(opts, device) == self._key(self.opts, self.device)

    def take(self) -> tuple[Any, Any]:
        """Hand the process and its pipe over (once); this object no longer owns them."""
        proc, conn = self._proc, self._conn
        self._proc, self._conn = None, None
        self._finalizer.detach()
        return proc, conn

    def kill(self) -> None:
        """Stop the process now (it was not needed)."""
        if self._proc is not None:
            self._finalizer()
            self._proc, self._conn = None, None


def _kill_process(proc: Any) -> None:
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=10)


class WorkerPool(RunnerBase):
    """One :class:`Worker` per device; evaluates many configs in parallel, one per device at a time.

    Args:
        opts: the search's :class:`WorkerOptions`.
        devices: e.g. ``["cuda:0", "cuda:1"]`` or ``["cpu"]``; default: every visible GPU, else ``["cpu"]``.
        timeout_s: per-request limit (see :class:`Worker`).
        spare: a :class:`SpareWorker` for the first device's worker (see :class:`Worker`).

    Raises:
        OptionError: a device no worker runs on (``"gpu0"``, ``"cuda:x"``: :meth:`kernelpilot.target.Target.
            from_device`), before any process starts; each worker makes its own Target from its device.
    """

    audits = True  # the device-activity audit runs on the first device (:meth:`audit`)
    concurrent = True  # each worker takes one request at a time (Worker._request); map stops once closed

    def __init__(self, opts: WorkerOptions, devices: list[str] | None = None, *, timeout_s: float = 120.0,
                 spare: SpareWorker | None = None):
        self.devices = devices or default_devices(opts.interpreted)
        for device in self.devices:
            Target.from_device(device)
        self.timeout_s = timeout_s
        self.workers = [Worker(opts, d, timeout_s=timeout_s, spare=spare if i == 0 else None)
                        for i, d in enumerate(self.devices)]
        self._closed = False  # set by close/abort: a map still running starts no more configs

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker."""
        self._closed = True
        for w in self.workers:
            w.close()

    def abort(self) -> None:
        """Kill every worker now, without the polite stop (an interrupted run: the version in flight is dropped)."""
        self._closed = True
        for w in self.workers:
            w._kill()

    @property
    def restarts(self) -> int:
        """Workers replaced so far (after a timeout, a crash or a poisoned CUDA context)."""
        return sum(w.restarts for w in self.workers)

    @property
    def parallel(self) -> int:
        """Configs this pool evaluates at once: one per worker (per device)."""
        return len(self.workers)

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """Evaluate one config on the first device."""
        return self.workers[0].evaluate(config, race_against_ns)

    def map(self, configs: Iterable[dict[str, Any]], race_against_ns: float | None = None) -> Iterator[Evaluation]:
        """Evaluate ``configs`` spread over all devices, each to the first free worker (a config raced out in a
        second does not leave its device idle while another runs a minute); yields each result as soon as it and
        every one before it are in (input order).

        ``race_against_ns``: the incumbent's time, to race clearly slower candidates out (see :meth:`Worker.evaluate`).
        An exception a worker raises is raised here once the workers in flight finish; configs not started then
        are dropped.
        """
        configs = list(configs)
        if len(self.workers) == 1:
            for c in configs:
                yield self.workers[0].evaluate(c, race_against_ns)
            return
        todo = list(range(len(configs)))[::-1]  # popped from the end: input order
        results: dict[int, Evaluation] = {}
        done = threading.Condition()

        def run(worker: Worker) -> None:
            while True:
                with done:
                    if not todo or self._closed:
                        return
                    i = todo.pop()
                ev = worker.evaluate(configs[i], race_against_ns)
                with done:
                    results[i] = ev
                    done.notify_all()

        ex = ThreadPoolExecutor(len(self.workers))
        futures = [ex.submit(run, w) for w in self.workers]
        finished = False
        try:
            for nxt in range(len(configs)):
                with done:
                    while nxt not in results and not all(f.done() for f in futures):
                        done.wait(timeout=0.5)
                    ev = results.pop(nxt, None)
                if ev is None:  # every worker stopped before this one: one of them raised
                    break
                yield ev
            finished = True
        finally:
            with done:
                todo.clear()  # a stopped consumer (budget, interruption) starts nothing more
            ex.shutdown(wait=finished)  # an interrupted run does not wait for the configs in flight (abort kills them)
        for f in futures:
            f.result()  # a worker's exception, raised here

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """Interleaved A/B samples on the first device (see :meth:`Worker.ab_samples`)."""
        return self.workers[0].ab_samples(a, b, n)

    def audit(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """The device-activity audit on the first device (see :meth:`Worker.audit`)."""
        return self.workers[0].audit(config)


def default_devices(interpreted: bool) -> list[str]:
    """``["cuda:0", ..., "cuda:<n-1>"]`` for the GPUs this process can see, or ``["cpu"]`` when interpreted or none.

    Counts GPUs through NVML (no CUDA context is created in the parent); honours ``CUDA_VISIBLE_DEVICES``.
    """
    if interpreted:
        return ["cpu"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v.strip() for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        return [f"cuda:{i}" for i in ids] or ["cpu"]
    n = nvml_device_count()  # None: no NVML, no GPU
    return [f"cuda:{i}" for i in range(n or 0)] or ["cpu"]

