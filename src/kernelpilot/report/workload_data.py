"""The records of a ``tune --workload`` run folder, read for its ``report.html``
(:mod:`kernelpilot.report.workload_html`): the run's result (``workload.json``, or the result object the run is about
to write there) and every cross-check's ``shapes/<i>/tune.json`` (every candidate config evaluated at one workload
shape).

Nothing is measured or recomputed here. A heatmap cell is the evaluation's own ``duration_ns`` (the median) over the
fastest such median at the same shape; the per-shape times and weighted totals are the result's. Where the result
says something its records do not (a row's time that is not the cited evaluation's median, a weighted total that is
not the sum of weight x median of its rows) the disagreement is listed in :attr:`WorkloadPage.problems`, and the page
shows it: the page is a check of the result, not a copy of its claims.

Every string here (config values, kernel names, failure messages) comes from a record and is raw text, escaped where
the page is written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from kernelpilot.records.workspace import read_record

__all__ = ["Cell", "WorkloadPage", "config_text", "read_workload"]

#: Relative difference under which two times read from records are the same number (JSON float round trips are
#: exact; this only absorbs a sum's rounding order).
SAME_REL = 1e-9


def _canon(config: Mapping[str, Any]) -> str:
    """A config's identity as text: JSON with sorted keys (what the run matches configs by)."""
    return json.dumps(dict(config), sort_keys=True, separators=(",", ":"), default=str)


def config_text(config: Mapping[str, Any]) -> str:
    """A config as a short line, ``BLOCK_SIZE=1024, num_warps=4`` (keys sorted); raw text. Raises nothing."""
    return ", ".join(f"{k}={v}" for k, v in sorted(dict(config).items())) or "{}"


@dataclass
class Cell:
    """One candidate config at one workload shape, as that shape's ``tune.json`` holds it.

    Attributes:
        median_ns: the evaluation's median (``duration_ns``, ns); None when it failed or was not evaluated there.
        ratio: ``median_ns`` over the fastest correct median at that shape (1.0 = the fastest); None with no median.
        reason: why there is no median (the failure status and message, or that no evaluation is recorded).
        record: ``shapes/<i>/tune.json#<seq>``, the evaluation it comes from ("" when absent).
    """

    median_ns: Optional[float] = None
    ratio: Optional[float] = None
    reason: str = ""
    record: str = ""


@dataclass
class WorkloadPage:
    """What the workload page shows (see the module docstring).

    Attributes:
        folder: the run folder. result: the run's result (``workload.json``'s content).
        kernel: the kernel file; keys: the dispatched keys; measured: False for interpreted times.
        rows: the result's per-shape rows (shape, weight, bucket, table_ns, single_ns, default_ns), in its order.
        configs: the candidate configs (heatmap rows); default_index / single_index: their positions (None if absent).
        cells: ``cells[config][shape]`` for every candidate at every row's shape.
        best_ns: per shape, the fastest correct median there (None when nothing ran correctly).
        folders: per shape, its cross-check folder relative to ``folder`` ("" when none was found).
        chosen: per shape, the index in ``configs`` of its bucket's chosen config (None when not a candidate).
        buckets: the result's buckets (name, ranges, config, decision ...).
        problems: every place where the result and its records disagree (empty when they agree).
    """

    folder: Path
    result: dict[str, Any]
    kernel: str
    keys: list[str]
    measured: bool
    rows: list[dict[str, Any]]
    configs: list[dict[str, Any]]
    default_index: Optional[int]
    single_index: Optional[int]
    cells: list[list[Cell]]
    best_ns: list[Optional[float]]
    folders: list[str]
    chosen: list[Optional[int]]
    buckets: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _shape_key(shape: Mapping[str, Any]) -> str:
    from kernelpilot.workload.model import shape_id

    return shape_id(shape)


