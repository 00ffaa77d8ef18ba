"""The worker process's side of isolated evaluation (:mod:`kernelpilot.search.worker` is the parent's side).

The child binds its device, imports the kernel file once and answers requests over a pipe until told to stop:
``eval`` (first launch → correctness over 3 seeds → timing → speed-of-light check, with the full records),
``ab`` (interleaved A/B samples of two configs on the same inputs) and ``call`` (a named function run on the loaded
kernel: ``kernelpilot check``/``bench``/``profile``/``inspect`` use it through :mod:`kernelpilot.search.isolated`).
Every fault of the kernel is answered as data; the parent catches what cannot be answered (a hang, a dead process).
"""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel

from kernelpilot.measure.timing import MAX_SAMPLES, MIN_SAMPLES, REP_MS
from kernelpilot.search.failures import _COMPILE_TYPES, POISONING_MARKERS, classify_exception, describe_exception
from kernelpilot.search.model import Evaluation, Status

__all__ = ["LOADED_FIELDS", "WorkerOptions", "correctness_status", "integrity_after_timing"]


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


#: The options a worker process is started on (what it loaded and how): a later ``options`` message changes every
#: other field, and a :class:`~kernelpilot.search.worker.SpareWorker` is taken over only when these agree.
LOADED_FIELDS = ("kernel", "ref", "shape", "interpreted")

#: The worker's timer guard, taken before the kernel file is imported (:mod:`kernelpilot.measure.guard`).
_GUARD: Any = None


def _guard_check(where: str) -> None:
    """Raise KernelFailed(``timer_tampered``) when the kernel file replaced a watched function."""
    from kernelpilot.errors import KernelFailed
    from kernelpilot.measure.guard import Tampered

    if _GUARD is None:
        return
    try:
        _GUARD.check()
    except Tampered as exc:
        raise KernelFailed(f"{exc} (seen {where})", "a kernel file must not replace timing, synchronisation or "
                           "kernelpilot functions: remove the patch", "timer_tampered") from None


_STAGE_STATUS: dict[str, Status] = {"aliasing": "aliased", "inputs": "inputs_mutated", "shapes": "wrong_at_shape",
                                     "tolerance": "tolerance_refused", "recheck": "stale_result"}


def correctness_status(correctness: Any) -> Status:
    """The failure status of a failed :class:`~kernelpilot.measure.correctness.CorrectnessResult`."""
    bad = next(s for s in correctness.seeds if not s.passed)
    if bad.stage in _STAGE_STATUS:
        return _STAGE_STATUS[bad.stage]
    failing = [o for o in bad.outputs if not o.passed]
    if failing:  # a comparison failed (also on the second run): NaN left behind, or values out of tolerance
        return "nan" if any(o.n_nonfinite > 0 for o in failing) else "wrong_result"
    if bad.error:
        low = bad.error.lower()
        return "illegal_memory_access" if any(m in low for m in POISONING_MARKERS) \
            else ("compile_error" if any(n in bad.error for n in _COMPILE_TYPES) else "runtime_error")
    return "nan" if any(o.n_nonfinite > 0 for o in bad.outputs) else "wrong_result"


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
    from kernelpilot.hardware.roofline import impossible_reason
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
    try:
        _guard_check("after the first launch")
    except Exception as exc:  # noqa: BLE001 - typed: timer_tampered
        return done(getattr(exc, "failure", "runtime_error"), str(getattr(exc, "message", exc)))
    dev = "cuda" if device.startswith("cuda") else "cpu"
    # derived shapes here when every evaluation is fully checked (verify, bench); a search checks them in the audit
    # before a config leads (:func:`_child_audit`), where they cost once per incumbent instead of once per config
    correctness = check_correctness(kf, opts.shape, config, dev, strict=opts.strict, other_shapes=opts.activity)
    phases["check"] = time.monotonic() - t
    if records is not None:
        records["correctness"] = correctness.model_dump(mode="json")
    if not correctness.passed:
        return done(correctness_status(correctness), correctness.summary)
    fn = lambda: run_kernel(kf, case.inputs, config)
    kwargs: dict[str, Any] = {} if opts.interpreted else {"rep_ms": opts.rep_ms, "max_samples": opts.max_samples,
                                                          "min_samples": opts.min_samples}
    t = time.monotonic()
    try:
        if race_against_ns and not opts.interpreted:
            short = time_callable(fn, device="cuda", min_samples=opts.race_samples, max_samples=opts.race_samples,
                                  rep_ms=0.0, before_each=case.refresher())
            if clearly_slower(short.samples_ns, race_against_ns, margin=opts.race_margin):
                phases["timing"] = time.monotonic() - t
                return done("ok", f"raced out after {short.n_samples} samples: median {short.median_ns:.0f} ns vs "
                                  f"incumbent {race_against_ns:.0f} ns", duration_ns=short.median_ns,
                            iqr_ns=short.iqr_ns, samples_ns=short.samples_ns)
        timing = time_callable(fn, dev, before_each=case.refresher(), **kwargs)
    except Exception as exc:  # noqa: BLE001
        return done(classify_exception(exc), f"timing failed: {type(exc).__name__}: {exc}")
    phases["timing"] = time.monotonic() - t
    if records is not None:
        records["timing"] = timing.model_dump(mode="json")
    fields = {"duration_ns": timing.median_ns, "iqr_ns": timing.iqr_ns, "samples_ns": timing.samples_ns}
    failure = integrity_after_timing(kf, opts, dev, case, config, fn, phases, records)
    if failure is not None:
        return done(failure[0], failure[1], **fields)
    why = None if opts.interpreted else impossible_reason(timing.median_ns, opts.floor_ns, opts.sol_tolerance)
    return done("impossible", why, **fields) if why else done("ok", **fields)


