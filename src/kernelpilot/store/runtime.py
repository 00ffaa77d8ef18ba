"""The config store at run time, for library code: :func:`configs_for` answers the decided config for a kernel at a
shape, or None, and never raises (docs/workloads.md, "The config store").

- **Loads once, caches.** The first call reads every row of the store file (read-only) into memory; each answer
  is cached per (store, key parts, shape). A missing file is looked for again at the next call (a store written
  later in the process is found); a file read once is not read again until :func:`reload`.
- **No torch, no Triton.** Standard library and pydantic (a test runs it in a fresh interpreter and checks
  ``sys.modules``); tensors are read duck-typed (``.shape``, ``.stride()``) for the stride pattern, and the arch
  comes from the CUDA driver (:func:`kernelpilot.store.keys.this_arch`; pass ``arch=`` to skip that).
- **Never raises.** A missing store, an unreadable one, a malformed argument or no matching entry all give None;
  why is in :func:`explain`'s :class:`Answer`, in :func:`last_reason`, and logged at DEBUG on the
  ``kernelpilot.store.runtime`` logger.

The rule of the answer is :func:`kernelpilot.store.lookup.select`'s (the same as ``kernelpilot configs lookup``):
every key part equal (another arch or toolchain never answers), the shape inside the range, the most specific range,
then measured here, then fastest.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from kernelpilot.store.keys import KeyParts, key_parts, strides_of
from kernelpilot.store.lookup import runtime_toolchain, select
from kernelpilot.store.model import ConfigStoreError, StoredConfig, canonical_json, default_store_path, utc_now
from kernelpilot.store.schema import COLUMNS, check_schema, connect, entry_of

__all__ = ["Answer", "StoreTable", "answer", "configs_for", "explain", "last_reason", "load_table", "reload"]

log = logging.getLogger("kernelpilot.store.runtime")


@dataclass(frozen=True)
class Answer:
    """One lookup's answer.

    Attributes:
        config: the decided config (tunable -> value), or None.
        reason: why (``hit: ...``, or what missed: no store, another arch, no range holding the shape ...).
        entry: the entry that answered (its ``duration_ns``, ``evidence``, ``origin``), or None.
        store: the store file asked.
    """

    config: Optional[dict[str, Any]]
    reason: str
    entry: Optional[StoredConfig] = None
    store: str = ""


@dataclass
class StoreTable:
    """A store file's entries as read at one moment.

    Attributes:
        path: the file. exists: False when there is no file. error: why the file cannot be used, or None.
        by_kernel: kernel hash -> its entries. skipped: rows that are not valid entries (a hand-edited file),
            left out.
    """

    path: Path
    exists: bool = True
    error: Optional[str] = None
    by_kernel: dict[str, list[StoredConfig]] = field(default_factory=dict)
    skipped: int = 0


def load_table(path: str | Path | None = None) -> StoreTable:
    """Read every entry of the store at ``path`` (default :func:`~kernelpilot.store.model.default_store_path`),
    read-only. Raises nothing: a missing file gives ``exists=False``, an unusable one ``error``."""
    p = Path(path).expanduser() if path is not None else default_store_path()
    if not p.is_file():
        return StoreTable(path=p, exists=False)
    conn = None
    table = StoreTable(path=p)
    try:
        conn = connect(p, read_only=True)
        check_schema(conn, p, create=False, now=utc_now())
        rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM configs").fetchall()
    except (sqlite3.Error, ConfigStoreError, OSError) as exc:
        table.error = exc.message if isinstance(exc, ConfigStoreError) else f"{p} cannot be read: {exc}"
        return table
    finally:
        if conn is not None:
            conn.close()
    for row in rows:
        try:
            e = entry_of(row, p)
        except ConfigStoreError:
            table.skipped += 1
            continue
        table.by_kernel.setdefault(e.key.kernel_hash, []).append(e)
    return table


def _differs(entries: list[StoredConfig], parts: KeyParts) -> Optional[str]:
    """The first key part (in the order arch, toolchain, dtype, strides) no entry of the kernel matches."""
    checks = (("arch", lambda e: e.key.arch == parts.arch, lambda e: e.key.arch, parts.arch),
              ("toolchain", lambda e: e.key.toolchain == parts.toolchain, lambda e: canonical_json(e.key.toolchain),
               canonical_json(parts.toolchain)),
              ("dtype", lambda e: e.key.dtype == parts.dtype, lambda e: e.key.dtype, parts.dtype),
              ("strides", lambda e: e.key.strides == parts.strides, lambda e: e.key.strides, parts.strides))
    for name, same, shown, want in checks:
        kept = [e for e in entries if same(e)]
        if not kept:
            have = ", ".join(sorted({shown(e) for e in entries}))
            return f"the store's entries for kernel {parts.kernel_hash[:12]} are for {name} {have}, not {want}"
        entries = kept
    return None


def answer(table: StoreTable, parts: KeyParts) -> Answer:
    """The answer of ``table`` for ``parts`` (its ``shape``), with the reason. Raises nothing."""
    where = str(table.path)
    if not table.exists:
        return Answer(None, f"no config store at {where}", store=where)
    if table.error is not None:
        return Answer(None, f"the config store cannot be used: {table.error}", store=where)
    mine = table.by_kernel.get(parts.kernel_hash, [])
    skipped = f" ({table.skipped} invalid rows left out)" if table.skipped else ""
    if not mine:
        return Answer(None, f"no entry for kernel {parts.kernel_hash[:12]} in {where}{skipped}", store=where)
    other = _differs(mine, parts)
    if other is not None:
        return Answer(None, other + skipped, store=where)
    same = [e for e in mine if (e.key.arch, e.key.toolchain, e.key.dtype, e.key.strides)
            == (parts.arch, parts.toolchain, parts.dtype, parts.strides)]
    shape = {k: v for k, v in parts.shape.items() if k != "dtype"}
    chosen = select(same, shape)
    if chosen is None:
        ranges = "; ".join(sorted({canonical_json(e.key.shape_range) for e in same}))
        return Answer(None, f"no stored range holds the shape {canonical_json(shape)} (ranges: {ranges}){skipped}",
                      store=where)
    return Answer(dict(chosen.config), f"hit: range {canonical_json(chosen.key.shape_range)}, origin "
                  f"{chosen.origin}, {chosen.duration_ns:.0f} ns", entry=chosen, store=where)


_lock = threading.Lock()
_tables: dict[str, StoreTable] = {}
_answers: dict[Any, Answer] = {}
_last = [""]


@functools.lru_cache(maxsize=1)
def _toolchain() -> dict[str, str]:
    return runtime_toolchain()


def _fast_key(path: str, kernel_hash: Any, shape: Any, dtype: Any, strides: Any, arch: Any,
              toolchain: Any) -> Any:
    """A hashable key of the raw arguments (None when one is not hashable: the answer is then not cached)."""
    try:
        key = (path, kernel_hash, tuple(sorted(dict(shape).items())), dtype,
               strides, arch, None if toolchain is None else canonical_json(dict(toolchain)))
        hash(key)
        return key
    except (TypeError, ValueError):
        return None


def explain(kernel_hash: str, shape: Mapping[str, Any], *, dtype: Optional[str] = None,
            strides: Optional[str] = None, tensors: Any = None, arch: Optional[str] = None,
            toolchain: Optional[Mapping[str, Any]] = None, path: str | Path | None = None) -> Answer:
    """The answer for a kernel at a shape, with its reason (module docstring); cached. Never raises.

    Args:
        kernel_hash: the kernel's source hash (:func:`kernelpilot.store.keys.source_hash` of its ``.py`` file).
        shape: the full shape (every key the stored ranges have; a ``dtype`` key is the dtype).
        dtype: default the shape's ``dtype`` key. strides: the stride pattern; default from ``tensors``, else
            ``contiguous``. tensors: the call's tensors (inputs in ``setup``'s order).
        arch: default this machine's (CUDA driver; ``cpu`` without a GPU). toolchain: default this interpreter's.
        path: the store file; default ``$KERNELPILOT_CONFIG_STORE``, else ``<kernelpilot home>/configs.db``.
    """
    try:
        if tensors is not None and strides is None:
            strides = strides_of(tensors)
        where = str(Path(path).expanduser() if path is not None else default_store_path())
        fast = _fast_key(where, kernel_hash, shape, dtype, strides, arch, toolchain)
        found = _answers.get(fast) if fast is not None else None
        if found is None:
            parts = key_parts(kernel_hash, shape, base_shape={}, arch=arch, dtype=dtype, strides=strides,
                              toolchain=toolchain if toolchain is not None else _toolchain())
            table = _tables.get(where)
            if table is None or not table.exists:
                table = load_table(where)
                if table.exists:
                    with _lock:
                        table = _tables.setdefault(where, table)
            found = answer(table, parts)
            if fast is not None and table.exists:
                with _lock:
                    _answers[fast] = found
    except Exception as exc:  # never raise into library code: say why instead
        found = Answer(None, f"lookup failed: {type(exc).__name__}: {getattr(exc, 'message', None) or exc}")
    _last[0] = found.reason
    log.debug("config store: %s", found.reason)
    return found


def configs_for(kernel_hash: str, shape: Mapping[str, Any], *, dtype: Optional[str] = None,
                strides: Optional[str] = None, tensors: Any = None, arch: Optional[str] = None,
                toolchain: Optional[Mapping[str, Any]] = None, path: str | Path | None = None
                ) -> Optional[dict[str, Any]]:
    """The decided config for a kernel at a shape (``{"BLOCK_N": 1024, "num_warps": 4}``), or None when the store
    is missing or unusable or holds no entry for it (why: :func:`last_reason`). :func:`explain`'s arguments; never
    raises; imports neither torch nor Triton.

    e.g. ``configs_for(source_hash(__file__), {"M": x.shape[0], "N": x.shape[1], "dtype": "bfloat16"},
    tensors=(x, w)) or DEFAULT``.
    """
    found = explain(kernel_hash, shape, dtype=dtype, strides=strides, tensors=tensors, arch=arch,
                    toolchain=toolchain, path=path)
    return dict(found.config) if found.config is not None else None


def last_reason() -> str:
    """The reason of this process's last :func:`configs_for`/:func:`explain` answer (``""`` before any)."""
    return _last[0]


def reload() -> None:
    """Forget every store read and answer cached: the next call reads the file again (after an import or merge
    in this process)."""
    with _lock:
        _tables.clear()
        _answers.clear()
