"""benchmark.md: the best config against PyTorch eager and torch.compile — same timer, same inputs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kernelpilot.kernels.contract import KernelFile, make_case, run_kernel
from kernelpilot.measure.timing import TimingResult, time_callable


class BenchmarkRow(BaseModel):
    """One contender: its timing, or why it was not timed."""

    name: str
    timing: TimingResult | None = None
    skipped: str | None = None


class BenchmarkResult(BaseModel):
    """The contenders at one shape; ``config`` is the kernel's (best) config."""

    shape: dict[str, Any]
    config: dict[str, Any]
    device: str
    rows: list[BenchmarkRow]


def _timed(name: str, fn: Any, device: str, before_each: Any = None) -> BenchmarkRow:
    try:
        return BenchmarkRow(name=name, timing=time_callable(fn, device, before_each=before_each))
    except Exception as exc:  # a baseline that cannot run is reported, not fatal
        return BenchmarkRow(name=name, skipped=f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")


#: torch.compile of each reference function, compiled once per process (a worker answers many requests).
_COMPILED: dict[Any, Any] = {}


def run_benchmark(kf: KernelFile, shape: dict[str, Any], config: dict[str, Any], device: str,
                  kernel_timing: TimingResult | None = None) -> BenchmarkResult:
    """Time the kernel at ``config``, the reference in eager PyTorch, and ``torch.compile(reference)``.

    All three run on the same inputs (seed 0, native dtypes) with the same timer; in-place inputs are restored
    before every launch of each, outside the timed region. torch.compile is skipped without a GPU: next to
    interpreted Triton its CPU time would compare nothing; it compiles once per process.
    ``kernel_timing``: the kernel's timing already taken on these inputs (``kernelpilot bench``), not taken again.
    Runs kernel code: callers run it in an isolated worker (:mod:`kernelpilot.search.isolated`).
    """
    import torch

    case = make_case(kf, shape, 0, device)
    inputs, restore = case.inputs, case.before_launch
    name = f"{kf.name} (Triton, best config)"
    rows = [BenchmarkRow(name=name, timing=kernel_timing) if kernel_timing is not None else
            _timed(name, lambda: run_kernel(kf, inputs, config), device, restore),
            _timed("PyTorch eager (reference)", lambda: kf.reference(**inputs), device, restore)]
    if device == "cuda":
        if kf.reference not in _COMPILED:
            _COMPILED[kf.reference] = torch.compile(kf.reference)
        compiled = _COMPILED[kf.reference]
        rows.append(_timed("torch.compile (reference, default mode)", lambda: compiled(**inputs), device, restore))
    else:
        rows.append(BenchmarkRow(name="torch.compile (reference)",
                                 skipped="no GPU: not run (interpreted Triton vs compiled CPU code compares nothing)"))
    return BenchmarkResult(shape=shape, config=config, device=device, rows=rows)


def render_benchmark_md(bench: BenchmarkResult, info: Any = None) -> str:
    """The benchmark table: median and IQR (µs) and speed relative to the kernel."""
    kernel = bench.rows[0].timing
    lines = ["# Benchmark", "", f"Shape `{bench.shape}`, config `{bench.config}`, device {bench.device}.", ""]
    if kernel is not None and not kernel.is_measurement:
        lines += ["**Interpreted — not a measurement**: the Triton kernel ran under the interpreter on the CPU.", ""]
    else:
        lines += ["CUDA events, L2 flushed before every sample, same inputs for every row.", ""]
    lines += ["| implementation | median µs | IQR µs | samples | time vs kernel |", "|---|---|---|---|---|"]
    for row in bench.rows:
        if row.timing is None:
            lines.append(f"| {row.name} | — | — | — | {row.skipped} |")
            continue
        t = row.timing
        rel = f"{t.median_ns / kernel.median_ns:.2f}x" if kernel else "—"
        lines.append(f"| {row.name} | {t.median_ns / 1e3:.2f} | {t.iqr_ns / 1e3:.2f} | {t.n_samples} | {rel} |")
    return "\n".join(lines) + "\n"
