"""Measuring one hand-written version against the session's frozen check, in an isolated worker.

Every version runs in its own worker process (:class:`kernelpilot.search.worker.Worker`) loaded from ``vN/kernel.py``
with the session's frozen reference (``check/reference.py``: the reference and its tolerances), at the session's
shape: the same stages as :func:`kernelpilot.api.verify` (the ``session`` subset of
:data:`kernelpilot.search.stages.STAGES`: the static screen at load, then every row of the table — the timer
guard, correctness over the seeds with a second run, aliasing and input mutation, the derived shapes, the re-check
after timing, (GPU) the device activity and the floor). On top of that, a version must build the same inputs as v0
(:func:`same_check_problem`): a version whose ``setup`` makes other (smaller, friendlier) inputs, or whose
``CHECK_SHAPES`` differ, would be measured on another problem, and is ``invalid`` (status ``check_changed``).

The A/B against the parent and the incumbent (:func:`ab_files`) loads the other version's file into the same worker
and times both on the same inputs, interleaved (A, B, A, B ...), with the inputs refreshed before every launch;
:func:`kernelpilot.search.stats.decide` judges the samples (the one decision rule of every command).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpilot.errors import ContractError
from kernelpilot.target import Target

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile
    from kernelpilot.search.worker_child import WorkerOptions

__all__ = ["AB_SAMPLES_GPU", "AB_SAMPLES_CPU", "ab_files", "open_worker", "same_check_problem"]

#: Interleaved samples per side for a version's A/B decisions (the search's number: Evaluator ``ab_samples``).
AB_SAMPLES_GPU = 30
#: Under the interpreter (times are not measurements; only the plumbing is exercised).
AB_SAMPLES_CPU = 6


def open_worker(kernel: Path, reference: Path, shape: dict[str, Any], *, interpreted: bool, floor_ns: float | None,
                sol_tolerance: float, timeout_s: float) -> Any:
    """A started :class:`~kernelpilot.search.worker.Worker` for one version file (device activity on).

    Raises:
        ContractError / ScreenRefused: the file breaks the contract or the static screen refuses it.
        KernelFailed: importing it crashed, hung or raised.
    """
    from kernelpilot.search.worker import Worker, WorkerOptions, default_devices

    opts = WorkerOptions(kernel=str(kernel), ref=str(reference), shape=shape, interpreted=interpreted,
                         floor_ns=floor_ns, sol_tolerance=sol_tolerance, activity=True)
    worker = Worker(opts, default_devices(interpreted)[0], timeout_s=timeout_s, start_timeout_s=timeout_s)
    worker._start()
    return worker


def same_check_problem(worker: Any, v0_kernel: Path) -> str | None:
    """Why this version's inputs differ from v0's (None when they are the same): run in ``worker``.

    Raises:
        KernelpilotError: the worker failed (crash, hang) while comparing.
    """
    return worker.call("kernelpilot.versions.measure:_same_check_in_worker", str(v0_kernel))


def ab_files(worker: Any, other_kernel: Path, config: dict[str, Any], n: int) -> tuple[list[float], list[float]]:
    """``n`` interleaved samples (ns) of this worker's version at ``config`` and of ``other_kernel`` at its own
    starting config, on the same inputs in the same worker.

    Returns:
        (this version's samples, the other's samples).

    Raises:
        KernelpilotError: either kernel failed while timed.
    """
    got = worker.call("kernelpilot.versions.measure:_ab_files_in_worker", str(other_kernel), config, n)
    return got["a"], got["b"]


def _describe(value: Any) -> tuple:
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype), tuple(value.stride()))
    return ("value", repr(value))


def _same_check_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target, v0_kernel: str) -> str | None:
    """Worker side of :func:`same_check_problem`: v0's ``setup`` and this file's must give the same names, outputs,
    in-place/partial/scratch lists, tensor shapes, dtypes and strides, and equal input values, on the first and the
    fresh seed now, and on **every later call** in this worker: this file's ``setup`` is replaced by a twin that
    calls v0's beside it and raises :class:`SetupChanged` at the first difference (the check's seeds, the shapes
    drawn per run, the secret seeds of the timed launches' values and the re-check: issue 24, a version's ``setup``
    compared at two points only could build friendlier inputs everywhere else). ``CHECK_SHAPES`` and
    ``SHAPE_RULES`` must be equal too."""
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.measure.correctness import FRESH_SEED

    base = load_kernel(v0_kernel, opts.ref, interpreted=bool(opts.interpreted))
    if (base.check_shapes or None) != (kf.check_shapes or None):
        return f"CHECK_SHAPES differ from v0's ({kf.check_shapes} vs {base.check_shapes})"
    if base.shape_rules != kf.shape_rules:
        return f"SHAPE_RULES differ from v0's ({kf.shape_rules} vs {base.shape_rules})"
    twin = _TwinSetup(kf.setup, base.setup)
    dev = target.torch_device
    for seed in (0, FRESH_SEED):
        try:
            twin(**opts.shape, seed=seed, **({"device": dev} if twin.takes_device else {}))
        except SetupChanged as exc:
            return exc.message
    kf.setup = twin  # every later make_case in this worker goes through the comparison
    return None


class SetupChanged(ContractError):
    """A version's ``setup`` built other inputs than v0's at some seed and shape (the session's check is frozen)."""


class _TwinSetup:
    """A version's ``setup`` that calls v0's beside it and raises :class:`SetupChanged` at the first difference."""

    def __init__(self, mine: Any, v0: Any) -> None:
        import inspect

        from kernelpilot.kernels.case import _accepts

        self.mine, self.v0 = mine, v0
        self.takes_device = _accepts(mine, "device")
        self.__signature__ = inspect.signature(mine)  # make_case asks whether setup accepts device

    def __call__(self, **kwargs: Any) -> Any:
        got, want = self.mine(**kwargs), self.v0(**kwargs)
        problem = _setup_difference(want, got)
        if problem:
            where = ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if k != "device")
            raise SetupChanged(f"{problem} at setup({where})", "a version must build the inputs v0 builds at every "
                               "seed and shape (the check is frozen at v0)")
        return got