def integrity_after_timing(kf: Any, opts: WorkerOptions, dev: str, case: Any, config: dict[str, Any], fn: Any,
                           phases: dict[str, float], records: dict[str, Any] | None) -> tuple[Status, str] | None:
    """The integrity checks after timing: the guard, the re-check on unseen values in the same tensors, and (GPU)
    the device activity of a few launches. Returns (status, message) of the first failure, or None."""
    from kernelpilot.measure.correctness import recheck

    t = time.monotonic()
    try:
        _guard_check("after timing")
        again = recheck(kf, case, config, dev)
    except Exception as exc:  # noqa: BLE001 - a tampered timer or a setup that changed its tensors
        return getattr(exc, "failure", "stale_result"), str(getattr(exc, "message", exc))
    if records is not None:
        records["recheck"] = again.model_dump(mode="json")
    if not again.passed:
        why = again.error or next(o.reason for o in again.outputs if not o.passed)
        return "stale_result", (f"after timing, on values no call had seen written into the same tensors: {why} "
                                "(a result cached by pointer or computed in setup, or a kernel that stops working)")
    if dev == "cuda" and opts.activity:
        try:
            found = _activity_failure(kf, opts, case, fn, records)
        except Exception as exc:  # noqa: BLE001
            return classify_exception(exc), f"device activity: {type(exc).__name__}: {exc}"
        if found is not None:
            return found
    phases["integrity"] = time.monotonic() - t
    try:
        _guard_check("after the integrity checks")
    except Exception as exc:  # noqa: BLE001
        return getattr(exc, "failure", "timer_tampered"), str(getattr(exc, "message", exc))
    return None


def _activity_failure(kf: Any, opts: WorkerOptions, case: Any, fn: Any,
                      records: dict[str, Any] | None = None) -> tuple[Status, str] | None:
    """Two profiled launches of ``fn`` (:func:`kernelpilot.measure.activity.device_activity`) judged: (status,
    message) of work outside the timed region or of the file's kernels never running, or of a profiler that could
    not record under ``--strict``; None when clean. The report goes into ``records["activity"]`` when given."""
    from kernelpilot.measure.activity import device_activity

    report = device_activity(fn, declared=kf.backend.kernel_names(kf) if kf.backend else [],
                             before_each=case.refresher(), n_launches=2)
    if records is not None:
        records["activity"] = report.model_dump(mode="json", exclude={"launches"})
    if report.problem:
        return report.failure, report.problem  # type: ignore[return-value]
    if not report.available and opts.strict:
        return "off_timer_work", f"--strict: {report.note} (work on other streams cannot be ruled out)"
    return None


