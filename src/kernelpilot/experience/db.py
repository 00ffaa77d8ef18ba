"""The experience log's SQLite file: :class:`ExperienceDB` adds entries (one row per distinct
:meth:`~kernelpilot.experience.model.ExperienceEntry.key`), masks them, answers recommend, search, list and stats,
merges another log and round-trips JSON Lines.

The file (default :func:`~kernelpilot.experience.model.default_db_path`) has a ``meta`` table (``kind`` =
``kernelpilot.experience``, ``schema_version``) and ``PRAGMA user_version`` = :data:`SCHEMA_VERSION`; it is opened
in WAL mode with a 30 s busy timeout, so several runs may add to it at once. See docs/experience.md.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from pydantic import ValidationError

from kernelpilot.errors import ExperienceError, OptionError
from kernelpilot.sqlitefile import SqliteFile
from kernelpilot.experience.model import (BACKENDS, BOTTLENECK_CLASSES, OUTCOMES, ExperienceEntry, Recommendation,
                                          default_db_path, normalize_bottleneck, normalize_kernel_type, utc_now)
from kernelpilot.experience.tags import normalize_tag

__all__ = ["SCHEMA_VERSION", "KIND", "LIST_FILTERS", "RUN_SOURCES", "ExperienceDB", "read_jsonl", "read_log"]

#: Version of the file's layout (``PRAGMA user_version`` and ``meta.schema_version``). 2 added ``claim``; a file of
#: version 1 is upgraded when opened for writing (:data:`V1_CLAIM`).
SCHEMA_VERSION = 2
#: ``claim`` of the entries of a version-1 log whose source is not a run's (``manual``, ``import:FILE``, ...): they
#: were stored before sources were checked.
V1_CLAIM = "added by hand before kernelpilot checked sources (experience log schema 1)"
#: Source prefixes of the entries kernelpilot's own runs record.
RUN_SOURCES = ("optimize:", "tune:", "session:")
#: ``meta.kind`` of an experience log (tells it from any other SQLite file).
KIND = "kernelpilot.experience"
#: Filters :meth:`ExperienceDB.list` accepts.
LIST_FILTERS = ("kernel", "kernel_type", "backend", "arch", "gpu", "bottleneck", "outcome", "source", "tag",
                "measured")
_COLUMNS = ("key", "kernel", "kernel_type", "backend", "arch", "gpu", "bottleneck", "change", "tags", "outcome",
            "speedup", "metrics_moved", "source", "measured", "recorded_utc", "masked", "claim")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY, kernel TEXT NOT NULL, kernel_type TEXT NOT NULL, backend TEXT NOT NULL, arch TEXT,
    gpu TEXT, bottleneck TEXT, change TEXT NOT NULL, tags TEXT NOT NULL, outcome TEXT NOT NULL, speedup REAL,
    metrics_moved TEXT NOT NULL, source TEXT NOT NULL, measured INTEGER NOT NULL, recorded_utc TEXT NOT NULL,
    masked INTEGER NOT NULL DEFAULT 0, claim TEXT);
CREATE INDEX IF NOT EXISTS entries_source ON entries (source);
CREATE INDEX IF NOT EXISTS entries_kind ON entries (kernel_type, backend);
"""
_FIX = ("move the file aside (or point --db / $KERNELPILOT_EXPERIENCE at another path) and start a new log; "
        "`kernelpilot experience import FILE.jsonl` refills it from an export")


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere (``\\``, ``%`` and ``_`` escaped with ``\\``)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _row(e: ExperienceEntry) -> tuple[Any, ...]:
    return (e.key(), e.kernel, e.kernel_type, e.backend, e.arch, e.gpu, e.bottleneck, e.change,
            json.dumps(e.tags), e.outcome, e.speedup, json.dumps(e.metrics_moved, sort_keys=True), e.source,
            int(e.measured), e.recorded_utc, int(e.masked), e.claim)


