"""Versions as the Evaluator's candidates: a session's candidate is a kernel *file*, not a config.

A session evaluates ``vN/kernel.py`` (or another back end's file, e.g. ``.cu``) through the one
:class:`~kernelpilot.engine.evaluator.Evaluator`, like ``optimize`` evaluates configs. The candidate is the config
``{"version": N}`` (:func:`version_config`) in a one-tunable space of the session's versions
(:func:`version_space`); :class:`VersionRunner` is the :class:`~kernelpilot.engine.runner.Runner` that turns it into
a measurement: it opens the version's own worker (:func:`kernelpilot.versions.measure.open_worker`: the ``session``
subset of the stage table, the frozen reference), refuses a version whose inputs differ from v0's
(``check_changed``), evaluates it at its file's default config, and takes interleaved A/B samples of two version
files in one worker (:func:`kernelpilot.versions.measure.ab_files`). The Evaluator then judges it by its one rule.

A failure is data, as with every runner: an :class:`~kernelpilot.records.evaluation.Evaluation` with a failure
status. Statuses only a session has (``check_changed``, a contract error's class name) are carried in
``records["session_status"]``; the Evaluation's ``status`` is then the nearest of the shared vocabulary
(``runtime_error`` when none is).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from kernelpilot.errors import KernelpilotError
from kernelpilot.records.evaluation import Evaluation, Status
from kernelpilot.search.runner_base import RunnerBase
from kernelpilot.versions.measure import ab_files, open_worker, same_check_problem

if TYPE_CHECKING:
    from kernelpilot.engine.runner import Runner
    from kernelpilot.hardware.roofline import Roofline
    from kernelpilot.versions.records import SessionState

__all__ = ["VERSION", "SampledOnce", "VersionRunner", "version_config", "version_kernel",
           "version_of", "version_space"]

def version_kernel(root: Path, index: int) -> Path:
    """The kernel file of ``ROOT/vN``: of its ``kernel.*`` files, the one the others belong to
    (:func:`kernelpilot.backends.registry.main_kernel`: ``kernel.cu`` beside its sidecar ``kernel.py``); else
    ``ROOT/vN/kernel.py`` (a version not copied yet)."""
    from kernelpilot.backends.registry import main_kernel

    vdir = Path(root) / f"v{index}"
    found = main_kernel(vdir.glob("kernel.*")) if vdir.is_dir() else None
    return vdir / (found.name if found is not None else "kernel.py")


#: The one "tunable" of a session's space: the version index.
VERSION = "version"


def version_config(index: int) -> dict[str, int]:
    """The Evaluator's config for version ``index``: ``{"version": index}``."""
    return {VERSION: int(index)}


def version_of(config: dict[str, Any]) -> int:
    """The version index of a config made by :func:`version_config`.

    Raises:
        KeyError: ``config`` is not a version config.
    """
    return int(config[VERSION])


def version_space(indices: Sequence[int]) -> Any:
    """A :class:`~kernelpilot.search.space.SearchSpace` whose configs are the versions ``indices`` (every recorded
    version and the one about to run): a version outside it is ``invalid_config``."""
    from kernelpilot.search.space import SearchSpace

    return SearchSpace({VERSION: sorted({int(i) for i in indices})})


