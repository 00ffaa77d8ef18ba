"""Static pruning before any GPU time: configs that can never win are answered ``pruned``.

Every config of the search is compiled for the target in parallel over CPU cores, in a background thread while the
workers measure, in the order the strategy will ask (:func:`compile_order`); configs over the shared-memory limit,
with more spills than the threshold (16 by default, the threshold TorchInductor's Triton autotuner uses to drop
spilling configs), under an occupancy floor, or that fail to compile are pruned (:func:`prune_reason`). A config
asked for before its compile finished is measured unchecked rather than keeping the GPU idle. On a GPU machine the
compiles also fill Triton's cache for the measurement workers. :class:`CompileAhead` is the
:class:`~kernelpilot.engine.evaluator.Pruner` the evaluator is handed.

Capturing a config's launch runs the kernel file's ``run_kernel``, so a config that hangs or exits there would hang
or break the compile-ahead too. With ``timeout_s`` (``tune`` and ``optimize`` pass their ``--timeout-s``) every
compile runs in an isolated worker (:class:`~kernelpilot.search.worker.Worker`, compile mode) that is killed past the
limit: the config gets the failure (``timeout``, ``worker_crash``) as its answer (:meth:`CompileAhead.failure`)
instead of the search waiting for it, and stopping the search kills the compiles in flight.
"""

from __future__ import annotations

import collections
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from kernelpilot.backends.binary.models import StaticFailure, StaticReport
from kernelpilot.childproc import usable_cpus
from kernelpilot.engine.seams import PrunerBase
from kernelpilot.records.evaluation import config_key

if TYPE_CHECKING:
    from kernelpilot.search.space import SearchSpace
    from kernelpilot.search.strategies import Strategy

__all__ = ["DEFAULT_MAX_SPILLS", "CompileAhead", "PruneReport", "compile_order", "prune_reason"]

#: Configs with more spilled registers than this are pruned (TorchInductor drops Triton configs that spill more
#: than 16 registers after compiling them; kernelpilot uses the same default, configurable with --max-spills).
DEFAULT_MAX_SPILLS = 16


class PruneReport(BaseModel):
    """What static pruning removed, and why.

    Attributes:
        arch: the target compiled for (``sm_90``).
        n_configs: configs handed to the compiler (the search space).
        n_compiled: configs whose compile finished (fewer than ``n_configs`` when a search ended first and the
            rest were cancelled).
        unchecked: configs the strategy asked for before their compile finished, measured without a static check.
        waited_s: seconds the search waited for compiles (the part of pruning not overlapped with measurement).
        n_pruned: configs removed (never sent to a GPU).
        by_reason: reason -> count (``shared memory``, ``spills``, ``occupancy``, ``compile``).
        compile_s: CPU seconds of compiling, summed over configs.
        wall_s: wall seconds from the first compile to the last (parallel over CPU cores, overlapped with measurement
            in a search).
        pruned: config key -> the reason with its numbers.
        warm_compiles: compiles of configs about to lead at the shapes their audits draw (:meth:`CompileAhead.warm`),
            finished; ``warm_s``: their wall seconds, summed.
    """

    arch: str
    n_configs: int = 0
    n_pruned: int = 0
    by_reason: dict[str, int] = Field(default_factory=dict)
    compile_s: float = 0.0
    wall_s: float = 0.0
    pruned: dict[str, str] = Field(default_factory=dict)
    static: dict[str, dict[str, Any]] = Field(default_factory=dict)
    n_compiled: int = 0
    unchecked: list[str] = Field(default_factory=list)
    waited_s: float = 0.0
    warm_compiles: int = 0
    warm_s: float = 0.0


