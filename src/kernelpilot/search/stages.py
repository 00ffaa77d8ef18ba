"""The one staged evaluation: every defence a config goes through, as one ordered table, and each command a subset.

Every command that runs a kernel — ``check``, ``bench``, ``profile`` (light card), ``verify``, ``optimize``/``tune``
(and the search's audit of a config before it leads), ``session try``/``finish`` — runs a named subset of
:data:`STAGES`, in the table's order, through the one function :func:`run_stages` (:func:`evaluate` wraps it into an
:class:`~kernelpilot.search.model.Evaluation`). A defence added to the table reaches every command whose subset
names it; ``tests/test_stages.py`` reads the table and the subsets (docs/measuring.md, "The staged evaluation").

Each row is a :class:`Stage` in the style of :data:`kernelpilot.profile.patterns.PATTERNS`: a name, the typed
statuses it can give (:data:`kernelpilot.search.model.Status`) and one function ``run(ctx) -> Failure | None`` over
a :class:`StageContext` (the functions and the context are in :mod:`kernelpilot.search.stage_steps`). The timer
guard's row runs where it stands and again after every later stage of the subset (a patch made by the kernel at
its N-th call is seen right after the stage that made the call).

Before the table: the static screen and the kernel file's import (:func:`kernelpilot.kernels.contract.load_kernel`,
``ScreenRefused``) and the declared-work check of the roofline (``DeclarationError``) — :data:`LOAD_STAGES`, steps of
loading the file rather than of evaluating a config.

This module runs inside the worker process (:mod:`kernelpilot.search.worker_child`); the parent never imports torch
through it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from kernelpilot.search.model import Evaluation, Status
from kernelpilot.search.stage_steps import (Failure, StageContext, _check, _config, _device_activity, _first_launch,
                                            _floor, _guard_failure, _recheck, _roles, _shapes, _timer_guard, _timing,
                                            correctness_status, guard_check, install_guard)
from kernelpilot.target import Target

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile

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
class Stage:
    """One row of :data:`STAGES`: ``name``, the statuses ``run`` may give, ``run(ctx) -> Failure | None`` and what it
    does in words (``title``)."""

    name: str
    statuses: tuple[Status, ...]
    run: Callable[[StageContext], Failure | None]
    title: str


#: The table, in the order the stages run (docs/measuring.md, "The staged evaluation"). A ``roles`` row (buffer
#: roles observed by running; measure/correctness.py) goes between ``timer_guard`` and ``check``.
STAGES: tuple[Stage, ...] = (
    Stage("config", ("invalid_config",), _config,
          "the config is inside TUNABLES and meets CONSTRAINTS (never run otherwise)"),
    Stage("roles", (), _roles,
          "each tensor's role observed by running the reference (read, written in full or in part, in-place or a pure "
          "output; kernels/roles.py) before the kernel ever runs; a declaration that contradicts it raises "
          "RoleMismatch (a declaration to fix, which stops the command)"),
    Stage("first_launch", _RUN_FAULTS, _first_launch,
          "setup at the shape (seed 0) and one launch: compile (or cache hit) and module load, timed as compile_s"),
    Stage("timer_guard", ("timer_tampered",), _timer_guard,
          "no watched timing, synchronisation or kernelpilot function replaced; checked again after every later "
          "stage"),
    Stage("check", ("nan", "wrong_result", "aliased", "inputs_mutated", "tolerance_refused", *_RUN_FAULTS), _check,
          "correctness on fresh inputs per seed (3 by default), a second run, no aliasing, inputs watched, "
          "tolerances within the caps"),
    Stage("shapes", ("wrong_at_shape", "aliased", "tolerance_refused"), _shapes,
          "correctness at shapes drawn per run to break divisibility (inside SHAPE_RULES), plus CHECK_SHAPES"),
    Stage("timing", ("wrong_when_timed", *_RUN_FAULTS), _timing,
          "CUDA-event timing, every launch on new values (interpreted without a GPU), raced against the incumbent; "
          "the outputs of launches kept in secret compared with the reference on the values they saw"),
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
    "check": ("config", "roles", "timer_guard", "check", "shapes"),
    # kernelpilot bench: checked before it is timed (like verify); the floor is reported (``impossible``), not refused
    "bench": ("config", "roles", "first_launch", "timer_guard", "check", "shapes", "timing", "recheck",
              "device_activity"),
    # kernelpilot profile's light card (no ncu): a checked timing
    "profile": ("config", "roles", "first_launch", "timer_guard", "check", "timing", "recheck", "device_activity"),
    # kernelpilot verify: every stage
    "verify": _ALL,
    # one config of optimize/tune: derived shapes and device activity wait for the audit (once per leader)
    "optimize": ("config", "roles", "first_launch", "timer_guard", "check", "timing", "recheck", "floor"),
    "tune": ("config", "roles", "first_launch", "timer_guard", "check", "timing", "recheck", "floor"),
    # the search's audit of a config before it becomes the incumbent
    "audit": ("timer_guard", "shapes", "device_activity"),
    # session try/finish: a version through every stage
    "session": _ALL,
    # bundle bench: the JIT kernel at each entry's config and shape is checked before the bundle is compared with
    # it bit for bit (the comparison and both timings are kernelpilot.bundle.bench's)
    "bundle_bench": ("config", "roles", "first_launch", "timer_guard", "check"),
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


def _note_settings(ctx: StageContext) -> None:
    """Put back torch's switches the kernel file changed during the stage, and record every one put back so far in
    ``ctx.records["settings_restored"]`` (:mod:`kernelpilot.measure.settings`)."""
    from kernelpilot.measure import settings

    settings.restore()
    if settings.restored():
        ctx.records["settings_restored"] = settings.restored()


def run_stages(name: str, ctx: StageContext) -> Failure | None:
    """Run command ``name``'s subset of :data:`STAGES` on ``ctx`` in order; the first failure ends it.

    Each stage's seconds go into ``ctx.phases[stage]``; the refusing stage into ``ctx.failed_stage`` and
    ``ctx.records["stage"]``. After the timer guard's row, the guard is checked again after every later stage (a
    failure there is the guard's). A stage that sets ``ctx.done`` (raced out) ends the subset with success; the
    stages after it go into ``ctx.skipped`` (with the stages that skipped themselves: no GPU, interpreted time).

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
        if failure is not None and failure.status == "kernel_not_launched" and failure.status not in where.statuses:
            # a launch that counted none of the file's own kernels (a KernelBench solution, kernels/kernelbench.py):
            # the finding is the device_activity stage's, made here without a GPU
            where = STAGES[STAGE_NAMES.index("device_activity")]
        _note_settings(ctx)
        if failure is not None:
            assert failure.status in where.statuses, f"stage {where.name} gave undeclared status {failure.status}"
            ctx.failed_stage = ctx.records["stage"] = where.name
            return failure
        guarded = guarded or stage.name == "timer_guard"
        if ctx.done:
            names = SUBSETS[name]
            ctx.skipped.update({n: f"not run: {ctx.done}" for n in names[names.index(stage.name) + 1:]})
            return None
    return None


