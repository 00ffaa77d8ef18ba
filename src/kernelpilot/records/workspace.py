"""The run folder: one sub-folder per version, JSON records written atomically, read back with validation.

Layout (docs/DESIGN.md, "The loop"): ``run.json``, ``env.json``/``env.md``, ``roofline.md``, ``kernel.py`` (the source
optimized), ``v0/ v1/ …`` each with ``config.json``, ``hypothesis.md``, ``correctness.json``, ``timing.json``,
``profile.ncu-rep``, ``metrics.json``, ``verdict.json``, ``outcome.json``; ``final_report.md``, ``benchmark.md``.
Nothing already recorded is overwritten: an existing non-empty folder is refused, and every write goes to a
temporary file first and is renamed into place.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, ValidationError

from kernelpilot.errors import RunFolderError
from kernelpilot.records.seal import note_written

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")
RUN_FILE = "run.json"


def current_umask() -> int:
    """This process's file-creation mask (e.g. ``0o022``), read without changing it where the OS allows
    (``/proc/self/status`` on Linux); elsewhere set and restored at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, then rename).

    The write is noted in this process's write journal (:func:`kernelpilot.records.seal.note_written`), so
    :meth:`kernelpilot.records.history.RunHistory.commit` knows kernelpilot wrote it.

    The file gets the permissions any new file gets here (``0o666`` less the umask: ``0644`` under the usual
    ``022``), not the owner-only ``0600`` of a temporary file, so a run folder is readable by the group.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        note_written(path)  # the write journal: a later commit stages only what kernelpilot wrote (records/seal.py)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_json(path: Path, data: BaseModel | dict[str, Any] | list[Any], *, compact: bool = False) -> Path:
    """Write a pydantic model or plain data as JSON, atomically: indented, or with ``compact`` on one line without
    spaces and text as UTF-8, not ``\\u`` escapes (a version's records: a run of 1,000 versions stays small; every
    field a model holds is still written)."""
    if compact:
        text = (data.model_dump_json(by_alias=True) if isinstance(data, BaseModel)
                else json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str))
    else:
        text = (data.model_dump_json(indent=2, by_alias=True) if isinstance(data, BaseModel)
                else json.dumps(data, indent=2, default=str))
    return write_text(path, text + "\n")


def read_record(path: Path, parse: Callable[[str], R]) -> R:
    """Read one record with ``parse`` (text -> record), naming the file when it is missing or does not parse.

    Raises:
        RunFolderError: the file is missing, or ``parse`` raised a ValidationError, ValueError (bad JSON included),
            KeyError or TypeError (the message names the file, the hint says how to restore it).
    """
    if not path.is_file():
        raise RunFolderError(f"record missing: {path}", "the run folder is incomplete; re-run that version")
    try:
        return parse(path.read_text())
    except (ValidationError, ValueError, KeyError, TypeError) as exc:
        first = str(exc).splitlines()[0:3]
        raise RunFolderError(f"record corrupt: {path}: {' '.join(first)}",
                             "restore it from the run's git history (`git -C RUN checkout -- FILE`)") from exc


def read_json(path: Path, model: type[M]) -> M:
    """Read and validate a JSON record as ``model`` (:func:`read_record`).

    Raises:
        RunFolderError: the file is missing, not JSON, or does not match ``model`` (the message names the file).
    """
    return read_record(path, model.model_validate_json)


class Workspace:
    """A run folder on disk.

    Args:
        root: the folder (``--out``).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def create(cls, root: Path) -> "Workspace":
        """Create a new run folder.

        Raises:
            RunFolderError: ``root`` exists and is not empty (nothing recorded there is touched), or it cannot be
                created or written (a missing or read-only parent, a file in the way).
        """
        root = Path(root)
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise RunFolderError(f"{root} already exists and is not empty; kernelpilot never overwrites a run",
                                 "pass a new --out folder (or move the old run away); to continue a killed run, "
                                 "pass --resume with that folder")
        try:
            root.mkdir(parents=True, exist_ok=True)
            probe = write_text(root / ".write-test", "")
            probe.unlink()
        except OSError as exc:
            raise RunFolderError(f"cannot create the run folder {root}: {exc.strerror or exc}",
                                 "pass an --out folder in a place you can write (e.g. --out runs/NAME)") from exc
        return cls(root)

    @classmethod
    def open(cls, root: Path) -> "Workspace":
        """Open an existing run folder (raises RunFolderError when ``run.json`` is absent)."""
        root = Path(root)
        if not (root / RUN_FILE).is_file():
            raise RunFolderError(f"{root} is not a kernelpilot run folder (no {RUN_FILE})",
                                 "pass the --out folder of a `kernelpilot optimize` run")
        return cls(root)

    def version_dir(self, index: int) -> Path:
        """The folder of version ``index`` (``v{index}``), created if needed."""
        d = self.root / f"v{index}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def version_indices(self) -> list[int]:
        """Indices of the version folders present, ascending."""
        out = []
        for p in self.root.glob("v*"):
            if p.is_dir() and p.name[1:].isdigit():
                out.append(int(p.name[1:]))
        return sorted(out)
