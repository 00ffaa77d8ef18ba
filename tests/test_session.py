"""``kernelpilot session``: versions an author writes, end to end under the Triton interpreter (issue 13).

One session runs once per module (start v0, try v1 / a wrong v2 / v3, mask, unmask, restart, try after the restart,
finish), through the CLI with ``--json`` as an agent would drive it; the tests read what it left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.records.history import RunHistory
from kernelpilot.records.workspace import write_json

SERIES = Path(__file__).resolve().parents[1] / "src" / "kernelpilot" / "examples" / "series" / "softmax"
SCHEMAS = Path(__file__).resolve().parents[1] / "src" / "kernelpilot" / "records" / "schema"


def kp(*args: str, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[int, dict]:
    """Run ``kernelpilot ARGS --json``; returns (exit code, the JSON object)."""
    proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", *args, "--json"], capture_output=True, text=True,
                          env=env, timeout=900)
    assert proc.returncode in ok, f"{args}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """The session folder, the experience DB, and each step's (exit code, JSON)."""
    base = tmp_path_factory.mktemp("session")
    run, db = base / "run", base / "experience.db"
    env = {**os.environ, "TRITON_INTERPRET": "1", "KERNELPILOT_EXPERIENCE": str(db)}
    steps: dict[str, tuple[int, dict]] = {}
    steps["start"] = kp("session", "start", str(SERIES / "v0.py"), "--out", str(run), "--kernel-type", "softmax",
                        env=env)
    steps["v1"] = kp("session", "try", str(run), str(SERIES / "v1.py"), "--hypothesis",
                     "online softmax: max and sum in one pass, x read twice", "--expect", "duration:down", env=env)
    steps["v2"] = kp("session", "try", str(run), str(SERIES / "v4.py"), "--hypothesis",
                     "two rows per program: half the programs", env=env, ok=(3,))
    steps["v3"] = kp("session", "try", str(run), str(SERIES / "v2.py"), "--hypothesis",
                     "the whole row in one tile: x read once", "--parent", "v1", env=env)
    steps["mask"] = kp("session", "mask", str(run), "v3", "--why", "measured on a throttled GPU", env=env)
    steps["unmask"] = kp("session", "unmask", str(run), "v3", env=env)
    steps["restart"] = kp("session", "restart", str(run), "--from", "v1", env=env)
    steps["v4"] = kp("session", "try", str(run), str(SERIES / "v3.py"), "--hypothesis",
                     "exp2 with log2(e) folded in", env=env)
    steps["finish"] = kp("session", "finish", str(run), env=env)
    steps["status"] = kp("session", "status", str(run), env=env)
    return run, db, env, steps


def _memory(run: Path, n: int) -> dict:
    return json.loads((run / f"v{n}" / "memory.json").read_text())


def test_each_version_is_classified_and_the_wrong_one_is_invalid(session):
    run, _, _, steps = session
    assert steps["start"][1]["memory"]["outcome"] == "baseline"
    assert steps["v2"][1]["memory"]["outcome"] == "invalid"
    assert steps["v2"][1]["memory"]["status"] == "wrong_result"
    for name in ("v1", "v3", "v4"):  # correct, but interpreted: no speed claimed
        assert steps[name][1]["memory"]["outcome"] == "unmeasured", name
        assert steps[name][1]["memory"]["measured"] is False
    assert _memory(run, 1)["expectations"][0]["verdict"] == "not measured"
    assert _memory(run, 3)["parent"] == 1 and _memory(run, 4)["parent"] == 1  # --parent, then the restart's


