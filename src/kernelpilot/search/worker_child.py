"""The worker process's side of isolated evaluation (:mod:`kernelpilot.search.worker` is the parent's side).

The child binds its device, imports the kernel file once and answers requests over a pipe until told to stop:
``eval`` (one config through a subset of the stage table, :mod:`kernelpilot.search.stages`, with the full records),
``ab`` (interleaved A/B samples of two configs on the same inputs) and ``call`` (a named function run on the loaded
kernel: ``kernelpilot check``/``bench``/``profile``/``inspect`` use it through :mod:`kernelpilot.search.isolated`).
Every fault of the kernel is answered as data; the parent catches what cannot be answered (a hang, a dead process).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelpilot.measure.timing import MAX_SAMPLES, MIN_SAMPLES, REP_MS
from kernelpilot.search.failures import describe_exception
from kernelpilot.search.model import Evaluation
from kernelpilot.search.stages import StageContext, correctness_status, evaluate, install_guard, run_stages
from kernelpilot.search.stages import guard_check as _guard_check
from kernelpilot.target import Target

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile

__all__ = ["LOADED_FIELDS", "WorkerOptions", "correctness_status"]


class WorkerOptions(BaseModel):
    """What every worker of one search needs.

    Attributes:
        kernel: the kernel file.
        ref: a file defining ``reference`` (or None: the kernel file's own).
        shape: the problem shape.
        interpreted: run under the Triton interpreter on the CPU (no GPU; times are not measurements); None: the
            worker decides when it starts (the interpreter when its torch sees no GPU), so the parent process need
            not import torch (``kernelpilot check``/``bench`` start faster).
        min_samples / max_samples / rep_ms: timing bounds (:func:`kernelpilot.measure.timing.time_cuda`).
        floor_ns: the roofline's speed-of-light floor, measured ceilings preferred (None: no check).
        sol_tolerance: a time under ``floor_ns * (1 - sol_tolerance)`` is ``impossible``; callers pass the roofline's
            :attr:`~kernelpilot.hardware.roofline.Roofline.sol_tolerance` (5 % under a measured ceiling, 0 under a
            datasheet peak; see :data:`kernelpilot.hardware.roofline.SOL_TOLERANCE_MEASURED`).
        strict: refuse what is otherwise shown as a finding (a loosened tolerance, an unavailable profiler).
        activity: (GPU) profile the device activity of every evaluation. A search sets False and audits a config
            before it leads instead (:func:`_child_audit`): two profiled launches of vector_add took 28 ms on an
            H100 (``scripts/probe_eval_cost.py``, 2026-11-24), 0.04-0.06 s as a search's audit.
        race_samples: samples taken first when racing against an incumbent.
        race_margin: a candidate whose short-run median is above ``(1 + race_margin)`` × the incumbent's and
            which the rank test calls slower is stopped there (racing; :func:`kernelpilot.search.stats.clearly_slower`).
        shape_seed: the run's secret the drawn shapes come from (:func:`kernelpilot.kernels.shapes.shape_rng`: per
            config, the same in the compile pool that builds them ahead); None: drawn afresh at every check.
    """

    kernel: str
    ref: str | None = None
    shape: dict[str, Any]
    interpreted: bool | None = False
    min_samples: int = MIN_SAMPLES
    max_samples: int = MAX_SAMPLES
    rep_ms: float = REP_MS
    floor_ns: float | None = None
    sol_tolerance: float = 0.05
    race_samples: int = 8
    race_margin: float = 0.10
    strict: bool = False
    activity: bool = True
    shape_seed: str | None = None


#: The options a worker process is started on (what it loaded and how): a later ``options`` message changes every
#: other field, and a :class:`~kernelpilot.search.worker.SpareWorker` is taken over only when these agree.
LOADED_FIELDS = ("kernel", "ref", "shape", "interpreted")


def _child_evaluate(kf: KernelFile, opts: WorkerOptions, target: Target, config: dict[str, Any],
                    race_against_ns: float | None, records: dict[str, Any] | None = None,
                    command: str | None = None) -> Evaluation:
    """Evaluate one config inside the worker: ``command``'s subset of the stage table
    (:func:`kernelpilot.search.stages.evaluate`; default ``optimize`` — derived shapes and device activity left to
    the audit — or ``verify``, every stage, when ``opts.activity``). Never raises for the config's faults.

    ``records``, when given, receives the full records as far as the evaluation got (``correctness``, ``timing``,
    ``recheck``, ``activity`` JSON dicts, and ``stage``: the stage that refused it): ``kernelpilot optimize`` writes
    them into each version's folder.
    """
    ctx = StageContext(kf, opts, target, config, race_against_ns, records=records if records is not None else {})
    return evaluate(command or ("verify" if opts.activity else "optimize"), ctx)


def _child_ab(kf: KernelFile, opts: WorkerOptions, target: Target, a: dict[str, Any], b: dict[str, Any],
              n: int) -> dict[str, list[float]]:
    """``n`` interleaved samples of configs ``a`` and ``b`` on the same inputs (A, B, A, B, ...), ns; launches of
    both sides kept in secret are checked (:func:`kernelpilot.measure.timed_check.interleaved_checked`: raises
    KernelFailed ``wrong_when_timed``)."""
    from kernelpilot.kernels.contract import make_case, run_kernel
    from kernelpilot.measure.timed_check import interleaved_checked

    case = make_case(kf, opts.shape, 0, target.torch_device)
    sa, sb = interleaved_checked(kf, case, lambda: run_kernel(kf, case.inputs, a),
                                 lambda: run_kernel(kf, case.inputs, b), n, target,
                                 {"a": f"config {a}", "b": f"config {b}"})
    _guard_check("after A/B timing")
    return {"a": sa, "b": sb}


def _child_audit(kf: KernelFile, opts: WorkerOptions, target: Target, config: dict[str, Any]) -> dict[str, Any] | None:
    """The audit of one config before it becomes the incumbent: the ``audit`` subset of the stage table (the timer
    guard, correctness at the derived shapes, then (GPU) the device activity of a launch): ``{"phases_s"}`` (seconds
    per stage) when clean, with ``"status"`` and ``"message"`` of the failure when not."""
    ctx = StageContext(kf, opts, target, config)
    failure = run_stages("audit", ctx)
    phases = {name: round(s, 6) for name, s in ctx.phases.items()}
    return {"phases_s": phases} if failure is None else {"status": failure.status, "message": failure.message,
                                                          "phases_s": phases}


def _child_call(kf: KernelFile, opts: WorkerOptions, target: Target, function: str, args: tuple) -> tuple[str, Any]:
    """Run ``module:function`` (named by the parent) as ``function(kf, opts, target, *args)``, ``target`` the
    worker's :class:`~kernelpilot.target.Target`; every fault of the kernel code, also
    ``SystemExit``/``KeyboardInterrupt``, comes back as ``("raised", description)``."""
    import importlib

    try:
        module, name = function.split(":", 1)
        result = getattr(importlib.import_module(module), name)(kf, opts, target, *args)
        _guard_check(f"after {name}")
        return "call", result
    except BaseException as exc:  # noqa: BLE001 - the kernel's exits and interrupts are data too
        what = function.rsplit(":", 1)[-1].strip("_").removesuffix("_in_worker")
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

        if opts.interpreted is None:  # decide here: the parent has not imported torch
            import torch

            # NVML's device count, not the CUDA runtime's: CUDA stays uninitialised until the reference process is
            # forked (kernelpilot.measure.refproc)
            os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
            gpu = Target.from_device(device).is_gpu and torch.cuda.is_available()
            device = device if gpu else "cpu"
            opts = opts.model_copy(update={"interpreted": not gpu})
        use_interpreter(bool(opts.interpreted))
        target = Target.from_device(device, bool(opts.interpreted))  # the worker's device, made once
        import torch  # noqa: F401 - imported before "booted": the start timeout is for the kernel file alone
        import triton  # noqa: F401

        from kernelpilot.measure.guard import TimerGuard

        from kernelpilot.kernels import threads

        threads.install([p for p in (opts.kernel, opts.ref) if p])  # before the import: threads it starts
        install_guard(TimerGuard.snapshot())  # before the kernel file: what it may not replace
        from kernelpilot.measure import settings

        settings.install()  # torch's switches as import torch left them: put back wherever the file changes them
        from kernelpilot.measure import refproc

        torch_device = target.torch_device
        early = opts.ref or (opts.kernel if str(opts.kernel).endswith(".py") else None)
        server = refproc.start_for(early, torch_device) if early else None  # boots while the kernel file loads

        # kernelpilot imported: the start timeout now runs for the kernel file alone; the parent learns the device
        conn.send(("booted", {"device": device, "interpreted": opts.interpreted}))
        kf = load_kernel(opts.kernel, opts.ref, interpreted=opts.interpreted)
        if target.interpreted and target.is_cpu:  # a CUDA .cu file cannot run without a GPU: say so up front
            from kernelpilot.backends.registry import require_runnable

            require_runnable(kf)
        if server is None:  # a .cu file: its reference is the sidecar's or ref.py, known once it is loaded
            refproc.start_for(kf.reference_path, torch_device)
        from kernelpilot.backends.registry import kernel_files

        threads.add_paths([kf.reference_path, *kernel_files(kf.path)])  # a .cu file's sidecar, ref.py
        _guard_check("after importing the kernel file")
        conn.send(("ready", None))
    except BaseException as exc:  # noqa: BLE001 - report, then exit
        conn.send(("load_error", describe_exception(exc, "importing the kernel file")))
        from kernelpilot.measure.refproc import shutdown

        shutdown()  # the reference process started while the file loaded: stopped, not left to its watchdog
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        kind = msg[0]
        try:
            if kind == "stop":
                from kernelpilot.measure.refproc import shutdown

                shutdown()
                return
            if kind == "eval":
                rec: dict[str, Any] = {}
                ev = _child_evaluate(kf, opts, target, msg[1], msg[2], records=rec)
                conn.send(("eval", {"evaluation": ev.model_dump_json(), **rec}))
            elif kind == "version":
                rec = {}
                ev = _child_evaluate(kf, opts, target, msg[1], None, records=rec, command="session")
                conn.send(("version", {"evaluation": ev.model_dump_json(), **rec}))
            elif kind == "ab":
                conn.send(("ab", _child_ab(kf, opts, target, msg[1], msg[2], msg[3])))
            elif kind == "audit":
                conn.send(("audit", _child_audit(kf, opts, target, msg[1])))
            elif kind == "call":
                conn.send(_child_call(kf, opts, target, msg[1], msg[2]))
            elif kind == "options":  # the parent's final options (a spare started before the floor was known)
                update = WorkerOptions.model_validate_json(msg[1])
                opts = opts.model_copy(update={k: getattr(update, k) for k in WorkerOptions.model_fields
                                               if k not in LOADED_FIELDS})
        except BrokenPipeError:  # the parent is gone (killed, or it closed the pipe): nobody to answer
            return
        except BaseException as exc:  # noqa: BLE001 - also the kernel's sys.exit: typed, and the worker goes on
            conn.send(("raised", describe_exception(exc, f"answering a {kind!r} request")))


