"""The one staged evaluation: every defence a config goes through, as one ordered table, and each command a subset.

Every command that runs a kernel — ``check``, ``bench``, ``profile`` (light card), ``verify``, ``optimize``/``tune``
(and the search's audit of a config before it leads), ``session try``/``finish`` — runs a named subset of
:data:`STAGES`, in the table's order, through the one function :func:`run_stages` (:func:`evaluate` wraps it into an
:class:`~kernelpilot.search.model.Evaluation`). A defence added to the table reaches every command whose subset
names it; ``tests/test_stages.py`` reads the table and the subsets (docs/measuring.md, "The staged evaluation").

Each row is a :class:`Stage` in the style of :data:`kernelpilot.profile.patterns.PATTERNS`: a name, the typed
statuses it can give (:data:`kernelpilot.search.model.Status`) and one function ``run(ctx) -> Failure | None`` over
a :class:`StageContext`. The timer guard's row runs where it stands and again after every later stage of the subset
(a patch made by the kernel at its N-th call is seen right after the stage that made the call).

Before the table: the static screen and the kernel file's import (:func:`kernelpilot.kernels.contract.load_kernel`,
``ScreenRefused``) and the declared-work check of the roofline (``DeclarationError``) — :data:`LOAD_STAGES`, steps of
loading the file rather than of evaluating a config.

This module runs inside the worker process (:mod:`kernelpilot.search.worker_child`); the parent never imports torch
through it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kernelpilot.search.failures import _COMPILE_TYPES, POISONING_MARKERS, classify_exception
from kernelpilot.search.model import Evaluation, Status

__all__ = ["FAULTS", "LOAD_STAGES", "STAGES", "STAGE_NAMES", "SUBSETS", "Failure", "Stage", "StageContext",
           "command_in_worker", "correctness_status", "evaluate", "guard_check", "install_guard", "refusal",
           "run_command", "run_stages", "stage_of", "statuses", "subset"]

#: Failures that are not an integrity question: the kernel did not compile, raised, poisoned the context (any stage
#: that runs kernel code may give them), or — parent side — hung or died.
FAULTS: tuple[str, ...] = ("compile_error", "runtime_error", "illegal_memory_access", "timeout", "worker_crash")
_RUN_FAULTS: tuple[Status, ...] = ("compile_error", "runtime_error", "illegal_memory_access")

#: Steps of loading the kernel file, before any config is evaluated (``verify`` names them as stages too).
LOAD_STAGES: tuple[str, ...] = ("screen", "declaration")


@dataclass(frozen=True)
class Failure:
    """Why a stage refused the config: a status of its :attr:`Stage.statuses` and a message for the user."""

    status: Status
    message: str


@dataclass
class StageContext:
    """What the stages of one evaluation share (inside the worker).

    Attributes:
        kf: the loaded :class:`~kernelpilot.kernels.contract.KernelFile`.
        opts: the worker's :class:`~kernelpilot.search.worker_child.WorkerOptions` (shape, strict, timing bounds,
            floor_ns and sol_tolerance, racing).
        device: the worker's device (``"cuda:0"``, ``"cpu"``).
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
    """

    kf: Any
    opts: Any
    device: str
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

    @property
    def dev(self) -> str:
        """The torch device: ``"cuda"`` or ``"cpu"``."""
        return "cuda" if self.device.startswith("cuda") else "cpu"

    def ensure_case(self) -> Any:
        """The case at the shape (seed 0) and ``fn``, built once (raises what ``setup`` raises)."""
        if self.case is None:
            from kernelpilot.kernels.contract import make_case, run_kernel

            self.case = make_case(self.kf, self.opts.shape, 0, self.dev)
            case, kf, config = self.case, self.kf, self.config
            self.fn = lambda: run_kernel(kf, case.inputs, config)
        return self.case


@dataclass(frozen=True)
class Stage:
    """One row of :data:`STAGES`: ``name``, the statuses ``run`` may give, ``run(ctx) -> Failure | None`` and what it
    does in words (``title``)."""

    name: str
    statuses: tuple[Status, ...]
    run: Callable[[StageContext], Failure | None]
    title: str


# -- the timer guard (taken by the worker before the kernel file is imported: kernelpilot.measure.guard)

_GUARD: Any = None


def install_guard(guard: Any) -> None:
    """Use ``guard`` (a :class:`~kernelpilot.measure.guard.TimerGuard` snapshot) for :func:`guard_check`."""
    global _GUARD
    _GUARD = guard


def guard_check(where: str) -> None:
    """Raise KernelFailed(``timer_tampered``) when the kernel file replaced a watched function (no guard: nothing)."""
    from kernelpilot.errors import KernelFailed
    from kernelpilot.measure.guard import Tampered

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


def _first_launch(ctx: StageContext) -> Failure | None:
    import torch

    try:
        ctx.ensure_case()
        t = time.monotonic()
        ctx.fn()  # type: ignore[misc]  # compile (or Triton cache hit) + module load
        if ctx.dev == "cuda":
            torch.cuda.synchronize()
        ctx.results["compile_s"] = time.monotonic() - t
    except Exception as exc:  # noqa: BLE001 - every fault of a config is data
        return Failure(classify_exception(exc), f"{type(exc).__name__}: {exc}")
    return None


def _timer_guard(ctx: StageContext) -> Failure | None:
    return _guard_failure("after the first launch" if "compile_s" in ctx.results else "before the check")


def _check(ctx: StageContext) -> Failure | None:
    from kernelpilot.measure.correctness import check_correctness

    correctness = check_correctness(ctx.kf, ctx.opts.shape, ctx.config, ctx.dev, seeds=ctx.seeds,
                                    strict=ctx.opts.strict, other_shapes=False)
    ctx.results["correctness"] = correctness
    ctx.records["correctness"] = correctness.model_dump(mode="json")
    return None if correctness.passed else Failure(correctness_status(correctness), correctness.summary)


def _timing(ctx: StageContext) -> Failure | None:
    from kernelpilot.measure.timing import time_callable
    from kernelpilot.search.stats import clearly_slower

    opts = ctx.opts
    try:
        case = ctx.ensure_case()
        if ctx.race_against_ns and not opts.interpreted:
            short = time_callable(ctx.fn, device="cuda", min_samples=opts.race_samples,
                                  max_samples=opts.race_samples, rep_ms=0.0, before_each=case.refresher())
            if clearly_slower(short.samples_ns, ctx.race_against_ns, margin=opts.race_margin):
                ctx.results.update(duration_ns=short.median_ns, iqr_ns=short.iqr_ns, samples_ns=short.samples_ns)
                ctx.done = (f"raced out after {short.n_samples} samples: median {short.median_ns:.0f} ns vs "
                            f"incumbent {ctx.race_against_ns:.0f} ns")
                return None
        kwargs: dict[str, Any] = {} if opts.interpreted else {
            "rep_ms": opts.rep_ms, "max_samples": opts.max_samples, "min_samples": opts.min_samples}
        timing = time_callable(ctx.fn, ctx.dev, before_each=case.refresher(), **kwargs)
    except Exception as exc:  # noqa: BLE001
        return Failure(classify_exception(exc), f"timing failed: {type(exc).__name__}: {exc}")
    ctx.results.update(timing=timing, duration_ns=timing.median_ns, iqr_ns=timing.iqr_ns,
                       samples_ns=timing.samples_ns)
    ctx.records["timing"] = timing.model_dump(mode="json")
    return None


def _recheck(ctx: StageContext) -> Failure | None:
    from kernelpilot.measure.correctness import recheck

    try:
        again = recheck(ctx.kf, ctx.ensure_case(), ctx.config, ctx.dev)
    except Exception as exc:  # noqa: BLE001 - a setup that changed its tensors
        return Failure("stale_result", str(getattr(exc, "message", exc)))
    ctx.records["recheck"] = again.model_dump(mode="json")
    if again.passed:
        return None
    why = again.error or next(o.reason for o in again.outputs if not o.passed)
    return Failure("stale_result", f"after timing, on values no call had seen written into the same tensors: {why} "
                                   "(a result cached by pointer or computed in setup, or a kernel that stops working)")


def _device_activity(ctx: StageContext) -> Failure | None:
    """Two profiled launches (:func:`kernelpilot.measure.activity.device_activity`) judged; on the GPU only."""
    if ctx.dev != "cuda":
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
    return None


def _floor(ctx: StageContext) -> Failure | None:
    from kernelpilot.hardware.roofline import impossible_reason

    duration = ctx.results.get("duration_ns")
    if ctx.opts.interpreted or duration is None:
        return None
    why = impossible_reason(duration, ctx.opts.floor_ns, ctx.opts.sol_tolerance)
    return Failure("impossible", why) if why else None


def _shapes(ctx: StageContext) -> Failure | None:
    """Correctness at :func:`~kernelpilot.measure.correctness.derived_shapes` (seed ``FRESH_SEED``), merged into the
    check's record when the check ran; a derived shape ``setup`` cannot build is a note (refused under strict)."""
    from kernelpilot.errors import ContractError
    from kernelpilot.kernels.contract import make_case
    from kernelpilot.measure.correctness import FRESH_SEED, SeedCheck, derived_shapes, run_and_compare

    shape, before = ctx.opts.shape, ctx.results.get("correctness")
    extra, notes = derived_shapes(ctx.kf, shape)
    checks: list[Any] = []
    checked: list[dict[str, Any]] = []
    for other in extra:
        try:
            case = make_case(ctx.kf, other, FRESH_SEED, ctx.dev)
        except ContractError as exc:
            notes.append(f"derived shape {other} not checked: {exc.message.splitlines()[0][:200]}")
            continue
        check, _, _ = run_and_compare(ctx.kf, case, ctx.config, ctx.dev, "shapes", watch_inputs=False)
        checked.append(dict(other))
        checks.append(check if check.passed or check.stage != "check" else check.model_copy(update={"stage": "shapes"}))
        if not check.passed:
            break
    skipped = [n for n in notes if "not checked" in n or "CHECK_SHAPES = []" in n]
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

