"""Git history of a run folder (GitPython over the ``git`` executable): the set-up (``run:``), one commit per version
as soon as it is decided — its subject says baseline, accepted, rejected or failed — and the final report
(``record:``); a resumed run adds a ``resume:`` commit, an interrupted one a ``run: interrupted`` commit. A kill
therefore loses at most the version in flight, and ``kernelpilot report`` can tell a record changed since its commit.
"""

from __future__ import annotations

from pathlib import Path

from kernelpilot.errors import ToolMissingError


def _git():
    try:
        import git  # GitPython
    except ImportError as exc:  # GitPython raises ImportError when the git executable is missing too
        raise ToolMissingError(f"GitPython/git unavailable: {exc}",
                               "install git and `pip install gitpython`, or pass --no-git") from exc
    return git


class RunHistory:
    """The git repository inside a run folder.

    Args:
        root: the run folder; a repository is created there if absent, with a local identity so commits work on
            machines without a global git config (CI, GPU hosts).
    """

    def __init__(self, root: Path) -> None:
        git = _git()
        self.root = Path(root)
        try:
            self.repo = git.Repo(self.root)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            self.repo = git.Repo.init(self.root)
            with self.repo.config_writer() as cw:
                cw.set_value("user", "name", "kernelpilot")
                cw.set_value("user", "email", "kernelpilot@localhost")
                cw.set_value("commit", "gpgsign", "false")

    def commit(self, paths: list[Path], message: str) -> str:
        """Stage ``paths`` (files or folders inside the run) and commit; returns the commit's hex sha."""
        rel = [str(Path(p).resolve().relative_to(self.root.resolve())) for p in paths if Path(p).exists()]
        if rel:
            self.repo.git.add("--", *rel)
        commit = self.repo.index.commit(message)
        return commit.hexsha

    def log(self) -> list[tuple[str, str]]:
        """(short sha, subject) of every commit, newest first."""
        if not self.repo.head.is_valid():
            return []
        return [(c.hexsha[:10], c.summary) for c in self.repo.iter_commits()]
