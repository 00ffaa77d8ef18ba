"""Seals: the sha256 of every record a command commits, written when it is decided and committed with it.

A kernelpilot folder under git (a run folder of ``optimize``, a session folder) holds ``seals.jsonl``: one line
(:class:`Seal`) per commit a kernelpilot command makes, appended just before that commit and committed in it. A line
names the commit's subject, the commit it was made on (``parent``), the sha256 of the previous line's bytes
(``prev_sha256``: the lines form a chain) and the sha256 of the bytes of every file the commit stages. So:

* a record edited after its commit differs from the committed blob *and* from its seal;
* a commit amended or rebased later (``git commit --amend``, ``rebase``) no longer is the ``parent`` the next line
  names, and a file whose committed bytes were changed no longer has its sealed hash;
* a commit made by hand has no line of its own.

What seals do not cover: anyone who can write the folder can rewrite the whole history *and* recompute every line
after the first change (there is no secret key); a seal only shows that the records agree with themselves and with
the history as it stands. The last line's hash (:func:`line_sha256`, printed by ``kernelpilot report``) is the
anchor to compare with a copy kept elsewhere.

The *write journal* (:func:`note_written`) remembers, per process, which files this process wrote and the sha256 of
what it wrote (:func:`kernelpilot.records.workspace.write_text` notes every record; a copy made with ``shutil`` is
noted by its caller). :meth:`kernelpilot.records.history.RunHistory.commit` stages from a folder only the files the
journal names, unchanged since they were written: a file dropped into the folder, or edited after kernelpilot wrote
it, is not committed by the next command.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

__all__ = ["SEALS_FILE", "Seal", "chain_problems", "forget", "git_blob_sha1", "journaled", "line_sha256",
           "note_written", "parse_seals", "sha256_bytes", "sha256_file", "written_under"]

#: The seal file at the root of a sealed folder.
SEALS_FILE = "seals.jsonl"


class Seal(BaseModel):
    """One line of ``seals.jsonl``: what one kernelpilot commit holds.

    Attributes:
        seq: the line's number, from 0.
        message: the commit's subject (``v3: accepted — BLOCK 128→256``): names the decision in differences.
        parent: hex sha of the commit the sealed commit was made on (None: the first commit).
        prev_sha256: sha256 (hex) of the previous line's bytes without its newline (None on the first line).
        files: path relative to the folder -> sha256 (hex) of the file's bytes, for every file the commit stages.
        refused: path -> why it was not committed although the command was asked to commit its folder (a file not
            written by this command, or changed after it was written).
        sealed_utc: when the line was written (ISO 8601, UTC).
    """

    seq: int
    message: str
    parent: str | None = None
    prev_sha256: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    refused: dict[str, str] = Field(default_factory=dict)
    sealed_utc: str = ""


def sha256_bytes(data: bytes) -> str:
    """sha256 of ``data`` as 64 hex digits."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """sha256 (hex) of the bytes of the file at ``path`` (read whole: records are small; an ncu report is a few MB).

    Raises:
        OSError: the file cannot be read.
    """
    return sha256_bytes(Path(path).read_bytes())


def git_blob_sha1(data: bytes) -> str:
    """The object id git gives a blob holding ``data`` (``git hash-object`` without filters: sha1 of
    ``b"blob <len>\\0" + data``), 40 hex digits. Compared with a tree entry's id, it says whether a file's bytes
    are the committed ones whatever ``git status`` reports (assume-unchanged, skip-worktree, ignore rules)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id, not security


def line_sha256(line: str) -> str:
    """sha256 (hex) of one ``seals.jsonl`` line (without its newline): the next line's ``prev_sha256``."""
    return sha256_bytes(line.encode())


def parse_seals(text: str) -> tuple[list[Seal], list[str], list[str]]:
    """The seals in the text of a ``seals.jsonl``: (the seals, their raw lines, one problem per bad line).

    Raises nothing: a line that is not a :class:`Seal` is a problem (``line 3: ...``) and is skipped.
    """
    seals: list[Seal] = []
    raw: list[str] = []
    problems: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            seals.append(Seal.model_validate_json(line))
            raw.append(line)
        except (ValidationError, ValueError) as exc:
            problems.append(f"line {n}: not a seal ({str(exc).splitlines()[0][:160]})")
    return seals, raw, problems


def chain_problems(seals: list[Seal], raw: list[str]) -> list[str]:
    """What breaks the chain of ``seals`` (their raw lines beside them): a line out of sequence, or whose
    ``prev_sha256`` is not the hash of the line before it (a line edited, removed or inserted). Empty: intact."""
    problems: list[str] = []
    for i, seal in enumerate(seals):
        want = line_sha256(raw[i - 1]) if i else None
        if seal.seq != i:
            problems.append(f"line {i + 1}: sequence number {seal.seq}, expected {i} (a line removed or inserted)")
        if seal.prev_sha256 != want:
            problems.append(f"line {i + 1} (`{seal.message[:60]}`): its hash of the previous line does not match "
                            "(a seal before it was edited, removed or inserted)")
    return problems


# ---- the write journal: what this process wrote, and the hash of what it wrote ----

_LOCK = threading.Lock()
_JOURNAL: dict[Path, str] = {}


def note_written(path: Path) -> str:
    """Remember that this process wrote the file at ``path`` (as it is now); returns its sha256.

    Raises:
        OSError: the file cannot be read back.
    """
    path = Path(path).resolve()
    digest = sha256_file(path)
    with _LOCK:
        _JOURNAL[path] = digest
    return digest


def journaled(path: Path) -> str | None:
    """The sha256 this process noted when it wrote ``path``, or None when it did not write it (or it was
    committed and forgotten since)."""
    with _LOCK:
        return _JOURNAL.get(Path(path).resolve())


def written_under(folder: Path) -> dict[Path, str]:
    """Every file under ``folder`` this process wrote and has not committed yet: resolved path -> sha256 noted."""
    root = Path(folder).resolve()
    prefix = str(root).rstrip("/") + "/"
    with _LOCK:
        return {p: d for p, d in _JOURNAL.items() if p == root or str(p).startswith(prefix)}


def forget(paths: list[Path]) -> None:
    """Drop ``paths`` from the journal (they were committed)."""
    with _LOCK:
        for p in paths:
            _JOURNAL.pop(Path(p).resolve(), None)
