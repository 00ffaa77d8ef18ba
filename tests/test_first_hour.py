"""The first hour on a fresh machine (issue 23, "First-hour fixes"): the README's test command and CI run one script,
a broken v0 (exit, os._exit, hang) stops a campaign at once with a typed error and leaves the experience log alone,
and the README's Python API snippet runs as a script."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    """The one-line commands of README.md's "Two commands" section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_readme_test_command_and_ci_run_the_same_script():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    test_cmd = commands[1]
    script = re.fullmatch(r"bash (scripts/\S+\.sh)", test_cmd)
    assert script, f"README's test command is not one script: {test_cmd!r}"
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert any(ln.endswith(f"bash {script.group(1)}") for ln in ci_lines), ci_lines
    for where, text in (("README's test command", test_cmd), (".ci/run", ci)):  # the install logic lives once
        code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        assert "pip install" not in code and "apt-get" not in code and "pytest" not in code, where
    body = (ROOT / script.group(1)).read_text()
    assert "torch==2.13.0" in body and "-e '.[test]'" in body
    assert "apt-get install" in body and "chromium" in body and "python3 -m pytest -q" in body
    assert subprocess.run(["bash", "-n", str(ROOT / script.group(1))]).returncode == 0  # it parses


def test_readme_main_command_is_unchanged():
    assert _readme_commands()[0] == "python3 -m pip install torch==2.13.0 -e . && kernelpilot optimize"
