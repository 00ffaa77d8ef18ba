"""The agent skill (issue 27, docs/agents.md): the shipped SKILL.md is in the seeds' form, names only commands and
options that exist (each run with ``--help``), ships in the wheel, and ``kernelpilot skill install`` writes it where
Claude Code and Codex read it — an identical file left alone, a different one (or a link) only replaced with
``--force``, never through the link."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from conftest import ROOT
from kernelpilot import api
from kernelpilot.api.skill import frontmatter, install_path, skill_text
from kernelpilot.cli import app
from kernelpilot.errors import OptionError, SkillInstallError

runner = CliRunner()
SHIPPED = ROOT / "src" / "kernelpilot" / "skill" / "SKILL.md"


# --- what the skill cites -------------------------------------------------------------------------------------


def cited_commands(text: str) -> list[str]:
    """Every ``kernelpilot ...`` command line in ``text``: lines of fenced code blocks that start with
    ``kernelpilot``, and inline code spans that do (outside the fences)."""
    found: list[str] = []
    prose: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            if line.strip().startswith("kernelpilot "):
                found.append(line.strip())
        else:
            prose.append(line)
    found += re.findall(r"`(kernelpilot [^`]+)`", "\n".join(prose))
    groups = {n for n, c in typer.main.get_command(app).commands.items() if hasattr(c, "commands")}
    found += [f"kernelpilot {span}" for span in re.findall(r"`([a-z][^`]*)`", "\n".join(prose))
              if span.split()[0] in groups and len(span.split()) > 1]  # `session try` in a sentence
    return found


def command_problems(line: str) -> tuple[list[str], tuple[str, ...], list[str]]:
    """(what is wrong with the cited ``line``, the command path it names, the options it gives): a subcommand the
    app lacks, a group cited with arguments, an option the command does not take."""
    tokens = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)
    assert tokens[0] == "kernelpilot", line
    cmd: Any = typer.main.get_command(app)
    path: list[str] = []
    i = 1
    while hasattr(cmd, "commands") and i < len(tokens) and not tokens[i].startswith("-"):
        if tokens[i] not in cmd.commands:
            return [f"{line!r}: no command {' '.join([*path, tokens[i]])!r}"], tuple(path), []
        cmd = cmd.commands[tokens[i]]
        path.append(tokens[i])
        i += 1
    if hasattr(cmd, "commands"):
        return ([f"{line!r}: {' '.join(path) or 'kernelpilot'} is a group; name its command"]
                if i < len(tokens) or not path else []), tuple(path), []
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    options = [t.split("=", 1)[0] for t in tokens[i:] if t.startswith("-") and len(t) > 1]
    problems = [f"{line!r}: {' '.join(path)} has no option {o}" for o in options if o not in known]
    return problems, tuple(path), options


def test_the_checker_catches_a_command_or_option_that_does_not_exist():
    text = ("```bash\nkernelpilot session tryy RUN F.py\n```\n"
            "and `kernelpilot check K --no-such-option --json` and `kernelpilot session try RUN F --hypothesis h`"
            " and `session mask` or `session hide`, `report.html`, `session`")
    lines = cited_commands(text)
    assert lines == ["kernelpilot session tryy RUN F.py", "kernelpilot check K --no-such-option --json",
                     "kernelpilot session try RUN F --hypothesis h", "kernelpilot session mask",
                     "kernelpilot session hide"]
    assert command_problems(lines[3])[:2] == ([], ("session", "mask"))
    assert "no command 'session hide'" in command_problems(lines[4])[0][0]
    assert "no command 'session tryy'" in command_problems(lines[0])[0][0]
    assert command_problems(lines[1])[0] == [f"{lines[1]!r}: check has no option --no-such-option"]
    assert command_problems(lines[2]) == ([], ("session", "try"), ["--hypothesis"])
    assert "no command 'session RUN'" in command_problems("kernelpilot session RUN")[0][0]
    assert "is a group" in command_problems("kernelpilot session --json")[0][0]


def test_every_command_the_skill_cites_exists_and_answers_help():
    lines = cited_commands(skill_text())
    paths = set()
    problems: list[str] = []
    for line in lines:
        wrong, path, options = command_problems(line)
        problems += wrong
        if wrong:
            continue
        paths.add(path)
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, (line, res.output)
        problems += [f"{line!r}: {o} not in `{' '.join(path)} --help`" for o in options if o not in res.output]
    assert not problems, "\n".join(problems)
    # the loop is there, cited as it is
    assert {("env",), ("check",), ("verify",), ("roofline",), ("session", "start"), ("session", "status"),
            ("session", "try"), ("session", "restart"), ("session", "mask"), ("session", "finish"), ("report",),
            ("experience", "guide"), ("experience", "recommend"), ("skill", "install")} <= paths, paths


def test_the_skill_is_in_the_seeds_form_with_its_sections():
    text = skill_text()
    assert text == SHIPPED.read_text(encoding="utf-8")
    head = text.split("---", 2)
    assert head[0] == "" and text.startswith("---\n")
    meta = yaml.safe_load(head[1])  # what an agent's YAML parser reads
    assert meta == frontmatter(text)
    assert re.fullmatch(r"[a-z0-9-]{1,64}", meta["name"]) and meta["name"] == "kernelpilot"
    assert 0 < len(meta["description"]) <= 1024 and "Use when" in meta["description"]
    for heading in ("## When to use it", "## The loop", "## When to stop", "## Never"):
        assert f"\n{heading}\n" in text, heading
    never = text.split("\n## Never\n", 1)[1]
    for rule in ("Never edit the records", "Never loosen tolerances", "Never touch the reference"):
        assert rule in never, rule


def test_the_skill_ships_as_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["kernelpilot"]
    rel = SHIPPED.relative_to(ROOT / "src" / "kernelpilot").as_posix()
    assert any(fnmatch.fnmatch(rel, p) for p in patterns), (rel, patterns)


def test_show_gives_the_text_its_hash_and_the_targets():
    shown = api.skill_show()
    data = SHIPPED.read_bytes()
    assert shown["text"].encode("utf-8") == data and shown["sha256"] == hashlib.sha256(data).hexdigest()
    assert shown["name"] == "kernelpilot" and shown["bytes"] == len(data)
    assert shown["targets"] == {"claude": ".claude/skills/kernelpilot/SKILL.md",
                                "codex": ".agents/skills/kernelpilot/SKILL.md"}
    res = runner.invoke(app, ["skill", "show"])
    assert res.exit_code == 0 and res.stdout == shown["text"]


# --- install -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent,rel", [("claude", ".claude/skills/kernelpilot/SKILL.md"),
                                       ("codex", ".agents/skills/kernelpilot/SKILL.md")])
def test_install_writes_the_skill_where_the_agent_reads_it_and_is_idempotent(agent, rel, tmp_path):
    r = api.skill_install(agent, dir=tmp_path)
    target = tmp_path / rel
    assert r["action"] == "written" and Path(r["path"]) == target and r["previous_sha256"] is None
    assert target.read_bytes() == SHIPPED.read_bytes() and r["sha256"] == hashlib.sha256(target.read_bytes()).hexdigest()
    os.utime(target, (1_000_000, 1_000_000))
    again = api.skill_install(agent, dir=tmp_path)
    assert again["action"] == "unchanged" and target.stat().st_mtime == 1_000_000  # not rewritten
    assert [p.name for p in target.parent.iterdir()] == ["SKILL.md"]  # no temporary file left


def test_a_different_file_is_refused_and_kept_until_force(tmp_path):
    target = install_path("claude", tmp_path)
    target.parent.mkdir(parents=True)
    target.write_text("---\nname: kernelpilot\ndescription: mine\n---\nmy edits\n")
    mine = target.read_bytes()
    with pytest.raises(SkillInstallError) as err:
        api.skill_install("claude", dir=tmp_path)
    assert str(target) in err.value.message and "--force" in err.value.hint
    assert target.read_bytes() == mine
    r = api.skill_install("claude", dir=tmp_path, force=True)
    assert r["action"] == "replaced" and r["previous_sha256"] == hashlib.sha256(mine).hexdigest()
    assert target.read_bytes() == SHIPPED.read_bytes()


def test_a_link_is_replaced_itself_never_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("someone else's file\n")
    target = install_path("codex", tmp_path / "proj")
    target.parent.mkdir(parents=True)
    target.symlink_to(elsewhere)
    with pytest.raises(SkillInstallError, match="symbolic link"):
        api.skill_install("codex", dir=tmp_path / "proj")
    r = api.skill_install("codex", dir=tmp_path / "proj", force=True)
    assert r["action"] == "replaced" and not target.is_symlink()
    assert elsewhere.read_text() == "someone else's file\n" and target.read_bytes() == SHIPPED.read_bytes()


def test_a_folder_in_the_way_and_an_unknown_agent_are_typed_errors(tmp_path):
    install_path("claude", tmp_path).mkdir(parents=True)
    with pytest.raises(SkillInstallError, match="is a folder"):
        api.skill_install("claude", dir=tmp_path, force=True)
    with pytest.raises(OptionError):
        api.skill_install("cursor", dir=tmp_path)
    assert not (tmp_path / ".cursor").exists()


def test_the_cli_installs_in_the_current_folder_by_default_and_refuses_with_an_error_object(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["skill", "install", "--for", "claude", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["action"] == "written" and Path(data["path"]).resolve() == (tmp_path / install_path("claude", Path("."))).resolve()
    Path(data["path"]).write_text("changed\n")
    res = runner.invoke(app, ["skill", "install", "--for", "claude", "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["error"] == "SkillInstallError"
    assert Path(data["path"]).read_text() == "changed\n"
    res = runner.invoke(app, ["skill", "install", "--for", "vim", "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["error"] == "OptionError"
    res = runner.invoke(app, ["skill", "install", "--for", "claude", "--force"])
    assert res.exit_code == 0 and "replaced" in res.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_the_installed_file_is_readable_by_the_group_like_every_record(tmp_path):
    old = os.umask(0o022)
    try:
        r = api.skill_install("codex", dir=tmp_path)
    finally:
        os.umask(old)
    assert Path(r["path"]).stat().st_mode & 0o777 == 0o644
