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
           "experience_merge", "experience_export", "experience_import", "experience_mask", "experience_guide",
           "judged", "source_problem"]

DbPath = Optional[str | Path]
#: Relative difference allowed between an entry's speedup and the one its source's records give (both are the
#: same float written as JSON; the tolerance only absorbs a rounded copy, 6 significant digits like the key).
SPEEDUP_REL_TOL = 1e-6


def source_problem(entry: ExperienceEntry, cache: Optional[dict[str, Any]] = None) -> Optional[str]:
    """Why ``entry`` is only the user's claim, or None when its source is a record that validates and holds its
    numbers.

    The source must name a record folder kernelpilot wrote: ``optimize:RUN/vN`` (a run folder,
    :func:`kernelpilot.app.validate.validate_run`), ``session:RUN/vN`` (a session folder, ``validate_session``) or
    ``tune:RUN`` (a ``tune --out`` folder, ``validate_tune``); the folder must exist and every record in it
    validate (schemas, cross-checks, git history); and what the entry states must be what the records say: the
    kernel, the outcome, the speedup (when given, within :data:`SPEEDUP_REL_TOL`), ``measured``, and the change
    (the tunables that differ from the parent's config, computed from both configs; a session's hypothesis).

    Args:
        entry: the entry to check. cache: folder -> its validation, shared over one import (optional).

    Returns:
        None, or the reason in words (``no record folder at ...``, ``its records do not validate: ...``, ``the
        records say speedup 1.02, the entry 3.0``). Raises nothing.
    """
    from kernelpilot.errors import KernelpilotError

    kind, _, rest = entry.source.partition(":")
    if kind not in ("optimize", "session", "tune") or not rest:
        return (f"source {entry.source!r} is not a record kernelpilot can check (optimize:RUN/vN, session:RUN/vN, "
                "tune:RUN)")
    folder, index = Path(rest), None
    if kind != "tune":
        head, sep, tail = rest.rpartition("/v")
        if not sep or not tail.isdigit():
            return f"source {entry.source!r} names no version (…/vN)"
        folder, index = Path(head), int(tail)
    if not folder.is_dir():
        return f"no record folder at {folder}"
    try:
        truth = _records_say(kind, folder, index, entry, {} if cache is None else cache)
    except (KernelpilotError, OSError, ValueError, KeyError) as exc:
        return f"its records cannot be read: {getattr(exc, 'message', exc)}"
    if isinstance(truth, str):
        return truth
    said = {"kernel": entry.kernel, "outcome": entry.outcome, "measured": entry.measured, "change": entry.change}
    for name, value in truth.items():
        if name == "speedup":
            if entry.speedup is not None and (value is None or abs(entry.speedup / value - 1) > SPEEDUP_REL_TOL):
                return f"the records say speedup {value}, the entry {entry.speedup}"
        elif name == "change" and not (entry.change == value or entry.change.startswith(value + " (")):
            return f"the records say the change was {value!r}, the entry {entry.change!r}"
        elif name != "change" and said[name] != value:
            return f"the records say {name} {value!r}, the entry {said[name]!r}"
    return None


def _validated(kind: str, folder: Path, cache: dict[str, Any]) -> Any:
    """(problems, versions or memories or evaluations, info) of a record folder, validated once per call."""
    key = f"{kind}:{folder.resolve()}"
    if key not in cache:
        from kernelpilot.app import validate

        if kind == "tune":
            problems, run, evaluations = validate.validate_tune(folder)
            cache[key] = (problems, evaluations, run)
        elif kind == "optimize":
            from kernelpilot.records.models import RunInfo
            from kernelpilot.records.workspace import read_json

            found = validate.validate_run(folder)
            cache[key] = (found.problems, found.versions, read_json(folder / "run.json", RunInfo))
        else:
            from kernelpilot.versions.records import load_memories, load_state

            state = load_state(folder)
            cache[key] = (validate.validate_session(folder).problems, load_memories(folder, state), state)
    return cache[key]


def _records_say(kind: str, folder: Path, index: Optional[int], entry: ExperienceEntry,
                 cache: dict[str, Any]) -> dict[str, Any] | str:
    """What the records of ``folder`` say about the entry's fields, or why they cannot (a string)."""
    from kernelpilot.experience.from_runs import entry_from_evaluation, entry_from_tune

    problems, items, info = _validated(kind, folder, cache)
    if problems:
        first = problems[0]
        return f"its records do not validate: {first.file} {first.problem}".strip()
    if kind == "tune":
        true = entry_from_tune(items, run=str(folder), kernel=entry.kernel, kernel_type=entry.kernel_type)
        if true is None:
            return "the search has no correct config to learn from"
        return {"kernel": Path(info.kernel).stem, "outcome": true.outcome, "speedup": true.speedup,
                "measured": true.measured, "change": entry.change.split(": ", 1)[0] + ": " +
                true.change.split(": ", 1)[1]}
    if kind == "optimize":
        by_index = {v.index: v for v in items}
        ev = by_index.get(index)
        true = None if ev is None else entry_from_evaluation(ev, by_index.get(ev.parent), kernel=entry.kernel,
                                                              kernel_type=entry.kernel_type, source=entry.source)
        if true is None:
            return f"v{index} is not a version of that run that tried a change"
        return {"kernel": info.kernel_name, "outcome": true.outcome, "speedup": true.speedup,
                "measured": true.measured, "change": true.change.split(" (", 1)[0]}
    mem = next((m for m in items if m.version == index), None)
    if mem is None or index == 0:
        return f"v{index} is not a tried version of that session"
    ratio = (mem.vs_parent or {}).get("ratio")
    return {"kernel": info.kernel_name, "outcome": "neutral" if mem.outcome == "unmeasured" else mem.outcome,
            "speedup": 1.0 / float(ratio) if mem.measured and ratio else None, "measured": mem.measured,
            "change": mem.hypothesis}


def judged(entries: list[ExperienceEntry]) -> list[ExperienceEntry]:
    """``entries`` as the log stores what a user hands it: each with ``claim`` set by :func:`source_problem`
    (None only when its source validates and holds its numbers), whatever ``claim`` it came with. Raises nothing."""
    cache: dict[str, Any] = {}
    return [e.model_copy(update={"claim": source_problem(e, cache)}) for e in entries]


def _records(entries: list[ExperienceEntry]) -> list[dict[str, Any]]:
    return [e.as_record() for e in entries]


def experience_add(fields: Optional[dict[str, Any]] = None, *, file: DbPath = None,
                   db: DbPath = None) -> dict[str, Any]:
    """Add one entry, from ``fields`` (the :class:`~kernelpilot.experience.ExperienceEntry` fields) or from
    ``file`` (one JSON object with those fields; a ``key`` field is ignored).

    The entry is on record only when its source validates and holds its numbers (:func:`source_problem`); else
    it is stored as the user's claim (``entry["claim"]`` says why) and ranks below lessons on record.

    Returns:
        ``{"db", "added" (False: the same entry was already there), "entry" (with its "key" and "claim")}``.

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
    [entry] = judged([entry])  # measured only with a source that validates; else the user's claim, named
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
    from kernelpilot.experience.db import read_log

    entries = judged(read_log(other))  # another machine's word: on record here only where its sources validate here
    with ExperienceDB.open(db) as log:
        added = log.add_many(entries)
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
    entries = judged(read_jsonl(file))  # a file's word: on record only where its sources validate here
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
