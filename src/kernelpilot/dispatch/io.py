"""Writing and reading ``dispatch.json`` with an integrity check.

The file is the :class:`~kernelpilot.dispatch.model.Dispatch` body plus one field, ``sha256``: the hex sha256 of
the body's canonical JSON (keys sorted, no spaces, UTF-8, no NaN/Infinity). A reader recomputes it from the body as
it parsed it, before anything is validated, so any change to the file that does not also rewrite the hash is
refused by name. The hash makes an edit evident, not impossible (whoever edits the body can recompute it); what the
body claims is still checked against itself (:mod:`kernelpilot.dispatch.model`) and, by the run's validation,
against the records its evidence names.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernelpilot.dispatch.model import FILE_KIND, SCHEMA_VERSION, Dispatch, validation_summary
from kernelpilot.errors import DispatchError, DispatchIntegrityError

__all__ = ["DISPATCH_FILE", "body_sha256", "canonical_json", "dispatch_sha256", "read_dispatch", "write_dispatch"]

#: The file name in a run's ``--out`` folder.
DISPATCH_FILE = "dispatch.json"


def canonical_json(body: dict[str, Any]) -> bytes:
    """The canonical JSON bytes of a body: sorted keys, ``,``/``:`` separators, UTF-8, NaN refused.

    Raises:
        ValueError: a NaN or infinite float (JSON has none; a dispatch body never holds one).
    """
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def body_sha256(body: dict[str, Any]) -> str:
    """Hex sha256 of :func:`canonical_json` of ``body``. Raises ValueError as :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(body)).hexdigest()


def dispatch_sha256(dispatch: Dispatch) -> str:
    """The ``sha256`` :func:`write_dispatch` stores for this table (the generated modules cite it). Raises
    nothing for a valid table."""
    return body_sha256(dispatch.model_dump(mode="json"))


def write_dispatch(dispatch: Dispatch, path: str | os.PathLike[str]) -> str:
    """Write ``dispatch`` to ``path`` (normally ``<out>/dispatch.json``) atomically, with its ``sha256``.

    Args:
        dispatch: a valid table (a :class:`Dispatch` is validated when built, overlapping ranges included).
        path: the file to write; its folder must exist.

    Returns:
        The hex sha256 stored in the file.

    Raises:
        DispatchError: the table does not validate again (a model built with ``model_construct``), or the file
            cannot be written.
    """
    try:
        body = Dispatch.model_validate(dispatch.model_dump(mode="json")).model_dump(mode="json")
    except ValidationError as exc:
        raise DispatchError(f"refusing to write {path}: {validation_summary(exc)}",
                            "build the table with make_dispatch, which checks it") from None
    digest = body_sha256(body)
    text = json.dumps({**body, "sha256": digest}, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dispatch-", suffix=".json", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        raise DispatchError(f"cannot write {target}: {exc}", "check the folder exists and is writable") from None
    return digest


def read_dispatch(path: str | os.PathLike[str]) -> Dispatch:
    """Read a ``dispatch.json``, refusing it unless its body hashes to its ``sha256`` and validates.

    Args:
        path: the file.

    Returns:
        The :class:`Dispatch`.

    Raises:
        DispatchIntegrityError: no ``sha256`` field, or the body hashes to another value (the message names the file
            and both hashes).
        DispatchError: missing or unreadable file, not JSON, another ``kind`` or ``schema_version``, or a body that
            contradicts itself (overlapping ranges, totals that differ from their rows, ...).
    """
    source = Path(path)
    try:
        raw = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DispatchError(f"cannot read dispatch table {source}: {exc}",
                            "give the dispatch.json a tune or optimize run wrote") from None
    if not isinstance(raw, dict) or raw.get("kind") != FILE_KIND:
        raise DispatchError(f"{source} is not a kernelpilot dispatch table (kind is not {FILE_KIND!r})",
                            "give the dispatch.json a tune or optimize run wrote")
    if raw.get("schema_version") != SCHEMA_VERSION:
        raise DispatchError(f"{source} has schema_version {raw.get('schema_version')!r}; this kernelpilot reads "
                            f"{SCHEMA_VERSION}", "use the kernelpilot version that wrote it, or tune again")
    stored = raw.pop("sha256", None)
    if not isinstance(stored, str):
        raise DispatchIntegrityError(f"{source} has no sha256: it was not written by kernelpilot, or the field was "
                                     "removed", "tune again to get a table whose integrity can be checked")
    try:
        actual = body_sha256(raw)
    except ValueError as exc:
        raise DispatchError(f"{source}: {exc}", "tune again") from None
    if actual != stored:
        raise DispatchIntegrityError(f"{source} was changed after it was written: its body hashes to {actual}, the "
                                     f"file says {stored}", "tune again; do not edit dispatch.json by hand")
    try:
        return Dispatch.model_validate(raw)
    except ValidationError as exc:
        raise DispatchError(f"{source} is refused: {validation_summary(exc)}",
                            "tune again; the table contradicts itself") from None
