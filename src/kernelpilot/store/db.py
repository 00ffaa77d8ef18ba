"""The config store's SQLite file: :class:`ConfigStore` puts decided configs, looks them up, exports them as JSON
Lines and takes in another store's (import of an export, merge of a store file).

The rule when a config arrives for a key (``put``, ``import_``, ``merge`` alike):

- a **different config** for a key that has one is **added beside it**: a stored config is never overwritten by
  another; :meth:`ConfigStore.conflicts` lists the keys that hold more than one, and a lookup answers one measured
  here before one taken in, then the fastest (then the smaller config text: :func:`kernelpilot.store.lookup.select`);
- the **same config** again keeps the better measurement (with its evidence, time, origin and GPU): one made here
  (origin ``put``) outranks one taken in from elsewhere (``import:``/``merge:``: measured on another machine or
  written by hand, so a claim), and among measurements of one kind the faster wins: ``improved`` when the new one
  is better, ``kept`` otherwise (an equal one keeps the stored);
- every arrival, whatever became of it, is appended to the ``history`` table, so the measurement that lost is on
  record too. Merging or importing the same file twice changes no config the second time.

The file (default :func:`~kernelpilot.store.model.default_store_path`) is opened in WAL mode with a 30 s busy
timeout, so several runs may write to it at once. Layout: :mod:`kernelpilot.store.schema`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from pydantic import BaseModel, ValidationError

from kernelpilot.errors import KernelpilotError
from kernelpilot.store.lookup import candidates, check_shape_dtype, origin_rank, select
from kernelpilot.sqlitefile import SqliteFile
from kernelpilot.store.model import (ConfigStoreError, Evidence, StoreKey, StoredConfig, canonical_json,
                                     default_store_path, utc_now)
from kernelpilot.store.schema import COLUMNS, check_schema, connect, entry_of, row_of

__all__ = ["MergeReport", "ConfigStore", "read_jsonl"]

_FIX = ("move the file aside (or point --store / $KERNELPILOT_CONFIG_STORE at another path) and start a new store; "
        "importing an export (JSON Lines) refills it")


class MergeReport(BaseModel):
    """What taking in a set of entries did (the rule in the module docstring).

    Attributes:
        added: new (key, config) rows. improved: same config, faster measurement now stored.
        kept: same config, the stored measurement was as fast or faster. conflicts: keys that now hold more than
            one config and did not before (both kept; lookup answers the fastest).
    """

    added: int = 0
    improved: int = 0
    kept: int = 0
    conflicts: int = 0


class ConfigStore(SqliteFile):
    """An open config store (a SQLite file). Open it with :meth:`open`; use it as a context manager or call
    :meth:`close`.

    Attributes:
        path: the file.
    """

    error, what, file_name, setting = ConfigStoreError, "config store", "configs.db", "$KERNELPILOT_CONFIG_STORE"
    fix = _FIX

    @classmethod
    def open(cls, path: str | Path | None = None) -> "ConfigStore":
        """Open (creating it and its folder if needed) the store at ``path``, default
        :func:`~kernelpilot.store.model.default_store_path`.

        Raises:
            ConfigStoreError: ``path`` is a folder; the folder or file cannot be created; the file is not a SQLite
                database, is another SQLite database, or has a newer schema. The hint says how to start over.
        """
        p = Path(path).expanduser() if path is not None else default_store_path()
        return cls.open_file(p, connect, lambda conn, at: check_schema(conn, at, create=True, now=utc_now()))

    # -- writing -------------------------------------------------------------------------------------------------

    def put(self, kernel_hash: str, arch: str, toolchain: Mapping[str, Any], dtype: str, strides: str,
            shape_range: Mapping[str, Any], config: Mapping[str, Any], duration_ns: float, *,
            evidence: Evidence | Mapping[str, Any] | None = None, decided_at: Optional[str] = None,
            gpu: Optional[str] = None) -> str:
        """Store a decided config (the rule in the module docstring); returns ``added``, ``improved`` or ``kept``.

        Args:
            kernel_hash, arch, toolchain, dtype, strides: the key fields (:class:`~kernelpilot.store.model.StoreKey`).
            shape_range: key -> ``[lo, hi]`` or value (:meth:`kernelpilot.workload.buckets.Bucket.store_range`); a
                ``dtype`` key, if present, must equal ``dtype`` and is dropped (it is a key field of its own).
            config: the tunables' values. duration_ns: its measured time, ns (> 0).
            evidence: ``{"run_dir": ..., "record_ids": [...]}``. decided_at: UTC ISO time (default now).
            gpu: the GPU measured on.

        Raises:
            ConfigStoreError: a malformed field (the message names it); the file cannot be written.
        """
        rng = dict(shape_range)
        if "dtype" in rng:
            if str(rng.pop("dtype")).removeprefix("torch.").lower() != str(dtype).removeprefix("torch.").lower():
                raise ConfigStoreError(f"shape range dtype {shape_range['dtype']!r} is not dtype {dtype!r}",
                                       "store each dtype under its own key")
        try:
            entry = StoredConfig(key=StoreKey(kernel_hash=kernel_hash, arch=arch, toolchain=toolchain, dtype=dtype,
                                              strides=strides, shape_range=rng),
                                 config=dict(config), duration_ns=duration_ns,
                                 evidence=Evidence.model_validate(evidence or {}),
                                 decided_at=decided_at or utc_now(), origin="put", gpu=gpu)
        except ValidationError as exc:
            raise ConfigStoreError(f"cannot store the config: {_short(exc)}",
                                   "see kernelpilot.store.ConfigStore.put for each field") from exc
        outcomes = self._take([entry])
        return outcomes[0]

    def _take(self, entries: list[StoredConfig]) -> list[str]:
        """Apply the rule to each entry in one transaction (all or none); returns each entry's outcome."""
        outcomes: list[str] = []
        now = utc_now()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            for e in entries:
                row = row_of(e)
                key_id, config_id = row[0], row[1]
                old = self._conn.execute("SELECT origin, duration_ns FROM configs WHERE key_id = ? AND config_id = ?",
                                         (key_id, config_id)).fetchone()
                if old is None:
                    self._conn.execute(f"INSERT INTO configs ({', '.join(COLUMNS)}) VALUES "
                                       f"({', '.join('?' * len(COLUMNS))})", row)
                    outcome = "added"
                elif (origin_rank(e.origin), e.duration_ns) < (origin_rank(old[0]), old[1]):
                    sets = ", ".join(f"{c} = ?" for c in COLUMNS[2:])
                    self._conn.execute(f"UPDATE configs SET {sets} WHERE key_id = ? AND config_id = ?",
                                       (*row[2:], key_id, config_id))
                    outcome = "improved"
                else:
                    outcome = "kept"
                self._conn.execute("INSERT INTO history (key_id, config_id, record, outcome, recorded_utc) "
                                   "VALUES (?, ?, ?, ?, ?)", (key_id, config_id, canonical_json(e.as_record()),
                                                              outcome, now))
                outcomes.append(outcome)
            self._conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise ConfigStoreError(f"cannot write to the config store {self.path}: {exc}",
                                   "check that the file and its folder are writable and not on a full disk") from exc
        return outcomes

    def take(self, entries: Iterable[StoredConfig], origin: Optional[str] = None) -> MergeReport:
        """Take in entries from elsewhere under the rule (module docstring), in one transaction.

        Args:
            entries: the entries. origin: recorded as each entry's ``origin`` (``import:FILE``); None keeps theirs.

        Returns:
            What it did (:class:`MergeReport`). Raises ConfigStoreError when the file cannot be written.
        """
        items = [e if origin is None else e.model_copy(update={"origin": origin}) for e in entries]
        before = {k for k, n in self._config_counts().items() if n > 1}
        outcomes = self._take(items)
        after = {k for k, n in self._config_counts().items() if n > 1}
        return MergeReport(added=outcomes.count("added"), improved=outcomes.count("improved"),
                           kept=outcomes.count("kept"), conflicts=len(after - before))

    def import_(self, path: str | Path) -> MergeReport:
        """Take in a JSON Lines export (:meth:`export`); every line is checked before any is taken; entries get
        origin ``import:<file name>``.

        Raises:
            ConfigStoreError: the file is missing or unreadable, a line is not a valid entry (``FILE:LINE``); the
                store cannot be written.
        """
        p = Path(path).expanduser()
        return self.take(read_jsonl(p), origin=f"import:{p.name}")

    def merge(self, other: str | Path) -> MergeReport:
        """Take in every entry of another store file (opened read-only); entries get origin ``merge:<file name>``.

        Raises:
            ConfigStoreError: ``other`` is missing, not a SQLite database, not a config store, or newer.
        """
        o = Path(other).expanduser()
        with self.reading(o, connect, lambda conn, at: check_schema(conn, at, create=False, now=utc_now())) as conn:
            rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM configs ORDER BY key_id, config_id").fetchall()
        return self.take([entry_of(r, o) for r in rows], origin=f"merge:{o.name}")

    # -- reading -------------------------------------------------------------------------------------------------

    def entries(self) -> list[StoredConfig]:
        """Every stored (key, config), in the export's stable order: by kernel hash, arch, toolchain, dtype, stride
        pattern, range, then config (canonical JSON text of each)."""
        rows = self._conn.execute(f"SELECT {', '.join(COLUMNS)} FROM configs ORDER BY kernel_hash, arch, toolchain, "
                                  "dtype, strides, shape_range, config").fetchall()
        return [entry_of(r, self.path) for r in rows]

    def history(self) -> list[dict[str, Any]]:
        """Every arrival in order: ``{"record": the entry as exported, "outcome": added/improved/kept,
        "recorded_utc"}``."""
        rows = self._conn.execute("SELECT record, outcome, recorded_utc FROM history ORDER BY id").fetchall()
        return [{"record": json.loads(r[0]), "outcome": r[1], "recorded_utc": r[2]} for r in rows]

    def _config_counts(self) -> dict[str, int]:
        return dict(self._conn.execute("SELECT key_id, count(*) FROM configs GROUP BY key_id").fetchall())

    def conflicts(self) -> list[list[StoredConfig]]:
        """The keys that hold more than one config: one list per key, in the order a lookup ranks them (measured here
        first, then fastest, then config text), keys in the export's order."""
        multi = {k for k, n in self._config_counts().items() if n > 1}
        groups: dict[str, list[StoredConfig]] = {}
        for e in self.entries():
            if e.key.key_id() in multi:
                groups.setdefault(e.key.key_id(), []).append(e)
        return [sorted(g, key=lambda e: (origin_rank(e.origin), e.duration_ns, canonical_json(e.config)))
                for g in groups.values()]

    def lookup_entry(self, kernel_hash: str, arch: str, toolchain: Mapping[str, Any], dtype: str, strides: str,
                     shape: Mapping[str, Any]) -> Optional[StoredConfig]:
        """As :func:`kernelpilot.store.lookup.lookup_entry`, on this open store (no reopening per call)."""
        check_shape_dtype(shape, dtype)
        return select(candidates(self._conn, self.path, kernel_hash, arch, toolchain, dtype, strides), shape)

    def lookup(self, kernel_hash: str, arch: str, toolchain: Mapping[str, Any], dtype: str, strides: str,
               shape: Mapping[str, Any]) -> Optional[dict[str, Any]]:
        """As :func:`kernelpilot.store.lookup.lookup`, on this open store: the config, or None."""
        entry = self.lookup_entry(kernel_hash, arch, toolchain, dtype, strides, shape)
        return dict(entry.config) if entry is not None else None

    # -- moving entries ------------------------------------------------------------------------------------------

    def export(self, path: str | Path) -> int:
        """Write every stored (key, config) to ``path`` as JSON Lines: one
        :meth:`~kernelpilot.store.model.StoredConfig.as_record` per line, keys sorted, in :meth:`entries` order (a
        stable text file for a team's repository: the same store gives the same bytes). Replaced atomically.
        Returns the number of lines.

        Raises:
            ConfigStoreError: ``path`` cannot be written.
        """
        p = Path(path).expanduser()
        entries = self.entries()
        self.write_jsonl(p, (e.as_record() for e in entries))
        return len(entries)


