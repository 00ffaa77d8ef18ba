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
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, get_args

from pydantic import BaseModel

from kernelpilot.search.failures import (_COMPILE_TYPES, POISONING_MARKERS, classify_exception, describe_exception,
                                         exit_text, raise_described)
from kernelpilot.search.model import Evaluation, Status

__all__ = [
    "POISONING_MARKERS",
    "Worker",
    "WorkerOptions",
    "WorkerPool",
    "classify_exception",
]

#: Seconds a fresh worker may take to import torch, Triton and kernelpilot before loading the kernel file (the
#: start timeout then applies to the kernel file's import alone). Generous: a loaded 2-core machine takes ~10 s.
BOOT_TIMEOUT_S = 180.0


class WorkerOptions(BaseModel):
    """What every worker of one search needs.

    Attributes:
        kernel: the kernel file.
        ref: a file defining ``reference`` (or None: the kernel file's own).
        shape: the problem shape.
        interpreted: run under the Triton interpreter on the CPU (no GPU; times are not measurements).
        min_samples / max_samples / rep_ms: timing bounds (:func:`kernelpilot.measure.timing.time_cuda`).
        floor_ns: the roofline's speed-of-light floor, measured ceilings preferred (None: no check).
        sol_tolerance: a time under ``floor_ns * (1 - sol_tolerance)`` is ``impossible``; callers pass the roofline's
            :attr:`~kernelpilot.hardware.roofline.Roofline.sol_tolerance` (5 % under a measured ceiling, 0 under a
            datasheet peak; see :data:`kernelpilot.hardware.roofline.SOL_TOLERANCE_MEASURED`).
        race_samples: samples taken first when racing against an incumbent.
        race_margin: a candidate whose short-run median is above ``(1 + race_margin)`` × the incumbent's and
            which the rank test calls slower is stopped there (racing; :func:`kernelpilot.search.stats.clearly_slower`).
    """

    kernel: str
    ref: str | None = None
    shape: dict[str, Any]
    interpreted: bool = False
    min_samples: int = 20
    max_samples: int = 200
    rep_ms: float = 150.0
    floor_ns: float | None = None
    sol_tolerance: float = 0.05
    race_samples: int = 8
    race_margin: float = 0.10


def below_floor(median_ns: float, floor_ns: float | None, tolerance: float) -> str | None:
    """Why a time is impossible, or None: :func:`kernelpilot.hardware.roofline.impossible_reason` (the one rule
    every command applies); ``tolerance`` is the roofline's :attr:`~kernelpilot.hardware.roofline.Roofline.sol_tolerance`.
    Raises nothing."""
    from kernelpilot.hardware.roofline import impossible_reason

    return impossible_reason(median_ns, floor_ns, tolerance)


# ---------------------------------------------------------------------------------------------------- child side


