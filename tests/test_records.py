"""Every record of a run folder has a schema and ``kernelpilot report`` validates them (issue 12).

One real run (``optimize`` on the bundled vector_add under the interpreter, two versions after v0) is made once;
each case copies it (git history included), damages one record the way a kill, a disk or a hand edit would, and
``report`` must refuse it, naming the file. A clean copy validates; run files are readable by the group.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES

from kernelpilot import api
from kernelpilot.app.schemas import SCHEMA_DIR, schema_texts
from kernelpilot.errors import RecordError


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("records") / "run"
    old = os.umask(0o022)
    try:
        result = api.optimize(EXAMPLES / "vector_add.py", out=out, iterations=2, benchmark=False)
    finally:
        os.umask(old)
    assert result.run.finished_utc and len(result.versions) == 3
    return out


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy, symlinks=True)
    return copy


def test_schema_exports_are_up_to_date() -> None:
    texts = schema_texts()
    on_disk = {p.name: p.read_text() for p in SCHEMA_DIR.glob("*.schema.json")}
    stale = sorted(n for n in texts if on_disk.get(n) != texts[n])
    extra = sorted(set(on_disk) - set(texts))
    assert not stale and not extra, (f"out of date: {stale}, no longer produced: {extra} — run "
                                     "`python -m kernelpilot.app.schemas`")
    assert {"run.schema.json", "version.outcome.schema.json", "version.timing.schema.json",
            "tune.schema.json"} <= set(texts)


def test_a_finished_run_validates_and_every_version_has_its_commit(finished_run: Path) -> None:
    found = api.report(finished_run)
    assert found.finished and [v.index for v in found.versions] == [0, 1, 2]
    log = subprocess.run(["git", "-C", str(finished_run), "log", "--format=%s"], capture_output=True,
                         text=True).stdout.splitlines()
    assert [s.split(":")[0] for s in log if s.startswith("v")] == ["v2", "v1", "v0"]
    assert subprocess.run(["git", "-C", str(finished_run), "status", "--porcelain"], capture_output=True,
                          text=True).stdout == ""
    for v in found.versions:  # each outcome names the commit that recorded its version
        assert v.commit and f"v{v.index}: " in subprocess.run(
            ["git", "-C", str(finished_run), "log", "-1", "--format=%s", v.commit], capture_output=True,
            text=True).stdout


def test_run_files_are_readable_by_the_group(finished_run: Path) -> None:
    for path in [finished_run / "run.json", finished_run / "env.json", finished_run / "v0" / "outcome.json",
                 finished_run / "v1" / "timing.json", finished_run / "final_report.md"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert stat.S_IMODE((finished_run / "v0").stat().st_mode) == 0o755


def _median_edit(path: Path) -> None:
    data = json.loads(path.read_text())
    data["duration_ns"] = 1000.0
    path.write_text(json.dumps(data, indent=2))


def _timing_edit(path: Path) -> None:
    data = json.loads(path.read_text())
    data["median_ns"] = data["median_ns"] * 0.5
    path.write_text(json.dumps(data, indent=2))


CASES = {
    "empty timing.json": ("v1/timing.json", lambda p: p.write_text(""), "empty file"),
    "truncated timing.json": ("v1/timing.json", lambda p: p.write_text(p.read_text()[:100]), "not valid JSON"),
    "garbage correctness.json": ("v1/correctness.json", lambda p: p.write_text("garbage{"), "not valid JSON"),
    "config.json of another shape": ("v2/config.json", lambda p: p.write_text('{"move": 3}'), "schema"),
    "garbage env.json": ("env.json", lambda p: p.write_text("xx"), "not valid JSON"),
    "hand-edited median in outcome.json": ("v1/outcome.json", _median_edit, "does not match the median"),
    "timing median not its samples'": ("v2/timing.json", _timing_edit, "is not the median of its"),
    "deleted correctness.json": ("v0/correctness.json", lambda p: p.unlink(), "missing"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_refuses_each_bad_record_naming_the_file(run_copy: Path, case: str) -> None:
    rel, damage, words = CASES[case]
    damage(run_copy / rel)
    with pytest.raises(RecordError) as info:
        api.report(run_copy)
    assert rel in info.value.message and words in info.value.message
    assert f"git -C {run_copy} checkout -- {rel}" in info.value.hint
    assert any(p["file"] == rel for p in info.value.problems)


def test_a_file_changed_since_its_commit_is_named(run_copy: Path) -> None:
    path = run_copy / "v1" / "hypothesis.md"
    path.write_text(path.read_text() + "\nedited later\n")
    with pytest.raises(RecordError, match="v1/hypothesis.md: changed since it was committed"):
        api.report(run_copy)


def test_report_cli_exits_non_zero_with_the_problems_as_json(run_copy: Path) -> None:
    (run_copy / "v1" / "timing.json").write_text("")
    proc = subprocess.run(["python3", "-m", "kernelpilot.cli", "report", str(run_copy), "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    obj = json.loads(proc.stdout)
    assert obj["error"] == "RecordError" and obj["hint"] and obj["problems"][0]["file"] == "v1/timing.json"