def _cross_checks(folder: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """shape id -> (``shapes/<i>``, that folder's ``tune.json`` content), for every cross-check folder present.

    Raises:
        RunFolderError: a ``tune.json`` that is not JSON (named).
    """
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    root = folder / "shapes"
    if not root.is_dir():
        return found
    subs = sorted((p for p in root.iterdir() if (p / "tune.json").is_file()),
                  key=lambda p: (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name))
    for sub in subs:
        data = read_record(sub / "tune.json", json.loads)
        if isinstance(data, dict) and isinstance(data.get("shape"), dict):
            found.setdefault(_shape_key(data["shape"]), (sub.relative_to(folder).as_posix(), data))
    return found


def _cells(configs: list[dict[str, Any]], rel: str, tune: Optional[dict[str, Any]]) -> list[Cell]:
    """Each config's cell at one shape, from that shape's ``tune.json`` (``rel`` its folder): a correct timed
    evaluation (status ok, a median, samples: what the run itself accepts) gives a median; else the reason."""
    if tune is None:
        return [Cell(reason="no cross-check record of this shape (no shapes/<i>/tune.json holds it)")
                for _ in configs]
    timed: dict[str, tuple[float, str]] = {}
    failed: dict[str, str] = {}
    for pos, e in enumerate(tune.get("evaluations") or []):
        if not isinstance(e, dict) or not isinstance(e.get("config"), dict):
            continue
        k = _canon(e["config"])
        record = f"{rel}/tune.json#{e.get('seq', pos) if e.get('seq') is not None else pos}"
        ns = e.get("duration_ns")
        if e.get("status") == "ok" and isinstance(ns, (int, float)) and ns > 0 and e.get("samples_ns"):
            timed[k] = (float(ns), record)
        elif e.get("status") != "ok":
            failed.setdefault(k, f"{e.get('status')}: {str(e.get('message') or '')[:300]} ({record})")
        else:
            failed.setdefault(k, f"ran correctly but has no timed samples ({record})")
    out = []
    for c in configs:
        k = _canon(c)
        if k in timed:
            out.append(Cell(median_ns=timed[k][0], record=timed[k][1]))
        else:
            out.append(Cell(reason=failed.get(k, f"not evaluated at this shape (absent from {rel}/tune.json)")))
    best = min((c.median_ns for c in out if c.median_ns is not None), default=None)
    for c in out:
        c.ratio = c.median_ns / best if c.median_ns is not None and best else None
    return out


def _same(a: Optional[float], b: Optional[float]) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=SAME_REL, abs_tol=0.0)


def _index(configs: list[dict[str, Any]], config: Any) -> Optional[int]:
    if not isinstance(config, dict):
        return None
    k = _canon(config)
    return next((i for i, c in enumerate(configs) if _canon(c) == k), None)


def read_workload(folder: str | Path, result: Optional[Mapping[str, Any]] = None) -> WorkloadPage:
    """Read a workload run folder's records into a :class:`WorkloadPage`.

    Args:
        folder: the run's ``--out`` folder (``shapes/<i>/tune.json`` under it).
        result: the run's result as a dict (``WorkloadResult.model_dump()``); None: read ``folder/workload.json``.

    Raises:
        RunFolderError: ``workload.json`` (when read) or a ``tune.json`` is missing where needed or not JSON.
    """
    root = Path(folder)
    data = dict(result) if result is not None else read_record(root / "workload.json", json.loads)
    configs = [dict(c) for c in data.get("candidates") or []]
    rows = [dict(r) for r in data.get("rows") or []]
    buckets = [dict(b) for b in data.get("buckets") or []]
    checks = _cross_checks(root)
    cells_by_shape, best, folders = [], [], []
    for r in rows:
        rel, tune = checks.get(_shape_key(r["shape"]), ("", None))
        col = _cells(configs, rel or "shapes/?", tune)
        cells_by_shape.append(col)
        best.append(min((c.median_ns for c in col if c.median_ns is not None), default=None))
        folders.append(rel)
    config_of = {b.get("name"): b.get("config") for b in buckets}
    page = WorkloadPage(folder=root, result=data, kernel=str(data.get("kernel", "")), keys=list(data.get("keys") or []),
                        measured=bool(data.get("measured", True)), rows=rows, configs=configs,
                        default_index=_index(configs, data.get("default_config")),
                        single_index=_index(configs, data.get("single_config")),
                        cells=[[cells_by_shape[s][c] for s in range(len(rows))] for c in range(len(configs))],
                        best_ns=best, folders=folders,
                        chosen=[_index(configs, config_of.get(r.get("bucket"))) for r in rows], buckets=buckets)
    page.problems = _problems(page, config_of)
    return page


def _problems(page: WorkloadPage, config_of: Mapping[str, Any]) -> list[str]:
    """Where the result's rows and totals differ from the records: each row's three times against the cited
    configs' medians in that shape's ``tune.json``, each weighted total against the sum over its rows."""
    out: list[str] = []
    if not page.rows:
        out.append("the result lists no workload shape")
    columns = (("table_ns", lambda r: config_of.get(r.get("bucket"))), ("single_ns", lambda _r: page.result.get(
        "single_config")), ("default_ns", lambda _r: page.result.get("default_config")))
    for s, row in enumerate(page.rows):
        for col, config_for in columns:
            i = _index(page.configs, config_for(row))
            record = page.cells[i][s].median_ns if i is not None else None
            if not _same(row.get(col), record):
                out.append(f"shape {json.dumps(row['shape'], sort_keys=True)}: the result's {col} is "
                           f"{row.get(col)!r} but the record ({page.folders[s] or 'none'}) holds {record!r}")
    for col in ("table_ns", "single_ns", "default_ns"):
        vals = [(float(r.get("weight") or 0.0), r.get(col)) for r in page.rows]
        total = math.fsum(w * v for w, v in vals) if vals and all(v is not None for _, v in vals) else None
        if not _same(page.result.get(col), total):
            out.append(f"the result's weighted {col} is {page.result.get(col)!r}; the sum of weight x median over "
                       f"its rows is {total!r}")
    return out
