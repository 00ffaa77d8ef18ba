"""Look a decided config up at run time: no torch, no Triton imported (a test runs this module in a fresh
interpreter and checks ``sys.modules``), so a library can call :func:`lookup` before it launches a kernel.

The rule (:func:`select`): an entry answers when every key field equals the query's (kernel hash, arch, toolchain
exactly, dtype, stride pattern; each normalised as :mod:`kernelpilot.store.model` says) and the shape lies in its
range (:func:`~kernelpilot.store.model.range_contains`: the same keys, whole numbers within ``[lo, hi]``, other
values equal). Among those, the most specific range wins (fewest shapes spanned: an entry decided for exactly this
shape before its power-of-two bucket), then a config measured here (origin ``put``) before one taken in from another
store (``import:``/``merge:``: a claim measured elsewhere, or written by hand, which must not displace a local
measurement however fast it says it is), then the fastest, then the smaller config text (canonical JSON): the same
store and query give the same answer in every process. An entry from another arch or
toolchain is never used: a miss returns None, and the caller tunes (or falls back to its default).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from kernelpilot.store.model import (ConfigStoreError, StoredConfig, canonical_json, default_store_path,
                                     normalize_arch, normalize_dtype, normalize_toolchain, range_contains, range_size,
                                     utc_now)
from kernelpilot.store.schema import COLUMNS, check_schema, connect, entry_of

__all__ = ["check_shape_dtype", "origin_rank", "select", "candidates", "lookup", "lookup_entry", "runtime_toolchain"]


def runtime_toolchain(tools: Iterable[str] = ("torch", "triton", "cuda")) -> dict[str, str]:
    """The toolchain of this interpreter, read without importing torch or Triton: the installed distributions'
    versions (``importlib.metadata``) and, for ``cuda``, the CUDA version torch was built with (the ``cuda = '12.8'``
    line of ``torch/version.py``, parsed, not executed). A tool not installed (or a CPU build's ``cuda``) is left
    out. Use the same function when putting and looking up, so both sides name the same toolchain.

    Returns:
        e.g. ``{"cuda": "12.8", "torch": "2.9.0+cu128", "triton": "3.5.0"}``. Raises nothing.
    """
    out: dict[str, str] = {}
    for tool in tools:
        if tool == "cuda":
            version = _torch_cuda_version()
        else:
            try:
                version = importlib.metadata.version(tool)
            except importlib.metadata.PackageNotFoundError:
                version = None
        if version:
            out[tool] = version
    return dict(sorted(out.items()))


def _torch_cuda_version() -> Optional[str]:
    try:
        spec = importlib.util.find_spec("torch")  # finds the package without running its __init__
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "version.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(node.value, ast.Constant):
            return node.value.value if isinstance(node.value.value, str) else None
    return None


def origin_rank(origin: str) -> int:
    """0 for an entry measured here (origin ``put``), 1 for one taken in from elsewhere: lower ranks first."""
    return 0 if origin == "put" else 1


def select(entries: Iterable[StoredConfig], shape: Mapping[str, Any]) -> Optional[StoredConfig]:
    """The entry that answers ``shape`` among entries of one key's other fields (module docstring's rule), or None.
    Raises nothing."""
    inside = [e for e in entries if range_contains(e.key.shape_range, shape)]
    if not inside:
        return None
    return min(inside, key=lambda e: (range_size(e.key.shape_range), canonical_json(e.key.shape_range),
                                      origin_rank(e.origin), e.duration_ns, canonical_json(e.config)))


def candidates(conn: sqlite3.Connection, path: Path, kernel_hash: str, arch: str, toolchain: Mapping[str, Any],
               dtype: str, strides: str) -> list[StoredConfig]:
    """The entries whose key fields other than the range equal the (normalised) query's.

    Raises:
        ConfigStoreError: a key field is malformed; a matching row is not a valid entry.
    """
    query = (str(kernel_hash).strip().lower(), normalize_arch(arch), normalize_dtype(dtype), str(strides).strip(),
             canonical_json(normalize_toolchain(toolchain)))
    rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM configs WHERE kernel_hash = ? AND arch = ? AND dtype = ? "
                        "AND strides = ? AND toolchain = ?", query).fetchall()
    return [entry_of(r, path) for r in rows]


def check_shape_dtype(shape: Mapping[str, Any], dtype: str) -> None:
    """Raise ConfigStoreError when ``shape`` has a ``dtype`` key that is not ``dtype`` (normalised)."""
    if "dtype" in shape and normalize_dtype(str(shape["dtype"])) != normalize_dtype(dtype):
        raise ConfigStoreError(f"the shape's dtype {shape['dtype']!r} is not the dtype asked for ({dtype!r})",
                               "look up with the dtype the shape runs at")


def lookup_entry(kernel_hash: str, arch: str, toolchain: Mapping[str, Any], dtype: str, strides: str,
                 shape: Mapping[str, Any], *, path: str | Path | None = None) -> Optional[StoredConfig]:
    """The stored entry that answers a query (module docstring's rule), or None (no store file, no match).

    Args:
        kernel_hash: the kernel's source hash. arch: ``sm_90`` (``9.0``, ``sm90`` accepted).
        toolchain: tool -> version, compared exactly after normalising (:func:`runtime_toolchain` gives this
            interpreter's). dtype: ``bfloat16``. strides: the stride pattern (``contiguous``).
        shape: the shape to serve: every key of the stored range (a ``dtype`` key, if present, must equal
            ``dtype``). path: the store file; default :func:`~kernelpilot.store.model.default_store_path`.

    Returns:
        The entry (its ``config``, ``duration_ns``, ``evidence``, ``origin``: ``put`` or the file it was imported
        from — an imported entry is a claim until measured here), or None.

    Raises:
        ConfigStoreError: the file is not a config store, is newer, or holds an invalid row; a malformed arch or
            dtype; the shape's dtype differs from ``dtype``.
    """
    check_shape_dtype(shape, dtype)
    p = Path(path).expanduser() if path is not None else default_store_path()
    if not p.is_file():
        return None
    conn = None
    try:
        conn = connect(p, read_only=True)
        check_schema(conn, p, create=False, now=utc_now())
        found = candidates(conn, p, kernel_hash, arch, toolchain, dtype, strides)
    except sqlite3.DatabaseError as exc:
        raise ConfigStoreError(f"{p} cannot be read as a config store: {exc}",
                               "give the path of a config store (configs.db)") from exc
    finally:
        if conn is not None:
            conn.close()
    return select(found, shape)


def lookup(kernel_hash: str, arch: str, toolchain: Mapping[str, Any], dtype: str, strides: str,
           shape: Mapping[str, Any], *, path: str | Path | None = None) -> Optional[dict[str, Any]]:
    """The decided config for a query, or None: :func:`lookup_entry`'s ``config`` (same arguments, same errors).
    A ``dict`` of tunable -> value, e.g. ``{"BLOCK_N": 1024, "num_warps": 4}``."""
    entry = lookup_entry(kernel_hash, arch, toolchain, dtype, strides, shape, path=path)
    return dict(entry.config) if entry is not None else None
