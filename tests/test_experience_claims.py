"""The experience log stores a lesson on record only with a source that validates: a run folder that exists, whose
records validate, and whose numbers and change are the entry's. Anything else (a made-up source, a real source
whose numbers differ, an edited run) is stored as the user's claim, named as such, and ranked below."""

from __future__ import annotations

import json
import sqlite3

import pytest

from kernelpilot import api
from kernelpilot.api.experience import experience_add, experience_import, experience_recommend
from kernelpilot.experience import ExperienceDB, ExperienceEntry
from kernelpilot.experience.from_runs import entries_from_optimize
from kernelpilot.experience.rank import rank


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """A finished optimize run (CPU, interpreter) and its experience entries, as the run recorded them."""
    import textwrap

    from conftest import TORCH_KERNEL

    root = tmp_path_factory.mktemp("claims")
    kernel = root / "vadd.py"
    kernel.write_text(textwrap.dedent(TORCH_KERNEL.replace("BODY", "out.copy_(x + y)")))
    out = root / "run"
    result = api.optimize(kernel, out=out, iterations=3, benchmark=False)
    entries = entries_from_optimize(result.versions, run=str(out.resolve()), kernel="vadd", kernel_type="vector_add")
    assert entries
    return out, entries


def _fields(entry: ExperienceEntry, **change) -> dict:
    data = {k: v for k, v in entry.model_dump(mode="json").items() if k not in ("recorded_utc", "claim", "masked")}
    return {**data, **change}


def test_an_entry_from_a_real_run_is_on_record(real_run, tmp_path):
    out, entries = real_run
    db = tmp_path / "log.db"
    for entry in entries:
        added = experience_add(_fields(entry), db=db)
        assert added["entry"]["claim"] is None, added["entry"]
    # the user cannot declare an entry on record: a "claim" field given is replaced by the check's answer
    assert experience_add(_fields(entries[0], claim=None, source="manual"), db=db)["entry"]["claim"]


def test_forged_entries_are_stored_as_claims_named_why(real_run, tmp_path):
    out, entries = real_run
    db = tmp_path / "log.db"
    real = entries[0]
    made_up = experience_add(_fields(real, source=f"optimize:{tmp_path}/no-such-run/v1"), db=db)["entry"]
    assert made_up["claim"].startswith("no record folder at")
    faster = experience_add(_fields(real, speedup=(real.speedup or 1.0) * 3), db=db)["entry"]
    assert "speedup" in faster["claim"] and "the records say" in faster["claim"]
    other_change = experience_add(_fields(real, change="vectorize the loads (wider accesses)"), db=db)["entry"]
    assert "the records say the change was" in other_change["claim"]
    not_a_change = experience_add(_fields(real, source=f"optimize:{out.resolve()}/v0"), db=db)["entry"]
    assert "not a version of that run that tried a change" in not_a_change["claim"]
    manual = experience_add(_fields(real, source="manual"), db=db)["entry"]
    assert "not a record kernelpilot can check" in manual["claim"]
    with ExperienceDB.open(db) as log:
        stored = {e.key(): e for e in log.entries()}
    assert all(stored[k["key"]].claim == k["claim"] for k in (made_up, faster, other_change, manual))


def test_an_edited_run_folder_does_not_validate(real_run, tmp_path):
    import shutil

    out, entries = real_run
    copy = tmp_path / "edited"
    shutil.copytree(out, copy)
    real = entries[0]
    v = real.source.rsplit("/v", 1)[1]
    outcome = copy / f"v{v}" / "outcome.json"
    data = json.loads(outcome.read_text())
    data["speedup_vs_parent"] = 9.0  # the edit a forger makes to back a claim
    outcome.write_text(json.dumps(data))
    entry = experience_add(_fields(real, source=f"optimize:{copy.resolve()}/v{v}", speedup=9.0), db=tmp_path / "l.db")
    assert entry["entry"]["claim"].startswith("its records do not validate")


def test_claims_rank_below_lessons_on_record_and_say_so(real_run, tmp_path):
    out, entries = real_run
    db = tmp_path / "log.db"
    real = entries[0]
    experience_add(_fields(real), db=db)
    forged = {"kernel": "vadd", "kernel_type": "vector_add", "change": "vectorize the loads", "outcome": "improved",
              "speedup": 5.0, "source": "optimize:/made/up/run/v3", "measured": True}
    experience_add(forged, db=db)
    recs = experience_recommend(kernel_type="vector_add", db=db)["recommendations"]
    claims = [r for r in recs if r["claims_only"]]
    on_record = [r for r in recs if not r["claims_only"]]
    assert claims and on_record and recs.index(claims[0]) > recs.index(on_record[-1])
    assert claims[0]["score"] > on_record[0]["score"]  # ranked below although its claimed speedup is larger
    assert "the user's claims only" in claims[0]["warning"] and claims[0]["n_claims"] == claims[0]["n_tried"]


def test_a_claim_adds_nothing_to_a_group_on_record():
    common = {"kernel": "k", "kernel_type": "softmax", "outcome": "improved", "measured": True}
    lesson = ExperienceEntry(**common, change="num_warps 4 -> 8", speedup=1.1, source="optimize:/r/v1")
    claim = ExperienceEntry(**common, change="num_warps 4 -> 8", speedup=9.0, source="manual", claim="made up")
    alone = {r.tag: r for r in rank([lesson], {})}
    both = {r.tag: r for r in rank([lesson, claim], {})}
    assert both["num_warps-up"].score == alone["num_warps-up"].score and both["num_warps-up"].n_claims == 1
    assert "1 of 2 are the user's claims" in both["num_warps-up"].warning


def test_import_judges_every_line_and_a_version_1_log_is_upgraded(real_run, tmp_path):
    out, entries = real_run
    lines = tmp_path / "team.jsonl"
    forged = _fields(entries[0], speedup=7.0, claim=None)
    lines.write_text("\n".join(json.dumps(x) for x in (_fields(entries[0]), forged)) + "\n")
    db = tmp_path / "log.db"
    assert experience_import(lines, db=db)["added"] == 2
    with ExperienceDB.open(db) as log:
        claims = sorted(e.claim is not None for e in log.entries())
    assert claims == [False, True]
    # a log written before sources were checked: its hand-added entries become claims, run entries stay on record
    old = tmp_path / "v1.db"
    with ExperienceDB.open(old) as log:
        log.add_many([ExperienceEntry(kernel="k", change="c", outcome="improved", source="manual", measured=True),
                      ExperienceEntry(kernel="k", change="d", outcome="improved", source="tune:/x", measured=True)])
    conn = sqlite3.connect(old)
    conn.execute("ALTER TABLE entries DROP COLUMN claim")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with ExperienceDB.open(old) as log:
        got = {e.source: e.claim for e in log.entries()}
    assert got["tune:/x"] is None and "schema 1" in got["manual"]
