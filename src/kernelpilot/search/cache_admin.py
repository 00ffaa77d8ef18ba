"""Cache administration (``kernelpilot cache list|show|clear``): read any cache file whole, summarize, find one by
path or prefix, delete. Re-exported by :mod:`kernelpilot.search.cache`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kernelpilot.errors import SearchError
from kernelpilot.search.cache_file import FILE_NAME_RE, CacheFileIndex, cache_dir
from kernelpilot.search.cache_store import CacheContext
from kernelpilot.search.cache_trust import FORGED, RefusedLine, consistency_problem, trust_note
from kernelpilot.search.model import Evaluation

__all__ = ["CacheSummary", "best_evaluation", "clear_cache", "list_caches", "read_cache_file", "resolve_cache_file",
           "show_cache", "survey_caches"]


class CacheSummary(BaseModel):
    """One cache file at a glance (``kernelpilot cache list``).

    Attributes:
        file: the file's path.
        kernel: the kernel's name (from the header, else from the file name).
        key: the context key (full sha256 from the header, else the 16 digits of the file name).
        context: the context from the header, or None when the header is missing or unreadable.
        created_at: when the file was started (ISO-8601 UTC), if known.
        records: valid record lines (a config recorded twice counts twice).
        configs: distinct configs recorded.
        ok: distinct configs whose last record is ``ok``.
        statuses: status -> number of configs (last record of each).
        best_duration_ns: the fastest ``ok`` median time, ns, or None.
        best_config: its config, or None.
        size_bytes: the file's size in bytes.
        skipped_lines: unreadable lines skipped (corrupt, or a torn last line).
        warnings: one message per skipped line, with its line number, then one per refused line.
        trust: who vouches for the lines (:func:`~kernelpilot.search.cache_trust.trust_note`: ``signed by this
            user (MAC checked)``, ``unsigned: consistency-checked only`` ...).
        refused: the last lines of configs that no run answers (a MAC that does not match, numbers that disagree:
            :func:`audit_records`), each ``<file>: line N (config K): why``.
    """

    file: Path
    kernel: str
    key: str
    context: CacheContext | None
    created_at: str | None = None
    records: int
    configs: int
    ok: int
    statuses: dict[str, int]
    best_duration_ns: float | None
    best_config: dict[str, Any] | None
    size_bytes: int
    skipped_lines: int
    warnings: list[str]
    trust: str = ""
    refused: list[str] = []


def audit_records(index: CacheFileIndex, context: CacheContext | None) -> tuple[list[str], list[RefusedLine]]:
    """Check the last line of every config in a read ``index``: who signed it, and whether its numbers agree.

    Args:
        index: a :class:`~kernelpilot.search.cache_file.CacheFileIndex` that has read its file.
        context: the file's context (its ``interpreted`` flag is checked against each line), or None.

    Returns:
        (the trust state of each line that passes, in file order; the :class:`RefusedLine` of each line that is
        ``forged`` or inconsistent). Raises nothing.
    """
    states: list[str] = []
    refused: list[RefusedLine] = []
    for key, ev in index.records.items():
        trust = index.trust[key]
        why = trust.why if trust.state == FORGED else consistency_problem(ev, context.interpreted if context else None)
        if why is None:
            states.append(trust.state)
        else:
            refused.append(RefusedLine(file=str(index.path), line=trust.line, key=key, config=dict(ev.config),
                                       why=why))
    return states, refused


def best_evaluation(evaluations: Iterable[Evaluation]) -> Evaluation | None:
    """The successful evaluation with the lowest ``objective`` (ns), or None when none succeeded. Raises nothing."""
    ok = [ev for ev in evaluations if ev.ok]
    return min(ok, key=lambda ev: ev.objective) if ok else None


def read_cache_file(path: str | os.PathLike[str]) -> tuple[CacheSummary, list[Evaluation]]:
    """Read one cache file, skipping (and counting) unreadable lines.

    Args:
        path: the ``.jsonl`` file.

    Returns:
        (its summary, the last evaluation of each config with ``cached=True``, in order of first recording).

    Raises:
        SearchError: the file does not exist.
        OSError: it cannot be read.
    """
    p = Path(path)
    if not p.is_file():
        raise SearchError(f"no cache file {p}", hint="`kernelpilot cache list` shows the cache files")
    index = CacheFileIndex(p)
    index.read_path()
    evals = [ev.model_copy(deep=True) for ev in index.records.values()]
    header = index.header
    context: CacheContext | None = None
    if header is not None:
        try:
            context = CacheContext.model_validate(header["context"])
        except ValidationError:
            context = None
    states, refused = audit_records(index, context)
    match = FILE_NAME_RE.match(p.name)
    kernel = context.kernel if context else (match.group("kernel") if match else p.stem)
    key = str(header["key"]) if header else (match.group("key") if match else "")
    refused_keys = {r.key for r in refused}
    best = best_evaluation(ev for ev in evals if ev.key not in refused_keys)  # a refused line is never the best
    summary = CacheSummary(
        file=p, kernel=kernel, key=key, context=context, created_at=header.get("created_at") if header else None,
        records=index.n_records, configs=len(evals), ok=sum(ev.ok for ev in evals),
        statuses=dict(Counter(ev.status for ev in evals)),
        best_duration_ns=best.duration_ns if best else None, best_config=dict(best.config) if best else None,
        size_bytes=p.stat().st_size, skipped_lines=index.skipped,
        warnings=index.warnings() + [f"{r.describe()}; refused" for r in refused],
        trust=trust_note(states), refused=[r.describe() for r in refused])
    return summary, evals


def _cache_files(root: str | os.PathLike[str] | None) -> list[Path]:
    folder = cache_dir(root)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and FILE_NAME_RE.match(p.name))


def list_caches(root: str | os.PathLike[str] | None = None) -> list[CacheSummary]:
    """Summaries of every cache file in the folder, sorted by file name.

    Args:
        root: the cache folder, or None for :func:`cache_dir`'s default.

    Returns:
        One :class:`CacheSummary` per ``<kernel>-<16 hex>.jsonl`` file (empty when the folder does not exist).

    Raises:
        OSError: a file cannot be read.
    """
    return [read_cache_file(p)[0] for p in _cache_files(root)]


def survey_caches(root: str | os.PathLike[str] | None = None) -> tuple[list[CacheSummary], list[str]]:
    """Summaries of the cache files that can be read, and one warning per file that cannot (unreadable, or no
    valid header line naming its context): one bad file never hides the others (``kernelpilot cache list``).

    Args:
        root: the cache folder, or None for :func:`cache_dir`'s default.

    Returns:
        (summaries sorted by file name, warnings naming each skipped file and why). Raises nothing for a file.
    """
    summaries: list[CacheSummary] = []
    skipped: list[str] = []
    for path in _cache_files(root):
        try:
            summary = read_cache_file(path)[0]
        except (OSError, SearchError) as exc:
            skipped.append(f"{path}: cannot be read ({exc}); skipped")
            continue
        if summary.context is None:
            why = summary.warnings[0] if summary.warnings else "no header line"
            why = why.removeprefix(f"{path}: ").removesuffix("; skipped")
            skipped.append(f"{path}: not a kernelpilot cache file ({why}); skipped (delete it with "
                           f"`kernelpilot cache clear {path.name}`)")
            continue
        summaries.append(summary)
    return summaries, skipped


def resolve_cache_file(path_or_prefix: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> Path:
    """The one cache file ``path_or_prefix`` names: an existing path, else a prefix of a file name or context key.

    Raises:
        SearchError: no file or several files match.
    """
    text = str(path_or_prefix)
    candidate = Path(text).expanduser()
    if candidate.is_file():
        return candidate
    files = _cache_files(root)
    exact = [p for p in files if p.name == text or p.stem == text]
    if exact:
        return exact[0]
    matches = []
    for p in files:
        m = FILE_NAME_RE.match(p.name)
        if p.name.startswith(text) or (m and m.group("key").startswith(text)):
            matches.append(p)
        elif m and len(text) > 16 and text.startswith(m.group("key")):
            try:
                first = p.open("rb").readline()
                if json.loads(first).get("key", "").startswith(text):
                    matches.append(p)
            except (OSError, ValueError, AttributeError):
                pass
    if not matches:
        raise SearchError(f"no cache file matches {text!r} in {cache_dir(root)}",
                         hint="give a file path, a file-name prefix or a context-key prefix; "
                              "`kernelpilot cache list` shows them")
    if len(matches) > 1:
        names = ", ".join(p.name for p in matches)
        raise SearchError(f"{text!r} matches {len(matches)} cache files: {names}",
                         hint="give a longer prefix (more of the context key) or the file's path")
    return matches[0]


def show_cache(path_or_prefix: str | os.PathLike[str],
               root: str | os.PathLike[str] | None = None) -> tuple[CacheSummary, list[Evaluation]]:
    """One cache file's summary and evaluations (``kernelpilot cache show``).

    Args:
        path_or_prefix: a file path, or a prefix of a cache file's name (``softmax-3f2a``) or of its context key.
        root: the cache folder searched for prefixes, or None for :func:`cache_dir`'s default.

    Returns:
        (summary, the last evaluation of each config with ``cached=True``).

    Raises:
        SearchError: no file or more than one file matches.
        OSError: the file cannot be read.
    """
    return read_cache_file(resolve_cache_file(path_or_prefix, root))


def clear_cache(path_or_prefix: str | os.PathLike[str] | None = None,
                root: str | os.PathLike[str] | None = None) -> list[Path]:
    """Delete one cache file, or every cache file in the folder (``kernelpilot cache clear``).

    Only files named like cache files (``<kernel>-<16 hex>.jsonl``) are deleted when clearing all; other files in
    the folder are left alone. A process still appending to a deleted file writes into the unlinked file.

    Args:
        path_or_prefix: what :func:`show_cache` accepts, or None for all.
        root: the cache folder, or None for :func:`cache_dir`'s default.

    Returns:
        The deleted files (empty when there was nothing to delete).

    Raises:
        SearchError: ``path_or_prefix`` matches no file or several files.
        OSError: a file cannot be deleted.
    """
    files = _cache_files(root) if path_or_prefix is None else [resolve_cache_file(path_or_prefix, root)]
    deleted = []
    for p in files:
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        deleted.append(p)
    return deleted


