"""The functions of the stage table's rows (:data:`kernelpilot.search.stages.STAGES`), and what they share.

Each ``run(ctx) -> Failure | None`` takes a :class:`StageContext` (the kernel file, the worker's options, the device,
the config, the case, the records, the seconds per stage, the results) and returns the :class:`Failure` that
refuses the config, or None. The table, the subsets per command and the runner are in
:mod:`kernelpilot.search.stages`; this module imports nothing from it. Runs inside the worker process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from kernelpilot.search.failures import _COMPILE_TYPES, POISONING_MARKERS, classify_exception
from kernelpilot.search.model import Status
from kernelpilot.target import Target

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile

__all__ = ["Failure", "StageContext", "correctness_status", "guard_check", "install_guard"]


@dataclass(frozen=True)
class Failure:
    """Why a stage refused the config: a status of its :attr:`kernelpilot.search.stages.Stage.statuses` and a message for the user."""

    status: Status
    message: str


@dataclass
class StageContext:
    """What the stages of one evaluation share (inside the worker).

    Attributes:
        kf: the loaded :class:`~kernelpilot.kernels.contract.KernelFile`.
        opts: the worker's :class:`~kernelpilot.search.worker_child.WorkerOptions` (shape, strict, timing bounds,
            floor_ns and sol_tolerance, racing).
        target: the worker's device (:class:`~kernelpilot.target.Target`, made once when the worker started:
            ``cuda:0`` or the CPU, interpreted or not).
        config: the config evaluated (tunable name -> value).
        race_against_ns: the incumbent's median (ns) to race against, or None.
        seeds: the check's seeds (one fresh input set each; :data:`kernelpilot.measure.correctness.DEFAULT_SEEDS`).
        case: the inputs at the shape (seed 0), built by the first stage that needs them.
        fn: one launch of the kernel on ``case``.
        records: full records as far as the evaluation got (JSON dicts): ``correctness``, ``timing``, ``recheck``,
            ``activity``; ``stage``: the name of the stage that refused the config.
        phases: seconds per stage, keyed by stage name (the evaluation's ``phases_s``).
        results: the typed results: ``correctness`` (CorrectnessResult), ``timing`` (TimingResult), ``compile_s``,
            ``duration_ns``, ``iqr_ns``, ``samples_ns``.
        done: set by a stage that ends the evaluation early with success (racing: the message).
        failed_stage: the name of the stage that refused the config (None: none did).
        skipped: stage name -> why it checked nothing (no GPU, an interpreted time, no profiler, ...): a stage that
            returns None without checking says so here, so no verdict claims a check that did not run.
    """

    kf: Any
    opts: Any
    target: Target
    config: dict[str, Any]
    race_against_ns: float | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    case: Any = None
    fn: Callable[[], None] | None = None
    records: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    done: str | None = None
    failed_stage: str | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def device(self) -> str:
        """The worker's name for its device, as records store it (``"cuda:0"``, ``"cpu"``): :attr:`target`'s label."""
        return self.target.label

    @property
    def dev(self) -> str:
        """The torch device: ``"cuda"`` or ``"cpu"`` (:attr:`target`'s)."""
        return self.target.torch_device

    def ensure_case(self) -> Any:
        """The case at the shape (seed 0) and ``fn``, built once (raises what ``setup`` raises)."""
        if self.case is None:
            from kernelpilot.kernels.contract import make_case, run_kernel

            self.case = make_case(self.kf, self.opts.shape, 0, self.dev)
            case, kf, config = self.case, self.kf, self.config
            self.fn = lambda: run_kernel(kf, case.inputs, config)
        return self.case


# -- the timer guard (taken by the worker before the kernel file is imported: kernelpilot.measure.guard)

_GUARD: Any = None


def install_guard(guard: Any) -> None:
    """Use ``guard`` (a :class:`~kernelpilot.measure.guard.TimerGuard` snapshot) for :func:`guard_check`."""
    global _GUARD
    _GUARD = guard


def guard_check(where: str) -> None:
    """Raise KernelFailed(``timer_tampered``) when the kernel file replaced a watched function (no guard: nothing),
    removed the import watch of torch's compiler config (:func:`kernelpilot.measure.compiler_config.watch_removed`)
    or left a thread running; first put back torch's process-wide settings the file changed
    (:func:`kernelpilot.measure.settings.restore`)."""
    from kernelpilot.errors import KernelFailed
    from kernelpilot.measure import settings
    from kernelpilot.measure.guard import Tampered

    settings.restore()
    from kernelpilot.kernels import threads

    from kernelpilot.measure import compiler_config

    removed = compiler_config.watch_removed()
    if removed:
        raise KernelFailed(f"{removed} (seen {where})", "a kernel file must not change sys.meta_path's watch: remove "
                           "the change", "timer_tampered")
    busy = threads.running()
    if busy:
        raise KernelFailed(f"a thread of the kernel file is still running ({'; '.join(busy[:3])}; seen {where}): "
                           "work in another thread is not timed", "do the work in run_kernel's own thread, or wait "
                           "for your threads before run_kernel returns", "timer_tampered")
    if _GUARD is None:
        return
    try:
        _GUARD.check()
    except Tampered as exc:
        raise KernelFailed(f"{exc} (seen {where})", "a kernel file must not replace timing, synchronisation or "
                           "kernelpilot functions: remove the patch", "timer_tampered") from None


def _guard_failure(where: str) -> Failure | None:
    try:
        guard_check(where)
    except Exception as exc:  # noqa: BLE001 - typed: timer_tampered
        return Failure(getattr(exc, "failure", "timer_tampered"), str(getattr(exc, "message", exc)))
    return None


# -- correctness statuses

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
        if "KernelNotLaunched" in bad.error:  # a KernelBench solution's own kernels did not run (kernels.kernelbench)
            return "kernel_not_launched"
        low = bad.error.lower()
        return "illegal_memory_access" if any(m in low for m in POISONING_MARKERS) \
            else ("compile_error" if any(n in bad.error for n in _COMPILE_TYPES) else "runtime_error")
    return "nan" if any(o.n_nonfinite > 0 for o in bad.outputs) else "wrong_result"


# -- the stages' functions, in table order

def _config(ctx: StageContext) -> Failure | None:
    from kernelpilot.errors import ContractError
    from kernelpilot.kernels.contract import validate_config

    try:
        validate_config(ctx.config, ctx.kf.tunables, ctx.kf.path)
    except ContractError as exc:
        return Failure("invalid_config", exc.message)
    return None


def _roles(ctx: StageContext) -> Failure | None:
    from kernelpilot.measure.correctness import observed_roles_at

    report = observed_roles_at(ctx.kf, ctx.opts.shape, ctx.dev)  # RoleMismatch raises: a declaration to fix
    if report is not None:
        ctx.records["roles"] = report.model_dump(mode="json")
        if ctx.case is not None:  # built on the declared roles: built again on the observed ones
            ctx.case, ctx.fn = None, None
    return None


def observe_roles_in_worker(kf: KernelFile, opts: Any, target: Target, shape: dict[str, Any]) -> dict[str, Any] | None:
    """Worker side of a campaign's set-up (:func:`kernelpilot.app.context.prepare`): the roles observed at ``shape``
    on the worker's device (:func:`kernelpilot.measure.correctness.observed_roles_at`, kept for the worker's later
    checks) as a JSON dict of :class:`~kernelpilot.kernels.roles.RoleReport`, or None when setup or the reference
    raises there (the first evaluation's check says why).

    Raises:
        RoleMismatch: a declaration contradicts the observation.
    """
    from kernelpilot.measure.correctness import observed_roles_at

    report = observed_roles_at(kf, dict(shape), target.torch_device)
    return None if report is None else report.model_dump(mode="json")


def _first_launch(ctx: StageContext) -> Failure | None:
    import torch

    try:
        ctx.ensure_case()
        t = time.monotonic()
        ctx.fn()  # type: ignore[misc]  # compile (or Triton cache hit) + module load
        if ctx.target.is_gpu:
            torch.cuda.synchronize()
        ctx.results["compile_s"] = time.monotonic() - t
    except Exception as exc:  # noqa: BLE001 - every fault of a config is data
        return Failure(classify_exception(exc), f"{type(exc).__name__}: {exc}")
    return None


def _timer_guard(ctx: StageContext) -> Failure | None:
    return _guard_failure("after the first launch" if "compile_s" in ctx.results else "before the check")


def _check(ctx: StageContext) -> Failure | None:
    from kernelpilot.measure.correctness import check_correctness
    from kernelpilot.measure.memory import case_is_large

    if ctx.case is not None and case_is_large(ctx.case):  # the check draws its own: one full-size case at a time
        ctx.case = ctx.fn = None  # (built again for timing; docs/kernelbench.md, "Memory at large sizes")
    correctness = check_correctness(ctx.kf, ctx.opts.shape, ctx.config, ctx.dev, seeds=ctx.seeds,
                                    strict=ctx.opts.strict, other_shapes=False)
    ctx.results["correctness"] = correctness
    ctx.records["correctness"] = correctness.model_dump(mode="json")
    return None if correctness.passed else Failure(correctness_status(correctness), correctness.summary)


def _timing(ctx: StageContext) -> Failure | None:
    from kernelpilot.measure.memory import keep_copy
    from kernelpilot.measure.timed_check import check_timed, keep_for
    from kernelpilot.measure.timing import time_callable
    from kernelpilot.search.stats import clearly_slower

    opts = ctx.opts
    try:
        case = ctx.ensure_case()
        if ctx.race_against_ns and not ctx.target.interpreted:
            short = time_callable(ctx.fn, Target.gpu(), min_samples=opts.race_samples,
                                  max_samples=opts.race_samples, rep_ms=0.0, before_each=case.refresher())
            if clearly_slower(short.samples_ns, ctx.race_against_ns, margin=opts.race_margin):
                ctx.results.update(duration_ns=short.median_ns, iqr_ns=short.iqr_ns, samples_ns=short.samples_ns)
                ctx.done = (f"raced out after {short.n_samples} samples: median {short.median_ns:.0f} ns vs "
                            f"incumbent {ctx.race_against_ns:.0f} ns")
                return None
        kwargs: dict[str, Any] = {} if ctx.target.interpreted else {
            "rep_ms": opts.rep_ms, "max_samples": opts.max_samples, "min_samples": opts.min_samples}
        check_s = ctx.phases.get("check")  # what one seed of the check cost bounds what a kept launch costs
        keep = keep_for(check_s / len(ctx.seeds) if check_s and ctx.seeds else None)
        refresher = case.refresher(keep=keep, copy=keep_copy)  # launches' outputs chosen in secret, compared
        timing = time_callable(ctx.fn, ctx.target, before_each=refresher, **kwargs)
    except Exception as exc:  # noqa: BLE001
        return Failure(classify_exception(exc), f"timing failed: {type(exc).__name__}: {exc}")
    ctx.results.update(timing=timing, duration_ns=timing.median_ns, iqr_ns=timing.iqr_ns,
                       samples_ns=timing.samples_ns)
    ctx.records["timing"] = timing.model_dump(mode="json")
    timed = check_timed(ctx.kf, refresher)
    ctx.records["timed_check"] = timed.model_dump(mode="json")
    return None if timed.passed else Failure("wrong_when_timed", timed.error or "a timed launch was wrong")


def _recheck(ctx: StageContext) -> Failure | None:
    from kernelpilot.measure.correctness import recheck

    try:
        again = recheck(ctx.kf, ctx.ensure_case(), ctx.config, ctx.dev)
    except Exception as exc:  # noqa: BLE001 - a setup that changed its tensors
        return Failure("stale_result", str(getattr(exc, "message", exc)))
    ctx.records["recheck"] = again.model_dump(mode="json")
    if again.passed:
        return None
    from kernelpilot.measure.correctness import RECOMPUTED_NOTE

    why = again.error or next(o.reason for o in again.outputs if not o.passed)
    if RECOMPUTED_NOTE in why:  # written anew and wrong: the kernel's miss at values the seeds did not draw
        return Failure("wrong_result", f"after timing, on values no call had seen written into the same tensors: "
                                       f"{why}")
    return Failure("stale_result", f"after timing, on values no call had seen written into the same tensors: {why} "
                                   "(a result cached by pointer or computed in setup, or a kernel that stops working)")


def _device_activity(ctx: StageContext) -> Failure | None:
    """Two profiled launches (:func:`kernelpilot.measure.activity.device_activity`) judged; on the GPU only."""
    if not ctx.target.is_gpu:
        ctx.skipped["device_activity"] = "needs a GPU (the profiler's device records): work off the timed stream " \
                                         "and the file's own kernels not checked"
        return None
    from kernelpilot.measure.activity import device_activity

    try:
        case = ctx.ensure_case()
        report = device_activity(ctx.fn, declared=ctx.kf.backend.kernel_names(ctx.kf) if ctx.kf.backend else [],
                                 before_each=case.refresher(), n_launches=2)
    except Exception as exc:  # noqa: BLE001
        return Failure(classify_exception(exc), f"device activity: {type(exc).__name__}: {exc}")
    ctx.records["activity"] = report.model_dump(mode="json", exclude={"launches"})
    if report.problem:
        return Failure(report.failure, report.problem)  # type: ignore[arg-type]
    if not report.available and ctx.opts.strict:
        return Failure("off_timer_work", f"--strict: {report.note} (work on other streams cannot be ruled out)")
    if not report.available:
        ctx.skipped["device_activity"] = f"{report.note} (work on other streams not ruled out)"
    return None


def _floor(ctx: StageContext) -> Failure | None:
    from kernelpilot.hardware.roofline import impossible_reason

    duration = ctx.results.get("duration_ns")
    if ctx.target.interpreted or duration is None or not ctx.opts.floor_ns:
        ctx.skipped["floor"] = ("interpreted, not a measurement" if ctx.target.interpreted else "no median (timing did "
                                "not run)" if duration is None else "no speed-of-light floor (no roofline for this "
                                "device: no GPU spec)")
        return None
    why = impossible_reason(duration, ctx.opts.floor_ns, ctx.opts.sol_tolerance)
    return Failure("impossible", why) if why else None


def _shapes(ctx: StageContext) -> Failure | None:
    """Correctness at :func:`~kernelpilot.kernels.shapes.derived_shapes` (seed ``FRESH_SEED``), merged into the
    check's record when the check ran; a derived shape ``setup`` cannot build is a note (refused under strict)."""
    from kernelpilot.errors import ContractError
    from kernelpilot.kernels.contract import make_case
    from kernelpilot.kernels.shapes import derived_shapes, shape_rng
    from kernelpilot.measure.correctness import FRESH_SEED, SeedCheck, observe_case_roles, run_and_compare

    shape, before = ctx.opts.shape, ctx.results.get("correctness")
    try:
        extra, notes = derived_shapes(ctx.kf, shape, ctx.config, rng=shape_rng(ctx.opts.shape_seed, ctx.config))
    except ContractError as exc:
        return Failure("wrong_at_shape", f"SHAPE_RULES: {exc.message}")
    checks: list[Any] = []
    checked: list[dict[str, Any]] = []
    for other in extra:
        try:
            case = make_case(ctx.kf, other, FRESH_SEED, ctx.dev)
        except ContractError as exc:
            notes.append(f"derived shape {other} not checked: {exc.message.splitlines()[0][:200]}")
            continue
        observe_case_roles(ctx.kf, case, derived=True)  # a buffer written in full at one shape may be in part here
        check, _, _ = run_and_compare(ctx.kf, case, ctx.config, ctx.dev, "shapes", watch_inputs=False)
        checked.append(dict(other))
        checks.append(check if check.passed or check.stage != "check" else check.model_copy(update={"stage": "shapes"}))
        if not check.passed:
            break
    skipped = [n for n in notes if "not checked" in n]
    if any(not c.passed and (c.error or "").startswith("kernel raised") for c in checks):
        notes.append("the kernel raised at a drawn shape: where this config cannot run there, declare its domain in "
                     "SHAPE_RULES (a multiple, '<= EXPR', '>= EXPR', 'power_of_two >= EXPR', 'fixed'; docs/contract.md)")
    if ctx.opts.strict and skipped and all(c.passed for c in checks):
        checks.append(SeedCheck(seed=FRESH_SEED, passed=False, error=f"--strict refuses: {skipped[0]}",
                                stage="tolerance", shape=shape))
    if before is not None:  # one correctness record: the check's seeds, then the shapes
        merged = _merged(ctx, before, checks, checked, notes)
        ctx.results["correctness"] = merged
        ctx.records["correctness"] = merged.model_dump(mode="json")
    bad = next((c for c in checks if not c.passed), None)
    if bad is None:
        return None
    why = bad.error or next((o.reason for o in bad.outputs if not o.passed), "")
    status = _STAGE_STATUS.get(bad.stage, "wrong_at_shape")
    if before is not None:
        return Failure(status, ctx.results["correctness"].summary)
    return Failure(status, f"correct at {shape} but not at the derived shape {bad.shape}: {why}")


def _merged(ctx: StageContext, before: Any, checks: list[Any], checked: list[dict[str, Any]],
            notes: list[str]) -> Any:
    """The check's CorrectnessResult with the derived shapes' checks, shapes and notes added (summary remade)."""
    from kernelpilot.measure.correctness import _result

    return _result(ctx.kf, before.shape, before.config, before.device, [*before.seeds, *checks],
                   "" if before.reference_dtype == "not run" else before.reference_dtype, before.deterministic,
                   [*before.shapes_checked, *checked], before.tolerances, [*before.notes, *notes])