def read_jsonl(path: str | Path) -> list[StoredConfig]:
    """The entries of a JSON Lines export, one object per non-blank line.

    Raises:
        ConfigStoreError: the file is missing or unreadable; a line is not JSON or not a valid entry (the message
            gives ``FILE:LINE`` and what is wrong).
    """
    p = Path(path).expanduser()
    try:
        data = p.read_bytes()
        if data.startswith(b"SQLite format 3\x00"):
            raise ConfigStoreError(f"{p} is a SQLite file (a config store?), not a JSON Lines export",
                                   "to take in another store file (configs.db), merge it")
        lines = data.decode("utf-8").splitlines()
    except OSError as exc:
        raise ConfigStoreError(f"cannot read {p}: {exc.strerror or exc}",
                               "give a JSON Lines file written by the config store's export") from exc
    except UnicodeDecodeError as exc:  # another binary file
        raise ConfigStoreError(f"{p} is not a text file (byte {exc.start} is not UTF-8)",
                               "give a JSON Lines file written by the config store's export") from exc
    out: list[StoredConfig] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            out.append(StoredConfig.from_record(data))
        except (ValueError, KernelpilotError) as exc:  # ValidationError is a ValueError
            raise ConfigStoreError(f"{p}:{n}: not a valid config store entry: {_short(exc)}",
                                   "fix or delete that line; each line is one entry as the export writes it") from exc
    return out


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'entry'}: {err['msg']}" for err in exc.errors())
    if isinstance(exc, KernelpilotError):
        return exc.message
    return str(exc)
