"""The config store's API (``kernelpilot configs list|lookup|export|import|merge|conflicts``): one function per
command, each returning the plain dict that the command prints with ``--json`` (docs/workloads.md, "The config
store"). Re-exported by :mod:`kernelpilot.api`.

The store file: ``store=`` (``--store``), else ``$KERNELPILOT_CONFIG_STORE``, else ``<kernelpilot home>/configs.db``.
A store given by path must exist for ``list``, ``lookup``, ``export`` and ``conflicts`` (a mistyped path is an
error, not an empty store); the default one may be missing (nothing stored yet). ``import`` and ``merge`` create
it. Each entry prints as :meth:`kernelpilot.store.StoredConfig.as_record` (the export's line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

from kernelpilot.store import ConfigStore, ConfigStoreError, StoredConfig, default_store_path
from kernelpilot.store.keys import KeyParts, key_parts, literal_shape
from kernelpilot.store.runtime import answer, load_table

__all__ = ["kernel_key", "configs_list", "configs_lookup", "configs_export", "configs_import", "configs_merge",
           "configs_conflicts"]

StorePath = Optional[str | Path]


def _path(store: StorePath) -> Path:
    return Path(store).expanduser() if store is not None else default_store_path()


def _existing(store: StorePath) -> Optional[Path]:
    """The store file, or None when the default one does not exist yet.

    Raises:
        ConfigStoreError: a store given by path does not exist, or is a folder.
    """
    p = _path(store)
    if p.is_file():
        return p
    if store is None and not p.exists():
        return None
    raise ConfigStoreError(f"no config store at {p}" + (" (a folder)" if p.is_dir() else ""),
                           "give the path of a configs.db file (kernelpilot configs import/merge creates one), or "
                           "leave --store out for the default store")


def kernel_key(kernel: Any, shape: Optional[Mapping[str, Any]] = None, *, ref: str | Path | None = None,
               arch: Optional[str] = None, toolchain: Optional[Mapping[str, Any]] = None,
               dtype: Optional[str] = None, strides: Optional[str] = None, tensors: Any = None) -> KeyParts:
    """The store key parts of a kernel at a shape (:func:`kernelpilot.store.keys.key_parts`), for any kernel: a
    ``.py`` file with a literal ``SHAPE`` is hashed and read without importing it; any other file (a ``.cu`` kernel,
    whose hash covers its headers and sidecar; a ``.py`` whose ``SHAPE`` is computed) is loaded
    (:func:`kernelpilot.kernels.contract.load_kernel`, screened, without a GPU) for its ``source_sha256`` and
    ``SHAPE``. A loaded ``KernelFile`` or a hash is used as is.

    Raises:
        ConfigStoreError: see :func:`~kernelpilot.store.keys.key_parts`. ContractError: a kernel file that does not
            load.
    """
    parts = {"ref": ref, "arch": arch, "toolchain": toolchain, "dtype": dtype, "strides": strides, "tensors": tensors}
    if isinstance(kernel, (str, Path)) and Path(kernel).expanduser().is_file():
        path = Path(kernel).expanduser()
        if path.suffix.lower() != ".py" or literal_shape(path) is None:
            from kernelpilot.kernels.contract import load_kernel

            kernel = load_kernel(path, ref, interpreted=True)
    return key_parts(kernel, shape, **parts)


def configs_lookup(kernel: Any, shape: Optional[Mapping[str, Any]] = None, *, ref: str | Path | None = None,
                   arch: Optional[str] = None, toolchain: Optional[Mapping[str, Any]] = None,
                   dtype: Optional[str] = None, strides: Optional[str] = None, store: StorePath = None
                   ) -> dict[str, Any]:
    """The decided config for a kernel at a shape, by the run-time rule (:func:`kernelpilot.store.runtime.answer`:
    every key part equal, the shape inside the range, most specific range, measured here, fastest); read fresh
    from the file (no cache).

    Args:
        kernel: the kernel file, or its source hash. shape: keys over the kernel's ``SHAPE`` (``{"M": 512}``).
        ref: its reference file. arch, toolchain, dtype, strides: default this machine's arch (``cpu`` without a
            GPU), this interpreter's toolchain, the shape's dtype, ``contiguous``. store: the store file.

    Returns:
        ``{"store", "kernel_hash", "arch", "toolchain", "dtype", "strides", "shape", "found", "config" (or None),
        "entry" (the answering entry as exported, or None), "reason"}``: a miss is ``found: false`` with the reason
        (no store yet, another arch or toolchain only, no range holding the shape ...).

    Raises:
        ConfigStoreError: a store given by path is missing; the store cannot be read; a malformed key part.
        ContractError: a kernel file that does not load.
    """
    parts = kernel_key(kernel, shape, ref=ref, arch=arch, toolchain=toolchain, dtype=dtype, strides=strides)
    where = _existing(store)
    table = load_table(where if where is not None else _path(store))
    if table.error is not None:
        raise ConfigStoreError(table.error, "move the file aside, or give another --store")
    found = answer(table, parts)
    return {"store": str(table.path), **parts.model_dump(mode="json"), "found": found.config is not None,
            "config": found.config, "entry": found.entry.as_record() if found.entry is not None else None,
            "reason": found.reason}


def _records(entries: list[StoredConfig]) -> list[dict[str, Any]]:
    return [e.as_record() for e in entries]


def configs_list(*, kernel: Any = None, arch: Optional[str] = None, store: StorePath = None) -> dict[str, Any]:
    """The stored configs, in the export's order.

    Args:
        kernel: only this kernel's (a kernel file, or a source hash or its first digits). arch: only this arch's.
        store: the store file.

    Returns:
        ``{"store", "count", "entries": [entry as exported, ...]}``.

    Raises:
        ConfigStoreError: a store given by path is missing or cannot be read; a malformed arch.
    """
    from kernelpilot.store import normalize_arch

    where = _existing(store)
    if where is None:
        return {"store": str(_path(store)), "count": 0, "entries": []}
    with ConfigStore.open(where) as s:
        entries = s.entries()
    if kernel is not None:
        text = str(kernel).strip().lower()
        if Path(str(kernel)).expanduser().is_file():
            text = kernel_key(kernel, arch="cpu", toolchain={}).kernel_hash
        elif not text or any(c not in "0123456789abcdef" for c in text):
            raise ConfigStoreError(f"--kernel {kernel!r} is neither a kernel file nor a source hash",
                                   "give the kernel file, or its hash (or the hash's first digits)")
        entries = [e for e in entries if e.key.kernel_hash.startswith(text)]
    if arch is not None:
        entries = [e for e in entries if e.key.arch == normalize_arch(arch)]
    return {"store": str(where), "count": len(entries), "entries": _records(entries)}


def configs_export(file: str | Path, *, store: StorePath = None) -> dict[str, Any]:
    """Write every stored config to ``file`` as JSON Lines (stable order and keys: the same store gives the same
    bytes; fit for a repository). The file is replaced atomically.

    Returns:
        ``{"store", "file", "written"}``.

    Raises:
        ConfigStoreError: a store given by path is missing or cannot be read; ``file`` cannot be written.
    """
    where = _existing(store)
    if where is None:
        raise ConfigStoreError(f"nothing to export: no config store at {_path(store)}",
                               "tune with --workload first, or give --store")
    with ConfigStore.open(where) as s:
        return {"store": str(where), "file": str(file), "written": s.export(file)}


def configs_import(file: str | Path, *, store: StorePath = None) -> dict[str, Any]:
    """Take in a JSON Lines export under the store's rule (a different config for a key is kept beside the stored
    one; the same config keeps the better measurement, one made here before one taken in). Every line is checked
    before any is taken, in one transaction: a bad file changes nothing. Entries get origin ``import:<file name>``.

    Returns:
        ``{"store", "file", "read", "added", "improved", "kept", "conflicts", "total"}``.

    Raises:
        ConfigStoreError: ``file`` is missing, not text, or has a line that is not an entry (``FILE:LINE``); the
            store cannot be opened or written.
    """
    from kernelpilot.store import read_jsonl

    entries = read_jsonl(file)  # checked before the store is opened: a bad file leaves no trace
    with ConfigStore.open(store) as s:
        report = s.take(entries, origin=f"import:{Path(file).name}")
        return {"store": str(s.path), "file": str(file), "read": len(entries), **report.model_dump(),
                "total": len(s.entries())}


def configs_merge(other: str | Path, *, store: StorePath = None) -> dict[str, Any]:
    """Take in every entry of another store file (opened read-only) under the same rule; entries get origin
    ``merge:<file name>``. Nothing is taken when the other file cannot be read.

    Returns:
        ``{"store", "other", "added", "improved", "kept", "conflicts", "total"}``.

    Raises:
        ConfigStoreError: ``other`` is missing, not a config store, newer, or the same file as the store; the store
            cannot be opened or written.
    """
    o = Path(other).expanduser()
    if o.is_file() and o.resolve() == _path(store).resolve():
        raise ConfigStoreError(f"{o} is the store itself", "merge another store's file")
    with ConfigStore.open(store) as s:
        report = s.merge(o)
        return {"store": str(s.path), "other": str(other), **report.model_dump(), "total": len(s.entries())}


def configs_conflicts(*, store: StorePath = None) -> dict[str, Any]:
    """The keys that hold more than one config (import and merge keep both), each with its configs in the order a
    lookup ranks them (measured here, then fastest).

    Returns:
        ``{"store", "count", "conflicts": [{"key": the key's fields, "entries": [entry as exported, ...]}, ...]}``.

    Raises:
        ConfigStoreError: a store given by path is missing or cannot be read.
    """
    where = _existing(store)
    if where is None:
        return {"store": str(_path(store)), "count": 0, "conflicts": []}
    with ConfigStore.open(where) as s:
        groups = s.conflicts()
    out = [{"key": g[0].key.model_dump(mode="json"), "entries": _records(g)} for g in groups]
    return {"store": str(where), "count": len(out), "conflicts": out}
