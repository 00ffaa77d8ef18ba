"""Holding a dispatch table's measurements against the records they cite.

A ``dispatch.json`` says, per row, which record (``record_id``) its time comes from. :func:`evidence_problems`
resolves every id through a function the caller gives (the run folder knows where its records live; this package
does not read run folders) and checks that the record is of the row's config, at the row's shape, correct
(``status`` ``ok``), and that its median is both the row's ``duration_ns`` and the median of its own samples, whose
count is the row's ``samples_n``. A table whose numbers its records do not bear out is a claim, not a measurement.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Mapping, Optional

from kernelpilot.dispatch.model import Dispatch, Measurement, shape_id

__all__ = ["evidence_problems"]

#: Relative tolerance between a row's duration and its record's median (both written from the same float).
_REL_TOL = 1e-9

Resolver = Callable[[str], Optional[Mapping[str, Any]]]


def _row_problems(row: Measurement, config: Optional[Mapping[str, Any]], where: str,
                  resolve: Resolver) -> list[str]:
    record = resolve(row.record_id)
    label = f"{where}, shape {shape_id(row.shape)}: record {row.record_id!r}"
    if record is None:
        return [f"{label} is not in the run"]
    out = []
    if record.get("status", "ok") != "ok":
        out.append(f"{label} has status {record.get('status')!r}, not ok")
    if config is not None and dict(record.get("config") or {}) != dict(config):
        out.append(f"{label} is of config {record.get('config')!r}, the row's is {dict(config)!r}")
    shape = record.get("shape")
    if shape is not None and dict(shape) != dict(row.shape):
        out.append(f"{label} is at shape {shape_id(dict(shape))}")
    median = record.get("duration_ns")
    if not isinstance(median, (int, float)) or not math.isclose(median, row.duration_ns, rel_tol=_REL_TOL):
        out.append(f"{label} has duration_ns {median!r}, the row says {row.duration_ns!r}")
    samples = list(record.get("samples_ns") or [])
    if len(samples) != row.samples_n:
        out.append(f"{label} holds {len(samples)} samples, the row says samples_n={row.samples_n}")
    elif samples and isinstance(median, (int, float)) and not math.isclose(statistics.median(samples), median,
                                                                         rel_tol=_REL_TOL):
        out.append(f"{label}: the median of its samples is {statistics.median(samples)!r}, not its duration_ns "
                   f"{median!r}")
    return out


def evidence_problems(dispatch: Dispatch, resolve: Resolver) -> list[dict[str, str]]:
    """Every disagreement between the table's rows and the records they cite.

    Args:
        dispatch: the table.
        resolve: record id -> the record as a mapping with ``config``, ``status``, ``duration_ns`` (median, ns),
            ``samples_ns`` (list, ns) and optionally ``shape``; ``None`` for an id the run does not hold. (An
            :class:`~kernelpilot.records.evaluation.Evaluation` dumped to a dict, with the shape it ran at added.)

    Returns:
        One ``{"file": "dispatch.json", "problem": ..., "fix": ...}`` per disagreement (the problem format of
        :class:`kernelpilot.errors.RecordError`); empty when every row is borne out. The library default's rows
        are checked for their config only when it has one. Raises whatever ``resolve`` raises.
    """
    sources: list[tuple[str, Optional[Mapping[str, Any]], list[Measurement]]] = [
        (f"bucket {bucket.name!r}", bucket.config, bucket.measured) for bucket in dispatch.buckets]
    sources.append(("single_config", dispatch.single_config.config, dispatch.single_config.measured))
    if dispatch.library_default is not None:
        sources.append(("library_default", dispatch.library_default.config, dispatch.library_default.measured))
    problems = []
    for where, config, rows in sources:
        for row in rows:
            for text in _row_problems(row, config, where, resolve):
                problems.append({"file": "dispatch.json", "problem": text,
                                 "fix": "tune the workload again; a dispatch table's times come from its records"})
    return problems
