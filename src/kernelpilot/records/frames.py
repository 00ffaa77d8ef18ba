"""Results as pandas DataFrames: one place that turns measured records into rows (``to_dataframe()`` of
:class:`~kernelpilot.app.tune.TuneResult`, :class:`~kernelpilot.app.session.OptimizeResult`,
:class:`~kernelpilot.app.report_cmd.ReportResult`, :class:`~kernelpilot.versions.session.SessionStatus`,
:class:`~kernelpilot.report.benchmark.BenchmarkResult` and :class:`~kernelpilot.api.BenchResult`).

One row per evaluation, version or contender; failures are rows too, with their ``status`` (the failure's kind)
and NaN where there is no time — never 0. Units are in the column names: ``*_ns`` nanoseconds, ``*_s`` seconds,
``pct_*`` percent; ``speedup_vs_*`` is the other's median over this one's (> 1: faster), NaN when there is nothing
to compare (a failure, an interpreted time, no baseline).

pandas is optional (``pip install 'kernelpilot[dataframe]'``): it is imported when a frame is built, and its absence
is a :class:`~kernelpilot.errors.MissingDependencyError` (an ImportError) with that hint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from kernelpilot.records.evaluation import Evaluation
    from kernelpilot.versions.records import MemoryRecord

__all__ = ["BENCHMARK_COLUMNS", "EVALUATION_COLUMNS", "MEMORY_COLUMNS", "baseline_speedups", "benchmark_frame",
           "evaluation_frame", "memory_frame"]

NAN = math.nan

#: Columns of an evaluation frame (tune, optimize, report) and their dtypes; ``config.NAME`` columns (one per
#: tunable, in the configs' order) follow ``config``.
#:
#: index: the version number (optimize) or the evaluation's position (tune); parent: the version it derives from;
#: config: the canonical config key; status: ``ok`` or the failure's kind; version_status: baseline / accepted /
#: rejected / failed; ok: correct and timed; accepted: it became the incumbent (NA when it failed);
#: duration_ns / iqr_ns: median and spread (NaN without a time); n_samples: timed samples kept;
#: pct_of_roofline: floor / median × 100; speedup_vs_first / _parent / _eager / _torch_compile: their median over
#: this one; measured: False under the Triton interpreter; cached: answered from the cache; wall_s: worker
#: seconds it cost; compile_s: seconds of its first launch; change: the move's label; bound: the card's class;
#: decision / message: why it was judged so, or why it failed; worker: where it ran.
EVALUATION_COLUMNS: dict[str, str] = {
    "index": "int64", "parent": "Int64", "config": "object", "status": "object", "version_status": "object",
    "ok": "bool", "accepted": "boolean", "duration_ns": "float64", "iqr_ns": "float64", "n_samples": "int64",
    "pct_of_roofline": "float64", "speedup_vs_first": "float64", "speedup_vs_parent": "float64",
    "speedup_vs_eager": "float64", "speedup_vs_torch_compile": "float64", "measured": "bool", "cached": "bool",
    "wall_s": "float64", "compile_s": "float64", "change": "object", "bound": "object", "decision": "object",
    "message": "object", "worker": "object",
}

#: Columns of a session's frame (one row per version, masked ones flagged) and their dtypes.
#:
#: version / parent; outcome: baseline / improved / regressed / neutral / mixed / invalid / unmeasured; status: the
#: evaluation status (or ``check_changed``); incumbent: it is the session's incumbent; masked; measured;
#: duration_ns / iqr_ns / pct_of_roofline; speedup_vs_v0: v0's median over this one; ab_ratio_vs_parent: the A/B
#: ratio of medians (this / parent); speedup_vs_parent: its inverse; speedup_vs_eager / _torch_compile: from the
#: session's benchmark (``session finish``); bottleneck_before / _after: the cards' classes; hypothesis; change.
MEMORY_COLUMNS: dict[str, str] = {
    "version": "int64", "parent": "Int64", "outcome": "object", "status": "object", "incumbent": "bool",
    "masked": "bool", "measured": "bool", "duration_ns": "float64", "iqr_ns": "float64",
    "pct_of_roofline": "float64", "speedup_vs_v0": "float64", "ab_ratio_vs_parent": "float64",
    "speedup_vs_parent": "float64", "speedup_vs_eager": "float64", "speedup_vs_torch_compile": "float64",
    "bottleneck_before": "object", "bottleneck_after": "object", "hypothesis": "object", "change": "object",
}

#: Columns of a benchmark frame (the kernel, PyTorch eager, torch.compile) and their dtypes: duration_ns / iqr_ns
#: (median and spread, NaN when not timed), n_samples, time_vs_kernel (this median over the kernel's; NaN when the
#: kernel's time is interpreted or missing), measured, cached_at (a reused timing's UTC time), skipped (why not timed).
BENCHMARK_COLUMNS: dict[str, str] = {
    "name": "object", "duration_ns": "float64", "iqr_ns": "float64", "n_samples": "int64",
    "time_vs_kernel": "float64", "measured": "bool", "cached_at": "object", "skipped": "object",
}


def _pandas() -> Any:
    """The pandas module.

    Raises:
        MissingDependencyError: pandas is not installed (the hint says how to install it).
    """
    try:
        import pandas
    except ImportError as exc:
        from kernelpilot.errors import MissingDependencyError

        raise MissingDependencyError(f"to_dataframe() needs pandas, which is not installed ({exc})",
                                     "pip install 'kernelpilot[dataframe]' (or pip install 'pandas>=2')") from exc
    return pandas


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pd.DataFrame:
    """A DataFrame of ``rows`` with ``columns`` first, in order, each cast to its dtype (extra keys follow)."""
    pd = _pandas()
    names = list(columns) + [k for row in rows for k in row if k not in columns]
    names = list(dict.fromkeys(names))
    df = pd.DataFrame(rows, columns=names)
    return df.astype({name: dtype for name, dtype in columns.items() if name in df.columns})


def _num(value: float | None) -> float:
    """``value`` as a float, NaN when there is none (never 0)."""
    return NAN if value is None else float(value)


def _over(numerator: float | None, denominator: float | None) -> float:
    """``numerator / denominator``, NaN when either is missing or not positive."""
    if numerator is None or denominator is None or not numerator > 0 or not denominator > 0:
        return NAN
    return float(numerator) / float(denominator)


def baseline_speedups(baselines_ns: dict[str, float] | None, duration_ns: float | None,
                      measured: bool = True) -> dict[str, float]:
    """``speedup_vs_eager`` and ``speedup_vs_torch_compile`` of a time: each baseline's median over ``duration_ns``
    (a baseline is found by its name: one holding ``eager``, one holding ``compile``); NaN when that baseline is
    missing, there is no time, or the time is not a measurement (interpreted)."""
    out = {"speedup_vs_eager": NAN, "speedup_vs_torch_compile": NAN}
    if not measured:
        return out
    for name, ns in (baselines_ns or {}).items():
        key = ("speedup_vs_eager" if "eager" in name.lower() else
               "speedup_vs_torch_compile" if "compile" in name.lower() else None)
        if key is not None:
            out[key] = _over(ns, duration_ns)
    return out


def evaluation_frame(evaluations: Sequence[Evaluation], baselines_ns: dict[str, float] | None = None
                     ) -> pd.DataFrame:
    """One row per evaluation (:data:`EVALUATION_COLUMNS`, then ``config.NAME`` per tunable).

    Args:
        evaluations: in order (a search's evaluations, a run's versions).
        baselines_ns: baseline name -> median, ns (a run's ``baselines_ns``: PyTorch eager, torch.compile).

    Raises:
        MissingDependencyError: pandas is not installed.
    """
    from kernelpilot.records.evaluation import version_change

    rows, by_index = [], {ev.index: ev for ev in evaluations if ev.index is not None}
    for position, ev in enumerate(evaluations):
        has_time = ev.duration_ns is not None
        row: dict[str, Any] = {
            "index": ev.index if ev.index is not None else position, "parent": ev.parent, "config": ev.key,
            "status": ev.status, "version_status": ev.version_status, "ok": ev.ok,
            "accepted": None if ev.accepted is None else bool(ev.accepted), "duration_ns": _num(ev.duration_ns),
            "iqr_ns": _num(ev.iqr_ns) if has_time else NAN, "n_samples": len(ev.samples_ns),
            "pct_of_roofline": _num(ev.pct_of_roofline), "speedup_vs_first": _num(ev.speedup_vs_first),
            "speedup_vs_parent": _num(ev.speedup_vs_parent),
            **baseline_speedups(baselines_ns, ev.duration_ns if ev.ok else None, ev.measured),
            "measured": ev.measured, "cached": ev.cached, "wall_s": float(ev.wall_s), "compile_s": _num(ev.compile_s),
            "change": version_change(ev, by_index) if ev.move is not None or ev.parent is not None else "",
            "bound": ev.bound or "", "decision": ev.decision,
            "message": ev.message, "worker": ev.worker}
        row.update({f"config.{name}": value for name, value in ev.config.items()})
        rows.append(row)
    return _frame(rows, EVALUATION_COLUMNS)


def memory_frame(memories: Sequence[MemoryRecord], incumbent: int | None,
                 baselines_ns: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per version of a session (:data:`MEMORY_COLUMNS`), masked ones included and flagged.

    Args:
        memories: the versions' ``memory.json`` records, in order. incumbent: the incumbent's version number.
        baselines_ns: baseline name -> median, ns (the session's ``benchmark.json``, after ``finish``).

    Raises:
        MissingDependencyError: pandas is not installed.
    """
    first = next((m for m in memories if m.version == 0), None)
    first_ns = first.duration_ns if first is not None and first.measured else None
    rows = []
    for m in memories:
        timed = m.outcome != "invalid" and m.duration_ns is not None
        ratio = (m.vs_parent or {}).get("ratio") if m.measured else None
        rows.append({
            "version": m.version, "parent": m.parent, "outcome": m.outcome, "status": m.status,
            "incumbent": m.version == incumbent, "masked": m.masked, "measured": m.measured,
            "duration_ns": _num(m.duration_ns) if timed else NAN, "iqr_ns": _num(m.iqr_ns) if timed else NAN,
            "pct_of_roofline": _num(m.pct_of_roofline),
            "speedup_vs_v0": _over(first_ns, m.duration_ns) if timed and m.measured else NAN,
            "ab_ratio_vs_parent": _num(ratio), "speedup_vs_parent": _over(1.0, ratio),
            **baseline_speedups(baselines_ns, m.duration_ns if timed else None, m.measured),
            "bottleneck_before": m.bottleneck_before or "", "bottleneck_after": m.bottleneck_after or "",
            "hypothesis": m.hypothesis, "change": m.change})
    return _frame(rows, MEMORY_COLUMNS)


def benchmark_frame(rows: Sequence[tuple[str, Any, str | None, str | None]]) -> pd.DataFrame:
    """One row per contender (:data:`BENCHMARK_COLUMNS`); the first is the kernel the others are compared with.

    Args:
        rows: ``(name, timing or None, cached_at, skipped)`` per contender, the kernel first (a
            :class:`~kernelpilot.measure.timing.TimingResult` as ``timing``).

    Raises:
        MissingDependencyError: pandas is not installed.
    """
    kernel = rows[0][1] if rows else None
    kernel_ns = kernel.median_ns if kernel is not None and kernel.is_measurement else None
    out = []
    for name, timing, cached_at, skipped in rows:
        out.append({"name": name, "duration_ns": _num(timing.median_ns if timing else None),
                    "iqr_ns": _num(timing.iqr_ns if timing else None),
                    "n_samples": timing.n_samples if timing else 0,
                    "time_vs_kernel": _over(timing.median_ns, kernel_ns) if timing else NAN,
                    "measured": bool(timing.is_measurement) if timing else False,
                    "cached_at": cached_at or "", "skipped": skipped or ""})
    return _frame(out, BENCHMARK_COLUMNS)
