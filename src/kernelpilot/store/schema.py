"""The config store's SQLite layout, shared by the writer (:mod:`kernelpilot.store.db`) and the run-time reader
(:mod:`kernelpilot.store.lookup`).

Tables:

- ``meta``: ``kind`` = :data:`KIND` (tells a store from any other SQLite file), ``schema_version``, ``created_utc``;
- ``schema_versions``: one row per layout version the file was brought to, with when (``PRAGMA user_version`` holds
  the current one, :data:`SCHEMA_VERSION`);
- ``configs``: one row per (key, config): the decided configs, each with its best measurement;
- ``history``: every measurement ever put, merged or imported, with what became of it (``added``, ``improved``,
  ``kept``: the rule in :mod:`kernelpilot.store.db`), so a measurement that lost is still on record.

Standard library only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from kernelpilot.store.model import ConfigStoreError, Evidence, StoreKey, StoredConfig, canonical_json

__all__ = ["KIND", "SCHEMA_VERSION", "COLUMNS", "SCHEMA", "connect", "check_schema", "row_of", "entry_of"]

#: ``meta.kind`` of a config store.
KIND = "kernelpilot.config-store"
#: Version of the file's layout.
SCHEMA_VERSION = 1
#: The ``configs`` columns, in order.
COLUMNS = ("key_id", "config_id", "kernel_hash", "arch", "toolchain", "dtype", "strides", "shape_range", "config",
           "duration_ns", "evidence", "decided_at", "origin", "gpu")
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schema_versions (version INTEGER PRIMARY KEY, applied_utc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS configs (
    key_id TEXT NOT NULL, config_id TEXT NOT NULL, kernel_hash TEXT NOT NULL, arch TEXT NOT NULL,
    toolchain TEXT NOT NULL, dtype TEXT NOT NULL, strides TEXT NOT NULL, shape_range TEXT NOT NULL,
    config TEXT NOT NULL, duration_ns REAL NOT NULL, evidence TEXT NOT NULL, decided_at TEXT NOT NULL,
    origin TEXT NOT NULL, gpu TEXT, PRIMARY KEY (key_id, config_id));
CREATE INDEX IF NOT EXISTS configs_lookup ON configs (kernel_hash, arch, dtype, strides, toolchain);
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key_id TEXT NOT NULL, config_id TEXT NOT NULL, record TEXT NOT NULL,
    outcome TEXT NOT NULL, recorded_utc TEXT NOT NULL);
"""
_FIX = ("move the file aside (or point --store / $KERNELPILOT_CONFIG_STORE at another path) and start a new store; "
        "importing an export (JSON Lines) refills it")


def connect(path: Path, read_only: bool = False) -> sqlite3.Connection:
    """Open ``path`` (read-only through a ``mode=ro`` URI) in autocommit mode with a 30 s busy timeout."""
    target = f"{path.resolve().as_uri()}?mode=ro" if read_only else str(path)
    return sqlite3.connect(target, timeout=30.0, isolation_level=None, uri=read_only)


def check_schema(conn: sqlite3.Connection, path: Path, create: bool, now: str) -> None:
    """Create the tables of an empty file (``create``), or check that the file is a config store this version reads.

    Raises:
        ConfigStoreError: another SQLite database, or a newer schema. sqlite3.DatabaseError: not a database.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if version == 0 and not tables and create:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in filter(None, (s.strip() for s in SCHEMA.split(";"))):
                conn.execute(stmt)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('kind', ?), ('schema_version', ?), ('created_utc', ?)",
                         (KIND, str(SCHEMA_VERSION), now))
            conn.execute("INSERT OR IGNORE INTO schema_versions VALUES (?, ?)", (SCHEMA_VERSION, now))
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
    if kind != KIND or "configs" not in tables:
        raise ConfigStoreError(f"{path} is a SQLite database but not a kernelpilot config store "
                               f"(tables: {', '.join(sorted(tables)) or 'none'})", _FIX)
    if version > SCHEMA_VERSION:
        raise ConfigStoreError(f"{path} was written by a newer kernelpilot (config store schema {version}; this "
                               f"version reads {SCHEMA_VERSION})",
                               "upgrade kernelpilot, or export the store with the newer version and import the JSON "
                               "Lines here")


def row_of(entry: StoredConfig) -> tuple[Any, ...]:
    """The ``configs`` row of an entry, in :data:`COLUMNS` order."""
    k = entry.key
    return (k.key_id(), entry.config_id(), k.kernel_hash, k.arch, canonical_json(k.toolchain), k.dtype, k.strides,
            canonical_json(k.shape_range), canonical_json(entry.config), entry.duration_ns,
            canonical_json(entry.evidence.model_dump(mode="json")), entry.decided_at, entry.origin, entry.gpu)


def entry_of(row: Any, path: Path) -> StoredConfig:
    """The entry of a ``configs`` row (as :data:`COLUMNS` selects it).

    Raises:
        ConfigStoreError: the row does not hold a valid entry (a hand-edited file).
    """
    import json

    d = dict(zip(COLUMNS, row))
    try:
        key = StoreKey(kernel_hash=d["kernel_hash"], arch=d["arch"], toolchain=json.loads(d["toolchain"]),
                       dtype=d["dtype"], strides=d["strides"], shape_range=json.loads(d["shape_range"]))
        entry = StoredConfig(key=key, config=json.loads(d["config"]), duration_ns=d["duration_ns"],
                             evidence=Evidence.model_validate(json.loads(d["evidence"])), decided_at=d["decided_at"],
                             origin=d["origin"], gpu=d["gpu"])
    except (ValueError, TypeError, ConfigStoreError) as exc:  # pydantic's ValidationError is a ValueError
        raise ConfigStoreError(f"{path}: a stored config is not valid ({exc})", _FIX) from exc
    if entry.key.key_id() != d["key_id"] or entry.config_id() != d["config_id"]:
        raise ConfigStoreError(f"{path}: a stored config's key or config does not hash to its row's ids (the file "
                               "was edited by hand)", _FIX)
    return entry
