"""Records that cannot lie (issue 24): every commit is sealed, ``report`` compares files with the committed blobs and
the seals by hashing (not ``git status``), run, session and tune folders are validated alike, ``session mask``
refuses a forged ``memory.json``, and a command commits only what it wrote.

One honest run (``optimize`` on vector_add, two versions after v0), one honest session (v0 and v1 of the softmax
series) and one honest ``tune --out`` search are made once under the interpreter; each case copies one (git history
included) and forges it the way someone rewarded for a speedup would. The honest copies validate clean (the control).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES

from kernelpilot import api
from kernelpilot.errors import RecordError
from kernelpilot.records.history import RunHistory
from kernelpilot.records.seal import SEALS_FILE, chain_problems, parse_seals, sha256_file
from kernelpilot.records.workspace import write_json

SERIES = EXAMPLES / "series" / "softmax"


def git(folder: Path, *args: str) -> str:
    """``git -C folder ARGS`` (must succeed); its stdout."""
    proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELPILOT_HOME", str(tmp_path_factory.mktemp("kp_home")))
        mp.delenv("KERNELPILOT_CACHE", raising=False)
        yield


@pytest.fixture(scope="module")
def honest(tmp_path_factory, home) -> dict[str, Path]:
    """An honest run, session and tune folder."""
    from kernelpilot.app.tune import tune

    base = tmp_path_factory.mktemp("integrity")
    api.optimize(EXAMPLES / "vector_add.py", out=base / "run", iterations=2, benchmark=False)
    api.session_start(SERIES / "v0.py", out=base / "session", no_experience=True)
    api.session_try(base / "session", SERIES / "v1.py", hypothesis="online softmax: one pass for max and sum")
    tune(EXAMPLES / "vector_add.py", strategy="random", budget_evals=3, out=base / "tune")
    return {"run": base / "run", "session": base / "session", "tune": base / "tune"}


@pytest.fixture
def copy(honest, tmp_path):
    """copy(kind) -> a fresh copy of the honest folder of that kind."""
    made: list[Path] = []

    def make(kind: str) -> Path:
        made.append(tmp_path / f"{kind}{len(made)}")
        dest = made[-1]
        shutil.copytree(honest[kind], dest, symlinks=True)
        return dest
    return make


def _faster(path: Path, field: str, factor: float = 5.0) -> None:
    data = json.loads(path.read_text())
    data[field] = data[field] / factor
    if "samples_ns" in data:
        data["samples_ns"] = [s / factor for s in data["samples_ns"]]
    path.write_text(json.dumps(data, indent=2) + "\n")


def _problems(folder: Path) -> dict[str, str]:
    """``report``'s refusal: file -> its problems, joined."""
    with pytest.raises(RecordError) as info:
        api.report(folder)
    found: dict[str, str] = {}
    for p in info.value.problems:
        found[p["file"]] = found.get(p["file"], "") + " | " + p["problem"]
    return found


def test_honest_run_session_and_tune_folders_validate_clean(honest) -> None:
    assert api.report(honest["run"]).finished
    assert api.report(honest["session"]).kind == "session"
    assert api.report(honest["tune"]).kind == "tune"
    for kind in ("run", "session"):
        folder = honest[kind]
        seals, raw, bad = parse_seals((folder / SEALS_FILE).read_text())
        assert not bad and not chain_problems(seals, raw)
        # one seal per commit, nothing refused, and every sealed file's hash is the hash of its bytes now
        assert len(seals) == len(git(folder, "log", "--format=%H").split())
        assert all(not s.refused for s in seals)
        last = {rel: digest for s in seals for rel, digest in s.files.items()}
        assert {"run.json", "v1/timing.json"} <= set(last) if kind == "run" else {"v1/memory.json"} <= set(last)
        for rel, digest in last.items():
            if rel not in ("report.html", "final_report.md"):
                assert sha256_file(folder / rel) == digest, rel


def test_an_edit_hidden_from_git_status_is_named(copy) -> None:
    run = copy("run")
    for rel in ("v1/timing.json", "v1/outcome.json"):
        git(run, "update-index", "--assume-unchanged", rel)
    _faster(run / "v1" / "timing.json", "median_ns")  # samples and median 5x faster: consistent in themselves
    outcome = json.loads((run / "v1" / "outcome.json").read_text())
    outcome["duration_ns"] /= 5.0
    outcome["samples_ns"] = [s / 5.0 for s in outcome.get("samples_ns", [])]  # kept in timing.json when written there
    (run / "v1" / "outcome.json").write_text(json.dumps(outcome, indent=2) + "\n")
    assert git(run, "status", "--porcelain") == ""  # git status sees nothing
    found = _problems(run)
    assert "edited after commit" in found["v1/timing.json"] and "assume-unchanged" in found["v1/timing.json"]
    assert "differs from the seal written at `v1: " in found["v1/timing.json"]
    assert "edited after commit" in found["v1/outcome.json"]