def _entry(row: sqlite3.Row, where: Path) -> ExperienceEntry:
    data = dict(zip(_COLUMNS, row))
    data.pop("key")
    try:
        data.update(tags=json.loads(data["tags"]), metrics_moved=json.loads(data["metrics_moved"]),
                    measured=bool(data["measured"]), masked=bool(data["masked"]))
        return ExperienceEntry.model_validate(data)
    except (ValueError, ValidationError) as exc:
        raise ExperienceError(f"{where}: a stored entry is not valid ({exc})", _FIX) from exc


def _connect(path: Path, read_only: bool = False) -> sqlite3.Connection:
    target = f"{path.resolve().as_uri()}?mode=ro" if read_only else str(path)
    return sqlite3.connect(target, timeout=30.0, isolation_level=None, uri=read_only)


def _check_schema(conn: sqlite3.Connection, path: Path, create: bool) -> None:
    """Create the tables of an empty file (``create``), or check that the file is an experience log this version
    reads. Raises ExperienceError (another SQLite database, a newer schema) or sqlite3.DatabaseError (not one)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if version == 0 and not tables and create:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                conn.execute(stmt)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('kind', ?), ('schema_version', ?), ('created_utc', ?)",
                         (KIND, str(SCHEMA_VERSION), utc_now()))
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return
    kind = None
    if "meta" in tables:
        found = conn.execute("SELECT value FROM meta WHERE name = 'kind'").fetchone()
        kind = found[0] if found else None
    if kind != KIND or "entries" not in tables:
        raise ExperienceError(f"{path} is a SQLite database but not a kernelpilot experience log "
                              f"(tables: {', '.join(sorted(tables)) or 'none'})", _FIX)
    if version == 1 and create:
        _upgrade_v1(conn)
    if version > SCHEMA_VERSION:
        raise ExperienceError(f"{path} was written by a newer kernelpilot (experience schema {version}; this "
                              f"version reads {SCHEMA_VERSION})",
                              "upgrade kernelpilot, or export it with the newer version and import the JSON Lines "
                              "here")


def _upgrade_v1(conn: sqlite3.Connection) -> None:
    """Add the ``claim`` column to a version-1 log: entries with a run's source (:data:`RUN_SOURCES`) stay on
    record, the others become claims (:data:`V1_CLAIM`)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if "claim" not in {r[1] for r in conn.execute("PRAGMA table_info(entries)")}:
            conn.execute("ALTER TABLE entries ADD COLUMN claim TEXT")
            runs = " AND ".join("source NOT LIKE ?" for _ in RUN_SOURCES)
            conn.execute(f"UPDATE entries SET claim = ? WHERE {runs}", (V1_CLAIM, *(f"{p}%" for p in RUN_SOURCES)))
        conn.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (str(SCHEMA_VERSION),))
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class ExperienceDB(SqliteFile):
    """An open experience log (a SQLite file). Open it with :meth:`open`; use it as a context manager or call
    :meth:`close`.

    Attributes:
        path: the file.
    """

    error, what, file_name = ExperienceError, "experience log", "experience.db"
    setting = "--db / $KERNELPILOT_EXPERIENCE"
    fix = _FIX

    # -- opening and closing -------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path | None = None) -> "ExperienceDB":
        """Open (creating it and its folder if needed) the log at ``path``, default :func:`default_db_path`.

        Raises:
            ExperienceError: ``path`` is a folder; the folder or file cannot be created; the file is not a SQLite
                database (corrupt, or another kind of file), is another SQLite database, or has a newer schema.
                The hint says how to start over.
        """
        p = Path(path).expanduser() if path is not None else default_db_path()
        return cls.open_file(p, _connect, lambda conn, at: _check_schema(conn, at, create=True))

    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[ExperienceEntry]:
        return [_entry(r, self.path) for r in self._conn.execute(sql, tuple(args))]

    # -- writing -------------------------------------------------------------------------------------------------

    def add(self, entry: ExperienceEntry) -> bool:
        """Add one entry; False when an entry with the same :meth:`~ExperienceEntry.key` is already there (the
        stored one is kept as it is, mask included). Raises ExperienceError when the file cannot be written."""
        return self.add_many([entry]) == 1

    def add_many(self, entries: Iterable[ExperienceEntry]) -> int:
        """Add entries in one transaction (all or none); returns how many were new (duplicates by key skipped).

        Raises:
            ExperienceError: the file cannot be written (read-only, disk full, locked for over 30 s).
        """
        rows = [_row(e) for e in entries]
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            added = 0
            for row in rows:
                added += self._conn.execute(
                    f"INSERT OR IGNORE INTO entries ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                    row).rowcount
            self._conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise ExperienceError(f"cannot write to the experience log {self.path}: {exc}",
                                  "check that the file and its folder are writable and not on a full disk") from exc
        return added

    def set_masked(self, source: str, masked: bool) -> int:
        """Mask (``masked=True``) or unmask every entry whose source is exactly ``source``; returns how many rows
        matched. Raises ExperienceError when the file cannot be written."""
        try:
            return self._conn.execute("UPDATE entries SET masked = ? WHERE source = ?", (int(masked), source)).rowcount
        except sqlite3.DatabaseError as exc:
            raise ExperienceError(f"cannot write to the experience log {self.path}: {exc}",
                                  "check that the file is writable") from exc

    # -- reading -------------------------------------------------------------------------------------------------

    def entries(self, include_masked: bool = False) -> list[ExperienceEntry]:
        """Every entry (masked ones only with ``include_masked``), oldest first."""
        where = "" if include_masked else " WHERE masked = 0"
        return self._query(f"SELECT {', '.join(_COLUMNS)} FROM entries{where} ORDER BY recorded_utc, rowid")

    def recommend(self, *, kernel_type: Optional[str] = None, backend: Optional[str] = None,
                  arch: Optional[str] = None, bottleneck: Optional[str] = None, limit: int = 10,
                  include_masked: bool = False) -> list[Recommendation]:
        """Past changes ranked for a kernel like the one described (the rule, ours, is in
        :mod:`kernelpilot.experience.rank`: similar kernels and GPU measurements weigh more; each result counts its
        capped log speedup; groups that failed more often than not carry a warning).

        Args:
            kernel_type, backend, arch, bottleneck: the kernel to advise (None: not asked, every value counts
                alike). limit: most recommendations (>= 1). include_masked: count masked entries too.

        Returns:
            Up to ``limit`` :class:`Recommendation`, best first; empty when the log has no entry.

        Raises:
            OptionError: ``limit`` < 1, an unknown back end or bottleneck class.
        """
        from kernelpilot.experience.guide import guide_ids_for
        from kernelpilot.experience.rank import rank
        from kernelpilot.experience.tags import link_tags

        _at_least_one("--limit", limit)
        query = {"kernel_type": normalize_kernel_type(kernel_type) if kernel_type else None,
                 "backend": _choice("--backend", backend, BACKENDS),
                 "arch": arch.strip().lower() if arch else None,
                 "bottleneck": _choice("--bottleneck", normalize_bottleneck(bottleneck) if bottleneck else None,
                                       BOTTLENECK_CLASSES)}
        # guide links: the query's back end (Triton if not asked) and class (every class for balanced/unknown)
        link_backend = query["backend"] or "triton"
        link_class = query["bottleneck"] if query["bottleneck"] not in ("balanced", "unknown") else None
        return rank(self.entries(include_masked), query, limit,
                    guide_ids=lambda tag: guide_ids_for(link_tags(tag), link_class, link_backend))

    def search(self, text: str, limit: Optional[int] = 50, *, include_masked: bool = False) -> list[ExperienceEntry]:
        """Entries whose change, tags, kernel, kernel type, source, GPU, arch or bottleneck contain every word of
        ``text`` (case-insensitive for ASCII), newest first.

        Raises:
            OptionError: ``text`` has no word; ``limit`` < 1 (None: no limit).
        """
        words = text.split()
        if not words:
            raise OptionError("search text is empty", "give a word to look for, e.g. vectorize")
        _at_least_one("--limit", limit)
        hay = ("(change || ' ' || tags || ' ' || kernel || ' ' || kernel_type || ' ' || source || ' ' || "
               "coalesce(gpu, '') || ' ' || coalesce(arch, '') || ' ' || coalesce(bottleneck, ''))")
        where = [f"{hay} LIKE ? ESCAPE '\\'" for _ in words] + ([] if include_masked else ["masked = 0"])
        return self._query(f"SELECT {', '.join(_COLUMNS)} FROM entries WHERE {' AND '.join(where)} "
                           f"ORDER BY recorded_utc DESC, rowid DESC" + (" LIMIT ?" if limit else ""),
                           [_like(w) for w in words] + ([limit] if limit else []))

    def list(self, limit: Optional[int] = 100, *, include_masked: bool = False,
             **filters: Any) -> list[ExperienceEntry]:
        """Entries matching every filter exactly, newest first.

        Args:
            limit: most entries (>= 1; None: all).
            include_masked: list masked entries too.
            **filters: any of :data:`LIST_FILTERS` (``tag``: entries carrying that tag; ``measured``: a bool);
                a None value is no filter.

        Raises:
            OptionError: an unknown filter name, an unknown back end, bottleneck or outcome, ``limit`` < 1.
        """
        _at_least_one("--limit", limit)
        unknown = sorted(set(filters) - set(LIST_FILTERS))
        if unknown:
            raise OptionError(f"unknown filter {', '.join(unknown)}", f"filters: {', '.join(LIST_FILTERS)}")
        where, args = ([] if include_masked else ["masked = 0"]), []
        for name, v in filters.items():
            if v is None:
                continue
            if name == "tag":
                where.append("tags LIKE ? ESCAPE '\\'")
                args.append(_like(json.dumps(normalize_tag(str(v)))))
                continue
            if name == "kernel_type":
                v = normalize_kernel_type(v)
            elif name == "bottleneck":
                v = _choice("--bottleneck", normalize_bottleneck(v), BOTTLENECK_CLASSES)
            elif name in ("backend", "outcome"):
                v = _choice(f"--{name}", v, BACKENDS if name == "backend" else OUTCOMES)
            elif name == "measured":
                v = int(bool(v))
            elif name == "arch":
                v = str(v).strip().lower()
            where.append(f"{name} = ?")
            args.append(v)
        sql = f"SELECT {', '.join(_COLUMNS)} FROM entries"
        sql += (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY recorded_utc DESC, rowid DESC"
        return self._query(sql + (" LIMIT ?" if limit else ""), args + ([limit] if limit else []))

    def stats(self, include_masked: bool = False) -> dict[str, Any]:
        """Counts over the log (masked entries left out unless ``include_masked``).

        Returns:
            ``{"path", "total", "masked" (masked entries in the file, always counted), "measured", "unmeasured",
            "sources" (distinct), "by_outcome", "by_kernel_type", "by_backend", "by_bottleneck" ("none" for
            entries without one), "by_tag" (the 20 most used tags)}``; each ``by_*`` maps value -> count, largest
            first.
        """
        entries = self.entries(include_masked)
        masked = self._conn.execute("SELECT count(*) FROM entries WHERE masked = 1").fetchone()[0]

        def count(values: Iterable[str]) -> dict[str, int]:
            c: dict[str, int] = {}
            for v in values:
                c[v] = c.get(v, 0) + 1
            return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))

        return {"path": str(self.path), "total": len(entries), "masked": masked,
                "measured": sum(e.measured for e in entries), "unmeasured": sum(not e.measured for e in entries),
                "sources": len({e.source for e in entries}),
                "by_outcome": count(e.outcome for e in entries),
                "by_kernel_type": count(e.kernel_type for e in entries),
                "by_backend": count(e.backend for e in entries),
                "by_bottleneck": count(e.bottleneck or "none" for e in entries),
                "by_tag": dict(list(count(t for e in entries for t in e.tags).items())[:20])}

    # -- moving entries between logs -----------------------------------------------------------------------------

    def merge(self, other: str | Path) -> int:
        """Add every entry of another log file that this one lacks (by key; masks and claims come along); returns
        how many were added. Merging the same file twice adds nothing the second time.

        Raises:
            ExperienceError: ``other`` is missing, not a SQLite database, not an experience log, or newer.
        """
        return self.add_many(read_log(other))

    def export_jsonl(self, path: str | Path) -> int:
        """Write every entry (masked ones too, with ``masked``) to ``path`` as JSON Lines, one
        :meth:`~ExperienceEntry.as_record` per line with sorted keys, oldest first: a stable text file to keep in
        a repository. The file is replaced atomically. Returns the number of lines.

        Raises:
            ExperienceError: ``path`` cannot be written.
        """
        p = Path(path).expanduser()
        entries = sorted(self.entries(include_masked=True), key=lambda e: (e.recorded_utc, e.key()))
        self.write_jsonl(p, (e.as_record() for e in entries))
        return len(entries)

    def import_jsonl(self, path: str | Path) -> int:
        """Add the entries of a JSON Lines file (as :meth:`export_jsonl` writes) that this log lacks; returns how
        many were added. All lines are checked before any is added.

        Raises:
            ExperienceError: the file is missing or unreadable, or a line is not a valid entry (``FILE:LINE``).
        """
        return self.add_many(read_jsonl(path))


