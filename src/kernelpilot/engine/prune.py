"""Static pruning before any GPU time: configs that can never win are answered ``pruned``.

Every config of the search is compiled for the target in parallel over CPU cores, in a background thread while the
workers measure, in the order the strategy will ask (:func:`compile_order`); configs over the shared-memory limit,
with more spills than the threshold (16 by default, the threshold TorchInductor's Triton autotuner uses to drop
spilling configs), under an occupancy floor, or that fail to compile are pruned (:func:`prune_reason`). A config
asked for before its compile finished is measured unchecked rather than keeping the GPU idle. On a GPU machine the
compiles also fill Triton's cache for the measurement workers. :class:`CompileAhead` is the
:class:`~kernelpilot.engine.evaluator.Pruner` the evaluator is handed.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelpilot.records.evaluation import config_key

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


def prune_reason(res: Any, max_spills: int, min_occupancy_pct: float | None) -> tuple[str, str] | None:
    """Why one static inspection result (:class:`~kernelpilot.profile.static.StaticReport` or
    :class:`~kernelpilot.profile.static.StaticFailure`) can never win: ``(kind, reason)`` with kind ``shared memory``,
    ``spills``, ``occupancy`` or ``compile``; None when the config must be measured. Raises nothing."""
    from kernelpilot.profile.static import StaticFailure

    if isinstance(res, StaticFailure):
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


class CompileAhead:
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
        max_workers: compile processes (default: CPU cores).
        measure_while_cold: do not wait for a verdict before the first compile finished (see :meth:`reason`).
        wait_s: longest wait in :meth:`reason` for one config, seconds.
        progress: called as ``progress(compiled, configs)`` after each compile, from the background thread
            (:func:`kernelpilot.progress.counter` makes one from a ``log``); it must not raise.

    Raises:
        ContractError: the kernel file, a config or the arch is invalid (raised here, before the thread starts).
    """

    def __init__(self, kernel: str | Path, configs: list[dict[str, Any]], shape: dict[str, Any], arch: str | None, *,
                 max_spills: int = DEFAULT_MAX_SPILLS, min_occupancy_pct: float | None = None,
                 max_workers: int | None = None, wait_s: float = 30.0, measure_while_cold: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> None:
        import threading

        from kernelpilot.profile.static import config_tasks, default_arch

        arch = arch or default_arch()
        self.max_spills, self.min_occupancy_pct, self.wait_s = max_spills, min_occupancy_pct, wait_s
        self.measure_while_cold, self.progress = measure_while_cold, progress
        self._tasks = config_tasks(kernel, configs, shape, arch, spill_bytes=False, sass=False)
        self._keys = [config_key(c) for c in configs]
        self._key_set = set(self._keys)
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

        gen = iter_tasks(self._tasks, max_workers=max_workers, in_process=False)
        try:
            for i, res in gen:
                self._record(self._keys[i], res)
                if self._stop:
                    break
        except BaseException as exc:  # noqa: BLE001 - kept; reason() then lets configs be measured unchecked
            self.error = exc
        finally:
            gen.close()  # cancels the compiles not started yet
            with self._cv:
                self._done = True
                self.report.wall_s = time.monotonic() - self._t0
                self._cv.notify_all()

    def _record(self, key: str, res: Any) -> None:
        why = prune_reason(res, self.max_spills, self.min_occupancy_pct)
        with self._cv:
            self.report.compile_s += float(getattr(res, "compile_s", 0.0) or 0.0)
            if not hasattr(res, "stage"):
                self.report.static[key] = {"registers_per_thread": res.registers_per_thread, "spills": res.n_spills,
                                           "shared_bytes": res.shared_mem_bytes,
                                           "occupancy_pct": res.occupancy.occupancy_pct if res.occupancy else None}
            if why is not None:
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
        Liger-Kernel's RMSNorm) while the worker could already measure."""
        key = config_key(config)
        t0 = time.monotonic()
        with self._cv:
            if key in self._unchecked:
                return None
            if key not in self.verdicts and key in self._key_set and (self.verdicts or not self.measure_while_cold):
                self._cv.wait_for(lambda: key in self.verdicts or self._done, timeout=self.wait_s)
            self.waited_s += time.monotonic() - t0
            if key in self.verdicts:
                return self.verdicts[key]
            self.unchecked.append(key)
            self._unchecked.add(key)
            return None

    def finish(self, *, stop: bool = False) -> PruneReport:
        """Wait for the compiles (or, with ``stop``, cancel those not started) and return the report.

        Raises:
            KernelRunError: a compile worker process died (from :func:`kernelpilot.profile.static.iter_tasks`).
        """
        self._stop = stop
        self._thread.join()
        if self.error is not None and not stop:
            raise self.error
        self.report.unchecked = list(self.unchecked)
        self.report.waited_s = self.waited_s
        return self.report


def compile_order(strat: Any, space: Any, seed: int, start: dict[str, Any]) -> list[dict[str, Any]]:
    """Every config of ``space``, in the order the strategy is expected to ask for them: its ``plan`` when it has one,
    else nearest the start first (breadth-first over one-step neighbours), then the rest in space order."""
    plan = getattr(strat, "plan", None)
    ordered: list[dict[str, Any]] = list(plan(space, seed=seed, start=start)) if plan is not None else []
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
