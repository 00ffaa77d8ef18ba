"""The experience-log part of kernelpilot's Python API (``kernelpilot experience ...``): one function per command,
each returning a JSON-ready dict (the command's ``--json`` output; keys listed in docs/experience.md).

Every function takes ``db``: the log's path, default ``$KERNELPILOT_EXPERIENCE`` or ``~/.kernelpilot/experience.db``
(:func:`kernelpilot.experience.default_db_path`). The implementation is :mod:`kernelpilot.experience`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from kernelpilot.errors import ExperienceError, OptionError
from kernelpilot.experience import ExperienceDB, ExperienceEntry, guide_for, read_jsonl

__all__ = ["experience_add", "experience_recommend", "experience_search", "experience_list", "experience_stats",
           "experience_merge", "experience_export", "experience_import", "experience_mask", "experience_guide"]

DbPath = Optional[str | Path]


def _records(entries: list[ExperienceEntry]) -> list[dict[str, Any]]:
    return [e.as_record() for e in entries]


def experience_add(fields: Optional[dict[str, Any]] = None, *, file: DbPath = None,
                   db: DbPath = None) -> dict[str, Any]:
    """Add one entry, from ``fields`` (the :class:`~kernelpilot.experience.ExperienceEntry` fields) or from
    ``file`` (one JSON object with those fields; a ``key`` field is ignored).

    Returns:
        ``{"db", "added" (False: the same entry was already there), "entry" (with its "key")}``.

    Raises:
        OptionError: both or neither of ``fields`` and ``file``; a field is missing or invalid (the message names
            it). ExperienceError: the file is unreadable, not JSON or not a valid entry; the log cannot be used.
    """
    if (fields is None) == (file is None):
        raise OptionError("give the entry either as fields or as --file, not both or neither",
                          "e.g. --kernel softmax --kernel-type softmax --change 'num_warps 4 -> 8' "
                          "--outcome improved --speedup 1.2, or --file entry.json")
    data: Any = fields
    if file is not None:
        try:
            data = json.loads(Path(file).expanduser().read_text(encoding="utf-8"))
        except OSError as exc:
            raise ExperienceError(f"cannot read {file}: {exc.strerror or exc}",
                                  "give a JSON file with one entry") from exc
        except ValueError as exc:
            raise ExperienceError(f"{file} is not JSON: {exc}", "give a JSON file with one entry object") from exc
        if not isinstance(data, dict):
            raise ExperienceError(f"{file} does not hold one JSON object", "give a JSON file with one entry object")
        data.pop("key", None)
    try:
        entry = ExperienceEntry.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors())
        error = OptionError if file is None else ExperienceError
        raise error(f"{'' if file is None else f'{file}: '}not a valid experience entry: {problems}",
                    "required: kernel, change, outcome (improved|regressed|neutral|mixed|invalid), source, "
                    "measured; see docs/experience.md") from exc
    with ExperienceDB.open(db) as log:
        added = log.add(entry)
        return {"db": str(log.path), "added": added, "entry": entry.as_record()}


def experience_recommend(*, kernel_type: Optional[str] = None, backend: Optional[str] = None,
                         arch: Optional[str] = None, bottleneck: Optional[str] = None, limit: int = 10,
                         include_masked: bool = False, db: DbPath = None) -> dict[str, Any]:
    """Past changes ranked for a kernel (see :meth:`kernelpilot.experience.ExperienceDB.recommend`).

    Returns:
        ``{"db", "query": {"kernel_type", "backend", "arch", "bottleneck"}, "recommendations": [Recommendation
        as a dict, ...]}``, best first.

    Raises:
        OptionError: ``limit`` < 1, an unknown back end or bottleneck. ExperienceError: the log cannot be used.
    """
    with ExperienceDB.open(db) as log:
        recs = log.recommend(kernel_type=kernel_type, backend=backend, arch=arch, bottleneck=bottleneck,
                             limit=limit, include_masked=include_masked)
        return {"db": str(log.path),
                "query": {"kernel_type": kernel_type, "backend": backend, "arch": arch, "bottleneck": bottleneck},
                "recommendations": [r.model_dump(mode="json") for r in recs]}


def experience_search(text: str, *, limit: int = 50, include_masked: bool = False, db: DbPath = None) -> dict[str, Any]:
    """Entries containing every word of ``text``, newest first.

    Returns:
        ``{"db", "text", "entries": [entry with "key", ...]}``.

    Raises:
        OptionError: empty ``text``, ``limit`` < 1. ExperienceError: the log cannot be used.
    """
    with ExperienceDB.open(db) as log:
        return {"db": str(log.path), "text": text,
                "entries": _records(log.search(text, limit, include_masked=include_masked))}


def experience_list(*, limit: int = 100, include_masked: bool = False, db: DbPath = None,
                    **filters: Any) -> dict[str, Any]:
    """Entries matching the filters (see :meth:`kernelpilot.experience.ExperienceDB.list`), newest first.

    Returns:
        ``{"db", "filters" (the ones given), "entries": [entry with "key", ...]}``.

    Raises:
        OptionError: an unknown filter or value, ``limit`` < 1. ExperienceError: the log cannot be used.
    """
    given = {k: v for k, v in filters.items() if v is not None}
    with ExperienceDB.open(db) as log:
        return {"db": str(log.path), "filters": given,
                "entries": _records(log.list(limit, include_masked=include_masked, **given))}


def experience_stats(*, include_masked: bool = False, db: DbPath = None) -> dict[str, Any]:
    """Counts over the log: see :meth:`kernelpilot.experience.ExperienceDB.stats` (the ``path`` key is also given
    as ``db``). Raises ExperienceError: the log cannot be used."""
    with ExperienceDB.open(db) as log:
        return {"db": str(log.path), **log.stats(include_masked)}


def experience_merge(other: str | Path, *, db: DbPath = None) -> dict[str, Any]:
    """Add the entries of another log file that this one lacks.

    Returns:
        ``{"db", "other", "added", "total" (entries in this log afterwards, masked included)}``.

    Raises:
        ExperienceError: either file cannot be used as an experience log.
    """
    with ExperienceDB.open(db) as log:
        added = log.merge(other)
        return {"db": str(log.path), "other": str(other), "added": added,
                "total": len(log.entries(include_masked=True))}


def experience_export(file: str | Path, *, db: DbPath = None) -> dict[str, Any]:
    """Write every entry to ``file`` as JSON Lines (stable order and keys: fit for a repository).

    Returns:
        ``{"db", "file", "written"}``. Raises ExperienceError: the log cannot be used or ``file`` written.
    """
    with ExperienceDB.open(db) as log:
        return {"db": str(log.path), "file": str(file), "written": log.export_jsonl(file)}


def experience_import(file: str | Path, *, db: DbPath = None) -> dict[str, Any]:
    """Add the entries of a JSON Lines file that the log lacks (every line is checked before any is added).

    Returns:
        ``{"db", "file", "read" (entries in the file), "added"}``.

    Raises:
        ExperienceError: the file is missing, or a line is not a valid entry (``FILE:LINE``); the log cannot be used.
    """
    entries = read_jsonl(file)
    with ExperienceDB.open(db) as log:
        return {"db": str(log.path), "file": str(file), "read": len(entries), "added": log.add_many(entries)}


def experience_mask(source: str, *, unmask: bool = False, db: DbPath = None) -> dict[str, Any]:
    """Mask (or with ``unmask`` unmask) every entry recorded from ``source`` (exact match).

    Returns:
        ``{"db", "source", "masked" (the new state), "entries" (how many matched)}``.

    Raises:
        OptionError: ``source`` is empty. ExperienceError: the log cannot be used.
    """
    if not source.strip():
        raise OptionError("the source to mask is empty", "e.g. kernelpilot experience mask session:RUN/v3")
    with ExperienceDB.open(db) as log:
        return {"db": str(log.path), "source": source, "masked": not unmask,
                "entries": log.set_masked(source, not unmask)}


def experience_guide(bottleneck: str, backend: str = "triton") -> dict[str, Any]:
    """The curated strategy guide for one bottleneck class and back end.

    Returns:
        ``{"bottleneck", "backend", "entries": [GuideEntry as a dict, ...]}``.

    Raises:
        OptionError: an unknown class or back end.
    """
    return {"bottleneck": bottleneck, "backend": backend,
            "entries": [g.model_dump(mode="json") for g in guide_for(bottleneck, backend)]}