def test_skip_worktree_and_an_excluded_file_are_named(copy) -> None:
    run = copy("run")
    git(run, "update-index", "--skip-worktree", "v2/timing.json")
    _faster(run / "v2" / "timing.json", "median_ns")
    (run / ".git" / "info").mkdir(exist_ok=True)
    with open(run / ".git" / "info" / "exclude", "a") as f:  # optimize names its report.html there already
        f.write("extra.json\n")
    (run / "extra.json").write_text("{}\n")
    (run / "v0" / "correctness.json").unlink()
    git(run, "update-index", "--assume-unchanged", "v0/correctness.json")
    assert git(run, "status", "--porcelain") == ""
    found = _problems(run)
    assert "skip-worktree" in found["v2/timing.json"]
    assert "never committed" in found["extra.json"]
    assert "v0/correctness.json" in found


def test_a_forged_record_committed_by_hand_is_named(copy) -> None:
    run = copy("run")
    _faster(run / "v2" / "timing.json", "median_ns")
    git(run, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "tidy")
    found = _problems(run)
    assert "has no seal" in found[SEALS_FILE]
    assert "without a seal" in found["v2/timing.json"]

    amended = copy("run")  # the same edit folded into the last kernelpilot commit
    _faster(amended / "v2" / "timing.json", "median_ns")
    git(amended, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--amend", "--no-edit", "-a")
    found = _problems(amended)
    assert "without a seal" in found["v2/timing.json"] and "amended" in found["v2/timing.json"]


def test_a_broken_seal_chain_is_named(copy) -> None:
    run = copy("run")
    lines = (run / SEALS_FILE).read_text().splitlines()
    seal = json.loads(lines[2])
    seal["files"]["v1/timing.json"] = "0" * 64
    lines[2] = json.dumps(seal, separators=(",", ":"))
    (run / SEALS_FILE).write_text("\n".join(lines) + "\n")
    git(run, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "seal")
    found = _problems(run)
    assert "previous line does not match" in found[SEALS_FILE] or "has no seal" in found[SEALS_FILE]


def test_a_forged_memory_json_is_refused_by_mask_and_by_report(copy) -> None:
    session = copy("session")
    head = git(session, "rev-parse", "HEAD")
    mem_path = session / "v1" / "memory.json"
    mem = json.loads(mem_path.read_text())
    mem.update(outcome="improved", incumbent_after=1, duration_ns=mem["duration_ns"] / 5, measured=True)
    mem_path.write_text(json.dumps(mem, indent=2) + "\n")
    with pytest.raises(RecordError, match="v1/memory.json") as info:
        api.session_mask(session, "v1", why="throttled")
    assert "session mask refused" in info.value.message
    assert any(p["file"] == "v1/memory.json" and "edited after commit" in p["problem"] for p in info.value.problems)
    assert git(session, "rev-parse", "HEAD") == head  # nothing committed
    assert "v1/memory.json" in _problems(session)

    git(session, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "forged")  # committed by hand
    with pytest.raises(RecordError) as info:
        api.session_unmask(session, "v1")
    files = " ".join(f"{p['file']}: {p['problem']}" for p in info.value.problems)
    assert "v1/memory.json: changed by commit" in files and "without a seal" in files and "has no seal" in files


def test_an_honest_session_is_masked_and_still_validates(copy) -> None:
    session = copy("session")
    status = api.session_mask(session, "v1", why="measured on a throttled GPU")
    assert [m.version for m in status.versions if m.masked] == [1]
    assert api.report(session).kind == "session"  # the mask commit is sealed like the others


def test_a_dropped_or_edited_file_is_not_committed_by_the_next_command(copy) -> None:
    from kernelpilot.versions import mask  # the command itself, under the API's check

    session = copy("session")
    (session / "v1" / "timing_fast.json").write_text('{"median_ns": 1}\n')  # dropped by someone else
    hyp = session / "v0" / "hypothesis.md"
    hyp.write_text(hyp.read_text() + "\nedited later\n")
    mask(session, "v1", why="throttled")
    changed = git(session, "show", "--name-only", "--format=", "HEAD").split()
    assert SEALS_FILE in changed and "v1/memory.json" in changed
    assert set(changed) <= {SEALS_FILE, "session.json", "v1/memory.json"}
    seal = parse_seals((session / SEALS_FILE).read_text())[0][-1]
    refused = {k: v for k, v in seal.refused.items() if k != "report.html"}  # rebuilt by report, never committed
    assert refused == {"v0/hypothesis.md": "changed since its commit, not by this command",
                            "v1/timing_fast.json": "not written by this command"}
    found = _problems(session)
    assert "never committed" in found["v1/timing_fast.json"] and "edited after commit" in found["v0/hypothesis.md"]


def test_history_commits_what_this_process_wrote_unchanged(tmp_path) -> None:
    history = RunHistory(tmp_path)
    write_json(tmp_path / "a.json", {"x": 1})
    write_json(tmp_path / "b.json", {"x": 2})
    (tmp_path / "b.json").write_text('{"x": 3}\n')  # changed after kernelpilot wrote it
    (tmp_path / "c.json").write_text("{}\n")  # never written by kernelpilot
    history.commit([tmp_path], "first")
    assert sorted(git(tmp_path, "ls-files").split()) == ["a.json", SEALS_FILE]
    assert history.refused == {"b.json": "changed after kernelpilot wrote it",
                               "c.json": "not written by this command"}
    history.commit([tmp_path / "c.json"], "named explicitly, still not written by kernelpilot")
    assert "c.json" not in git(tmp_path, "ls-files").split()


def test_a_tune_folder_with_an_edited_median_is_refused(copy) -> None:
    tune = copy("tune")
    path = tune / "evaluations.jsonl"
    lines = path.read_text().splitlines()
    line = json.loads(lines[1])
    line["evaluation"]["duration_ns"] /= 5
    lines[1] = json.dumps(line)
    path.write_text("\n".join(lines) + "\n")
    found = _problems(tune)
    assert "line 2: duration_ns" in found["evaluations.jsonl"] and "is not the median" in found["evaluations.jsonl"]

    consistent = copy("tune")  # the samples scaled too: the line agrees with itself, tune.json does not
    lines = (consistent / "evaluations.jsonl").read_text().splitlines()
    line = json.loads(lines[0])
    ev = line["evaluation"]
    ev["samples_ns"] = [s / 5 for s in ev["samples_ns"]]
    ev["duration_ns"] = statistics.median(ev["samples_ns"])
    lines[0] = json.dumps(line)
    (consistent / "evaluations.jsonl").write_text("\n".join(lines) + "\n")
    found = _problems(consistent)
    assert "is not line 1" in found["tune.json"]
    assert "line 2: its prev_sha256 is not the hash of line 1" in found["evaluations.jsonl"]  # the chain


def test_an_edited_best_in_tune_json_is_refused(copy) -> None:
    tune = copy("tune")
    data = json.loads((tune / "tune.json").read_text())
    data["best"]["duration_ns"] /= 5
    (tune / "tune.json").write_text(json.dumps(data))
    assert "is no evaluation of evaluations.jsonl" in _problems(tune)["tune.json"]


REWRITE = r'''
import hashlib, json, pathlib
t = pathlib.Path("v1/timing.json")
if t.is_file():
    d = json.loads(t.read_text())
    d["median_ns"] /= 5
    d["samples_ns"] = [s / 5 for s in d["samples_ns"]]
    t.write_text(json.dumps(d, indent=2) + "\n")
    digest = hashlib.sha256(t.read_bytes()).hexdigest()
    seals = pathlib.Path("seals.jsonl")
    lines = [json.loads(x) for x in seals.read_text().splitlines()]
    for s in lines:
        if "v1/timing.json" in s["files"]:
            s["files"]["v1/timing.json"] = digest
    seals.write_text("".join(json.dumps(s, separators=(",", ":")) + "\n" for s in lines))
'''


def test_a_history_rewritten_with_its_seals_is_named(copy, tmp_path) -> None:
    run = copy("run")
    script = tmp_path / "rewrite.py"
    script.write_text(REWRITE)
    env = {**os.environ, "FILTER_BRANCH_SQUELCH_WARNING": "1"}
    proc = subprocess.run(["git", "-C", str(run), "filter-branch", "-f", "--tree-filter",
                           f"python3 {script}", "HEAD"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert git(run, "status", "--porcelain") == ""  # files, commits and seal hashes all agree with each other
    found = _problems(run)
    assert "does not match" in found[SEALS_FILE]  # the seal after the rewritten one names the old line's hash
    assert "not in the history" in found[SEALS_FILE] or "amended or rebased" in found[SEALS_FILE]


def test_another_measured_config_named_as_the_best_is_refused_and_export_will_not_ship_it(copy, tmp_path) -> None:
    """tune.json's best must be the search's last accepted evaluation, and ``export`` validates a folder as
    ``report`` does before it ships the best's config: naming another measured config (with its own time, so it
    is still an evaluation of the lines) is refused at both."""
    from kernelpilot import api
    from kernelpilot.errors import RecordError

    tune = copy("tune")
    data = json.loads((tune / "tune.json").read_text())
    other = next(e for e in data["evaluations"] if e["status"] == "ok" and e["config"] != data["best"]["config"])
    data["best"] = other
    (tune / "tune.json").write_text(json.dumps(data))
    assert "is not the search's last accepted evaluation" in _problems(tune)["tune.json"]
    with pytest.raises(RecordError, match="last accepted evaluation"):
        api.export(tune, out=tmp_path / "bundle", arch="sm_90")
    assert not (tmp_path / "bundle").exists()