def prune_reason(res: StaticReport | StaticFailure, max_spills: int, min_occupancy_pct: float | None) -> tuple[str, str] | None:
    """Why one static inspection result (:class:`~kernelpilot.profile.static.StaticReport` or
    :class:`~kernelpilot.profile.static.StaticFailure`) can never win: ``(kind, reason)`` with kind ``shared memory``,
    ``spills``, ``occupancy`` or ``compile``, or the failure status (``timeout``, ``worker_crash``, ...) of a compile
    whose isolated worker hung or died (``stage="worker"``); None when the config must be measured. Raises nothing."""
    from kernelpilot.backends.binary.models import NO_BINARY

    if isinstance(res, StaticFailure):
        if res.stage == NO_BINARY:  # a back end without a binary (plain PyTorch): nothing known, so measure it
            return None
        if res.stage == "worker":  # the kernel's own code exited, crashed or hung while the launch was captured
            return (res.failure or "runtime_error",
                    f"run_kernel failed while compile-ahead captured its launch: {res.message}"[:500])
        if res.stage == "resources":
            return "shared memory", f"needs {res.shared_mem_bytes} B of shared memory per block: {res.message}"
        return "compile", f"{res.stage} failed: {res.error_type}: {res.message}"[:500]
    limit = res.shared_mem_limit_bytes
    occ = res.occupancy.occupancy_pct if res.occupancy else None
    if limit is not None and res.shared_mem_bytes > limit:
        return "shared memory", f"{res.shared_mem_bytes} B of shared memory per block > limit {limit} B"
    if res.n_spills > max_spills:
        return "spills", f"{res.n_spills} spilled registers > {max_spills} (--max-spills)"
    if min_occupancy_pct is not None and occ is not None and occ < min_occupancy_pct:
        return "occupancy", f"theoretical occupancy {occ:.1f} % < floor {min_occupancy_pct:g} %"
    return None