def _child_evaluate(kf: Any, opts: WorkerOptions, device: str, config: dict[str, Any],
                    race_against_ns: float | None, records: dict[str, Any] | None = None) -> Evaluation:
    """Evaluate one config inside the worker (see the module docstring); never raises for the config's faults.

    ``records``, when given, receives the full ``correctness`` and ``timing`` records (JSON dicts of
    :class:`~kernelpilot.measure.correctness.CorrectnessResult` and :class:`~kernelpilot.measure.timing.TimingResult`)
    as far as the evaluation got: ``kernelpilot optimize`` writes them into each version's folder.
    """
    import torch

    from kernelpilot.errors import ContractError
    from kernelpilot.kernels.contract import make_case, run_kernel, validate_config
    from kernelpilot.measure.correctness import check_correctness
    from kernelpilot.measure.timing import time_callable
    from kernelpilot.search.stats import clearly_slower

    t0 = time.monotonic()
    base: dict[str, Any] = {"config": config, "worker": device, "measured": not opts.interpreted}

    def done(status: Status, message: str = "", **fields: Any) -> Evaluation:
        return Evaluation(status=status, message=message[:2000], wall_s=time.monotonic() - t0, **base, **fields)

    try:
        validate_config(config, kf.tunables, kf.path)
    except ContractError as exc:
        return done("invalid_config", exc.message)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    try:
        case = make_case(kf, opts.shape, 0, "cuda" if device.startswith("cuda") else "cpu")
        t = time.monotonic()
        run_kernel(kf, case.inputs, config)  # first launch: compile (or Triton cache hit) + module load
        sync()
        compile_s = time.monotonic() - t
    except Exception as exc:  # noqa: BLE001 - every fault of a config is data
        return done(classify_exception(exc), f"{type(exc).__name__}: {exc}")
    base["compile_s"] = compile_s
    phases = base["phases_s"] = {"setup_and_compile": compile_s}  # where this evaluation's seconds went
    t = time.monotonic()
    correctness = check_correctness(kf, opts.shape, config, "cuda" if device.startswith("cuda") else "cpu")
    phases["check"] = time.monotonic() - t
    if records is not None:
        records["correctness"] = correctness.model_dump(mode="json")
    if not correctness.passed:
        bad = next(s for s in correctness.seeds if not s.passed)
        if bad.error:
            status: Status = "illegal_memory_access" if any(m in bad.error.lower() for m in POISONING_MARKERS) \
                else ("compile_error" if any(n in bad.error for n in _COMPILE_TYPES) else "runtime_error")
            return done(status, correctness.summary)
        nonfinite = any(o.n_nonfinite > 0 for o in bad.outputs)
        return done("nan" if nonfinite else "wrong_result", correctness.summary)
    fn = lambda: run_kernel(kf, case.inputs, config)
    kwargs: dict[str, Any] = {} if opts.interpreted else {"rep_ms": opts.rep_ms, "max_samples": opts.max_samples,
                                                          "min_samples": opts.min_samples}
    t = time.monotonic()
    try:
        if race_against_ns and not opts.interpreted:
            short = time_callable(fn, device="cuda", min_samples=opts.race_samples, max_samples=opts.race_samples,
                                  rep_ms=0.0, before_each=case.before_launch)
            if clearly_slower(short.samples_ns, race_against_ns, margin=opts.race_margin):
                phases["timing"] = time.monotonic() - t
                return done("ok", f"raced out after {short.n_samples} samples: median {short.median_ns:.0f} ns vs "
                                  f"incumbent {race_against_ns:.0f} ns", duration_ns=short.median_ns,
                            iqr_ns=short.iqr_ns, samples_ns=short.samples_ns)
        timing = time_callable(fn, "cuda" if device.startswith("cuda") else "cpu", before_each=case.before_launch,
                               **kwargs)
    except Exception as exc:  # noqa: BLE001
        return done(classify_exception(exc), f"timing failed: {type(exc).__name__}: {exc}")
    phases["timing"] = time.monotonic() - t
    if records is not None:
        records["timing"] = timing.model_dump(mode="json")
    fields = {"duration_ns": timing.median_ns, "iqr_ns": timing.iqr_ns, "samples_ns": timing.samples_ns}
    why = None if opts.interpreted else below_floor(timing.median_ns, opts.floor_ns, opts.sol_tolerance)
    return done("impossible", why, **fields) if why else done("ok", **fields)


def _child_ab(kf: Any, opts: WorkerOptions, device: str, a: dict[str, Any], b: dict[str, Any],
              n: int) -> dict[str, list[float]]:
    """``n`` interleaved samples of configs ``a`` and ``b`` on the same inputs (A, B, A, B, ...), ns."""
    from kernelpilot.kernels.contract import make_case, run_kernel
    from kernelpilot.measure.timing import time_interleaved

    on_gpu = device.startswith("cuda")
    case = make_case(kf, opts.shape, 0, "cuda" if on_gpu else "cpu")
    sa, sb = time_interleaved(lambda: run_kernel(kf, case.inputs, a), lambda: run_kernel(kf, case.inputs, b), n,
                              "cuda" if on_gpu else "cpu", before_each=case.before_launch)
    return {"a": sa, "b": sb}


def _child_call(kf: Any, opts: WorkerOptions, device: str, target: str, args: tuple) -> tuple[str, Any]:
    """Run ``module:function`` (named by the parent) as ``function(kf, opts, device, *args)``; every fault of the
    kernel code, also ``SystemExit``/``KeyboardInterrupt``, comes back as ``("raised", description)``."""
    import importlib

    try:
        module, name = target.split(":", 1)
        return "call", getattr(importlib.import_module(module), name)(kf, opts, device, *args)
    except BaseException as exc:  # noqa: BLE001 - the kernel's exits and interrupts are data too
        what = target.rsplit(":", 1)[-1].strip("_").removesuffix("_in_worker")
        return "raised", describe_exception(exc, f"running `{what}` in the worker")


