"""The tuner: a strategy over a kernel's search space, with static pruning, isolated workers, a crash-safe cache,
statistical decisions, a speed-of-light floor and a budget. ``kernelpilot tune`` is a thin layer over :func:`tune`.

Per search:

1. The space: TUNABLES and CONSTRAINTS of the kernel file, plus the device's limits
   (:class:`kernelpilot.search.space.SearchSpace`).
2. Static pruning before any GPU time (:class:`CompileAhead`): every config is compiled for the target in
   parallel over CPU cores, in a background thread while the workers measure, in the order the strategy will
   ask; configs over the shared-memory limit, with more spills than the threshold (16 by default, the threshold
   TorchInductor's Triton autotuner uses to drop spilling configs), under an occupancy floor, or that fail to
   compile are answered ``pruned`` without a GPU. A config asked for before its compile finished is measured
   unchecked rather than keeping the GPU idle.
3. The strategy calls ``evaluate(config)``; the tuner answers from its own memory (no config runs twice), from
   the cache (no budget spent), or by a worker (one budget unit); every new answer is appended to the cache
   before the strategy sees it, so a killed search resumes where it stopped.
4. A config that looks faster than the incumbent replaces it only when faster beyond noise
   (:func:`kernelpilot.search.stats.decide` on interleaved A/B samples taken by the worker; on stored samples in
   a replay). Clearly slower candidates are raced out after a few samples.
5. A time under the speed-of-light floor is ``impossible`` (recorded, never ranked): the roofline's rule
   (:meth:`kernelpilot.hardware.roofline.Roofline.is_impossible`), measured ceilings preferred, 5 % slack under a
   measured ceiling and none under a datasheet peak — the same rule ``kernelpilot optimize`` applies.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelpilot.backends.triton.config import to_triton_config  # re-exported: its home is the Triton backend
from kernelpilot.errors import SearchError
from kernelpilot.search.model import Budget, BudgetExhausted, Evaluation, config_key

__all__ = ["IncumbentChange", "PruneReport", "TuneResult", "Tuner", "static_prune", "to_triton_config", "tune"]

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


class IncumbentChange(BaseModel):
    """One change of the incumbent: after ``evaluations`` evaluations, ``config`` at ``duration_ns``, and why."""

    evaluations: int
    config: dict[str, Any]
    duration_ns: float
    decision: str


class TuneResult(BaseModel):
    """Everything one search did (``kernelpilot tune --json`` prints it; ``tune.json`` in ``--out``).

    Attributes:
        kernel, shape, device, gpu, strategy, seed: what was searched where.
        space_size / space_total: valid configs / before constraints.
        constraints: the constraints applied (the kernel's, then automatic device limits).
        best: the incumbent at the end (None when no config ran correctly).
        history: each change of the incumbent.
        evaluations: every evaluation the strategy received, in order (cached ones flagged).
        n_new / n_cached: evaluations run now / answered from the cache.
        failures: status -> count over ``evaluations``.
        prune: static pruning's report (None when off or replaying).
        stopped: why the search ended (``strategy finished`` or the budget message).
        wall_s: seconds of the whole search; device_s: wall seconds of new evaluations.
        floor_ns: the speed-of-light floor used (None without a spec).
        cache_file: the cache file read and appended.
        worker_restarts: workers replaced after a timeout, crash or poisoned context.
        measured: False under the Triton interpreter (times are not measurements).
        triton_config: the best config as a ``triton.Config(...)`` line.
        top_configs: the five fastest correct configs (fully timed) as ``triton.Config`` lines, fastest first,
            ready to paste into ``@triton.autotune(configs=[...])``.
    """

    kernel: str
    shape: dict[str, Any]
    device: str
    gpu: str | None
    strategy: str
    seed: int
    space_size: int
    space_total: int
    constraints: list[str]
    best: Evaluation | None
    history: list[IncumbentChange]
    evaluations: list[Evaluation]
    n_new: int
    n_cached: int
    failures: dict[str, int]
    prune: PruneReport | None
    stopped: str
    wall_s: float
    device_s: float
    floor_ns: float | None
    cache_file: str | None
    worker_restarts: int
    measured: bool
    triton_config: str | None
    top_configs: list[str] = Field(default_factory=list)


def static_prune(kernel: str | Path, configs: list[dict[str, Any]], shape: dict[str, Any], *, arch: str | None,
                 max_spills: int = DEFAULT_MAX_SPILLS, min_occupancy_pct: float | None = None,
                 max_workers: int | None = None) -> PruneReport:
    """Compile ``configs`` for ``arch`` in parallel over CPU cores and decide which never need a GPU (blocking; the
    tuner overlaps the same work with measurement through :class:`CompileAhead`).

    Args:
        kernel: the kernel file.
        configs: the configs to compile (full configs).
        shape: the problem shape (the compile specializes on it).
        arch: target such as ``sm_90`` (None: this machine's GPU, else sm_90; :mod:`kernelpilot.profile.static`).
        max_spills: prune configs with more spilled registers (``n_spills``, 4-byte units) than this.
        min_occupancy_pct: prune configs whose theoretical occupancy is below this percentage (None: no floor).
        max_workers: compile processes (default: CPU cores).

    Returns:
        A :class:`PruneReport`; ``pruned`` maps each removed config's key to its reason. A config whose capture
        raised a ``ValueError`` (``run_kernel`` refusing it) or that failed to compile is pruned as ``compile``.

    Raises:
        ContractError: the kernel file or the arch is invalid.
    """
    ahead = CompileAhead(kernel, configs, shape, arch, max_spills=max_spills, min_occupancy_pct=min_occupancy_pct,
                         max_workers=max_workers)
    return ahead.finish()


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
        kernel, configs, shape, arch, max_spills, min_occupancy_pct, max_workers: as :func:`static_prune`.
        wait_s: longest wait in :meth:`reason` for one config, seconds.

    Raises:
        ContractError: the kernel file, a config or the arch is invalid (raised here, before the thread starts).
    """

    def __init__(self, kernel: str | Path, configs: list[dict[str, Any]], shape: dict[str, Any], arch: str | None, *,
                 max_spills: int = DEFAULT_MAX_SPILLS, min_occupancy_pct: float | None = None,
                 max_workers: int | None = None, wait_s: float = 30.0) -> None:
        import threading

        from kernelpilot.profile.static import config_tasks, default_arch

        arch = arch or default_arch()
        self.max_spills, self.min_occupancy_pct, self.wait_s = max_spills, min_occupancy_pct, wait_s
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

    def reason(self, config: dict[str, Any]) -> str | None:
        """The prune reason of ``config`` (None: measure it), waiting up to ``wait_s`` for its compile; a config
        not compiled by then (or outside the compiled set) is measured unchecked, and stays so: a verdict arriving
        later does not turn a config already sent to a worker into a pruned one."""
        key = config_key(config)
        t0 = time.monotonic()
        with self._cv:
            if key in self._unchecked:
                return None
            if key not in self.verdicts and key in self._key_set:
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


class Tuner:
    """The evaluate function handed to a strategy (see the module docstring for what it does per call).

    Args:
        space: the search space.
        runner: the worker pool (``evaluate``/``ab_samples``), or a replay callable ``config -> Evaluation``.
        cache: an :class:`kernelpilot.search.cache.EvaluationCache`, or None (replay, or caching off).
        budget: evaluations and/or seconds (only new evaluations count).
        pruned: config key -> reason, from :func:`static_prune` (known before the search).
        ahead: a :class:`CompileAhead` whose verdicts prune configs as their compiles finish (overlapped with
            measurement), or None.
        ab_samples: interleaved samples per side for a replacement decision (0: decide on stored samples).
        race: race clearly slower candidates out after a few samples.
        card_for: optional ``Evaluation -> card dict`` attached to accepted incumbents (guided strategy's evidence).
        log: progress callback, one line per event.
    """

    def __init__(self, space: Any, runner: Any, *, cache: Any = None, budget: Budget | None = None,
                 pruned: dict[str, str] | None = None, ahead: CompileAhead | None = None, ab_samples: int = 30,
                 race: bool = True,
                 card_for: Callable[[Evaluation], dict[str, Any] | None] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.space, self.runner, self.cache = space, runner, cache
        self.budget = (budget or Budget()).start()
        self.pruned = pruned or {}
        self.ahead = ahead
        self.ab_samples, self.race, self.card_for = ab_samples, race, card_for
        self.log = log or (lambda _msg: None)
        self.seen: dict[str, Evaluation] = {}
        self.order: list[Evaluation] = []
        self.incumbent: Evaluation | None = None
        self.history: list[IncumbentChange] = []
        self.n_new = 0
        self.device_s = 0.0
        #: results measured ahead of the strategy's call (a batch over several workers, or a known plan), by key
        self.ready: dict[str, Evaluation] = {}

    @property
    def parallel(self) -> int:
        """Configs the runner evaluates at once (one per GPU or Ray actor; 1 for a replay)."""
        return max(1, int(getattr(self.runner, "parallel", 1) or 1))

    def __call__(self, config: dict[str, Any]) -> Evaluation:
        key = config_key(config)
        if key in self.seen:
            return self.seen[key]
        why = self.space.why_invalid(config)
        if why is not None:
            ev = Evaluation(config=config, status="invalid_config", message=why)
        elif (why := self._prune_reason(config)) is not None:
            ev = Evaluation(config=config, status="pruned", message=why)
        else:
            ev = self.ready.pop(key, None)
            if ev is None and self.cache is not None:
                ev = self.cache.get(config)
            if ev is None:
                self.budget.check()
                ev = self._absorb(self._run(config))
        ev = self._judge(ev)
        self.seen[key] = ev
        self.order.append(ev)
        self.log(f"[{len(self.order)}] {key} -> {ev.status}"
                 + (f" {ev.duration_ns / 1e3:.2f} µs" if ev.duration_ns else "")
                 + (" (cached)" if ev.cached else "") + (f" — {ev.decision}" if ev.decision else ""))
        return ev

    def _needs_run(self, config: dict[str, Any]) -> bool:
        """True when ``config`` would cost a worker evaluation now (valid, not pruned, not answered before)."""
        key = config_key(config)
        return not (key in self.seen or key in self.ready or self.space.why_invalid(config)
                    or self._prune_reason(config) is not None
                    or (self.cache is not None and self.cache.get(config) is not None))

    def _prune_reason(self, config: dict[str, Any]) -> str | None:
        """Why static pruning drops ``config`` (None: measure it): the reasons known up front, else the compile-ahead's
        verdict (waiting a little for a compile still running)."""
        key = config_key(config)
        if key in self.pruned:
            return self.pruned[key]
        return self.ahead.reason(config) if self.ahead is not None else None

    def _absorb(self, ev: Evaluation) -> Evaluation:
        """Count a new evaluation against the budget and append it to the cache (before anyone reads it)."""
        self.budget.charge()
        self.n_new += 1
        self.device_s += ev.wall_s
        if self.cache is not None:
            self.cache.put(ev)
        return ev

    def many(self, configs: list[dict[str, Any]]) -> list[Evaluation]:
        """Evaluate ``configs`` with the new ones measured in parallel over the runner's workers (one per GPU or
        Ray actor), then answered and judged one by one in order, as :meth:`__call__` would.

        Raises:
            BudgetExhausted: the budget is spent (configs measured before are recorded and cached).
        """
        todo: list[dict[str, Any]] = []
        for c in configs:
            if self._needs_run(c) and config_key(c) not in {config_key(t) for t in todo}:
                todo.append(c)
        mapper = getattr(self.runner, "map", None)
        if len(todo) > 1 and self.parallel > 1 and mapper is not None:
            self.budget.check()
            if self.budget.max_evals is not None:
                todo = todo[: max(0, self.budget.max_evals - self.budget.evals)]
            race_ns = self.incumbent.duration_ns if (self.race and self.incumbent is not None) else None
            for ev in mapper(todo, race_against_ns=race_ns):
                self.ready[ev.key] = self._absorb(ev)
        return [self(c) for c in configs]

    def _run(self, config: dict[str, Any]) -> Evaluation:
        race_ns = self.incumbent.duration_ns if (self.race and self.incumbent is not None) else None
        evaluate = getattr(self.runner, "evaluate", None)
        if evaluate is not None:
            return evaluate(config, race_against_ns=race_ns)
        return self.runner(config)

    def _judge(self, ev: Evaluation) -> Evaluation:
        from kernelpilot.search.stats import decide

        if not ev.ok or ev.message.startswith("raced out"):
            return ev.model_copy(update={"accepted": False if ev.ok else None,
                                         "decision": "raced out: clearly slower" if ev.ok else ""})
        if self.incumbent is None:
            return self._accept(ev, "first correct config")
        if ev.duration_ns >= self.incumbent.duration_ns:  # type: ignore[operator]
            return ev.model_copy(update={"accepted": False, "decision": "not faster (median)"})
        samples = None
        ab = getattr(self.runner, "ab_samples", None)
        if ab is not None and self.ab_samples > 0:
            samples = ab(ev.config, self.incumbent.config, self.ab_samples)
        cand, inc = samples if samples else (ev.samples_ns, self.incumbent.samples_ns)
        if not cand or not inc:
            cand, inc = [ev.duration_ns], [self.incumbent.duration_ns]
        d = decide(cand, inc)
        if d.replace:
            return self._accept(ev, d.reason + (" (interleaved A/B)" if samples else " (stored samples)"))
        return ev.model_copy(update={"accepted": False, "decision": d.reason})

    def _accept(self, ev: Evaluation, why: str) -> Evaluation:
        update: dict[str, Any] = {"accepted": True, "decision": why}
        if self.card_for is not None and ev.card is None:
            card = self.card_for(ev)
            if card is not None:
                update["card"] = card
                if self.cache is not None:  # keep the evidence with the record for replays
                    self.cache.put(ev.model_copy(update={"card": card, "cached": False}))
        ev = ev.model_copy(update=update)
        self.incumbent = ev
        self.history.append(IncumbentChange(evaluations=len(self.order) + 1, config=ev.config,
                                            duration_ns=float(ev.duration_ns or math.nan), decision=why))
        return ev


def _gpu_name() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        pynvml.nvmlShutdown()
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - no NVML
        return None


def tune(kernel: str | Path, *, strategy: str = "guided", budget_evals: int | None = None,
         budget_s: float | None = None, shape: dict[str, Any] | None = None, seed: int = 0,
         ref: str | Path | None = None, gpu: str | None = None, prune: bool | str = True,
         constraints: list[str] | None = None,
         max_spills: int = DEFAULT_MAX_SPILLS, min_occupancy_pct: float | None = None, timeout_s: float = 120.0,
         devices: list[str] | None = None, ab_samples: int = 30, race: bool = True, cache_root: str | Path | None = None,
         replay: str | Path | None = None, use_cache: bool = True, start: dict[str, Any] | None = None,
         ray_address: str | None = None, out: str | Path | None = None,
         log: Callable[[str], None] | None = None) -> TuneResult:
    """Search a kernel's configs with one strategy (see the module docstring).

    Args:
        kernel: the kernel file (TUNABLES, optional CONSTRAINTS; or a ``@triton.autotune`` kernel).
        strategy: ``guided``, ``exhaustive``, ``random``, ``local`` or ``bayes``.
        budget_evals / budget_s: stop after this many new evaluations / wall seconds (None: no limit).
        shape: overrides of SHAPE (CPU_SHAPE under the interpreter).
        seed: the strategy's seed.
        gpu: spec name for limits and the speed-of-light floor (default: the GPU present).
        prune: compile every config first and drop those that cannot win (:func:`static_prune`); ``"report"``
            compiles and reports what would be pruned but runs every config (to measure what pruning saves;
            the compile-ahead still fills Triton's cache); False: no compile-ahead.
        constraints: extra constraint expressions for this search, added to the kernel file's CONSTRAINTS.
        max_spills / min_occupancy_pct: pruning thresholds.
        timeout_s: per-config limit in a worker (a hang becomes ``timeout``).
        devices: workers' devices (default: every visible GPU, else the interpreter on the CPU).
        ab_samples: interleaved samples per side for each replacement decision.
        race: stop clearly slower candidates early.
        cache_root: cache folder (default ``$KERNELPILOT_CACHE`` or ``~/.kernelpilot/cache``).
        replay: answer from this cache file (or prefix) instead of running anything (no GPU needed).
        use_cache: read and append the cache (False: every config runs, nothing is stored).
        start: the guided/local strategies' starting config (default: DEFAULT_CONFIG).
        ray_address: evaluate on a Ray cluster (``--ray ADDRESS``) instead of local workers.
        out: folder to write ``tune.json`` and ``tune.md`` (must not exist or be empty).
        log: progress callback.

    Returns:
        A :class:`TuneResult`.

    Raises:
        SearchError: unknown strategy, bad space or constraints, no budget and no end (never: strategies end).
        ContractError: the kernel file breaks the contract.
    """
    from kernelpilot.kernels.contract import load_kernel, resolve_config, resolve_shape
    from kernelpilot.loop import detect_device, roofline_for
    from kernelpilot.search.cache import CacheContext, EvaluationCache, ReplayRunner
    from kernelpilot.search.space import SearchSpace, limits_from_spec
    from kernelpilot.search.strategies import get_strategy

    if prune not in (True, False, "report"):
        raise SearchError(f"--prune {prune!r} is not one of drop, report, off",
                          "drop skips configs that cannot win; report only reports them; off compiles nothing ahead")
    t0 = time.monotonic()
    log = log or (lambda _m: None)
    device = "cpu" if replay is not None else detect_device()
    interpreted = device != "cuda" and replay is None
    kf = load_kernel(kernel, ref, interpreted=interpreted)
    if constraints:
        kf.constraints = [*kf.constraints, *constraints]
    if replay is not None:
        runner: Any = ReplayRunner(replay, root=cache_root)
        ctx = runner.context if hasattr(runner, "context") else None
        if ctx is not None and ctx.kernel_sha256 != kf.source_sha256:
            raise SearchError(f"the cache {runner.path} was measured with another version of {kf.path.name} "
                              f"(sha256 {ctx.kernel_sha256[:12]} vs {kf.source_sha256[:12]} now)",
                              "replay with the kernel file the cache was filled with, or fill a new cache")
        shp = dict(ctx.shape) if ctx is not None else resolve_shape(kf, shape)
        gpu = gpu or (ctx.gpu if ctx is not None and ctx.gpu != "cpu" else None)
    else:
        shp = resolve_shape(kf, shape)
        gpu = gpu or (_gpu_name() if device == "cuda" else None)
    spec = None
    if gpu:
        from kernelpilot.hardware.specs import find_spec, match_device

        try:
            spec = match_device(gpu) if replay is None and device == "cuda" else find_spec(gpu)
        except Exception:  # noqa: BLE001 - no spec: no limits, no floor
            spec = None
    space = SearchSpace.from_kernel(kf, limits_from_spec(spec) if spec is not None else None)
    if space.size == 0:
        raise SearchError(f"{kf.path}: no config satisfies the constraints ({'; '.join(space.constraints)})",
                          "relax CONSTRAINTS or add candidate values to TUNABLES")
    roof, _, _ = roofline_for(kf, shp, "cpu", spec.name if spec is not None else None)
    floor_ns = roof.floor_ns if roof is not None else None
    strat = get_strategy(strategy)
    start_cfg = start or resolve_config(kf, None)

    report: PruneReport | None = None
    ahead: CompileAhead | None = None
    pool: Any = None
    cache = None
    try:
        if replay is None:
            if prune and not kf.extras.get("autotuner"):
                log(f"static pruning: compiling {space.size} configs in parallel with the measurements")
                ahead = CompileAhead(kf.path, compile_order(strat, space, seed, start_cfg), shp,
                                     arch=None if device == "cuda" else "sm_90", max_spills=max_spills,
                                     min_occupancy_pct=min_occupancy_pct)
            from kernelpilot.search.worker import WorkerOptions, WorkerPool

            opts = WorkerOptions(kernel=str(kf.path), ref=str(ref) if ref else None, shape=shp, interpreted=interpreted,
                                 floor_ns=floor_ns, sol_tolerance=roof.sol_tolerance if roof is not None else 0.0)
            if ray_address:
                from kernelpilot.search.ray_pool import RayPool

                pool = RayPool(opts, ray_address, timeout_s=timeout_s)
            else:
                pool = WorkerPool(opts, devices, timeout_s=timeout_s)
            runner = pool
            if use_cache:
                from kernelpilot.measure.env import collect_env

                cache = EvaluationCache(CacheContext.for_kernel(kf, shp, collect_env(probe_ncu=False)), root=cache_root)
        card_for = _light_card_for(kf, shp, roof, gpu) if strategy == "guided" else None
        tuner = Tuner(space, runner, cache=cache, budget=Budget(max_evals=budget_evals, max_s=budget_s),
                      ahead=ahead if prune is True else None, ab_samples=ab_samples if replay is None else 0,
                      race=race and replay is None, card_for=card_for, log=log)
        _prefetch(strat, space, tuner, pool, seed, start_cfg)
        try:
            strat.search(space, tuner, seed=seed, start=start_cfg)
            stopped = "strategy finished"
        except BudgetExhausted as exc:
            stopped = str(exc)
    finally:
        restarts = 0
        if pool is not None:
            try:
                restarts = pool.restarts
            finally:
                pool.close()
        if ahead is not None:  # "report" wants every config's verdict; a dropping search cancels what it no longer needs
            report = ahead.finish(stop=prune is True)
            log(f"static pruning: {report.n_pruned} of {report.n_compiled} compiled ({report.n_configs} in the space) "
                f"pruned {report.by_reason}; compiles ran {report.wall_s:.1f} s beside the measurements, the search "
                f"waited {report.waited_s:.1f} s for them; {len(report.unchecked)} measured before their compile ended")
    failures = Counter(ev.status for ev in tuner.order if ev.status != "ok")
    best = tuner.incumbent
    result = TuneResult(
        kernel=str(kf.path), shape=shp, device=device, gpu=gpu, strategy=strategy, seed=seed,
        space_size=space.size, space_total=space.total_size, constraints=list(space.constraints), best=best,
        history=tuner.history, evaluations=tuner.order, n_new=tuner.n_new,
        n_cached=sum(1 for e in tuner.order if e.cached), failures=dict(failures), prune=report, stopped=stopped,
        wall_s=time.monotonic() - t0, device_s=tuner.device_s, floor_ns=floor_ns,
        cache_file=str(cache.path) if cache is not None else (str(replay) if replay else None),
        worker_restarts=restarts,
        measured=not interpreted, triton_config=to_triton_config(best.config) if best else None,
        top_configs=[to_triton_config(e.config) for e in sorted(
            (e for e in tuner.order if e.ok and not e.message.startswith("raced out")), key=lambda e: e.objective)[:5]],
    )
    if out is not None:
        write_tune_records(result, Path(out))
    return result


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


def _prefetch(strat: Any, space: Any, tuner: Tuner, pool: Any, seed: int, start: dict[str, Any]) -> None:
    """With several devices and a strategy whose order is known up front (``plan``), evaluate the next configs in
    parallel over the devices, so the strategy's sequential calls are answered without waiting."""
    plan = getattr(strat, "plan", None)
    if plan is None or pool is None or tuner.parallel < 2:
        return
    todo = [c for c in plan(space, seed=seed, start=start) if tuner._needs_run(c)]
    if tuner.budget.max_evals is not None:
        todo = todo[: max(0, tuner.budget.max_evals - tuner.budget.evals)]
    for ev in pool.map(todo):
        tuner.ready[ev.key] = tuner._absorb(ev)


def _light_card_for(kf: Any, shape: dict[str, Any], roof: Any, gpu: str | None) -> Callable[[Evaluation], dict | None]:
    """Light cards (timing + roofline + compile metadata) for accepted incumbents: the guided strategy's evidence
    when the tuner does not run ncu. In a replay the card is rebuilt the same way from the stored time and a CPU
    compile for the target, so replayed guided searches see the evidence a live one saw."""
    def card_for(ev: Evaluation) -> dict[str, Any] | None:
        if not ev.ok or not ev.measured:
            return None
        if ev.card:
            return ev.card
        from kernelpilot.profile.light import light_profile

        try:
            card, _ = light_profile(kf.path, ev.config, shape, timing_ns=ev.duration_ns, roofline=roof,
                                    device_name=gpu, kernel_name=kf.name, reason="tune: light card of the incumbent")
        except Exception:  # noqa: BLE001 - no card: the strategy explores
            return None
        return json.loads(card.model_dump_json(by_alias=True))
    return card_for


def write_tune_records(result: TuneResult, out: Path) -> None:
    """Write ``tune.json`` (the whole result) and ``tune.md`` (tables) into ``out``.

    Raises:
        RunFolderError: ``out`` exists and is not empty (nothing in it is touched).
    """
    from kernelpilot.records.workspace import Workspace, write_json, write_text

    ws = Workspace.create(out)
    write_json(ws.root / "tune.json", result)
    write_text(ws.root / "tune.md", render_tune_md(result))


def render_tune_md(r: TuneResult) -> str:
    """A Markdown report of a search: best config, incumbent changes, failures, pruning, every evaluation."""
    unit = "µs" if r.measured else "µs (interpreted, not a measurement)"
    lines = [f"# tune: {Path(r.kernel).name} ({r.strategy}, seed {r.seed})", "",
             f"Shape `{r.shape}` on {r.gpu or r.device}; space {r.space_size} valid configs of {r.space_total}; "
             f"constraints: {'; '.join(r.constraints) or 'none'}.", "",
             f"Stopped: {r.stopped}. {len(r.evaluations)} evaluations ({r.n_new} new, {r.n_cached} cached), "
             f"{r.device_s:.1f} s of worker time, {r.wall_s:.1f} s wall; worker restarts {r.worker_restarts}.", ""]
    if r.best is not None:
        lines += [f"**Best:** `{r.best.config}` — median {r.best.duration_ns / 1e3:.2f} {unit}"
                  + (f", speed-of-light floor {r.floor_ns / 1e3:.2f} µs ({r.floor_ns / r.best.duration_ns:.1%} of it)"
                     if r.floor_ns and r.best.duration_ns else ""), "", f"    {r.triton_config}", ""]
    if r.top_configs:
        lines += ["## Fastest configs as triton.Config lines", "", "```python",
                  *[f"    {c}," for c in r.top_configs], "```", ""]
    if r.history:
        lines += ["## Incumbent changes", "", "| after eval | config | median µs | why |", "|---|---|---|---|"]
        lines += [f"| {h.evaluations} | `{h.config}` | {h.duration_ns / 1e3:.2f} | {h.decision} |" for h in r.history]
        lines.append("")
    if r.prune is not None:
        pr = r.prune
        lines += ["## Static pruning", "", f"{pr.n_pruned} of {pr.n_compiled} configs compiled for {pr.arch} were "
                  f"pruned before any GPU time ({pr.by_reason}); {pr.n_configs} in the space. Compiles ran "
                  f"{pr.wall_s:.1f} s in parallel with the measurements ({pr.compile_s:.1f} CPU-seconds); the search "
                  f"waited {pr.waited_s:.1f} s for them; {len(pr.unchecked)} configs were measured before their "
                  f"compile finished.", ""]
    if r.failures:
        lines += ["## Failures (kept as data)", "", "| status | count |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(r.failures.items())]
        lines.append("")
    lines += ["## Evaluations", "", "| # | config | status | median µs | IQR µs | cached | decision / message |",
              "|---|---|---|---|---|---|---|"]
    for i, ev in enumerate(r.evaluations, 1):
        med = f"{ev.duration_ns / 1e3:.2f}" if ev.duration_ns else "—"
        iqr = f"{ev.iqr_ns / 1e3:.2f}" if ev.iqr_ns is not None else "—"
        note = (ev.decision or ev.message).replace("|", "/").replace("\n", " ")[:160]
        lines.append(f"| {i} | `{ev.key}` | {ev.status} | {med} | {iqr} | {'yes' if ev.cached else ''} | {note} |")
    return "\n".join(lines) + "\n"