class CompileAhead(PrunerBase):
    """Static compile of a search's configs in a background thread, in parallel over CPU cores, while the workers
    measure: the compile-ahead half of static pruning.

    Configs are compiled in the given order (the tuner passes the strategy's plan, or the configs nearest the
    start first). :meth:`reason` answers whether a config can be skipped; it waits up to ``wait_s`` for a config
    whose compile has not finished, then lets it be measured unchecked (counted in ``unchecked``) rather than keep a
    GPU idle. On a GPU machine the compiles also fill Triton's cache for the measurement workers.

    Args:
        kernel: the kernel file. configs: the configs to compile (full configs), in the order wanted.
        shape: the problem shape (the compile specializes on it).
        arch: target such as ``sm_90`` (None: this machine's GPU, else sm_90).
        max_spills: prune configs with more spilled registers (``n_spills``, 4-byte units) than this.
        min_occupancy_pct: prune configs whose theoretical occupancy is below this percentage (None: no floor).
        max_workers: compile processes (default: the CPUs this process may use,
            :func:`kernelpilot.childproc.usable_cpus`).
        measure_while_cold: do not wait for a verdict before the first compile finished (see :meth:`reason`).
        wait_s: longest wait in :meth:`reason` for one config, seconds.
        progress: called as ``progress(compiled, configs)`` after each compile, from the background thread
            (:func:`kernelpilot.progress.counter` makes one from a ``log``); it must not raise.
        timeout_s: seconds one config's compile (its captured launch runs ``run_kernel``) may take in its isolated
            worker before the worker is killed and the config's answer is a ``timeout`` (:meth:`failure`); None: a
            process pool without a limit (a hanging ``run_kernel`` then hangs the compile-ahead).
        compute_unit: the kernel file's ``COMPUTE_UNIT``; a tensor-core unit has the first config's SASS read and
            checked for tensor-core instructions (:func:`kernelpilot.kernels.compute_unit.check_unit_sass`): a
            refusal is raised by :meth:`reason` (``declaration``).
        domain / shape_seed: the loaded kernel file and the run's secret for the drawn shapes: with both (and
            ``timeout_s``), :meth:`warm` compiles a config at the shapes its audit will check
            (:func:`kernelpilot.kernels.shapes.shape_rng`), and :data:`WARM_WORKERS` compile processes stay up for
            it once the configs are compiled; a space of at most :data:`WARM_ALL_MAX` configs is compiled at every
            config's drawn shapes after its own compiles.

    Raises:
        ContractError: the kernel file, a config or the arch is invalid (raised here, before the thread starts).
    """

    def __init__(self, kernel: str | Path, configs: list[dict[str, Any]], shape: dict[str, Any], arch: str | None, *,
                 max_spills: int = DEFAULT_MAX_SPILLS, min_occupancy_pct: float | None = None,
                 max_workers: int | None = None, wait_s: float = 30.0, measure_while_cold: bool = False,
                 progress: Callable[[int, int], None] | None = None, timeout_s: float | None = None,
                 compute_unit: str | None = None, domain: Any = None, shape_seed: str | None = None) -> None:
        from kernelpilot.profile.static import config_tasks, default_arch, read_kernel_meta

        arch = arch or default_arch()
        self.kernel, self.shape, self.arch, self.domain, self.shape_seed = kernel, shape, arch, domain, shape_seed
        # config key -> indices of its tasks at its drawn shapes (no verdict), all after the configs' own tasks
        self._warm_of: dict[str, list[int]] = {}
        self._configs = list(configs)
        self._closing = False
        self.max_spills, self.min_occupancy_pct, self.wait_s = max_spills, min_occupancy_pct, wait_s
        self.measure_while_cold, self.progress, self.timeout_s = measure_while_cold, progress, timeout_s
        self.failures: dict[str, str] = {}  # key -> failure status of a compile whose worker hung or died
        self._workers: list[Any] = []
        self._meta = read_kernel_meta(kernel)  # the file imported once here: warm() builds its tasks from it
        self._tasks = config_tasks(kernel, configs, shape, arch, spill_bytes=False, sass=False, meta=self._meta)
        self.compute_unit = compute_unit
        #: a DeclarationError found in the compiled SASS (a tensor-core COMPUTE_UNIT without tensor-core code)
        self.declaration: BaseException | None = None
        if self._tasks and compute_unit and compute_unit.endswith("_tensor"):
            self._tasks[0]["sass"] = True  # one disassembly (~0.75 s) shows whether tensor cores are used
        self._keys = [config_key(c) for c in configs]
        self._key_set = set(self._keys)
        self._index = {k: i for i, k in enumerate(self._keys)}
        #: indices of configs not handed to a compile worker yet, next first (isolated mode; see :meth:`reason`)
        self._todo: collections.deque[int] = collections.deque()
        self._started: set[int] = set()
        self._unchecked: set[str] = set()
        self.report = PruneReport(arch=arch, n_configs=len(configs))
        self.verdicts: dict[str, str | None] = {}  # key -> prune reason, or None to measure
        self.unchecked: list[str] = []
        self.waited_s = 0.0
        self.error: BaseException | None = None
        self._reasons: Counter[str] = Counter()
        self._done = False
        self._stop = False
        self._cv = threading.Condition()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(max_workers,), name="kp-compile-ahead", daemon=True)
        self._thread.start()

    def _run(self, max_workers: int | None) -> None:
        from kernelpilot.profile.static import iter_tasks

        gen = iter_tasks(self._tasks, max_workers=max_workers, in_process=False) if self.timeout_s is None else None
        try:
            if gen is None:
                self._run_isolated(max_workers)
            else:
                for i, res in gen:
                    self._record(self._keys[i], res)
                    if self._stop:
                        break
        except BaseException as exc:  # noqa: BLE001 - kept; reason() then lets configs be measured unchecked
            self.error = exc
        finally:
            if gen is not None:
                gen.close()  # cancels the compiles not started yet
            with self._cv:
                self._done = True
                self.report.wall_s = time.monotonic() - self._t0
                self._cv.notify_all()

    def _run_isolated(self, max_workers: int | None) -> None:
        """The compiles in isolated compile-mode workers (one thread each, configs handed out in order), each call
        limited to ``timeout_s``; a worker that hangs or dies gives its config a ``stage="worker"`` failure and is
        replaced for the next config. Stops taking configs once :meth:`finish` asks it to stop."""
        from kernelpilot.errors import KernelpilotError
        from kernelpilot.backends.binary.models import StaticFailure, load_result
        from kernelpilot.search.worker import Worker, WorkerOptions

        assert self.timeout_s is not None
        if not self._tasks:
            return
        opts = WorkerOptions(kernel=self._tasks[0]["kernel_path"], shape={}, interpreted=False)
        n = max(1, min(max_workers or usable_cpus(), len(self._tasks)))
        self._workers = [Worker(opts, "cpu", timeout_s=self.timeout_s, start_timeout_s=self.timeout_s)
                         for _ in range(n)]
        with self._cv:
            self._todo.extend(range(len(self._tasks)))
        if len(self._configs) <= WARM_ALL_MAX:  # after the space's own compiles, each config at its drawn shapes
            for config in self._configs:
                self.warm(config, front=False)

        def failed(task: dict[str, Any], exc: KernelpilotError) -> StaticFailure:
            return StaticFailure(kernel_file=task["kernel_path"], config=dict(task["config"]), arch=task["arch"],
                                 stage="worker", error_type=type(exc).__name__, message=exc.message[:4000],
                                 hint=exc.hint, failure=getattr(exc, "failure", "runtime_error"))

        def work(worker: Any, keep: bool) -> None:
            while not self._stop:
                i = self._take(keep)
                if i is None:
                    return
                task = self._tasks[i]
                if i >= len(self._keys):  # a drawn shape (warm()): Triton's cache is filled; the audit judges it
                    t = time.monotonic()
                    try:
                        _start_compile_mode(worker)
                        worker.call("kernelpilot.profile.static_isolated:_task_in_worker", task)
                    except BaseException:  # noqa: BLE001 - the audit meets the same failure and records it
                        continue
                    with self._cv:
                        self.report.warm_compiles += 1
                        self.report.warm_s += time.monotonic() - t
                    continue
                try:
                    _start_compile_mode(worker)
                    if self._stop:
                        return
                    res: Any = load_result(worker.call("kernelpilot.profile.static_isolated:_task_in_worker", task))
                except KernelpilotError as exc:
                    res = failed(task, exc)
                except BaseException as exc:  # noqa: BLE001 - one config's trouble must not stop the others
                    res = failed(task, KernelpilotError(f"{type(exc).__name__}: {exc}"))
                if self._stop:
                    return
                self._record(self._keys[i], res)

        keep = WARM_WORKERS if self.domain is not None and self.shape_seed is not None else 0
        threads = [threading.Thread(target=work, args=(w, n_ < keep), name="kp-compile-ahead-worker", daemon=True)
                   for n_, w in enumerate(self._workers)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for w in self._workers:
                w.close()

    def _take(self, keep: bool = False) -> int | None:
        """The next task index to compile (isolated mode), each once, or None when none is left; with ``keep``, a
        kept worker's thread waits for :meth:`warm` tasks until :meth:`finish`."""
        with self._cv:
            while True:
                while self._todo:
                    i = self._todo.popleft()
                    if i not in self._started:
                        self._started.add(i)
                        return i
                if not keep or self._stop or self._closing:
                    return None
                self._cv.wait()

    def warm(self, config: dict[str, Any], front: bool = True) -> None:
        """Compile ``config`` at the shapes its audit will draw (:func:`kernelpilot.kernels.shapes.derived_shapes`
        with the run's :func:`~kernelpilot.kernels.shapes.shape_rng`): ahead of the queue (``front``) when a config
        is about to lead, so the compiles overlap its A/B timing instead of its audit (session 14, H200: the
        attention tutorial's audits spent 1.4-3.4 s each compiling at the drawn shapes); at its end for a space of at
        most :data:`WARM_ALL_MAX` configs, each after the space's own compiles. Built once per config (asked again
        with ``front``, its compiles not started yet move ahead); nothing without ``domain``, ``shape_seed`` or the
        isolated workers. Raises nothing."""
        from kernelpilot.kernels.shapes import derived_shapes, shape_rng
        from kernelpilot.profile.static import config_tasks

        key = config_key(config)
        if self.domain is None or self.shape_seed is None or self.timeout_s is None:
            return
        if key not in self._warm_of:
            try:
                shapes, _ = derived_shapes(self.domain, self.shape, config, rng=shape_rng(self.shape_seed, config))
                tasks = [t for shp in shapes for t in config_tasks(self.kernel, [config], shp, self.arch,
                                                                     spill_bytes=False, sass=False, meta=self._meta)]
            except Exception:  # noqa: BLE001 - a shape the rules cannot draw: the audit says so
                tasks = []
            with self._cv:
                if key not in self._warm_of:  # not built meanwhile by the other thread that warms (pool, evaluator)
                    self._warm_of[key] = list(range(len(self._tasks), len(self._tasks) + len(tasks)))
                    self._tasks.extend(tasks)
                    if not front:
                        self._todo.extend(self._warm_of[key])
        with self._cv:
            if front:
                self._todo.extendleft(i for i in reversed(self._warm_of[key]) if i not in self._started)
            self._cv.notify_all()

    def _prioritize(self, key: str) -> None:
        """Compile ``key`` next when its compile has not started (isolated mode; called under the lock): a strategy
        that asks out of the compile order (a model's proposal) waits for one compile, not for the queue ahead."""
        i = self._index.get(key)
        if i is not None and i not in self._started and self.timeout_s is not None:
            self._todo.appendleft(i)

    def _record(self, key: str, res: StaticReport | StaticFailure) -> None:
        why = prune_reason(res, self.max_spills, self.min_occupancy_pct)
        failed = isinstance(res, StaticFailure)
        if self.compute_unit and not failed and res.opcode_counts and self.declaration is None:
            from kernelpilot.errors import DeclarationError
            from kernelpilot.kernels.compute_unit import check_unit_sass

            try:
                check_unit_sass(self.compute_unit, res.opcode_counts, f"{res.kernel_file} at {key}",
                                launches=res.launches_captured)
            except DeclarationError as exc:
                self.declaration = exc
        with self._cv:
            self.report.compile_s += float(res.compile_s or 0.0)
            if not failed:
                self.report.static[key] = {"registers_per_thread": res.registers_per_thread, "spills": res.n_spills,
                                           "shared_bytes": res.shared_mem_bytes,
                                           "occupancy_pct": res.occupancy.occupancy_pct if res.occupancy else None}
            if why is not None:
                if failed and res.stage == "worker":
                    self.failures[key] = why[0]
                self._reasons[why[0]] += 1
                self.report.pruned[key] = f"{why[0]}: {why[1]}"
                self.report.n_pruned = len(self.report.pruned)
                self.report.by_reason = dict(self._reasons)
            self.report.n_compiled += 1
            self.verdicts[key] = self.report.pruned.get(key)
            self._cv.notify_all()
            compiled = self.report.n_compiled
        if self.progress is not None:
            try:
                self.progress(compiled, self.report.n_configs)
            except Exception:  # noqa: BLE001 - a progress display that fails must not stop the pruning
                self.progress = None

    def facts(self, config: dict[str, Any]) -> dict[str, Any] | None:
        """The compiled binary's facts of ``config`` (``registers_per_thread``, ``spills`` in 4-byte units,
        ``shared_bytes``, ``occupancy_pct``) when its compile has finished, else None; never waits."""
        with self._cv:
            found = self.report.static.get(config_key(config))
        return dict(found) if found else None

    def reason(self, config: dict[str, Any]) -> str | None:
        """The prune reason of ``config`` (None: measure it), waiting up to ``wait_s`` for its compile; a config
        not compiled by then (or outside the compiled set) is measured unchecked, and stays so: a verdict arriving
        later does not turn a config already sent to a worker into a pruned one. With ``measure_while_cold`` nothing
        waits before the first verdict: the compile processes are still starting (about 20 s on the H100 for
        Liger-Kernel's RMSNorm) while the worker could already measure.

        Raises:
            DeclarationError: the compiled SASS refused the kernel's tensor-core ``COMPUTE_UNIT`` (``declaration``).
        """
        key = config_key(config)
        t0 = time.monotonic()
        with self._cv:
            if self.declaration is not None:
                raise self.declaration
            if key in self._unchecked:
                return None
            if key not in self.verdicts and key in self._key_set and (self.verdicts or not self.measure_while_cold):
                self._prioritize(key)
                self._cv.wait_for(lambda: key in self.verdicts or self._done, timeout=self.wait_s)
            self.waited_s += time.monotonic() - t0
            if self.declaration is not None:
                raise self.declaration
            if key in self.verdicts:
                return self.verdicts[key]
            self.unchecked.append(key)
            self._unchecked.add(key)
            return None

    def failure(self, config: dict[str, Any]) -> str | None:
        """The failure status (``timeout``, ``worker_crash``, ...) when the compile of ``config`` hung or killed its
        isolated worker: the evaluator answers the config with that status instead of ``pruned`` (the kernel's own
        code failed, as it would in a measurement); None otherwise. Never waits."""
        from kernelpilot.records.evaluation import FAILURES

        with self._cv:
            found = self.failures.get(config_key(config))
        return None if found is None else (found if found in FAILURES else "runtime_error")

    def finish(self, *, stop: bool = False) -> PruneReport:
        """Wait for the compiles (or, with ``stop``, cancel those not started and kill the isolated ones in flight)
        and return the report.

        Raises:
            KernelRunError: a compile worker process died (from :func:`kernelpilot.profile.static.iter_tasks`).
        """
        self._stop = stop
        with self._cv:  # kept workers waiting for warm() tasks end once the queue is empty
            self._closing = True
            self._cv.notify_all()
        if stop:
            for w in list(self._workers):  # a compile in flight (maybe a hung run_kernel) ends now
                proc = getattr(w, "_proc", None)
                if proc is not None:
                    proc.kill()
        # a stopping search does not wait for workers still booting (their threads see the stop and close them)
        self._thread.join(timeout=STOP_JOIN_S if stop else None)
        if self._thread.is_alive():
            with self._cv:
                self.report.wall_s = time.monotonic() - self._t0
        if self.error is not None and not stop:
            raise self.error
        self.report.unchecked = list(self.unchecked)
        self.report.waited_s = self.waited_s
        return self.report


def compile_order(strat: Strategy, space: SearchSpace, seed: int, start: dict[str, Any]) -> list[dict[str, Any]]:
    """Every config of ``space``, in the order the strategy is expected to ask for them: its ``plan`` when it has one,
    else nearest the start first (breadth-first over one-step neighbours), then the rest in space order."""
    ordered: list[dict[str, Any]] = list(strat.plan(space, seed=seed, start=start) or [])
    if not ordered:
        try:
            first = start if space.is_valid(start) else space.nearest(start)
        except Exception:  # noqa: BLE001 - a start outside the space: space order only
            first = None
        frontier = [first] if first is not None else []
        seen = {config_key(first)} if first is not None else set()
        while frontier:
            ordered += frontier
            nxt = []
            for c in frontier:
                for n in space.neighbours(c):
                    if config_key(n) not in seen:
                        seen.add(config_key(n))
                        nxt.append(n)
            frontier = nxt
    seen = {config_key(c) for c in ordered}
    return ordered + [c for c in space.configs() if config_key(c) not in seen]


#: Compile processes :class:`CompileAhead` keeps up after the configs are compiled, for :meth:`CompileAhead.warm`:
#: a config about to lead has two drawn shapes (smaller, larger) and maybe CHECK_SHAPES, compiled side by side.
WARM_WORKERS = 2
#: A space of at most this many configs has every config compiled at its drawn shapes, after the space's own
#: compiles: a config about to lead whose A/B timing is short (0.15 s for the attention tutorial's v3 and v8 on an
#: H100, session 14) leaves no time to compile them before its audit (1.2-2.3 s of compiles there).
WARM_ALL_MAX = 64

#: Seconds :meth:`CompileAhead.finish` waits for the compile threads when the search stops them: a worker still
#: booting (importing torch, seconds) is left to close itself in the background instead of holding the search's end.
STOP_JOIN_S = 2.0


def _start_compile_mode(worker: Any) -> None:
    """Start ``worker`` (a compile-mode :class:`~kernelpilot.search.worker.Worker`) when it is not running. This
    process's environment is left alone: the child leaves the interpreter itself before it imports Triton
    (``use_interpreter(False)`` in :func:`kernelpilot.search.worker_child._child_main`; nothing the spawn imports
    before it imports Triton). Removing ``TRITON_INTERPRET`` here while it spawned hid it from this process's other
    threads: a test that imported Triton in between ran it compiled. Raises as ``Worker._start``."""
    proc = getattr(worker, "_proc", None)
    if proc is not None and proc.is_alive():
        return
    worker._kill()
    worker._start()