def _child_main(conn: Any, opts_json: str, device: str) -> None:
    """The worker process: bind the device, load the kernel, answer requests until told to stop.

    The child's stdout is sent to its stderr, so a kernel that prints cannot corrupt a command's ``--json`` output.
    """
    import sys

    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if device.startswith("cuda:"):
        os.environ["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
    opts = WorkerOptions.model_validate_json(opts_json)
    try:
        from kernelpilot.kernels.contract import load_kernel, use_interpreter

        use_interpreter(opts.interpreted)
        import torch  # noqa: F401 - imported before "booted": the start timeout is for the kernel file alone
        import triton  # noqa: F401

        conn.send(("booted", None))  # kernelpilot imported: the start timeout now runs for the kernel file alone
        kf = load_kernel(opts.kernel, opts.ref, interpreted=opts.interpreted)
        conn.send(("ready", None))
    except BaseException as exc:  # noqa: BLE001 - report, then exit
        conn.send(("load_error", describe_exception(exc, "importing the kernel file")))
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        kind = msg[0]
        try:
            if kind == "stop":
                return
            if kind == "eval":
                rec: dict[str, Any] = {}
                ev = _child_evaluate(kf, opts, device, msg[1], msg[2], records=rec)
                conn.send(("eval", {"evaluation": ev.model_dump_json(), **rec}))
            elif kind == "version":
                rec = {}
                ev = _child_evaluate(kf, opts, device, msg[1], None, records=rec)
                conn.send(("version", {"evaluation": ev.model_dump_json(), **rec}))
            elif kind == "ab":
                conn.send(("ab", _child_ab(kf, opts, device, msg[1], msg[2], msg[3])))
            elif kind == "call":
                conn.send(_child_call(kf, opts, device, msg[1], msg[2]))
        except BaseException as exc:  # noqa: BLE001 - also the kernel's sys.exit: typed, and the worker goes on
            conn.send(("raised", describe_exception(exc, f"answering a {kind!r} request")))


# ---------------------------------------------------------------------------------------------------- parent side


class Worker:
    """One worker process bound to one device; replaced transparently after a crash, hang or poisoned context.

    Args:
        opts: the search's :class:`WorkerOptions`.
        device: ``"cuda:<index>"`` or ``"cpu"``.
        timeout_s: seconds one request may take before the worker is killed and the config is a ``timeout``.
        start_timeout_s: seconds to wait for the worker to load the kernel.

    Raises:
        kernelpilot.errors.ContractError: the kernel file breaks the contract (the child's message and hint).
        kernelpilot.errors.KernelFailed: importing the kernel file exited, crashed, hung (over ``start_timeout_s``)
            or raised; the failure is ``worker_crash``, ``timeout`` or the exception's class.
    """

    def __init__(self, opts: WorkerOptions, device: str, *, timeout_s: float = 120.0, start_timeout_s: float = 120.0):
        self.opts, self.device, self.timeout_s, self.start_timeout_s = opts, device, timeout_s, start_timeout_s
        self.restarts = 0
        self._proc: Any = None
        self._conn: Any = None

    # -- process management
    def _start(self) -> None:
        from kernelpilot.errors import KernelFailed

        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child_main, args=(child, self.opts.model_dump_json(), self.device), daemon=True)
        proc.start()
        child.close()
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
        if kind != "ready":
            proc.kill()
            proc.join(timeout=10)
            raise_described(payload)
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
        """Send one request; returns (kind, payload) or ("timeout"|"crash", text). Restarts the worker as needed."""
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
        """Run ``target`` (``"module:function"``) in the worker as ``function(kf, opts, device, *args)`` and return
        what it returned (picklable). The function runs kernel code; the worker is replaced after any failure.

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


class WorkerPool:
    """One :class:`Worker` per device; evaluates many configs in parallel, one per device at a time.

    Args:
        opts: the search's :class:`WorkerOptions`.
        devices: e.g. ``["cuda:0", "cuda:1"]`` or ``["cpu"]``; default: every visible GPU, else ``["cpu"]``.
        timeout_s: per-request limit (see :class:`Worker`).
    """

    def __init__(self, opts: WorkerOptions, devices: list[str] | None = None, *, timeout_s: float = 120.0):
        self.devices = devices or default_devices(opts.interpreted)
        self.workers = [Worker(opts, d, timeout_s=timeout_s) for d in self.devices]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker."""
        for w in self.workers:
            w.close()

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
        """Evaluate ``configs`` spread over all devices (one worker each); yields results in input order.

        ``race_against_ns``: the incumbent's time, to race clearly slower candidates out (see :meth:`Worker.evaluate`).
        """
        configs = list(configs)
        if len(self.workers) == 1:
            for c in configs:
                yield self.workers[0].evaluate(c, race_against_ns)
            return
        chunks: list[list[int]] = [list(range(i, len(configs), len(self.workers))) for i in range(len(self.workers))]
        results: list[Evaluation | None] = [None] * len(configs)

        def run(worker: Worker, idx: list[int]) -> None:
            for i in idx:
                results[i] = worker.evaluate(configs[i], race_against_ns)

        with ThreadPoolExecutor(len(self.workers)) as ex:
            list(ex.map(run, self.workers, chunks))
        yield from (r for r in results if r is not None)

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """Interleaved A/B samples on the first device (see :meth:`Worker.ab_samples`)."""
        return self.workers[0].ab_samples(a, b, n)


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
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: no GPU
        return ["cpu"]
    return [f"cuda:{i}" for i in range(n)] or ["cpu"]

