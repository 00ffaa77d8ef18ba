"""The evaluation cache's store: the context a measurement depends on (:class:`CacheContext`) and the append-only,
crash-safe file of one context (:class:`EvaluationCache`). Format and rules: :mod:`kernelpilot.search.cache`,
which re-exports every public name here; what a line must pass before it is answered:
:mod:`kernelpilot.search.cache_trust`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import re
import warnings
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, field_validator

from kernelpilot.errors import SearchError
from kernelpilot.search.cache_file import (
    FORMAT_VERSION,
    HEADER_KIND,
    CacheFileIndex,
    cache_dir,
    dumps_compact,
    fsync_dir,
    jsonable,
    now_iso,
    write_all,
)
from kernelpilot.search.cache_trust import (
    SIGNED,
    CacheLineRefused,
    RefusedLine,
    cache_secret,
    consistency_problem,
    floor_problem,
    line_mac,
    measurement_only,
    signer_id,
)
from kernelpilot.search.model import Evaluation, config_key

if TYPE_CHECKING:
    from kernelpilot.hardware.roofline import Roofline
    from kernelpilot.kernels.contract import KernelFile
    from kernelpilot.measure.env import EnvInfo

__all__ = ["CacheContext", "EvaluationCache", "NotInCache"]


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
        return jsonable(value) if isinstance(value, dict) else value

    def key(self) -> str:
        """The sha256 hex digest of this context (every field and :data:`FORMAT_VERSION`, canonical JSON).

        Two contexts with equal fields give the same key whatever the shape's key order; raises nothing.
        """
        payload = {"format": FORMAT_VERSION, **self.model_dump(mode="json")}
        return hashlib.sha256(dumps_compact(payload).encode()).hexdigest()

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


class EvaluationCache:
    """The cache of one context: config -> its last recorded :class:`Evaluation`, backed by one JSONL file.

    Several processes may use the same file at once: appends are serialized by ``flock`` and each process
    reads what the others appended when it misses (:meth:`get`) or counts (:meth:`__len__`).

    Every line :meth:`put` writes is signed with this user's key (:mod:`kernelpilot.search.cache_trust`); :meth:`get`
    answers a line only when it is signed by that key, its numbers agree (median = median of its samples, samples
    present) and it is not under ``roofline``'s floor. Any other line is refused by name (a
    :class:`~kernelpilot.search.cache_trust.CacheLineRefused` warning, :attr:`refused`) and the config is measured
    again, as if it had never been cached.

    Args:
        context: what the evaluations depend on; names the file (:meth:`CacheContext.file_name`).
        root: the cache folder, or None for :func:`cache_dir`'s default (``$KERNELPILOT_CACHE`` or
            ``<kernelpilot_home()>/cache``).
        roofline: the floor cached answers are held to, the live evaluations' (None: no floor check here; the
            evaluator still stops on a time under the floor).

    Attributes:
        context: the context.
        path: the cache file (it exists once something was put, or when an earlier run wrote it).
        roofline: the floor's roofline, or None.

    Raises:
        SearchError: the file exists but its header belongs to another context (a renamed or copied file); this
            user's cache key is readable by others or malformed.
        OSError: the file exists and cannot be read; the key cannot be created.
    """

    def __init__(self, context: CacheContext, root: str | os.PathLike[str] | None = None, *,
                 roofline: Roofline | None = None) -> None:
        self.context = context
        self.roofline = roofline
        self._key = context.key()
        self.path = cache_dir(root) / context.file_name()
        self._index = CacheFileIndex(self.path, context_key=self._key, create_secret=True)
        self._refused: dict[tuple[str, int], RefusedLine] = {}
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
        """One message per skipped line, naming its line number (and a missing header, if so), then one per line
        refused so far (:attr:`refused`)."""
        return self._index.warnings() + [f"{r.describe()}; refused, measured again" for r in self.refused]

    @property
    def refused(self) -> list[RefusedLine]:
        """The lines :meth:`get` refused so far (forged, unsigned or signed elsewhere, inconsistent, under the
        floor), each once, in the order they were met."""
        return list(self._refused.values())

    def refusal(self, config: dict[str, Any]) -> str | None:
        """Why the recorded line of ``config`` would not be answered (see the class docstring), or None (answerable,
        or not recorded). Raises nothing."""
        key = config_key(config)
        ev = self._index.records.get(key)
        return None if ev is None else self._why_refused(key, ev)

    def _why_refused(self, key: str, ev: Evaluation) -> str | None:
        trust = self._index.trust.get(key)
        if trust is None or trust.state != SIGNED:
            why = trust.why if trust is not None else "no signature"
            return (why.replace(": consistency-checked only", "") + "; a live search reuses only lines signed with "
                    "this user's key")
        return consistency_problem(ev, self.context.interpreted) or floor_problem(ev, self.roofline)

    def _answer(self, key: str) -> Evaluation | None:
        """The answerable record of ``key`` (a copy without the old run's verdicts), or None; a refused line is
        noted and warned about once."""
        ev = self._index.records.get(key)
        if ev is None:
            self._refresh()
            ev = self._index.records.get(key)
        if ev is None:
            return None
        why = self._why_refused(key, ev)
        if why is None:
            return measurement_only(ev)
        line = self._index.trust[key].line if key in self._index.trust else 0
        if (key, line) not in self._refused:
            refused = RefusedLine(file=str(self.path), line=line, key=key, config=dict(ev.config), why=why)
            self._refused[(key, line)] = refused
            warnings.warn(CacheLineRefused(f"{refused.describe()}; not reused, the config is measured again"),
                          stacklevel=3)
        return None

    @property
    def records(self) -> int:
        """Valid record lines read so far (a config recorded twice counts twice)."""
        return self._index.n_records

    def get(self, config: dict[str, Any]) -> Evaluation | None:
        """The last recorded evaluation of ``config``, or None when there is none or its line is refused.

        On a miss the file is re-read from where this process stopped (another process may have added it). A
        refused line (see the class docstring) is named in a :class:`CacheLineRefused` warning and :attr:`refused`.

        Args:
            config: tunable name -> value (key order does not matter).

        Returns:
            A copy of the evaluation with ``cached=True`` (its ``wall_s`` is what it cost when measured) and without
            the verdicts of the run that measured it (``accepted``, ``decision``, version numbers, speedups:
            :func:`~kernelpilot.search.cache_trust.measurement_only`), or None.
        """
        return self._answer(config_key(config))

    def put(self, evaluation: Evaluation) -> None:
        """Append ``evaluation`` as one line (a later put for the same config supersedes it); durable on return.

        The record is written with ``cached=False`` (it is the measurement), signed with this user's key
        (``signer`` and ``mac``: :func:`~kernelpilot.search.cache_trust.line_mac`). Creates the folder and the file
        (with its header line) when needed.

        Args:
            evaluation: the outcome of one config, any status (failures are data and are cached too).

        Raises:
            OSError: the folder or file cannot be written (permissions, full disk).
            SearchError: the file was found to belong to another context.
        """
        stored = evaluation.model_copy(update={"cached": False})
        secret = cache_secret(create=True)
        assert secret is not None
        body = jsonable({"key": stored.key, "evaluation": stored.model_dump(), "recorded_at": now_iso(),
                         "signer": signer_id(secret)})
        line = dumps_compact({**body, "mac": line_mac(secret, self._key, body)}) + "\n"
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
                          "context": self.context.model_dump(mode="json"), "created_at": now_iso()}
                prefix += dumps_compact(header) + "\n"
            write_all(fd, (prefix + line).encode("utf-8"))
            os.fsync(fd)
            if size == 0:
                fsync_dir(self.path.parent)
            self._index.read_fd(fd)
        finally:
            os.close(fd)

    def __contains__(self, config: object) -> bool:
        """True when ``config`` (a config dict, or its :func:`config_key`) has a record :meth:`get` answers."""
        if isinstance(config, str):
            return self._answer(config) is not None
        if isinstance(config, dict):
            return self.get(config) is not None
        return False

    def __len__(self) -> int:
        """Number of distinct configs recorded (after reading what other processes appended)."""
        self._refresh()
        return len(self._index.records)

    def evaluations(self) -> list[Evaluation]:
        """The last evaluation of every recorded config (``cached=True``), in order of first recording, as the file
        holds it (refused lines included: this is what the file says, not what :meth:`get` answers)."""
        self._refresh()
        return [ev.model_copy(deep=True) for ev in self._index.records.values()]

    def __repr__(self) -> str:
        return f"EvaluationCache({self.path}, {len(self._index.records)} configs)"

