"""benchmark.md: the best config against PyTorch eager and torch.compile — same timer, same inputs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kernelpilot.fmt import format_duration_ns, format_ratio
from kernelpilot.kernels.contract import KernelFile, make_case, run_kernel
from kernelpilot.measure.settings import pristine, restore as restore_settings
from kernelpilot.measure.timing import TimingResult, time_callable
from kernelpilot.target import Target


class BenchmarkRow(BaseModel):
    """One contender: its timing, or why it was not timed. ``cached_at`` (UTC, ISO 8601): the timing was taken then
    and reused from the baseline cache (:mod:`kernelpilot.measure.baseline_cache`); ``note`` says why it was or
    was not reused."""

    name: str
    timing: TimingResult | None = None
    skipped: str | None = None
    cached_at: str | None = None
    note: str = ""


class BenchmarkResult(BaseModel):
    """The contenders at one shape; ``config`` is the kernel's (best) config. ``round_robin``: every timed row comes
    from one round-robin timing (one sample of each per round, the same count each: ratios pair sample by sample)."""

    shape: dict[str, Any]
    config: dict[str, Any]
    device: str
    rows: list[BenchmarkRow]
    round_robin: bool = False

    @property
    def baselines_ns(self) -> dict[str, float]:
        """The baselines timed (every row after the kernel's): name -> median, ns."""
        return {r.name: r.timing.median_ns for r in self.rows[1:] if r.timing is not None}

    def to_dataframe(self) -> Any:
        """The contenders as a pandas DataFrame, the kernel first: columns in
        :data:`kernelpilot.records.frames.BENCHMARK_COLUMNS` (``duration_ns``, ``iqr_ns``, ``time_vs_kernel`` ...);
        a contender not timed is a row with its reason in ``skipped`` and NaN times.

        Raises:
            MissingDependencyError: pandas is not installed (``pip install 'kernelpilot[dataframe]'``).
        """
        from kernelpilot.records.frames import benchmark_frame

        return benchmark_frame([(r.name, r.timing, r.cached_at, r.skipped) for r in self.rows])


def _timed(name: str, fn: Any, target: Target, before_each: Any = None) -> BenchmarkRow:
    try:
        return BenchmarkRow(name=name, timing=time_callable(fn, target, before_each=before_each))
    except Exception as exc:  # a baseline that cannot run is reported, not fatal
        return BenchmarkRow(name=name, skipped=f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")


#: torch.compile of each reference function, compiled once per process (a worker answers many requests).
_COMPILED: dict[Any, Any] = {}


def run_benchmark(kf: KernelFile, shape: dict[str, Any], config: dict[str, Any], target: Target,
                  kernel_timing: TimingResult | None = None, *, use_cache: bool = True) -> BenchmarkResult:
    """Time the kernel at ``config``, the reference in eager PyTorch, and ``torch.compile(reference)``.

    All three run on the same inputs (seed 0, native dtypes) with the same timer; in-place inputs are restored
    before every launch of each, outside the timed region. torch.compile is skipped without a GPU: next to
    interpreted Triton its CPU time would compare nothing; it compiles once per process.

    Without ``kernel_timing`` (``optimize``'s baselines, timed with the incumbent's config) the contenders that run
    are timed round-robin (:func:`kernelpilot.measure.timing.time_round_robin`), so the ratios between them are
    drift-free; torch.compile is then always timed now. With ``kernel_timing`` (the kernel's timing already taken on
    these inputs: ``kernelpilot bench``) the baselines are timed one after the other and, with ``use_cache``, a
    torch.compile timing of the same reference, inputs and GPU from the last day is reused when eager, re-timed now,
    agrees with eager of then within 3 % (:mod:`kernelpilot.measure.baseline_cache`; the row says so).
    Runs kernel code: callers run it in an isolated worker (:mod:`kernelpilot.search.isolated`).
    """
    restore_settings()  # in full, compiler config included: each launch then gets the quick check (pristine)
    try:
        return _run_benchmark(kf, shape, config, target, kernel_timing, use_cache)
    finally:
        restore_settings()  # a change made during the timing, found in full (recorded in settings_restored)


def _run_benchmark(kf: KernelFile, shape: dict[str, Any], config: dict[str, Any], target: Target,
                   kernel_timing: TimingResult | None, use_cache: bool) -> BenchmarkResult:
    case = make_case(kf, shape, 0, target.torch_device)
    inputs, restore = case.inputs, case.refresher()  # every launch: unseen inputs, outputs poisoned
    lang = {"triton": "Triton", "cuda": "CUDA C++"}.get((kf.backend.name if kf.backend is not None else ""), "kernel")
    name = f"{kf.name} ({lang}, best config)"
    if kernel_timing is None:
        return _round_robin(kf, case, name, config, shape, target)
    rows = [BenchmarkRow(name=name, timing=kernel_timing),
            _timed("PyTorch eager (reference)", pristine(lambda: kf.reference(**inputs)), target, restore)]
    if target.is_gpu:
        rows.append(_compiled_row(kf, inputs, case.inplace, restore, rows[1].timing, use_cache, target))
    else:
        rows.append(BenchmarkRow(name=COMPILE_ROW, skipped=NO_GPU_COMPILE))
    return BenchmarkResult(shape=shape, config=config, device=target.torch_device, rows=rows)


COMPILE_ROW = "torch.compile (reference, default mode)"
NO_GPU_COMPILE = "no GPU: not run (interpreted Triton vs compiled CPU code compares nothing)"


def _round_robin(kf: KernelFile, case: Any, name: str, config: dict[str, Any],
                 shape: dict[str, Any], target: Target) -> BenchmarkResult:
    """The kernel, eager and (on a GPU) torch.compile timed round-robin; a contender whose first launch raises is a
    row that says why, and the others are timed without it. The kernel's timed launches are checked as every timed
    launch is (:func:`kernelpilot.measure.timed_check.check_timed`: outputs of launches kept in secret against the
    reference); a kernel wrong on them gets no time, its row says why."""
    import torch

    from kernelpilot.measure.memory import keep_copy
    from kernelpilot.measure.timed_check import KEEP, check_timed
    from kernelpilot.measure.timing import time_round_robin

    inputs = case.inputs
    checked = case.refresher(keep=KEEP, copy=keep_copy)  # new values every launch; kernel outputs kept in secret
    restore = _KernelLaunchesKept(checked)
    contenders: list[tuple[str, Any]] = [(name, lambda: run_kernel(kf, inputs, config)),
                                         ("PyTorch eager (reference)", pristine(lambda: kf.reference(**inputs)))]
    skipped: dict[str, str] = {}
    if target.is_gpu:
        compiled = _compiled(kf)
        contenders.append((COMPILE_ROW, pristine(lambda: compiled(**inputs))))
    else:
        skipped[COMPILE_ROW] = NO_GPU_COMPILE
    runnable = []
    for label, fn in contenders:
        try:  # the first launch compiles (torch.compile, Triton) outside any timing
            restore()
            fn()
            if target.is_gpu:
                torch.cuda.synchronize()
            runnable.append((label, fn))
        except Exception as exc:  # a contender that cannot run is reported, not fatal
            skipped[label] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    timings = dict(zip([n for n, _ in runnable], time_round_robin([f for _, f in runnable], target,
                                                                   before_each=restore))) if runnable else {}
    if name in timings:
        timed = check_timed(kf, checked, tags={"0": name})
        if not timed.passed:
            del timings[name]
            skipped[name] = f"wrong_when_timed: {timed.error}"
    rows = [BenchmarkRow(name=label, timing=timings.get(label), skipped=skipped.get(label),
                         note="timed round-robin with the other rows" if label in timings else "")
            for label in [n for n, _ in contenders] + ([] if target.is_gpu else [COMPILE_ROW])]
    return BenchmarkResult(shape=shape, config=config, device=target.torch_device, rows=rows, round_robin=True)


class _KernelLaunchesKept:
    """The ``before_each`` of a round-robin: every launch gets new values (the refresher's ``__call__``), and only
    the kernel's launches (tag ``"0"``, the first contender) are offered to the refresher's secret reservoir."""

    def __init__(self, refresher: Any) -> None:
        self.refresher = refresher

    def __call__(self) -> None:
        self.refresher()

    def after(self, tag: str = "") -> None:
        """Keep the outputs of the kernel's launch when the reservoir draws it; other contenders' are not kept."""
        if tag == "0":
            self.refresher.after(tag)


def _compiled(kf: KernelFile) -> Any:
    """``torch.compile(kf.reference)``, made once per process (:data:`_COMPILED`; Inductor compiles on the first
    call)."""
    import torch

    if kf.reference not in _COMPILED:
        _COMPILED[kf.reference] = torch.compile(kf.reference)
    return _COMPILED[kf.reference]


def _compiled_row(kf: KernelFile, inputs: dict[str, Any], inplace: list[str], restore: Any,
                  eager: TimingResult | None, use_cache: bool, target: Target) -> BenchmarkRow:
    """The torch.compile row: from the baseline cache when usable, else compiled (once per process) and timed."""
    from kernelpilot.measure import baseline_cache

    name = COMPILE_ROW
    key, why = None, "baseline cache not used (--fresh-baselines)"
    if use_cache and eager is not None:
        try:
            key = baseline_cache.baseline_key(kf.reference, inputs, inplace)
            entry, why = baseline_cache.lookup(key, eager)
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be keyed is a miss, never a failure
            entry, why = None, f"baseline cache not usable: {type(exc).__name__}: {exc}"
        if entry is not None:
            return BenchmarkRow(name=name, timing=entry.compiled, cached_at=entry.measured_at,
                                note=f"timed {entry.measured_at} (baseline cache); {why}")
    compiled = _compiled(kf)
    row = _timed(name, pristine(lambda: compiled(**inputs)), target, restore)
    if row.timing is not None and key is not None and eager is not None:
        baseline_cache.store(key, eager, row.timing)
    return row.model_copy(update={"note": f"timed now; {why}"})


def render_benchmark_md(bench: BenchmarkResult, info: Any = None) -> str:
    """The benchmark table: median and IQR (each in the unit that fits it) and each time relative to the kernel's.

    The relative time is ``—`` where there is nothing to compare, and a line under the table says why: the kernel ran
    under the Triton interpreter (its time is not a measurement: an interpreted kernel against compiled PyTorch
    compares nothing), or it has no time."""
    kernel = bench.rows[0].timing
    interpreted = kernel is not None and not kernel.is_measurement
    lines = ["# Benchmark", "", f"Shape `{bench.shape}`, config `{bench.config}`, device {bench.device}.", ""]
    if interpreted:
        lines += ["**Interpreted — not a measurement**: the Triton kernel ran under the interpreter on the CPU.", ""]
    else:
        lines += ["CUDA events, L2 flushed before every sample, same inputs for every row.", ""]
    lines += ["| implementation | median | IQR | samples | time vs kernel |", "|---|---|---|---|---|"]
    for row in bench.rows:
        if row.timing is None:
            lines.append(f"| {row.name} | — | — | — | {row.skipped} |")
            continue
        t = row.timing
        rel = (format_ratio(t.median_ns / kernel.median_ns, suffix="x")
               if kernel is not None and not interpreted and kernel.median_ns > 0 else "—")
        name = f"{row.name} [cached]" if row.cached_at else row.name
        lines.append(f"| {name} | {format_duration_ns(t.median_ns)} | {format_duration_ns(t.iqr_ns)} | "
                     f"{t.n_samples} | {rel} |")
    why = ("time vs kernel: — because the kernel ran under the Triton interpreter: its time is not a measurement, so "
           "no ratio to PyTorch is claimed" if interpreted else
           "time vs kernel: — because the kernel has no time" if kernel is None else "")
    notes = ([f"- {why}"] if why else []) + [f"- {row.name}: {row.note}" for row in bench.rows if row.note]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"
