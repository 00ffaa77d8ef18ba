"""The cache file's format, below the store: header constants, the file name, the compact JSON of one line, the
folder, the incremental reader (:class:`CacheFileIndex`) and the durable append helpers.

See :mod:`kernelpilot.search.cache` for the format and the crash-safety rules; that module re-exports
:data:`HEADER_KIND`, :data:`FORMAT_VERSION` and :func:`cache_dir`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernelpilot.facts import kernelpilot_home, utc_now_iso
from kernelpilot.search.cache_trust import LineTrust, cache_secret, check_line
from kernelpilot.search.cache_trust import dumps_compact as dumps_compact  # noqa: PLC0414 - re-exported
from kernelpilot.search.model import Evaluation

__all__ = ["HEADER_KIND", "FORMAT_VERSION", "FILE_NAME_RE", "CacheFileIndex", "cache_dir", "dumps_compact", "fsync_dir",
           "jsonable", "now_iso", "write_all"]

#: ``kind`` of a cache file's first line.
HEADER_KIND = "kernelpilot.cache"
#: Format version; part of the context key, so a future format change opens new files.
FORMAT_VERSION = 1
#: A cache file's name: ``<kernel>-<16 hex digits of the context key>.jsonl``.
FILE_NAME_RE = re.compile(r"^(?P<kernel>.+)-(?P<key>[0-9a-f]{16})\.jsonl$")


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds (``2025-01-01T00:00:00.000+00:00``). Raises nothing."""
    return utc_now_iso("milliseconds")


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (non-JSON leaves such as ``torch.float16`` become their ``str``)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def cache_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``root`` if given, else ``$KERNELPILOT_CACHE``, else ``<kernelpilot_home()>/cache``.

    Args:
        root: an explicit folder (``~`` is expanded), or None.

    Returns:
        The folder's path; it is not created here (the first :meth:`EvaluationCache.put` creates it).
    """
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get("KERNELPILOT_CACHE", "").strip()
    return Path(env).expanduser() if env else kernelpilot_home() / "cache"



class CacheFileIndex:
    """The parsed state of one cache file, read incrementally from a byte offset (internal).

    ``records`` maps config key -> last Evaluation (dict order: first appearance); ``trust`` maps the same key to
    the :class:`~kernelpilot.search.cache_trust.LineTrust` of that last line (its line number and who signed it);
    ``corrupt`` holds (line number, reason) of skipped complete lines; ``torn`` the line number of an invalid final
    fragment that has no newline yet (a crash mid-write), or None.

    Args:
        path: the cache file.
        context_key: the context key lines are verified against (None: the header's ``key``).
        create_secret: make this user's cache key when there is none (a writer); False for readers that only look
            (then, without a key, no line can be ``signed``).
    """

    def __init__(self, path: Path, context_key: str | None = None, create_secret: bool = False) -> None:
        self.path = path
        self.context_key = context_key
        self.create_secret = create_secret
        self._secret: bytes | None = None
        self._secret_read = False
        self.reset()

    def reset(self) -> None:
        self.offset = 0
        self.lines = 0
        self.ident: tuple[int, int] | None = None
        self.header: dict[str, Any] | None = None
        self.records: dict[str, Evaluation] = {}
        self.trust: dict[str, LineTrust] = {}
        self.n_records = 0
        self.corrupt: list[tuple[int, str]] = []
        self.torn: int | None = None
        self._skip_newline = False

    @property
    def skipped(self) -> int:
        return len(self.corrupt) + (1 if self.torn is not None else 0)

    def warnings(self) -> list[str]:
        out = [f"{self.path}: line {n}: {why}; skipped" for n, why in self.corrupt]
        if self.torn is not None:
            out.append(f"{self.path}: line {self.torn}: torn last line (incomplete write, e.g. a crash); skipped")
        if self.header is None and self.lines > 0:
            out.append(f"{self.path}: no header line (context unknown)")
        return out

    def _parse(self, raw: bytes) -> tuple[str, Any] | str:
        """``("header", dict)`` / ``("record", (Evaluation, the line's JSON object))`` / ``("blank", None)``, or
        the reason the line is corrupt."""
        if not raw.strip():
            return "blank", None
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return f"not valid JSON ({exc})"
        if not isinstance(obj, dict):
            return "not a JSON object"
        if obj.get("kind") == HEADER_KIND:
            if self.header is not None:
                return "a second header line"
            if not isinstance(obj.get("context"), dict) or not isinstance(obj.get("key"), str):
                return "header without context or key"
            return "header", obj
        if "evaluation" not in obj:
            return "no 'evaluation' field"
        try:
            return "record", (Evaluation.model_validate(obj["evaluation"]), obj)
        except ValidationError as exc:
            return f"evaluation does not validate ({exc.error_count()} errors: {exc.errors()[0]['msg']})"

    def _apply(self, parsed: tuple[str, Any]) -> None:
        kind, value = parsed
        if kind == "header":
            self.header = value
        elif kind == "record":
            ev, obj = value
            self.records[ev.key] = ev.model_copy(update={"cached": True})
            self.trust[ev.key] = check_line(obj, self._context_key(), self._key_bytes(), self.lines)
            self.n_records += 1

    def _context_key(self) -> str:
        return self.context_key or str((self.header or {}).get("key", ""))

    def _key_bytes(self) -> bytes | None:
        """This user's cache key (read once; created only for a writer)."""
        if not self._secret_read:
            self._secret = cache_secret(create=self.create_secret)
            self._secret_read = self._secret is not None or not self.create_secret
        return self._secret

    def read_fd(self, fd: int) -> None:
        """Parse what was appended to the open file ``fd`` since the last call (the caller holds a flock)."""
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino)
        if ident != self.ident or st.st_size < self.offset:  # a new or replaced file: start over
            self.reset()
            self.ident = ident
        if st.st_size == self.offset:
            return
        chunks, pos = [], self.offset
        while pos < st.st_size:
            chunk = os.pread(fd, st.st_size - pos, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        data = b"".join(chunks)
        start = 1 if self._skip_newline and data.startswith(b"\n") else 0
        self._skip_newline = False
        self.torn = None
        end = data.rfind(b"\n")
        if end >= start:
            for raw in data[start:end].split(b"\n"):
                self.lines += 1
                parsed = self._parse(raw)
                if isinstance(parsed, str):
                    self.corrupt.append((self.lines, parsed))
                else:
                    self._apply(parsed)
            consumed = end + 1
        else:
            consumed = start
        self.offset += consumed
        rest = data[consumed:]
        if rest:  # a final line without its newline: complete only if it parses
            parsed = self._parse(rest)
            if isinstance(parsed, str):
                self.torn = self.lines + 1  # re-read next time (it becomes a corrupt line once a newline follows)
            else:
                self.lines += 1
                self._apply(parsed)
                self.offset += len(rest)
                self._skip_newline = True  # the next append starts with "\n" to end this line

    def read_path(self) -> None:
        """Open the file read-only under a shared flock and parse what is new; a missing file reads as empty."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            if self.ident is not None:
                self.reset()
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            self.read_fd(fd)
        finally:
            os.close(fd)  # closing releases the lock


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` the whole buffer (one call in practice; continues after a short write, e.g. a full disk)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync_dir(folder: Path) -> None:
    """fsync a folder so a newly created file's name survives a power loss (best effort)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