#: The table, in the order the stages run (docs/measuring.md, "The staged evaluation"). A ``roles`` row (buffer
#: roles observed by running; measure/correctness.py) goes between ``timer_guard`` and ``check``.
STAGES: tuple[Stage, ...] = (
    Stage("config", ("invalid_config",), _config,
          "the config is inside TUNABLES and meets CONSTRAINTS (never run otherwise)"),
    Stage("first_launch", _RUN_FAULTS, _first_launch,
          "setup at the shape (seed 0) and one launch: compile (or cache hit) and module load, timed as compile_s"),
    Stage("timer_guard", ("timer_tampered",), _timer_guard,
          "no watched timing, synchronisation or kernelpilot function replaced; checked again after every later "
          "stage"),
    Stage("check", ("nan", "wrong_result", "aliased", "inputs_mutated", "tolerance_refused", *_RUN_FAULTS), _check,
          "correctness on fresh inputs per seed (3 by default), a second run, no aliasing, inputs watched, "
          "tolerances within the caps"),
    Stage("shapes", ("wrong_at_shape", "aliased", "tolerance_refused"), _shapes,
          "correctness at the derived shapes (CHECK_SHAPES, else every integer dimension halved)"),
    Stage("timing", _RUN_FAULTS, _timing,
          "CUDA-event timing on refreshed inputs (interpreted without a GPU), raced against the incumbent"),
    Stage("recheck", ("stale_result",), _recheck,
          "after timing, values no call has seen written into the same tensors: one more run must match"),
    Stage("device_activity", ("off_timer_work", "kernel_not_launched", *_RUN_FAULTS), _device_activity,
          "(GPU) two profiled launches: no work outside the timed stream, the file's own kernels ran"),
    Stage("floor", ("impossible",), _floor,
          "(measured) the median is not under the speed-of-light floor"),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)