def _setup_difference(a: Any, b: Any) -> str | None:
    """Why setup result ``b`` (the version's) differs from ``a`` (v0's), None when it does not."""
    import torch

    if not isinstance(a, dict) or not isinstance(b, dict):
        return None if type(a) is type(b) else "setup returns another kind of value than v0's"
    for what in ("outputs", "inplace", "partial", "scratch"):
        if sorted(a.get(what, [])) != sorted(b.get(what, [])):
            return f"setup's {what} differ from v0's ({b.get(what, [])} vs {a.get(what, [])})"
    ia, ib = a.get("inputs", {}), b.get("inputs", {})
    if sorted(ia) != sorted(ib):
        return f"setup's inputs differ from v0's ({sorted(ib)} vs {sorted(ia)})"
    outputs, inplace = a.get("outputs", []), a.get("inplace", [])
    for name, va in ia.items():
        vb = ib[name]
        if _describe(va) != _describe(vb):
            return f"input {name!r} differs from v0's: {_describe(vb)} vs {_describe(va)}"
        if name in outputs and name not in inplace:
            continue  # an output's initial values are poisoned by the check anyway
        same = torch.equal(va, vb) if isinstance(va, torch.Tensor) else va == vb
        if not same:
            return f"input {name!r} holds other values than v0's"
    return None


def _ab_files_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target, other_kernel: str, config: dict[str, Any],
                        n: int) -> dict[str, list[float]]:
    """Worker side of :func:`ab_files`."""
    from kernelpilot.kernels.contract import load_kernel, make_case, run_kernel
    from kernelpilot.measure.timed_check import interleaved_checked
    from kernelpilot.search.worker_child import _guard_check

    other = load_kernel(other_kernel, opts.ref, interpreted=target.interpreted)
    dev = target.torch_device
    case = make_case(kf, opts.shape, 0, dev)
    sa, sb = interleaved_checked(kf, case, lambda: run_kernel(kf, case.inputs, config),
                                 lambda: run_kernel(other, case.inputs, other.default_config), n, target,
                                 {"a": f"{kf.path.parent.name} at {config}", "b": other.path.parent.name})
    _guard_check("after the A/B of two versions")
    return {"a": sa, "b": sb}


def _default_config_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target) -> dict[str, Any]:
    """The version file's starting config (``DEFAULT_CONFIG`` or each tunable's first candidate)."""
    return dict(kf.default_config)
