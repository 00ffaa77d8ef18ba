"""The evaluation cache: append-only, crash-safe, one JSON line per evaluated config, and a replay runner.

One file per **context** — what makes a measurement reusable: the kernel file's source hash, the shape (with its
dtype), the GPU, the driver, and the torch / triton / Python versions, and whether the kernel ran under the Triton
interpreter (:class:`CacheContext`). The file is ``<dir>/<kernel>-<key[:16]>.jsonl`` where ``key`` is the sha256
of the context, so a changed kernel, shape, GPU or version opens a different file and nothing stale is reused,
while adding configs to a search space invalidates nothing (records are per config).

File format (JSON Lines, UTF-8)::

    {"kind": "kernelpilot.cache", "version": 1, "key": "<sha256>", "context": {...}, "created_at": "..."}
    {"key": "<config_key(config)>", "evaluation": {...Evaluation...}, "recorded_at": "2025-01-01T00:00:00.000+00:00"}
    ...

Writing: each record is one ``os.write`` of the whole line to a file opened with ``O_APPEND``, under an exclusive
``fcntl.flock``, followed by ``os.fsync`` — several processes (workers, a rerun) can share a file. The header is
written with the first record, in the same write (again with the next record if a crash
tore it). A crash can at worst leave a torn last line; the next append
starts on a fresh line so the torn fragment never swallows a good record.

Reading (under a shared ``flock``) never loses good records: a torn last line or a corrupt line anywhere is
skipped, counted (``skipped_lines``) and named by line number (``warnings``). When a config was recorded more than
once, the last record wins.

Folder: an explicit ``root``, else ``$KERNELPILOT_CACHE``, else ``<kernelpilot_home()>/cache``
(:func:`cache_dir`).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
import platform
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError, field_validator

from kernelpilot.errors import SearchError
from kernelpilot.hardware.specs import kernelpilot_home
from kernelpilot.search.model import Evaluation, config_key

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile
    from kernelpilot.measure.env import EnvInfo

__all__ = [
    "FORMAT_VERSION",
    "HEADER_KIND",
    "CacheContext",
    "CacheSummary",
    "EvaluationCache",
    "NotInCache",
    "ReplayRunner",
    "cache_dir",
    "clear_cache",
    "list_caches",
    "read_cache_file",
    "show_cache",
]

#: ``kind`` of a cache file's first line.
HEADER_KIND = "kernelpilot.cache"
#: Format version; part of the context key, so a future format change opens new files.
FORMAT_VERSION = 1
#: A cache file's name: ``<kernel>-<16 hex digits of the context key>.jsonl``.
_FILE_RE = re.compile(r"^(?P<kernel>.+)-(?P<key>[0-9a-f]{16})\.jsonl$")


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (non-JSON leaves such as ``torch.float16`` become their ``str``)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))


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


class CacheContext(BaseModel):
    """What a measurement depends on besides its config; its :meth:`key` names the cache file.

    Attributes:
        kernel: the kernel's name (the kernel file's stem, e.g. ``softmax``); used in the file name.
        kernel_sha256: the kernel file's content hash (``KernelFile.source_sha256``: kernel + reference source).
        shape: the problem shape, dtype included (``{"M": 4096, "N": 4096, "dtype": "float16"}``); values that
            are not JSON (a ``torch.dtype``) are stored as their ``str``.
        gpu: the GPU's name (``NVIDIA H200``), or ``cpu`` for interpreted runs.
        driver: the NVIDIA driver version, or None when there is none.
        torch: torch's version, or None.
        triton: triton's version, or None.
        python: the Python version (default: this interpreter's, e.g. ``3.11.9``).
        interpreted: True when the kernel ran under the Triton interpreter (times are not measurements).
    """

    kernel: str
    kernel_sha256: str
    shape: dict[str, Any]
    gpu: str
    driver: str | None
    torch: str | None
    triton: str | None
    python: str = platform.python_version()
    interpreted: bool = False

    @field_validator("shape", mode="before")
    @classmethod
    def _plain_shape(cls, value: Any) -> Any:
        return _jsonable(value) if isinstance(value, dict) else value

    def key(self) -> str:
        """The sha256 hex digest of this context (every field and :data:`FORMAT_VERSION`, canonical JSON).

        Two contexts with equal fields give the same key whatever the shape's key order; raises nothing.
        """
        payload = {"format": FORMAT_VERSION, **self.model_dump(mode="json")}
        return hashlib.sha256(_dumps(payload).encode()).hexdigest()

    def file_name(self) -> str:
        """``<kernel>-<key()[:16]>.jsonl``, the kernel name reduced to ``[A-Za-z0-9_.-]``."""
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.kernel).strip("._") or "kernel"
        return f"{name}-{self.key()[:16]}.jsonl"

    @classmethod
    def for_kernel(cls, kernel_file: KernelFile, shape: dict[str, Any], env: EnvInfo) -> CacheContext:
        """The context of ``kernel_file`` at ``shape`` on the machine ``env`` describes.

        Args:
            kernel_file: the loaded kernel file (its name, ``source_sha256`` and ``interpreted`` flag are used).
            shape: the shape the search runs at (dtype included).
            env: provenance from :func:`kernelpilot.measure.env.collect_env` (GPU name, driver, versions).

        Returns:
            The context; ``gpu`` is ``cpu`` when ``env`` has no GPU. Raises nothing.
        """
        return cls(kernel=kernel_file.name, kernel_sha256=kernel_file.source_sha256, shape=shape,
                   gpu=env.gpu.name if env.gpu is not None else "cpu", driver=env.driver, torch=env.torch,
                   triton=env.triton, python=env.python,
                   interpreted=bool(kernel_file.interpreted or env.mode != "cuda"))


class NotInCache(KeyError):
    """A replay was asked for a config the cache has no record of (replay never invents a result).

    Attributes:
        config: the config asked for.
        key: its :func:`config_key`.
        source: the cache file replayed.
    """

    def __init__(self, config: dict[str, Any], source: str | os.PathLike[str] = "") -> None:
        self.config = dict(config)
        self.key = config_key(config)
        self.source = str(source)
        self.message = (f"config {self.key} is not in the cache{' ' + self.source if self.source else ''}: "
                        "replay answers only configs that were evaluated on the device (fill the cache first, "
                        "e.g. with an exhaustive search)")
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class _Index:
    """The parsed state of one cache file, read incrementally from a byte offset (internal).

    ``records`` maps config key -> last Evaluation (dict order: first appearance); ``corrupt`` holds
    (line number, reason) of skipped complete lines; ``torn`` the line number of an invalid final fragment that
    has no newline yet (a crash mid-write), or None.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reset()

    def reset(self) -> None:
        self.offset = 0
        self.lines = 0
        self.ident: tuple[int, int] | None = None
        self.header: dict[str, Any] | None = None
        self.records: dict[str, Evaluation] = {}
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
        """``("header", dict)`` / ``("record", Evaluation)`` / ``("blank", None)``, or the reason it is corrupt."""
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
            return "record", Evaluation.model_validate(obj["evaluation"])
        except ValidationError as exc:
            return f"evaluation does not validate ({exc.error_count()} errors: {exc.errors()[0]['msg']})"

    def _apply(self, parsed: tuple[str, Any]) -> None:
        kind, value = parsed
        if kind == "header":
            self.header = value
        elif kind == "record":
            ev: Evaluation = value
            self.records[ev.key] = ev.model_copy(update={"cached": True})
            self.n_records += 1

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


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` the whole buffer (one call in practice; continues after a short write, e.g. a full disk)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class EvaluationCache:
    """The cache of one context: config -> its last recorded :class:`Evaluation`, backed by one JSONL file.

    Several processes may use the same file at once: appends are serialized by ``flock`` and each process
    reads what the others appended when it misses (:meth:`get`) or counts (:meth:`__len__`).

    Args:
        context: what the evaluations depend on; names the file (:meth:`CacheContext.file_name`).
        root: the cache folder, or None for :func:`cache_dir`'s default (``$KERNELPILOT_CACHE`` or
            ``<kernelpilot_home()>/cache``).

    Attributes:
        context: the context.
        path: the cache file (it exists once something was put, or when an earlier run wrote it).

    Raises:
        SearchError: the file exists but its header belongs to another context (a renamed or copied file).
        OSError: the file exists and cannot be read.
    """

    def __init__(self, context: CacheContext, root: str | os.PathLike[str] | None = None) -> None:
        self.context = context
        self._key = context.key()
        self.path = cache_dir(root) / context.file_name()
        self._index = _Index(self.path)
        self._refresh()

    def _refresh(self) -> None:
        self._index.read_path()
        self._check_header()

    def _check_header(self) -> None:
        header = self._index.header
        if header is not None and header.get("key") != self._key:
            raise SearchError(f"cache file {self.path} belongs to another context (key {header.get('key')}, "
                             f"expected {self._key})",
                             hint="the file was renamed or copied by hand; delete it with `kernelpilot cache clear`")

    @property
    def key(self) -> str:
        """The context key (sha256 hex digest) of this cache."""
        return self._key

    @property
    def skipped_lines(self) -> int:
        """How many lines of the file could not be read (corrupt lines + a torn last line); they were skipped."""
        return self._index.skipped

    @property
    def warnings(self) -> list[str]:
        """One message per skipped line, naming its line number (and a missing header, if so)."""
        return self._index.warnings()

    @property
    def records(self) -> int:
        """Valid record lines read so far (a config recorded twice counts twice)."""
        return self._index.n_records

    def get(self, config: dict[str, Any]) -> Evaluation | None:
        """The last recorded evaluation of ``config``, or None.

        On a miss the file is re-read from where this process stopped (another process may have added it).

        Args:
            config: tunable name -> value (key order does not matter).

        Returns:
            A copy of the evaluation with ``cached=True`` (its ``wall_s`` is what it cost when measured), or None.
        """
        key = config_key(config)
        ev = self._index.records.get(key)
        if ev is None:
            self._refresh()
            ev = self._index.records.get(key)
        return None if ev is None else ev.model_copy(deep=True)

    def put(self, evaluation: Evaluation) -> None:
        """Append ``evaluation`` as one line (a later put for the same config supersedes it); durable on return.

        The record is written with ``cached=False`` (it is the measurement). Creates the folder and the file
        (with its header line) when needed.

        Args:
            evaluation: the outcome of one config, any status (failures are data and are cached too).

        Raises:
            OSError: the folder or file cannot be written (permissions, full disk).
            SearchError: the file was found to belong to another context.
        """
        stored = evaluation.model_copy(update={"cached": False})
        line = _dumps({"key": stored.key, "evaluation": stored.model_dump(), "recorded_at": _now_iso()}) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._index.read_fd(fd)  # what others appended, and the header, before writing
            self._check_header()
            size = os.fstat(fd).st_size
            # after a torn line (a crash mid-write) start a fresh line so this record stays whole
            prefix = "" if size == 0 or os.pread(fd, 1, size - 1) == b"\n" else "\n"
            if self._index.header is None:  # a new file (or one whose header line was torn)
                header = {"kind": HEADER_KIND, "version": FORMAT_VERSION, "key": self._key,
                          "context": self.context.model_dump(mode="json"), "created_at": _now_iso()}
                prefix += _dumps(header) + "\n"
            _write_all(fd, (prefix + line).encode("utf-8"))
            os.fsync(fd)
            if size == 0:
                _fsync_dir(self.path.parent)
            self._index.read_fd(fd)
        finally:
            os.close(fd)

    def __contains__(self, config: object) -> bool:
        """True when ``config`` (a config dict, or its :func:`config_key`) has a record."""
        if isinstance(config, str):
            if config not in self._index.records:
                self._refresh()
            return config in self._index.records
        if isinstance(config, dict):
            return self.get(config) is not None
        return False

    def __len__(self) -> int:
        """Number of distinct configs recorded (after reading what other processes appended)."""
        self._refresh()
        return len(self._index.records)

    def evaluations(self) -> list[Evaluation]:
        """The last evaluation of every recorded config (``cached=True``), in order of first recording."""
        self._refresh()
        return [ev.model_copy(deep=True) for ev in self._index.records.values()]

    def __repr__(self) -> str:
        return f"EvaluationCache({self.path}, {len(self._index.records)} configs)"


def _fsync_dir(folder: Path) -> None:
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


class CacheSummary(BaseModel):
    """One cache file at a glance (``kernelpilot cache list``).

    Attributes:
        file: the file's path.
        kernel: the kernel's name (from the header, else from the file name).
        key: the context key (full sha256 from the header, else the 16 digits of the file name).
        context: the context from the header, or None when the header is missing or unreadable.
        created_at: when the file was started (ISO-8601 UTC), if known.
        records: valid record lines (a config recorded twice counts twice).
        configs: distinct configs recorded.
        ok: distinct configs whose last record is ``ok``.
        statuses: status -> number of configs (last record of each).
        best_duration_ns: the fastest ``ok`` median time, ns, or None.
        best_config: its config, or None.
        size_bytes: the file's size in bytes.
        skipped_lines: unreadable lines skipped (corrupt, or a torn last line).
        warnings: one message per skipped line, with its line number.
    """

    file: Path
    kernel: str
    key: str
    context: CacheContext | None
    created_at: str | None = None
    records: int
    configs: int
    ok: int
    statuses: dict[str, int]
    best_duration_ns: float | None
    best_config: dict[str, Any] | None
    size_bytes: int
    skipped_lines: int
    warnings: list[str]


def _best(evaluations: Iterable[Evaluation]) -> Evaluation | None:
    ok = [ev for ev in evaluations if ev.ok]
    return min(ok, key=lambda ev: ev.objective) if ok else None


def read_cache_file(path: str | os.PathLike[str]) -> tuple[CacheSummary, list[Evaluation]]:
    """Read one cache file, skipping (and counting) unreadable lines.

    Args:
        path: the ``.jsonl`` file.

    Returns:
        (its summary, the last evaluation of each config with ``cached=True``, in order of first recording).

    Raises:
        SearchError: the file does not exist.
        OSError: it cannot be read.
    """
    p = Path(path)
    if not p.is_file():
        raise SearchError(f"no cache file {p}", hint="`kernelpilot cache list` shows the cache files")
    index = _Index(p)
    index.read_path()
    evals = [ev.model_copy(deep=True) for ev in index.records.values()]
    header = index.header
    context: CacheContext | None = None
    if header is not None:
        try:
            context = CacheContext.model_validate(header["context"])
        except ValidationError:
            context = None
    match = _FILE_RE.match(p.name)
    kernel = context.kernel if context else (match.group("kernel") if match else p.stem)
    key = str(header["key"]) if header else (match.group("key") if match else "")
    best = _best(evals)
    summary = CacheSummary(
        file=p, kernel=kernel, key=key, context=context, created_at=header.get("created_at") if header else None,
        records=index.n_records, configs=len(evals), ok=sum(ev.ok for ev in evals),
        statuses=dict(Counter(ev.status for ev in evals)),
        best_duration_ns=best.duration_ns if best else None, best_config=dict(best.config) if best else None,
        size_bytes=p.stat().st_size, skipped_lines=index.skipped, warnings=index.warnings())
    return summary, evals


def _cache_files(root: str | os.PathLike[str] | None) -> list[Path]:
    folder = cache_dir(root)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and _FILE_RE.match(p.name))


def list_caches(root: str | os.PathLike[str] | None = None) -> list[CacheSummary]:
    """Summaries of every cache file in the folder, sorted by file name.

    Args:
        root: the cache folder, or None for :func:`cache_dir`'s default.

    Returns:
        One :class:`CacheSummary` per ``<kernel>-<16 hex>.jsonl`` file (empty when the folder does not exist).

    Raises:
        OSError: a file cannot be read.
    """
    return [read_cache_file(p)[0] for p in _cache_files(root)]


def _resolve(path_or_prefix: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> Path:
    """The one cache file ``path_or_prefix`` names: an existing path, else a prefix of a file name or context key."""
    text = str(path_or_prefix)
    candidate = Path(text).expanduser()
    if candidate.is_file():
        return candidate
    files = _cache_files(root)
    exact = [p for p in files if p.name == text or p.stem == text]
    if exact:
        return exact[0]
    matches = []
    for p in files:
        m = _FILE_RE.match(p.name)
        if p.name.startswith(text) or (m and m.group("key").startswith(text)):
            matches.append(p)
        elif m and len(text) > 16 and text.startswith(m.group("key")):
            try:
                first = p.open("rb").readline()
                if json.loads(first).get("key", "").startswith(text):
                    matches.append(p)
            except (OSError, ValueError, AttributeError):
                pass
    if not matches:
        raise SearchError(f"no cache file matches {text!r} in {cache_dir(root)}",
                         hint="give a file path, a file-name prefix or a context-key prefix; "
                              "`kernelpilot cache list` shows them")
    if len(matches) > 1:
        names = ", ".join(p.name for p in matches)
        raise SearchError(f"{text!r} matches {len(matches)} cache files: {names}",
                         hint="give a longer prefix (more of the context key) or the file's path")
    return matches[0]


def show_cache(path_or_prefix: str | os.PathLike[str],
               root: str | os.PathLike[str] | None = None) -> tuple[CacheSummary, list[Evaluation]]:
    """One cache file's summary and evaluations (``kernelpilot cache show``).

    Args:
        path_or_prefix: a file path, or a prefix of a cache file's name (``softmax-3f2a``) or of its context key.
        root: the cache folder searched for prefixes, or None for :func:`cache_dir`'s default.

    Returns:
        (summary, the last evaluation of each config with ``cached=True``).

    Raises:
        SearchError: no file or more than one file matches.
        OSError: the file cannot be read.
    """
    return read_cache_file(_resolve(path_or_prefix, root))


def clear_cache(path_or_prefix: str | os.PathLike[str] | None = None,
                root: str | os.PathLike[str] | None = None) -> list[Path]:
    """Delete one cache file, or every cache file in the folder (``kernelpilot cache clear``).

    Only files named like cache files (``<kernel>-<16 hex>.jsonl``) are deleted when clearing all; other files in
    the folder are left alone. A process still appending to a deleted file writes into the unlinked file.

    Args:
        path_or_prefix: what :func:`show_cache` accepts, or None for all.
        root: the cache folder, or None for :func:`cache_dir`'s default.

    Returns:
        The deleted files (empty when there was nothing to delete).

    Raises:
        SearchError: ``path_or_prefix`` matches no file or several files.
        OSError: a file cannot be deleted.
    """
    files = _cache_files(root) if path_or_prefix is None else [_resolve(path_or_prefix, root)]
    deleted = []
    for p in files:
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        deleted.append(p)
    return deleted


class ReplayRunner:
    """A runner that answers from a filled cache with no GPU, so strategies can be compared on the CPU.

    ``runner(config)`` returns the cached evaluation (``worker="replay"``, ``cached=True``; ``wall_s`` is what
    the measurement cost, so replays can add up the device seconds a strategy would have spent).

    Args:
        source: an :class:`EvaluationCache`, a cache file path, or a prefix :func:`show_cache` accepts.
        root: the folder searched for a prefix (None: :func:`cache_dir`'s default).

    Attributes:
        path: the cache file replayed.
        context: its context (None when the file has no readable header).
        calls: how many configs were answered so far.
        history: the configs answered, in call order (repeats included).

    Raises:
        SearchError: ``source`` names no cache file or several.
    """

    def __init__(self, source: EvaluationCache | str | os.PathLike[str],
                 root: str | os.PathLike[str] | None = None) -> None:
        if isinstance(source, EvaluationCache):
            evals = source.evaluations()
            self.path: Path = source.path
            self.context: CacheContext | None = source.context
        else:
            summary, evals = show_cache(source, root=root)
            self.path, self.context = summary.file, summary.context
        self._by_key = {ev.key: ev.model_copy(update={"worker": "replay", "cached": True}) for ev in evals}
        self.calls = 0
        self.history: list[dict[str, Any]] = []

    def __call__(self, config: dict[str, Any]) -> Evaluation:
        """The recorded evaluation of ``config`` (a copy, ``worker="replay"``, ``cached=True``).

        Raises:
            NotInCache: the cache has no record of ``config`` (a ``KeyError``).
        """
        ev = self._by_key.get(config_key(config))
        if ev is None:
            raise NotInCache(config, self.path)
        self.calls += 1
        self.history.append(dict(config))
        return ev.model_copy(deep=True)

    def __contains__(self, config: object) -> bool:
        """True when ``config`` (a dict) can be replayed."""
        return isinstance(config, dict) and config_key(config) in self._by_key

    def __len__(self) -> int:
        """Number of configs that can be replayed."""
        return len(self._by_key)

    def configs(self) -> list[dict[str, Any]]:
        """Every config that can be replayed (copies), in order of first recording."""
        return [dict(ev.config) for ev in self._by_key.values()]

    def evaluations(self) -> list[Evaluation]:
        """Every replayable evaluation (copies), in order of first recording."""
        return [ev.model_copy(deep=True) for ev in self._by_key.values()]

    def best(self) -> Evaluation | None:
        """The fastest ``ok`` evaluation (lowest ``duration_ns``), or None when none is ``ok``."""
        best = _best(self._by_key.values())
        return None if best is None else best.model_copy(deep=True)