def test_git_history_has_one_commit_per_step_and_the_hypothesis_first(session):
    run = session[0]
    subjects = subprocess.run(["git", "-C", str(run), "log", "--format=%s", "--reverse"], capture_output=True,
                              text=True, check=True).stdout.splitlines()
    kinds = [s.split(":")[0] for s in subjects]
    assert kinds == ["session", "v0", "v1", "v1", "v2", "v2", "v3", "v3", "mask", "unmask", "restart", "v4", "v4",
                     "finish"], subjects
    assert subjects[2].startswith("v1: hypothesis — online softmax")
    # the hypothesis commit holds the file and the hypothesis, not the outcome
    files = subprocess.run(["git", "-C", str(run), "show", "--name-only", "--format=", "HEAD~11"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert subjects[-12].startswith("v1: hypothesis") and "v1/hypothesis.md" in files
    assert "v1/memory.json" not in files and "v1/kernel.py" in files


def test_every_memory_json_is_valid_against_its_schema(session):
    jsonschema = pytest.importorskip("jsonschema")
    run = session[0]
    schema = json.loads((SCHEMAS / "version.memory.schema.json").read_text())
    found = sorted(run.glob("v*/memory.json"))
    assert len(found) == 5
    for path in found:
        jsonschema.validate(json.loads(path.read_text()), schema)
    jsonschema.validate(json.loads((run / "session.json").read_text()),
                        json.loads((SCHEMAS / "session.schema.json").read_text()))
    broken = dict(json.loads(found[0].read_text()), outcome="great")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_mask_unmask_and_restart_change_what_counts_without_deleting(session):
    run, _, _, steps = session
    masked = {v["version"]: v["masked"] for v in steps["mask"][1]["versions"]}
    assert masked[3] is True and masked[1] is False
    assert {v["version"]: v["masked"] for v in steps["unmask"][1]["versions"]}[3] is False
    after = {v["version"]: v for v in steps["restart"][1]["versions"]}
    assert after[2]["masked"] and after[3]["masked"] and not after[1]["masked"]
    assert after[3]["mask_reason"] == "restart from v1"
    assert steps["restart"][1]["incumbent"] == 1
    assert all((run / f"v{i}" / "kernel.py").is_file() for i in range(5))
    state = json.loads((run / "session.json").read_text())
    assert state["restarts"][0]["from"] == 1 and state["restarts"][0]["masked"] == [2, 3]
    table = steps["status"][1]["table_md"]
    assert "| v3" not in table and "| v4" in table  # masked versions are left out of status


def test_the_check_is_frozen_a_version_with_other_inputs_is_invalid(session, tmp_path):
    run, _, env, _ = session
    clone = tmp_path / "run"
    shutil.copytree(run, clone)
    src = (SERIES / "v1.py").read_text().replace("x = (4.0 * torch.randn", "x = (0.001 * torch.randn")
    assert "0.001 * torch.randn" in src
    (tmp_path / "friendlier.py").write_text(src)
    state = json.loads((clone / "session.json").read_text())
    state["finished_utc"] = None
    # reopened through kernelpilot's own writer and sealed commit: a hand edit would be refused (issue 24)
    write_json(clone / "session.json", state)
    RunHistory(clone).commit([clone / "session.json"], "test: reopen the finished session")
    code, got = kp("session", "try", str(clone), str(tmp_path / "friendlier.py"), "--hypothesis",
                   "smaller inputs are faster", env=env, ok=(3,))
    assert got["memory"]["status"] == "check_changed" and got["memory"]["outcome"] == "invalid"
    assert "other values than v0's" in got["memory"]["message"]
    bad = got["memory"]["version"]  # an invalid version is no parent: nothing to judge the next one against
    code, got = kp("session", "try", str(clone), str(SERIES / "v2.py"), "--hypothesis", "h", "--parent", f"v{bad}",
                   env=env, ok=(2,))
    assert f"v{bad} is invalid (check_changed)" in got["message"]
    assert not (clone / f"v{bad + 1}").exists()  # refused before anything was written


def test_the_final_report_lists_versions_masked_ones_apart(session):
    run = session[0]
    report = (run / "final_report.md").read_text()
    assert "## Masked (kept, not counted)" in report and "- v3: restart from v1" in report
    assert "| v4" in report and "not measurements" in report
    readme = (run / "README.md").read_text()
    assert "## Stop conditions" in readme and "UNKNOWN" in readme


def test_bad_input_is_refused_with_a_json_error(session, tmp_path):
    run, _, env, _ = session
    code, got = kp("session", "try", str(run), str(SERIES / "v1.py"), "--hypothesis", "x", "--expect", "duration",
                   env=env, ok=(1, 2))
    assert got["error"] and "METRIC:up" in got["message"]
    code, got = kp("session", "status", str(tmp_path), env=env, ok=(1,))
    assert "not a kernelpilot session folder" in got["message"]
    code, got = kp("session", "mask", str(run), "v0", "--why", "x", env=env, ok=(2,))
    assert "v0 cannot be masked" in got["message"]


def test_the_experience_log_holds_the_tried_versions(session):
    from kernelpilot.experience import ExperienceDB

    run, db, env, _ = session
    run = run.resolve()
    with ExperienceDB.open(db) as log:
        entries = log.list(limit=100)
        everything = [e for e in log.list(limit=100, include_masked=True) if e.source.startswith(f"session:{run}")]
        entries = [e for e in entries if e.source.startswith(f"session:{run}")]
    assert {e.change for e in everything} >= {"online softmax: max and sum in one pass, x read twice",
                                             "two rows per program: half the programs"}
    assert len(everything) == 4 and all(e.kernel_type == "softmax" for e in everything)
    invalid = [e for e in everything if e.outcome == "invalid"]
    assert len(invalid) == 1 and invalid[0].masked  # v2, masked by the restart
    assert len(entries) < len(everything)
    code, rec = kp("experience", "recommend", "--kernel-type", "softmax", "--backend", "triton", env=env)
    changes = {c for r in rec["recommendations"] for c in [r["change"], *r.get("changes", [])] if c}
    assert "online softmax: max and sum in one pass, x read twice" in changes
    assert "two rows per program: half the programs" not in changes  # masked by the restart


def test_a_cuda_version_is_copied_with_its_sidecar_and_local_includes(tmp_path):
    from kernelpilot.errors import ContractError
    from kernelpilot.versions.run_version import copy_version, version_kernel

    src = tmp_path / "src"
    (src / "inc").mkdir(parents=True)
    (src / "inc" / "tile.cuh").write_text("#pragma once\n#define TILE 32\n")
    (src / "k.cu").write_text('#include "inc/tile.cuh"\nextern "C" void solve(const float* x, float* y, int n) {}\n')
    (src / "k.py").write_text("TUNABLES = {}\n")
    root = tmp_path / "run"
    dest = copy_version(src / "k.cu", root / "v1")
    assert dest.name == "kernel.cu" and version_kernel(root, 1) == dest
    assert (root / "v1" / "kernel.py").read_text() == "TUNABLES = {}\n"  # the sidecar, beside it
    assert (root / "v1" / "inc" / "tile.cuh").is_file()
    (tmp_path / "outside.cuh").write_text("#define X 1\n")
    (src / "bad.cu").write_text('#include "../outside.cuh"\nextern "C" void solve(float* y, int n) {}\n')
    with pytest.raises(ContractError, match="outside its folder"):
        copy_version(src / "bad.cu", root / "v2")
    assert not (root / "v2").exists()  # refused before anything is copied
    with pytest.raises(ContractError, match="a back end reads: .*tile.cuh: a .cuh header has no solve"):
        copy_version(src / "inc" / "tile.cuh", root / "v3")
    # a header named after the kernel keeps its name (only the sidecar is renamed with the kernel)
    (src / "m.cuh").write_text("#define M 1\n")
    (src / "m.cu").write_text('#include "m.cuh"\nextern "C" void solve(float* y, int n) {}\n')
    dest = copy_version(src / "m.cu", root / "v4")
    assert (root / "v4" / "m.cuh").is_file() and not (root / "v4" / "kernel.py").exists()
    assert version_kernel(root, 4) == dest