class VersionRunner(RunnerBase):
    """A :class:`~kernelpilot.engine.runner.Runner` over version files, one worker per version (see the module
    docstring). Workers stay open until :meth:`close`, so an A/B after the evaluation reuses the version's worker.

    Args:
        kernel_of: version index -> its kernel file (``vN/kernel.cu`` else ``vN/kernel.py``).
        reference: the frozen reference file (``check/reference.py``).
        shape: the session's shape.
        interpreted: the Triton interpreter (no GPU: times are not measurements).
        floor_ns / sol_tolerance: the speed-of-light floor the worker applies (None: no floor).
        timeout_s: seconds one request to a version's worker may take.
        step: called with the name of each step about to run (``checking and timing ...``, ``A/B against v1``).
    """

    parallel = 1

    def __init__(self, kernel_of: Callable[[int], Path], reference: Path, shape: dict[str, Any], *,
                 interpreted: bool, floor_ns: float | None, sol_tolerance: float, timeout_s: float,
                 step: Callable[[str], None] = lambda _w: None) -> None:
        self.kernel_of, self.reference, self.shape = kernel_of, Path(reference), dict(shape)
        self.interpreted, self.floor_ns, self.sol_tolerance = interpreted, floor_ns, sol_tolerance
        self.timeout_s, self.step = timeout_s, step
        self.workers: dict[int, Any] = {}
        #: each evaluated version's starting config (its file's ``DEFAULT_CONFIG``), by index
        self.configs: dict[int, dict[str, Any]] = {}
        #: why an A/B of a version failed (its KernelpilotError), by the version's index
        self.ab_errors: dict[int, KernelpilotError] = {}

    @classmethod
    def for_session(cls, root: Path, state: SessionState, roofline: Roofline | None, *, timeout_s: float,
                    step: Callable[[str], None] = lambda _w: None) -> VersionRunner:
        """The runner of a session folder ``root`` with its :class:`~kernelpilot.versions.records.SessionState`
        and roofline (None: no floor): its version files, frozen reference, shape, device and floor."""
        return cls(lambda i: version_kernel(root, i), Path(root) / state.reference, state.shape,
                   interpreted=not state.target.is_gpu, floor_ns=state.floor_ns, timeout_s=timeout_s, step=step,
                   sol_tolerance=roofline.sol_tolerance if roofline is not None else 0.0)

    def open(self, index: int) -> Any:
        """A started worker for version ``index`` (kept until :meth:`close`; the same one when already open).

        Raises:
            ContractError / ScreenRefused: the file breaks the contract or the static screen refuses it.
            KernelFailed: importing it crashed, hung or raised.
        """
        if index not in self.workers:
            self.workers[index] = open_worker(self.kernel_of(index), self.reference, self.shape,
                                              interpreted=self.interpreted, floor_ns=self.floor_ns,
                                              sol_tolerance=self.sol_tolerance, timeout_s=self.timeout_s)
        return self.workers[index]

    def _failed(self, config: dict[str, Any], status: str, message: str, t0: float) -> Evaluation:
        shared = status if status in get_args(Status) else "runtime_error"
        return Evaluation(config=config, status=shared, message=message[:2000], wall_s=time.monotonic() - t0,
                          measured=not self.interpreted, records={"session_status": status})

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """Evaluate the version ``config`` names in its own worker (no racing: a version is timed in full).
        ``records`` holds the worker's ``correctness``/``timing`` records, ``kernel_config`` (the file's default
        config) and, for a failure only a session has, ``session_status``. Never raises for the version's faults."""
        del race_against_ns
        t0, index = time.monotonic(), version_of(config)
        try:
            worker = self.open(index)
        except KernelpilotError as exc:
            return self._failed(config, getattr(exc, "failure", None) or type(exc).__name__,
                                f"{exc.message}\nhint: {exc.hint}", t0)
        try:
            problem = same_check_problem(worker, self.kernel_of(0)) if index > 0 else None
            kernel_config = worker.call("kernelpilot.versions.measure:_default_config_in_worker")
        except KernelpilotError as exc:
            return self._failed(config, getattr(exc, "failure", None) or "runtime_error", exc.message, t0)
        if problem:
            return self._failed(config, "check_changed", f"this version measures another problem than v0: {problem} "
                                "(the check is frozen at v0: same reference, shape, inputs, seeds and tolerances)", t0)
        self.step(f"checking and timing at {self.shape}")
        ev, correctness, timing = worker.version(kernel_config)
        self.configs[index] = kernel_config
        return ev.model_copy(update={"config": config, "records": {
            "correctness": correctness, "timing": timing, "kernel_config": kernel_config}})

    def map(self, configs: Sequence[dict[str, Any]], race_against_ns: float | None = None) -> Iterator[Evaluation]:
        """The versions evaluated one after the other (one worker each), in order."""
        return iter([self.evaluate(c, race_against_ns) for c in configs])

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """``n`` interleaved samples (ns) of version ``a`` and version ``b``, each at its file's default config, on
        the same inputs in the worker of whichever was evaluated here (the other's file is loaded beside it). None
        when neither has a worker here, or the timing failed (the error is kept in :attr:`ab_errors` under the
        version that was evaluated)."""
        ia, ib = version_of(a), version_of(b)
        here, other, swapped = (ia, ib, False) if ia in self.configs else (ib, ia, True)
        if here not in self.configs:
            return None
        self.step(f"A/B against v{other} ({n} interleaved samples per side)")
        try:
            mine, theirs = ab_files(self.workers[here], self.kernel_of(other), self.configs[here], n)
        except KernelpilotError as exc:
            self.ab_errors[here] = exc
            return None
        return (theirs, mine) if swapped else (mine, theirs)

    def ab_error(self, config: dict[str, Any]) -> KernelpilotError | None:
        """Why the A/B of the version ``config`` names failed in its worker (kept by :meth:`ab_samples`), or None."""
        return self.ab_errors.get(version_of(config))

    def close(self) -> None:
        """Stop every version's worker."""
        for worker in self.workers.values():
            worker.close()
        self.workers.clear()


class SampledOnce(RunnerBase):
    """A :class:`~kernelpilot.engine.runner.Runner` that asks ``runner`` for each pair's A/B samples once: the
    Evaluator's A/B against the incumbent and the session's comparison with the parent (the same version, by
    default) then rest on the same samples, in either order. Everything else is ``runner``'s.

    Attributes:
        runner: the wrapped runner. samples: (key of a, key of b) -> (a's samples, b's samples), ns.
    """

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.samples: dict[tuple[str, str], tuple[list[float], list[float]]] = {}

    @property
    def parallel(self) -> int:
        """The wrapped runner's."""
        return int(self.runner.parallel)

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        """The wrapped runner's evaluation."""
        return self.runner.evaluate(config, race_against_ns)

    def map(self, configs: Sequence[dict[str, Any]], race_against_ns: float | None = None) -> Iterator[Evaluation]:
        """The wrapped runner's evaluations."""
        return self.runner.map(configs, race_against_ns)

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> tuple[list[float], list[float]] | None:
        """The pair's samples taken before (either order), else ``n`` new ones from the wrapped runner (kept when
        it answered). None when it could not time them."""
        from kernelpilot.records.evaluation import config_key

        ka, kb = config_key(a), config_key(b)
        if (ka, kb) in self.samples:
            return self.samples[(ka, kb)]
        if (kb, ka) in self.samples:
            sb, sa = self.samples[(kb, ka)]
            return sa, sb
        got = self.runner.ab_samples(a, b, n)
        if got:
            self.samples[(ka, kb)] = (list(got[0]), list(got[1]))
        return got

    def ab_error(self, config: dict[str, Any]) -> KernelpilotError | None:
        """The wrapped runner's."""
        return self.runner.ab_error(config)

    def close(self) -> None:
        """Close the wrapped runner."""
        self.runner.close()