_ALL = STAGE_NAMES
#: Each command's subset of :data:`STAGES` (names, in table order).
SUBSETS: dict[str, tuple[str, ...]] = {
    # kernelpilot check: correctness only; its answer is the CorrectnessResult
    "check": ("config", "timer_guard", "check", "shapes"),
    # kernelpilot bench: checked before it is timed (like verify); the floor is reported (``impossible``), not refused
    "bench": ("config", "first_launch", "timer_guard", "check", "shapes", "timing", "recheck", "device_activity"),
    # kernelpilot profile's light card (no ncu): a checked timing
    "profile": ("config", "first_launch", "timer_guard", "check", "timing", "recheck", "device_activity"),
    # kernelpilot verify: every stage
    "verify": _ALL,
    # one config of optimize/tune: derived shapes and device activity wait for the audit (once per leader)
    "optimize": ("config", "first_launch", "timer_guard", "check", "timing", "recheck", "floor"),
    "tune": ("config", "first_launch", "timer_guard", "check", "timing", "recheck", "floor"),
    # the search's audit of a config before it becomes the incumbent
    "audit": ("timer_guard", "shapes", "device_activity"),
    # session try/finish: a version through every stage
    "session": _ALL,
    # bundle bench: the JIT kernel at each entry's config and shape is checked before the bundle is compared with
    # it bit for bit (the comparison and both timings are kernelpilot.bundle.bench's)
    "bundle_bench": ("config", "first_launch", "timer_guard", "check"),
}


def subset(name: str) -> tuple[Stage, ...]:
    """The rows of :data:`STAGES` in command ``name``'s subset, in table order.

    Raises:
        KeyError: no such command in :data:`SUBSETS`.
    """
    names = SUBSETS[name]
    return tuple(s for s in STAGES if s.name in names)


def stage_of(status: str) -> str:
    """The stage that gives ``status`` as its own (the first row of :data:`STAGES` declaring it): ``none`` for
    ``ok``, ``failure`` for a fault that is not an integrity question (:data:`FAULTS`) or an unknown status."""
    if status == "ok":
        return "none"
    if status in FAULTS:
        return "failure"
    return next((s.name for s in STAGES if status in s.statuses), "failure")