def _child_ab(kf: Any, opts: WorkerOptions, device: str, a: dict[str, Any], b: dict[str, Any],
              n: int) -> dict[str, list[float]]:
    """``n`` interleaved samples of configs ``a`` and ``b`` on the same inputs (A, B, A, B, ...), ns."""
    from kernelpilot.kernels.contract import make_case, run_kernel
    from kernelpilot.measure.timing import time_interleaved

    on_gpu = device.startswith("cuda")
    case = make_case(kf, opts.shape, 0, "cuda" if on_gpu else "cpu")
    sa, sb = time_interleaved(lambda: run_kernel(kf, case.inputs, a), lambda: run_kernel(kf, case.inputs, b), n,
                              "cuda" if on_gpu else "cpu", before_each=case.refresher())
    _guard_check("after A/B timing")
    return {"a": sa, "b": sb}


def _child_audit(kf: Any, opts: WorkerOptions, device: str, config: dict[str, Any]) -> dict[str, Any] | None:
    """The audit of one config before it becomes the incumbent: correctness at the derived shapes, then (GPU) the
    device activity of a launch. ``{"status", "message"}`` of the failure, or None when both are clean."""
    from kernelpilot.kernels.contract import make_case, run_kernel
    from kernelpilot.measure.correctness import FRESH_SEED, derived_shapes, run_and_compare

    dev = "cuda" if device.startswith("cuda") else "cpu"
    for other in derived_shapes(kf, opts.shape)[0]:
        check, _, _ = run_and_compare(kf, make_case(kf, other, FRESH_SEED, dev), config, dev, "shapes")
        if not check.passed:
            why = check.error or next((o.reason for o in check.outputs if not o.passed), "")
            return {"status": _STAGE_STATUS.get(check.stage, "wrong_at_shape"),
                    "message": f"correct at {opts.shape} but not at the derived shape {other}: {why}"}
    if dev != "cuda":
        return None
    case = make_case(kf, opts.shape, 0, "cuda")
    found = _activity_failure(kf, opts, case, lambda: run_kernel(kf, case.inputs, config))
    _guard_check("after the activity audit")
    return {"status": found[0], "message": found[1]} if found else None


def _child_call(kf: Any, opts: WorkerOptions, device: str, target: str, args: tuple) -> tuple[str, Any]:
    """Run ``module:function`` (named by the parent) as ``function(kf, opts, device, *args)``; every fault of the
    kernel code, also ``SystemExit``/``KeyboardInterrupt``, comes back as ``("raised", description)``."""
    import importlib

    try:
        module, name = target.split(":", 1)
        result = getattr(importlib.import_module(module), name)(kf, opts, device, *args)
        _guard_check(f"after {name}")
        return "call", result
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

        if opts.interpreted is None:  # decide here: the parent has not imported torch
            import torch

            gpu = device.startswith("cuda") and torch.cuda.is_available()
            device = device if gpu else "cpu"
            opts = opts.model_copy(update={"interpreted": not gpu})
        use_interpreter(bool(opts.interpreted))
        import torch  # noqa: F401 - imported before "booted": the start timeout is for the kernel file alone
        import triton  # noqa: F401

        from kernelpilot.measure.guard import TimerGuard

        global _GUARD
        _GUARD = TimerGuard.snapshot()  # before the kernel file: what it may not replace

        # kernelpilot imported: the start timeout now runs for the kernel file alone; the parent learns the device
        conn.send(("booted", {"device": device, "interpreted": opts.interpreted}))
        kf = load_kernel(opts.kernel, opts.ref, interpreted=opts.interpreted)
        if opts.interpreted and device == "cpu":  # a CUDA .cu file cannot run without a GPU: say so up front
            from kernelpilot.backends.registry import require_runnable

            require_runnable(kf)
        _guard_check("after importing the kernel file")
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
            elif kind == "audit":
                conn.send(("audit", _child_audit(kf, opts, device, msg[1])))
            elif kind == "call":
                conn.send(_child_call(kf, opts, device, msg[1], msg[2]))
            elif kind == "options":  # the parent's final options (a spare started before the floor was known)
                update = WorkerOptions.model_validate_json(msg[1])
                opts = opts.model_copy(update={k: getattr(update, k) for k in WorkerOptions.model_fields
                                               if k not in LOADED_FIELDS})
        except BaseException as exc:  # noqa: BLE001 - also the kernel's sys.exit: typed, and the worker goes on
            conn.send(("raised", describe_exception(exc, f"answering a {kind!r} request")))