def evaluate(name: str, ctx: StageContext) -> Evaluation:
    """:func:`run_stages` as an :class:`Evaluation`: ``ok`` (or the refusing stage's status and message), with the
    time fields once timing ran, ``compile_s``, ``phases_s`` per stage, ``wall_s``, the stages that checked
    (``stages_run``) and those that did not, with why (``stages_skipped``). Never raises for the config's faults."""
    t0 = time.monotonic()
    failure = run_stages(name, ctx)
    r = ctx.results
    fields = {k: r[k] for k in ("duration_ns", "iqr_ns", "samples_ns") if k in r}
    status, message = (failure.status, failure.message) if failure else ("ok", ctx.done or "")
    return Evaluation(config=ctx.config, status=status, message=message[:2000], wall_s=time.monotonic() - t0,
                      worker=ctx.device, measured=ctx.target.measured, compile_s=r.get("compile_s"),
                      phases_s=dict(ctx.phases), stages_run=[n for n in ctx.phases if n not in ctx.skipped],
                      stages_skipped=dict(ctx.skipped), **fields)


def run_command(name: str, kf: KernelFile, opts: Any, target: Target, config: dict[str, Any], *,
                seeds: tuple[int, ...] = (0, 1, 2)) -> tuple[Failure | None, StageContext]:
    """Command ``name``'s subset run on one config (:func:`run_stages`): (the failure or None, the context with its
    results and records). ``opts.shape`` is the shape; never raises for the kernel's faults."""
    ctx = StageContext(kf, opts, target, config, seeds=seeds)
    return run_stages(name, ctx), ctx


def refusal(ctx: StageContext, failure: Failure) -> Exception:
    """The :class:`~kernelpilot.errors.KernelFailed` a command raises when a stage refused its config: the kernel
    file and the message, a hint naming the stage, ``failure`` its status."""
    from kernelpilot.errors import KernelFailed

    stage = ctx.failed_stage or stage_of(failure.status)
    hint = (f"refused at the {stage} stage: this result cannot be trusted; see docs/measuring.md, \"The kernel is "
            "an adversary\"") if failure.status not in FAULTS else f"the kernel failed at the {stage} stage: fix it"
    return KernelFailed(f"{ctx.kf.path}: {failure.message}", hint, failure.status)


def command_in_worker(kf: KernelFile, opts: Any, target: Target, name: str, shape: dict[str, Any],
                      config: dict[str, Any]) -> dict[str, float]:
    """Worker side of a command that only needs its subset to pass (``bundle bench``'s check of each entry): run
    ``name``'s subset at ``shape`` (the full shape) and ``config`` (the full config) through
    :meth:`kernelpilot.search.isolated.IsolatedKernel.call`. Returns the seconds per stage.

    Raises:
        KernelFailed: a stage refused the config (:func:`refusal`: its status, the stage named in the hint).
    """
    failure, ctx = run_command(name, kf, opts.model_copy(update={"shape": dict(shape)}), target, dict(config))
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
