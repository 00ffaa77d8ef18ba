"""Reading a bundle folder with the standard library only: the manifest as JSON and every listed file checked
against its sha256. :mod:`kernelpilot.bundle.manifest` validates the same JSON against the schema (pydantic) for
``export`` and ``verify``; :mod:`kernelpilot.bundle.load` uses this module alone, so that loading a bundle imports
neither pydantic nor Triton (see :mod:`kernelpilot.bundle.driver` for the measured cost of those imports).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from kernelpilot.errors import KernelpilotError

__all__ = ["BundleError", "FORMAT", "MANIFEST", "file_sha256", "read_files", "read_manifest_data"]

#: The manifest format this code writes and reads.
FORMAT = "kernelpilot-bundle/1"
MANIFEST = "manifest.json"


class BundleError(KernelpilotError):
    """A bundle is unusable here: a file whose sha256 does not match, another arch, a PTX ISA newer than the driver,
    a shape outside the declared ones, a missing kernel or file, a manifest that breaks the schema. The message
    names both sides (expected vs found)."""


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest_data(bundle: str | Path) -> dict[str, Any]:
    """``BUNDLE/manifest.json`` as a dict whose ``format`` is :data:`FORMAT` (the schema is not checked here).

    Raises:
        BundleError: the folder or manifest is missing, not a JSON object, or of another format.
    """
    path = Path(bundle) / MANIFEST
    if not Path(bundle).is_dir():
        raise BundleError(f"{bundle}: not a bundle folder", "make one with `kernelpilot export RUN|KERNEL --out DIR`")
    if not path.is_file():
        raise BundleError(f"{path}: missing (every bundle has a manifest.json)", "export the bundle again")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path}: not JSON ({exc})", "export the bundle again") from exc
    if not isinstance(data, dict):
        raise BundleError(f"{path}: not a JSON object", "export the bundle again")
    if data.get("format") != FORMAT:
        raise BundleError(f"{path}: format {data.get('format')!r}, this kernelpilot reads {FORMAT!r}",
                          "export the bundle with this kernelpilot")
    return data


def read_files(bundle: str | Path, files: Iterable[tuple[str, str]], cubins: Iterable[tuple[str, str]]
               ) -> dict[str, bytes]:
    """Every listed file's bytes (path -> bytes), each checked against its sha256 once read (the bytes returned
    are the bytes hashed), and every entry's cubin checked to be listed.

    Args:
        bundle: the folder. files: (path relative to it, hex sha256) per listed file.
        cubins: (cubin path, kernel name) per entry.

    Raises:
        BundleError: a file is missing, or its sha256 differs (tampered or corrupt): the message names the file
            and both hashes; a cubin not listed in ``files``.
    """
    root = Path(bundle)
    data: dict[str, bytes] = {}
    for rel, sha in files:
        p = root / rel
        if not p.is_file():
            raise BundleError(f"{p}: listed in the manifest but missing", "export the bundle again")
        data[rel] = p.read_bytes()
        got = hashlib.sha256(data[rel]).hexdigest()
        if got != sha:
            raise BundleError(f"{p}: sha256 {got} does not match the manifest's {sha} (tampered or corrupt)",
                              "do not edit bundle files; export the bundle again")
    for cubin, kernel_name in cubins:
        if cubin not in data:
            raise BundleError(f"{root / cubin}: entry {kernel_name} names a cubin the manifest's files do not "
                              f"list (no hash to check it against)", "export the bundle again")
    return data
