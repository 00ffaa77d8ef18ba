"""Git history of a run folder (GitPython over the ``git`` executable): the set-up (``run:``), one commit per version
as soon as it is decided — its subject says baseline, accepted, rejected or failed — and the final report
(``record:``); a resumed run adds a ``resume:`` commit, an interrupted one a ``run: interrupted`` commit. A kill
therefore loses at most the version in flight, and ``kernelpilot report`` can tell a record changed since its commit.

Every commit is sealed (:mod:`kernelpilot.records.seal`): ``seals.jsonl`` gets a line with the sha256 of each file
the commit stages, and commits with it. A command commits only what it wrote itself: a file named explicitly is
staged (its caller wrote it), a folder contributes only the files this process's write journal names, unchanged since
they were written; any other new or changed file found there is left out and named in the seal's ``refused``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kernelpilot.errors import RecordError, ToolMissingError
from kernelpilot.records.seal import (SEALS_FILE, Seal, forget, git_blob_sha1, journaled, line_sha256, parse_seals,
                                      sha256_bytes, sha256_file, written_under)

__all__ = ["RunHistory", "committed_blobs"]


def _git():
    try:
        import git  # GitPython
    except ImportError as exc:  # GitPython raises ImportError when the git executable is missing too
        raise ToolMissingError(f"GitPython/git unavailable: {exc}",
                               "install git and `pip install gitpython`, or pass --no-git") from exc
    return git


def committed_blobs(repo: Any, commit: Any = None, *, sizes: bool = False) -> dict[str, tuple[Any, ...]]:
    """Path (relative, ``/``-separated) -> (blob id, file mode as an octal string) of every file in ``commit``
    (default HEAD; a Commit or a revision), read with ``git ls-tree -r``; with ``sizes``, (id, mode, size in bytes).
    Empty when the repository has no commit yet."""
    if commit is None and not repo.head.is_valid():
        return {}
    rev = "HEAD" if commit is None else getattr(commit, "hexsha", commit)
    args = ["-r", "-z", "--full-tree"] + (["-l"] if sizes else []) + [rev]
    out: dict[str, tuple[Any, ...]] = {}
    for entry in repo.git.ls_tree(*args).split("\0"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if fields[1] != "blob":
            continue
        out[path] = (fields[2], fields[0], int(fields[3])) if sizes else (fields[2], fields[0])
    return out


def _files_under(folder: Path) -> list[Path]:
    """Every file (or symbolic link) under ``folder``, ``.git`` excluded."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        out.extend(Path(dirpath) / f for f in filenames)
    return out


def _differs(path: Path, blob_id: str, blob_size: int) -> bool:
    """Whether the file at ``path`` is not the committed blob ``blob_id`` (of ``blob_size`` bytes): by size, then by
    hash for files under 1 MB (naming what a commit leaves out; ``kernelpilot report`` hashes every file)."""
    size = path.stat().st_size
    if size != blob_size:
        return True
    return size < (1 << 20) and git_blob_sha1(path.read_bytes()) != blob_id