def run_stages(name: str, ctx: StageContext) -> Failure | None:
    """Run command ``name``'s subset of :data:`STAGES` on ``ctx`` in order; the first failure ends it.

    Each stage's seconds go into ``ctx.phases[stage]``; the refusing stage into ``ctx.failed_stage`` and
    ``ctx.records["stage"]``. After the timer guard's row, the guard is checked again after every later stage (a
    failure there is the guard's). A stage that sets ``ctx.done`` (raced out) ends the subset with success.

    Raises:
        KeyError: ``name`` is not in :data:`SUBSETS`. AssertionError: a stage gave a status it does not declare
            (a bug of the table, caught by tests/test_stages.py).
    """
    guarded = False
    for stage in subset(name):
        t = time.monotonic()
        failure = stage.run(ctx)
        where = stage
        if failure is None and guarded:
            failure, where = _guard_failure(f"after the {stage.name} stage"), STAGES[STAGE_NAMES.index("timer_guard")]
        ctx.phases[stage.name] = time.monotonic() - t
        if failure is not None:
            assert failure.status in where.statuses, f"stage {where.name} gave undeclared status {failure.status}"
            ctx.failed_stage = ctx.records["stage"] = where.name
            return failure
        guarded = guarded or stage.name == "timer_guard"
        if ctx.done:
            return None
    return None


def evaluate(name: str, ctx: StageContext) -> Evaluation:
    """:func:`run_stages` as an :class:`Evaluation`: ``ok`` (or the refusing stage's status and message), with the
    time fields once timing ran, ``compile_s``, ``phases_s`` per stage and ``wall_s``. Never raises for the
    config's faults."""
    t0 = time.monotonic()
    failure = run_stages(name, ctx)
    r = ctx.results
    fields = {k: r[k] for k in ("duration_ns", "iqr_ns", "samples_ns") if k in r}
    status, message = (failure.status, failure.message) if failure else ("ok", ctx.done or "")
    return Evaluation(config=ctx.config, status=status, message=message[:2000], wall_s=time.monotonic() - t0,
                      worker=ctx.device, measured=not ctx.opts.interpreted, compile_s=r.get("compile_s"),
                      phases_s=dict(ctx.phases), **fields)


def run_command(name: str, kf: Any, opts: Any, device: str, config: dict[str, Any], *,
                seeds: tuple[int, ...] = (0, 1, 2)) -> tuple[Failure | None, StageContext]:
    """Command ``name``'s subset run on one config (:func:`run_stages`): (the failure or None, the context with its
    results and records). ``opts.shape`` is the shape; never raises for the kernel's faults."""
    ctx = StageContext(kf, opts, device, config, seeds=seeds)
    return run_stages(name, ctx), ctx


def refusal(ctx: StageContext, failure: Failure) -> Exception:
    """The :class:`~kernelpilot.errors.KernelFailed` a command raises when a stage refused its config: the kernel
    file and the message, a hint naming the stage, ``failure`` its status."""
    from kernelpilot.errors import KernelFailed

    stage = ctx.failed_stage or stage_of(failure.status)
    hint = (f"refused at the {stage} stage: this result cannot be trusted; see docs/measuring.md, \"The kernel is "
            "an adversary\"") if failure.status not in FAULTS else f"the kernel failed at the {stage} stage: fix it"
    return KernelFailed(f"{ctx.kf.path}: {failure.message}", hint, failure.status)


def command_in_worker(kf: Any, opts: Any, device: str, name: str, shape: dict[str, Any],
                      config: dict[str, Any]) -> dict[str, float]:
    """Worker side of a command that only needs its subset to pass (``bundle bench``'s check of each entry): run
    ``name``'s subset at ``shape`` (the full shape) and ``config`` (the full config) through
    :meth:`kernelpilot.search.isolated.IsolatedKernel.call`. Returns the seconds per stage.

    Raises:
        KernelFailed: a stage refused the config (:func:`refusal`: its status, the stage named in the hint).
    """
    failure, ctx = run_command(name, kf, opts.model_copy(update={"shape": dict(shape)}), device, dict(config))
    if failure is not None:
        raise refusal(ctx, failure)
    return dict(ctx.phases)


def statuses(name: str) -> set[str]:
    """Every status command ``name``'s subset can give (its stages' :attr:`Stage.statuses`; ``ok`` aside; the
    parent adds ``timeout`` and ``worker_crash``).

    Raises:
        KeyError: no such command in :data:`SUBSETS`.
    """
    return {status for stage in subset(name) for status in stage.statuses}
