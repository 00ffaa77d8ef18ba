"""The agent skill's Python API (``kernelpilot skill show|install``; issue 27, docs/agents.md).

The skill is one Markdown file shipped in the package (``kernelpilot/skill/SKILL.md``), in the form the seed
workflows and the agents use: YAML frontmatter with ``name`` and ``description``, then the instructions. Where each
agent looks for it (docs/agents.md, "Where agents look"):

* Claude Code: ``<project>/.claude/skills/<name>/SKILL.md``, or ``~/.claude/skills/<name>/SKILL.md`` for every project;
* Codex: ``<project>/.agents/skills/<name>/SKILL.md`` (from the working directory up to the repository root), or
  ``~/.agents/skills/<name>/SKILL.md``.

``install`` writes the file under ``dir`` (the project folder, default the current one; the home folder for every
project), refuses to replace a different file unless ``force``, and leaves an identical one untouched.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from kernelpilot.errors import OptionError, SkillInstallError

__all__ = ["AGENT_DIRS", "SKILL_NAME", "skill_install", "skill_show", "skill_text"]

#: The skill's name: its frontmatter ``name`` and the folder it is installed in.
SKILL_NAME = "kernelpilot"

#: Agent -> the skills folder under a project (or home) folder, in which ``<SKILL_NAME>/SKILL.md`` goes
#: (docs/agents.md, "Where agents look", for the sources).
AGENT_DIRS: dict[str, tuple[str, ...]] = {"claude": (".claude", "skills"), "codex": (".agents", "skills")}


def skill_text() -> str:
    """The shipped ``SKILL.md`` (UTF-8 text, frontmatter first).

    Raises:
        SkillInstallError: the package lacks the file (a broken install).
    """
    try:
        return (resources.files("kernelpilot") / "skill" / "SKILL.md").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as exc:
        raise SkillInstallError(f"the packaged skill is missing: {exc}",
                                "reinstall kernelpilot (python3 -m pip install -e .)") from exc


def frontmatter(text: str) -> dict[str, str]:
    """The ``key: value`` lines between the opening and closing ``---`` lines of ``text`` (one line per key, as the
    shipped skill writes them).

    Raises:
        SkillInstallError: ``text`` has no frontmatter block.
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in [ln.strip() for ln in lines[1:]]:
        raise SkillInstallError("the skill has no frontmatter block (--- ... ---)", "reinstall kernelpilot")
    end = 1 + [ln.strip() for ln in lines[1:]].index("---")
    fields: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip()] = value.strip()
    return fields


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def skill_show() -> dict[str, Any]:
    """The shipped skill and where each agent would find it.

    Returns:
        ``{"name", "description", "text", "sha256" (of the UTF-8 bytes), "bytes", "targets": {agent: path relative
        to a project or home folder}}``.

    Raises:
        SkillInstallError: the packaged file is missing or has no frontmatter.
    """
    text = skill_text()
    meta = frontmatter(text)
    data = text.encode("utf-8")
    return {"name": meta.get("name", ""), "description": meta.get("description", ""), "text": text,
            "sha256": _digest(data), "bytes": len(data),
            "targets": {agent: str(install_path(agent, Path("."))) for agent in AGENT_DIRS}}


def install_path(agent: str, folder: Path) -> Path:
    """Where ``agent`` reads the skill under ``folder``: ``folder/.claude/skills/kernelpilot/SKILL.md`` (claude),
    ``folder/.agents/skills/kernelpilot/SKILL.md`` (codex).

    Raises:
        OptionError: an agent other than ``claude`` or ``codex``.
    """
    if agent not in AGENT_DIRS:
        raise OptionError(f"--for {agent}: unknown agent", f"give one of: {', '.join(AGENT_DIRS)}")
    return folder.joinpath(*AGENT_DIRS[agent], SKILL_NAME, "SKILL.md")


def skill_install(agent: str, *, dir: str | Path | None = None, force: bool = False) -> dict[str, Any]:
    """Write the shipped skill where ``agent`` reads it, under ``dir``.

    What is on disk is read, not assumed: a file already there with the same bytes is left untouched
    (``"action": "unchanged"``, its modification time kept); a different file (or a symbolic link) is refused unless
    ``force``, which replaces it (``"replaced"``, the link itself, never its target); otherwise the file is written
    (``"written"``). Each write goes to a temporary file in the same folder and is renamed over the target, so a
    reader never sees half a skill.

    Args:
        agent: ``claude`` or ``codex``.
        dir: the project folder (default: the current directory); the home folder installs it for every project.
        force: replace a different file.

    Returns:
        ``{"agent", "path", "action": "written"|"unchanged"|"replaced", "sha256", "bytes", "previous_sha256"}``
        (``previous_sha256``: the replaced file's, else None).

    Raises:
        OptionError: an unknown agent. SkillInstallError: a different file is there and ``force`` is off; the path
            is a folder; the folder cannot be written (the message names the path).
    """
    folder = Path(dir) if dir is not None else Path.cwd()
    target = install_path(agent, folder)
    data = skill_text().encode("utf-8")
    previous: str | None = None
    replacing = target.is_symlink() or target.exists()
    if replacing:
        if target.is_dir() and not target.is_symlink():
            raise SkillInstallError(f"{target} is a folder, not a file", "move it away, then install again")
        current = None if target.is_symlink() else target.read_bytes()
        if current == data:
            return _installed(agent, target, "unchanged", data, None)
        previous = _digest(current) if current is not None else None
        if not force:
            what = "a symbolic link" if current is None else f"a different file (sha256 {previous[:12]}…)"
            raise SkillInstallError(f"{target} is {what}; left as it is",
                                    "compare it with `kernelpilot skill show`, then install with --force to replace it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".SKILL.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o644 & ~_umask())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise SkillInstallError(f"cannot write {target}: {exc.strerror or exc}",
                                "check the folder's permissions, or give another one with --dir") from exc
    return _installed(agent, target, "replaced" if replacing else "written", data, previous)


def _umask() -> int:
    """The process's umask (read by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _installed(agent: str, target: Path, action: str, data: bytes, previous: str | None) -> dict[str, Any]:
    return {"agent": agent, "path": str(target), "action": action, "sha256": _digest(data), "bytes": len(data),
            "previous_sha256": previous}