class RunHistory:
    """The git repository inside a run folder.

    Args:
        root: the run folder; a repository is created there if absent, with a local identity so commits work on
            machines without a global git config (CI, GPU hosts).

    Attributes:
        refused: path -> why, for the files the last :meth:`commit` left out (see the module docstring).
    """

    def __init__(self, root: Path) -> None:
        git = _git()
        self.root = Path(root)
        self.refused: dict[str, str] = {}
        try:
            self.repo = git.Repo(self.root)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            # no template: git's sample hooks are 27 KB a run folder and never run here (issue 25, records that scale)
            self.repo = git.Repo.init(self.root, template="", allow_unsafe_options=True)  # an empty template
            with self.repo.config_writer() as cw:
                cw.set_value("user", "name", "kernelpilot")
                cw.set_value("user", "email", "kernelpilot@localhost")
                cw.set_value("commit", "gpgsign", "false")

    def _rel(self, path: Path) -> str:
        return Path(path).resolve().relative_to(self.root.resolve()).as_posix()

    def _select(self, paths: list[Path], leave_out: frozenset[str] = frozenset()) -> tuple[dict[str, str],
                                                                                           dict[str, str]]:
        """(path -> sha256 of the files to stage, path -> why for the files left out) for ``paths``; the relative
        paths in ``leave_out`` are passed over in folders (neither staged nor refused)."""
        head = committed_blobs(self.repo, sizes=True)
        stage: dict[str, str] = {}
        refused: dict[str, str] = {}
        for p in paths:
            p = Path(p)
            if p.is_symlink() or not p.exists():
                continue
            if p.is_file():
                rel, data = self._rel(p), p.read_bytes()
                now, noted = sha256_bytes(data), journaled(p)
                if noted is not None and noted != now:
                    refused[rel] = "changed after kernelpilot wrote it"
                elif noted is None and (rel not in head or head[rel][0] != git_blob_sha1(data)):
                    refused[rel] = "not written by this command" if rel not in head else \
                        "changed since its commit, not by this command"
                else:
                    stage[rel] = now
                continue
            noted_here = {self._rel(f): d for f, d in written_under(p).items()}
            for f in _files_under(p):
                rel = self._rel(f)
                if rel == SEALS_FILE or rel in stage or rel in leave_out:
                    continue
                if f.is_symlink():
                    refused[rel] = "a symbolic link, not a file kernelpilot wrote"
                    continue
                if rel in noted_here:
                    if sha256_file(f) == noted_here[rel]:
                        stage[rel] = noted_here[rel]
                    else:
                        refused[rel] = "changed after kernelpilot wrote it"
                elif rel not in head or _differs(f, head[rel][0], head[rel][2]):
                    refused[rel] = ("not written by this command" if rel not in head
                                    else "changed since its commit, not by this command")
        return stage, {k: v for k, v in refused.items() if k not in stage}

    def _seal_text(self, stage: dict[str, str], refused: dict[str, str], message: str) -> str:
        """The new ``seals.jsonl``: the committed one (not the copy on disk) and this commit's line."""
        from kernelpilot.records.models import now_utc

        committed = ""
        if self.repo.head.is_valid():
            try:
                committed = (self.repo.head.commit.tree / SEALS_FILE).data_stream.read().decode()
            except KeyError:
                committed = ""
        disk = self.root / SEALS_FILE
        if disk.is_file() and disk.read_text(errors="replace") != committed:
            refused[SEALS_FILE] = "edited after its commit; rewritten from the committed copy"
        seals, raw, _ = parse_seals(committed)
        seal = Seal(seq=len(seals), message=message.splitlines()[0][:200] if message else "",
                    parent=self.repo.head.commit.hexsha if self.repo.head.is_valid() else None,
                    prev_sha256=line_sha256(raw[-1]) if raw else None, files=dict(sorted(stage.items())),
                    refused=dict(sorted(refused.items())), sealed_utc=now_utc())
        return "".join(line + "\n" for line in raw) + seal.model_dump_json() + "\n"

    def commit(self, paths: list[Path], message: str, *, leave_out: frozenset[str] = frozenset()) -> str:
        """Seal and commit what this command wrote among ``paths``; returns the commit's hex sha.

        Args:
            paths: files (staged when they exist, unless changed since this process wrote them) and folders (only
                the files this process wrote there and did not commit yet, unchanged since; see the module
                docstring). A path that does not exist is skipped. Files left out are in :attr:`refused` and in
                the seal.
            message: the commit message (its first line is the seal's ``message``).
            leave_out: files (relative paths) a folder in ``paths`` does not contribute: reports rebuilt from the
                records (``report.html``, a page of several MB), never committed.

        Raises:
            RecordError: git staged other bytes than the files hold (a filter or attribute configured in the
                folder); nothing is committed.
        """
        from kernelpilot.records.workspace import write_text

        stage, refused = self._select(paths, leave_out)
        write_text(self.root / SEALS_FILE, self._seal_text(stage, refused, message))
        rels = sorted(stage) + [SEALS_FILE]
        tags = [e.partition(" ") for e in self.repo.git.ls_files("-v", "-z", "--", *rels).split("\0") if e]
        hidden = sorted(path for tag, _, path in tags if tag == "S" or tag.islower())
        if hidden:  # a flag that hides a file's change from git must not keep it out of the commit
            self.repo.git.update_index("--no-assume-unchanged", "--no-skip-worktree", "--", *hidden)
        self.repo.git.add("-f", "--", *rels)
        staged = {}
        for entry in self.repo.git.ls_files("-s", "-z", "--", *rels).split("\0"):
            if entry:
                meta, _, path = entry.partition("\t")
                staged[path] = meta.split()[1]
        for rel in rels:
            if staged.get(rel) != git_blob_sha1((self.root / rel).read_bytes()):
                raise RecordError(f"{self.root}: git staged other bytes than {rel} holds (a filter or attribute "
                                  "configured in the folder's .git/config or .gitattributes)",
                                  "remove the filter configuration from the run folder; nothing was committed")
        commit = self.repo.index.commit(message)
        forget([self.root / r for r in rels])
        self.refused = refused
        return commit.hexsha

    def log(self) -> list[tuple[str, str]]:
        """(short sha, subject) of every commit, newest first."""
        if not self.repo.head.is_valid():
            return []
        return [(c.hexsha[:10], c.summary) for c in self.repo.iter_commits()]