def read_log(other: str | Path) -> list[ExperienceEntry]:
    """Every entry of a log file (masked ones too), oldest first; the file is opened read-only (a version-1 file's
    entries get ``claim`` as :func:`_upgrade_v1` would give it).

    Raises:
        ExperienceError: ``other`` is missing, not a SQLite database, not an experience log, or newer.
    """
    o = Path(other).expanduser()
    with ExperienceDB.reading(o, _connect, lambda conn, at: _check_schema(conn, at, create=False)) as conn:
        has_claim = "claim" in {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
        runs = " OR ".join("source LIKE ?" for _ in RUN_SOURCES)
        claim = "claim" if has_claim else f"CASE WHEN {runs} THEN NULL ELSE ? END"
        args = () if has_claim else (*(f"{p}%" for p in RUN_SOURCES), V1_CLAIM)
        rows = conn.execute(f"SELECT {', '.join(_COLUMNS[:-1])}, {claim} FROM entries ORDER BY recorded_utc, "
                            "rowid", args).fetchall()
    return [_entry(r, o) for r in rows]


def read_jsonl(path: str | Path) -> list[ExperienceEntry]:
    """The entries of a JSON Lines file, one object per non-blank line (a ``key`` field is ignored: keys are
    computed; a line without ``source`` gets ``import:<file name>``).

    Raises:
        ExperienceError: the file is missing or unreadable; a line is not JSON or not a valid entry (the message
            gives ``FILE:LINE`` and what is wrong).
    """
    p = Path(path).expanduser()
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ExperienceError(f"cannot read {p}: {exc.strerror or exc}",
                              "give a JSON Lines file written by `kernelpilot experience export`") from exc
    out: list[ExperienceEntry] = []
    for n, line in _numbered(lines):
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            data.pop("key", None)
            data.setdefault("source", f"import:{p.name}")
            out.append(ExperienceEntry.model_validate(data))
        except (ValueError, ValidationError) as exc:
            raise ExperienceError(f"{p}:{n}: not a valid experience entry: {_short(exc)}",
                                  "fix or delete that line; each line is one entry as "
                                  "`kernelpilot experience export` writes it") from exc
    return out


def _numbered(lines: list[str]) -> Iterator[tuple[int, str]]:
    for n, line in enumerate(lines, start=1):
        if line.strip():
            yield n, line


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'entry'}: {err['msg']}" for err in exc.errors())
    return str(exc)


def _at_least_one(option: str, value: Optional[int]) -> None:
    if value is not None and value < 1:
        raise OptionError(f"{option} {value} is below 1", "give 1 or more")


def _choice(option: str, value: Optional[str], allowed: tuple[str, ...]) -> Optional[str]:
    if value is None:
        return None
    v = str(value).strip().lower()
    if v not in allowed:
        raise OptionError(f"{option} {value}: not one of {', '.join(allowed)}", f"e.g. {option} {allowed[0]}")
    return v
