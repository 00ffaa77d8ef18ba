"""The build record of a cached nvcc build: what the compiler read, and the hash of what it wrote.

A cached ``.so`` is only as true as the claim "this binary is what nvcc made of these files". The cache key (source,
local headers, flags, arch, nvcc version; :mod:`kernelpilot.backends.cuda.build`) names the request, but two things
it cannot see were attacks on the record (issue 24): a header found through ``-I`` as ``#include <...>`` (outside
the key: editing it served the stale binary), and the binary itself (anything lying under the key was loaded: a
faster build swapped in gave an 11x false speedup). So each build writes, beside its binary, a record
(``<name>.build.json``) holding:

- ``deps``: every file nvcc read, from **nvcc's own dependency list** (``-MD -MF``, written by the compile that made
  the binary; not our reading of ``#include`` lines), each with its sha256. A lookup re-hashes every one of them;
  a missing or changed file makes the entry stale, and the build runs again (an ordinary miss, with the reason);
- ``binary`` / ``binary_sha256``: the binary's file name (content-addressed: it holds the hash's first 16 digits,
  so a concurrent build of the same key never overwrites a file another process checked) and its sha256.

Two checks against the recorded hash, with two answers (the choice, and why):

- **At lookup** (:func:`check_cached`): a binary whose bytes do not hash to the record is a swapped or corrupt file.
  It is never loaded. The file is moved to ``quarantine/`` (the evidence is kept, not deleted; one line per finding
  goes to ``quarantine/findings.jsonl``), a
  :class:`BuildCacheTampered` warning names it with both hashes, the build runs again, and the new
  :class:`~kernelpilot.backends.cuda.build.BuildResult` carries the finding (``tampered``). Rebuilding rather than
  refusing: the swapped binary gains its author nothing (it never runs), an honest user whose cache was damaged
  (disk, a crashed copy) keeps a working run, and nothing is hidden (warning, quarantined file, result field).
- **At load** (:func:`load_library`): the file is read once, its bytes are hashed and compared with the hash the
  lookup verified, and **those same bytes** are what ``dlopen`` maps (through an in-memory file), so no swap between
  check and load is possible. A mismatch here means the cache is being rewritten while a run uses it: that is
  refused with :class:`~kernelpilot.errors.BuildIntegrityError` (no silent retry inside a timed run).

Limits, said plainly: the record itself is not signed. Someone who writes the cache and rewrites the record and
the binary consistently (a forged hash and a forged dependency list together) is not detected by this module; the
record closes the two shapes above (a swapped binary, an unseen header) and any edit of a file the compiler read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

from kernelpilot.errors import BuildIntegrityError

__all__ = ["RECORD_FORMAT", "BuildCacheTampered", "check_cached", "hash_files", "load_library", "parse_depfile",
           "read_record", "sha256_bytes", "write_record"]

#: The ``format`` field of a build record; another value is treated as no record (the build runs again).
RECORD_FORMAT = "kernelpilot-cuda-build/1"


#: memfds of the libraries loaded by :func:`load_library` (kept open; see there).
_LOADED_FDS: list[int] = []


class BuildCacheTampered(UserWarning):
    """A cached binary's bytes do not hash to its build record: it was swapped or corrupted. It was not loaded; it
    was moved to the cache's ``quarantine/`` folder and the build ran again (the message names the file and both
    hashes)."""


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def parse_depfile(text: str, cwd: Path) -> list[Path]:
    """The prerequisites of a make-style dependency file (``nvcc -MD -MF``): ``target : a.cu \\ hdr.cuh ...``.

    Args:
        text: the file's text. cwd: the folder nvcc ran in (relative paths are resolved against it).

    Returns:
        Each prerequisite once, resolved to an absolute path, in the order listed. Escapes are undone (``\\ `` is a
        space in a name, ``$$`` a ``$``); continuation lines are joined; several rules are merged.
    """
    joined = re.sub(r"\\\r?\n", " ", text)
    out: list[Path] = []
    seen: set[Path] = set()
    for line in joined.splitlines():
        m = re.match(r"^(?:\\.|[^:])*?:(?!\S)", line) if line.strip() else None
        if not m:
            continue
        body = line[m.end():]
        for raw in re.findall(r"(?:\\.|[^\s\\])+", body):
            name = re.sub(r"\\(.)", r"\1", raw).replace("$$", "$")
            p = Path(name) if os.path.isabs(name) else cwd / name
            p = Path(os.path.normpath(p))
            if p not in seen:
                seen.add(p)
                out.append(p)
    return out


def hash_files(paths: list[Path]) -> list[list[str]]:
    """``[[absolute path, sha256], ...]`` of ``paths`` (a missing file gets the hash ``"missing"``). Raises nothing."""
    out = []
    for p in paths:
        try:
            out.append([str(p), sha256_bytes(p.read_bytes())])
        except OSError:
            out.append([str(p), "missing"])
    return out


def read_record(path: Path) -> dict[str, Any] | None:
    """The build record at ``path``, or None when absent, unreadable, not JSON or of another format (a build
    without a usable record is rebuilt, never trusted). Raises nothing."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT or not isinstance(data.get("deps"), list):
        return None
    return data


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` (with ``format`` set) to ``path`` atomically (a temporary file, then ``os.replace``)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"format": RECORD_FORMAT, **record}, indent=1) + "\n")
    os.replace(tmp, path)


def _stale(record: dict[str, Any]) -> str:
    """Why the record's dependencies no longer match the files on disk ("" when every one matches)."""
    changed = []
    for item in record["deps"]:
        try:
            name, want = str(item[0]), str(item[1])
        except (IndexError, TypeError):
            return "the record's dependency list is malformed"
        try:
            got = sha256_bytes(Path(name).read_bytes())
        except OSError:
            got = "missing"
        if got != want:
            changed.append(f"{name} ({'missing' if got == 'missing' else 'changed'})")
    if not changed:
        return ""
    return "files the compiler read changed since the build: " + ", ".join(changed[:5]) + (
        f" and {len(changed) - 5} more" if len(changed) > 5 else "")


def check_cached(record_path: Path) -> tuple[Path | None, dict[str, Any], str]:
    """Look a build up by its record: ``(binary path, record, "")`` when every dependency and the binary hash as
    recorded (the record's ``binary_sha256`` is then the binary's hash); else ``(None, {}, why)`` and the build must
    run again.

    ``why`` says what was found: no record, a dependency changed (named), the binary missing, or a binary whose
    bytes differ from the record. In that last case the binary is moved to ``<cache>/quarantine/``, the finding is
    appended to ``quarantine/findings.jsonl`` and a :class:`BuildCacheTampered` warning is issued (the module docstring says why this rebuilds rather than
    refuses); ``why`` then starts with ``"tampered: "``.

    Args:
        record_path: ``<cache>/<name>.build.json``.

    Raises:
        Nothing (every failure is a reason to rebuild).
    """
    record = read_record(record_path)
    if record is None:
        return None, {}, "no build record"
    stale = _stale(record)
    if stale:
        return None, {}, stale
    binary = record_path.parent / str(record.get("binary", ""))
    want = str(record.get("binary_sha256", ""))
    if not record.get("binary") or binary.parent != record_path.parent or not binary.is_file():
        return None, {}, "the recorded binary is missing"
    try:
        got = sha256_bytes(binary.read_bytes())
    except OSError:
        return None, {}, "the recorded binary cannot be read"
    if got == want:
        return binary, record, ""
    quarantine = record_path.parent / "quarantine"
    quarantine.mkdir(exist_ok=True)
    kept = quarantine / f"{binary.name}.{got[:16]}"
    try:
        shutil.move(str(binary), kept)
    except OSError:
        kept = binary
    why = (f"tampered: {binary} has sha256 {got}, its build record says {want}; it was not loaded (kept as "
           f"{kept}) and the build ran again")
    try:  # the finding outlives the process (a worker's warning may never reach a terminal)
        from kernelpilot.facts import utc_now_iso

        with open(quarantine / "findings.jsonl", "a") as log:
            log.write(json.dumps({"time": utc_now_iso(),
                                  "record": str(record_path), "binary": str(binary), "kept": str(kept),
                                  "recorded_sha256": want, "found_sha256": got}) + "\n")
    except OSError:
        pass
    warnings.warn(BuildCacheTampered(why), stacklevel=3)
    return None, {}, why


def load_library(path: Path, sha256: str) -> Any:
    """``ctypes.CDLL`` of the binary at ``path``, loading exactly the bytes that hash to ``sha256``.

    The file is read once; its bytes are hashed and, when they match, written to an anonymous in-memory file
    (``memfd``, Linux) that ``dlopen`` maps, so the bytes checked are the bytes run. Its descriptor stays open
    for the life of the process (a loaded library is never unloaded): the loader knows objects by path, and a
    reused ``/proc/self/fd/N`` would be answered with the library loaded earlier under that name. Without ``memfd``
    (not Linux, or refused) the bytes go to a private temporary file instead.

    Args:
        path: the cached binary. sha256: the hash its build record holds (:attr:`BuildResult.sha256`).

    Raises:
        BuildIntegrityError: the bytes on disk hash to something else (the message names the file and both hashes).
        OSError: the loader refused the file (not a shared library for this machine).
    """
    import ctypes
    import tempfile

    data = Path(path).read_bytes()
    got = sha256_bytes(data)
    if got != sha256:
        raise BuildIntegrityError(
            f"{path}: the binary about to be loaded has sha256 {got}, but the build record verified {sha256}: "
            f"the build cache was rewritten during the run; nothing was loaded",
            f"stop whatever writes to {Path(path).parent}, delete that folder, and run again")
    if hasattr(os, "memfd_create"):
        # The descriptor stays open for the process's life (a loaded library is never unloaded either): the loader
        # knows objects by name, and a reused "/proc/self/fd/N" would be answered with the library loaded before.
        try:
            fd = os.memfd_create(f"kp-{Path(path).name}", 0)
        except OSError:
            fd = -1  # memfd refused here (an old kernel, a sandbox): the private copy below
        if fd >= 0:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            _LOADED_FDS.append(fd)
            return ctypes.CDLL(f"/proc/self/fd/{fd}")
    with tempfile.TemporaryDirectory(prefix="kp-so-") as tmp:
        copy = Path(tmp) / Path(path).name
        copy.write_bytes(data)
        return ctypes.CDLL(str(copy))
