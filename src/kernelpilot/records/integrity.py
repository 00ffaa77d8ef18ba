"""A sealed folder's files against its git history and its seals, by hashing, not by ``git status``.

``git status`` can be told to look away: a file marked ``git update-index --assume-unchanged`` or
``--skip-worktree``, or matched by ``.gitignore`` / ``.git/info/exclude``, is not listed however it was edited.
:func:`check_history` reads every file on disk and every blob of the last commit itself:

* each file's bytes are hashed as git hashes a blob (:func:`~kernelpilot.records.seal.git_blob_sha1`) and compared
  with the committed blob (``edited after commit``, ``deleted``, ``never committed``), and with the last seal that
  covered it (``differs from the seal written at `v3: accepted …```);
* the seal chain is followed (:func:`~kernelpilot.records.seal.chain_problems`), and each commit is compared with
  its seal line: made on the commit the line names, changing only the files it seals, each blob with the sealed
  sha256. A commit amended or rebased after a later seal named it, a committed blob changed, or a commit made by hand
  is named. See :mod:`kernelpilot.records.seal` for what this does not cover.

A folder whose history holds no seals (written before seals existed) gets the first comparison only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel

from kernelpilot.records.history import committed_blobs
from kernelpilot.records.seal import SEALS_FILE, Seal, chain_problems, git_blob_sha1, parse_seals, sha256_bytes

__all__ = ["Difference", "HistoryCheck", "check_history"]

Kind = Literal["edited", "deleted", "untracked", "seal", "history", "link"]


class Difference(BaseModel):
    """One way a file differs from its record: ``file`` relative to the folder (``seals.jsonl`` for the history's
    own problems), ``kind`` (edited / deleted / untracked / seal / history / link) and ``problem`` in words."""

    file: str
    kind: Kind
    problem: str


class HistoryCheck(BaseModel):
    """What :func:`check_history` found.

    Attributes:
        git: the folder is a git repository with at least one commit (nothing else is checked otherwise).
        tracked: the files of the last commit.
        sealed: the history holds seals (``seals.jsonl``).
        seal_head: sha256 of the last seal line (None without seals): compare it with a copy kept elsewhere.
        differences: every difference found.
    """

    git: bool = False
    tracked: set[str] = set()
    sealed: bool = False
    seal_head: str | None = None
    differences: list[Difference] = []


def _disk_files(root: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".git")]
        out.extend((Path(dirpath) / f).relative_to(root).as_posix() for f in filenames)
    return out


def _hidden_flags(repo: Any) -> dict[str, str]:
    """Path -> the flag hiding its changes from ``git status`` (``assume-unchanged`` / ``skip-worktree``)."""
    flags: dict[str, str] = {}
    for line in repo.git.ls_files("-v").splitlines():
        tag, _, rel = line.partition(" ")
        if tag == "S":
            flags[rel] = "skip-worktree"
        elif tag.islower():
            flags[rel] = "assume-unchanged"
    return flags


def _check_commits(repo: Any, seals: list[Seal], raw: list[str], out: list[Difference]) -> None:
    """Each commit against its seal line (see the module docstring)."""
    chain = list(repo.iter_commits("HEAD", first_parent=True))[::-1]
    cache: dict[str, dict[str, tuple[str, int]]] = {}

    def blobs_of(commit: Any) -> dict[str, tuple[str, int]]:
        if commit is None:
            return {}
        if commit.hexsha not in cache:
            if len(cache) > 4:
                cache.clear()
            cache[commit.hexsha] = committed_blobs(repo, commit)
        return cache[commit.hexsha]

    ids = [c.hexsha for c in chain]
    first = seals[0].parent
    if first is not None and first not in ids:
        out.append(Difference(file=SEALS_FILE, kind="history", problem=(
            f"the first seal was made on commit {first[:10]}, which is not in the history (rewritten)")))
        return
    start = ids.index(first) + 1 if first is not None else 0
    for i, seal in enumerate(seals):
        at = start + i
        if at >= len(chain):
            out.append(Difference(file=SEALS_FILE, kind="history", problem=(
                f"{len(seals) - i} seals from `{seal.message[:60]}` on have no commit (commits removed)")))
            return
        commit = chain[at]
        parent = commit.parents[0] if commit.parents else None
        where = f"commit {commit.hexsha[:10]} (`{commit.summary[:60]}`)"
        if len(commit.parents) > 1:
            out.append(Difference(file=SEALS_FILE, kind="history", problem=f"{where} is a merge: not made by "
                                  "kernelpilot"))
        if (parent.hexsha if parent is not None else None) != seal.parent:
            out.append(Difference(file=SEALS_FILE, kind="history", problem=(
                f"{where} was made on {parent.hexsha[:10] if parent else 'nothing'}, but its seal "
                f"`{seal.message[:60]}` names {str(seal.parent)[:10]}: a commit before it was amended or rebased")))
        before, blobs = blobs_of(parent), blobs_of(commit)
        want_seals = "".join(line + "\n" for line in raw[:i + 1])
        if blobs.get(SEALS_FILE, ("",))[0] != git_blob_sha1(want_seals.encode()):
            out.append(Difference(file=SEALS_FILE, kind="history", problem=(
                f"{where} does not add exactly the seal `{seal.message[:60]}`: not made by kernelpilot, or rewritten")))
        for rel in sorted(set(blobs) | set(before)):
            if rel == SEALS_FILE or blobs.get(rel) == before.get(rel):
                continue
            if rel not in seal.files:
                what = "removes" if rel not in blobs else "changes"
                out.append(Difference(file=rel, kind="history", problem=(
                    f"{where} {what} it without a seal (the commit was amended, or made by hand)")))
        for rel, digest in seal.files.items():
            if rel not in blobs:
                out.append(Difference(file=rel, kind="history", problem=(
                    f"sealed at `{seal.message[:60]}`, but not in {where} (the commit was rewritten)")))
            elif sha256_bytes((commit.tree / rel).data_stream.read()) != digest:
                out.append(Difference(file=rel, kind="history", problem=(
                    f"committed in {where} with other bytes than the seal written at `{seal.message[:60]}` "
                    "(the commit was rewritten)")))
    for commit in chain[start + len(seals):]:
        where = f"commit {commit.hexsha[:10]} (`{commit.summary[:60]}`)"
        out.append(Difference(file=SEALS_FILE, kind="history", problem=f"{where} has no seal: not made by kernelpilot"))
        parent = commit.parents[0] if commit.parents else None
        before, blobs = blobs_of(parent), blobs_of(commit)
        for rel in sorted(set(blobs) | set(before)):
            if rel != SEALS_FILE and blobs.get(rel) != before.get(rel):
                out.append(Difference(file=rel, kind="history", problem=(
                    f"{'removed' if rel not in blobs else 'changed'} by {where} without a seal (made by hand)")))


def check_history(root: Path, *, skip: Callable[[str], bool] = lambda _r: False,
                  commit_only: Callable[[str], bool] = lambda _r: False) -> HistoryCheck:
    """Compare every file of the folder ``root`` with its last commit and its seal (see the module docstring).

    Args:
        root: a run or session folder.
        skip: files not compared with the last commit (reports a command rebuilds, a version in flight); the
            history check still covers what was committed of them.
        commit_only: files whose one allowed difference from the last commit the caller checks itself (a version's
            ``outcome.json`` with its own commit id); returns True when the file is allowed.

    Raises nothing: without GitPython, git or a commit, the result has ``git`` False and no differences.
    """
    result = HistoryCheck()
    try:
        import git
    except ImportError:
        return result
    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return result
    if not repo.head.is_valid():
        return result
    root = Path(repo.working_tree_dir or root)
    head = committed_blobs(repo)
    result.git, result.tracked = True, set(head)
    out: list[Difference] = []
    seals: list[Seal] = []
    if SEALS_FILE in head:
        text = (repo.head.commit.tree / SEALS_FILE).data_stream.read().decode(errors="replace")
        seals, raw, bad = parse_seals(text)
        out += [Difference(file=SEALS_FILE, kind="history", problem=why) for why in bad + chain_problems(seals, raw)]
        if seals:
            result.sealed, result.seal_head = True, sha256_bytes(raw[-1].encode())
            _check_commits(repo, seals, raw, out)
    last_seal: dict[str, tuple[str, str]] = {}
    for seal in seals:
        for rel, digest in seal.files.items():
            last_seal[rel] = (digest, seal.message)
    flags = _hidden_flags(repo)
    named = {d.file for d in out}
    for rel in sorted(set(_disk_files(root)) | set(head)):
        if skip(rel) or rel in named:
            continue
        path = root / rel
        hidden = f" (hidden from `git status`: marked {flags[rel]})" if rel in flags else ""
        if path.is_symlink():
            out.append(Difference(file=rel, kind="link", problem="a symbolic link, not a record kernelpilot wrote"))
            continue
        if not path.is_file():
            out.append(Difference(file=rel, kind="deleted", problem=f"committed, then deleted{hidden}"))
            continue
        if rel not in head:
            out.append(Difference(file=rel, kind="untracked", problem=(
                "never committed to the folder's git history (not written by a kernelpilot command, or written "
                "after its last commit)")))
            continue
        data = path.read_bytes()
        sealed = last_seal.get(rel)
        off_seal = sealed is not None and sha256_bytes(data) != sealed[0]
        if git_blob_sha1(data) != head[rel][0]:
            if commit_only(rel):
                continue
            seal_note = f"; differs from the seal written at `{sealed[1][:60]}`" if off_seal and sealed else ""
            out.append(Difference(file=rel, kind="edited", problem=(
                f"changed since it was committed (edited after commit{seal_note}){hidden}")))
        elif off_seal and sealed:
            out.append(Difference(file=rel, kind="seal", problem=(
                f"differs from the seal written at `{sealed[1][:60]}` (the file and its commit were changed "
                "together)")))
    result.differences = out
    return result
