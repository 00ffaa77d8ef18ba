"""The experience log (issue 13): entries added and de-duplicated in a real SQLite file, ranked by the documented
rule, searched, listed, counted, merged without duplicates, exported and imported as JSON Lines; typed errors for
unusable files; the strategy guide's entries each cite a source; the CLI's --json and exit codes. CPU only."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from typer.testing import CliRunner

from kernelpilot.errors import ExperienceError, OptionError
from kernelpilot.experience import (ExperienceDB, ExperienceEntry, Recommendation, default_db_path,
                                    entries_from_optimize, entry_from_tune, guide_entries, guide_for, guide_ids_for,
                                    role_tags)
from kernelpilot.experience.model import BOTTLENECK_CLASSES
from kernelpilot.experience.rank import CAP, UNMEASURED_WEIGHT, value
from kernelpilot.experience.tags import TAG_PATTERNS, derive_tags

ROOT = Path(__file__).resolve().parents[1]


def entry(change: str = "num_warps 4 -> 8", outcome: str = "improved", speedup: float | None = 1.2,
          source: str = "session:r1/v1", **kw: Any) -> ExperienceEntry:
    fields: dict[str, Any] = dict(kernel="softmax", kernel_type="softmax", backend="triton", arch="sm_90",
                                  gpu="NVIDIA H100", bottleneck="memory", change=change, outcome=outcome,
                                  speedup=speedup, source=source, measured=True)
    fields.update(kw)
    return ExperienceEntry(**fields)


@pytest.fixture
def db(tmp_path: Path):
    with ExperienceDB.open(tmp_path / "log" / "experience.db") as log:
        yield log


def by_tag(recs: list[Recommendation]) -> dict[str, Recommendation]:
    return {r.tag or r.change: r for r in recs}


# ---------------------------------------------------------------------------------------------------- entries


def test_open_creates_folder_schema_and_wal(tmp_path):
    path = tmp_path / "a" / "b" / "experience.db"
    ExperienceDB.open(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2  # schema 2: the claim column
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert dict(conn.execute("SELECT name, value FROM meta"))["kind"] == "kernelpilot.experience"


def test_add_then_same_entry_again_is_not_added(db):
    e = entry()
    assert db.add(e) is True
    assert db.add(e) is False
    # recorded at another time, or masked: still the same result, not a second entry
    assert db.add(e.model_copy(update={"recorded_utc": "2030-01-01T00:00:00+00:00", "masked": True})) is False
    assert db.add(entry(speedup=1.3)) is True  # another result is another entry
    assert len(db.list()) == 2


def test_tags_derived_from_the_change_only_when_none_given():
    assert entry("BLOCK_N=256 -> BLOCK_N=1024").tags == ["block_size", "block_n-up"]
    assert entry("raise num_warps from 8 to 4").tags == ["num_warps", "num_warps-down"]
    assert entry("vectorize loads", tags=["My Tag", "my tag", ""]).tags == ["my-tag"]
    assert derive_tags("keep the whole row in one program per row and fuse the passes") == [
        "one-block-per-row", "fusion"]
    assert derive_tags("it grows 2 to 4") == []  # not a tunable's name: no direction tag


def test_entry_refuses_bad_values():
    with pytest.raises(ValueError):
        entry(outcome="better")
    with pytest.raises(ValueError):
        entry(speedup=0.0)
    with pytest.raises(ValueError):
        entry(speedup=float("nan"))
    with pytest.raises(ValueError):
        entry(bottleneck="disk")
    with pytest.raises(ValueError):
        entry(surprise=1)  # unknown field
    assert entry(bottleneck="small_grid", kernel_type="Layer-Norm").model_dump()["bottleneck"] == "small-grid"
    assert entry(kernel_type="Layer-Norm").kernel_type == "layer_norm"


def test_key_ignores_time_mask_tags_and_metrics():
    a = entry(tags=["x"], metrics_moved={"duration_ns": -0.2})
    b = entry(recorded_utc="2000-01-01T00:00:00+00:00", masked=True)
    assert a.key() == b.key() and len(a.key()) == 64
    assert a.key() != entry(source="session:r2/v1").key() != entry(outcome="neutral").key()


# ---------------------------------------------------------------------------------------------------- ranking


def test_a_change_that_helped_three_times_beats_a_bigger_single_win(db):
    for i in range(3):
        db.add(entry("vectorize loads", speedup=1.15, source=f"s:{i}"))
    db.add(entry("use split-k", speedup=2.0, source="s:once"))
    recs = db.recommend(kernel_type="softmax", backend="triton", arch="sm_90", bottleneck="memory")
    assert [r.tag for r in recs[:2]] == ["vectorize", "split-k"]
    top = recs[0]
    assert (top.n_tried, top.n_improved, top.n_failed) == (3, 3, 0)
    assert top.median_speedup == pytest.approx(1.15) and top.best_speedup == pytest.approx(1.15)
    assert top.similarity == 1.0 and top.warning is None
    assert len(top.examples) == 3 and "triton-memory-vectorize" in top.guide


def test_a_change_that_mostly_failed_carries_a_warning_and_ranks_last(db):
    db.add(entry("vectorize loads", speedup=1.1, source="s:good"))
    db.add(entry("num_stages 2 -> 4", outcome="improved", speedup=1.3, source="s:1"))
    db.add(entry("num_stages 2 -> 4", outcome="regressed", speedup=0.8, source="s:2"))
    db.add(entry("num_stages 2 -> 4", outcome="regressed", speedup=0.9, source="s:3"))
    db.add(entry("num_stages 2 -> 4", outcome="invalid", speedup=None, source="s:4"))
    recs = db.recommend(kernel_type="softmax")
    stages = by_tag(recs)["num_stages"]
    assert stages.warning == "failed 3 of 4 times (1 invalid)"
    assert (stages.n_failed, stages.n_invalid, stages.n_improved) == (3, 1, 1)
    assert stages.score < 0 < by_tag(recs)["vectorize"].score
    assert recs[0].tag == "vectorize" and recs[-1].tag in ("num_stages", "num_stages-up")


def test_changes_on_other_kernel_types_rank_lower(db):
    db.add(entry("vectorize loads", kernel="mm", kernel_type="matmul", source="s:mm"))
    db.add(entry("fuse the passes", source="s:softmax"))
    recs = db.recommend(kernel_type="softmax", backend="triton")
    assert [r.tag for r in recs] == ["fusion", "vectorize"]
    assert by_tag(recs)["vectorize"].similarity == pytest.approx(0.5)
    # asked for a matmul, the order turns round
    assert [r.tag for r in db.recommend(kernel_type="matmul")] == ["vectorize", "fusion"]


def test_masked_entries_are_left_out_unless_asked(db):
    db.add(entry("vectorize loads", source="session:r1/v2"))
    db.add(entry("fuse the passes", speedup=1.05, source="session:r1/v3"))
    assert db.set_masked("session:r1/v2", True) == 1
    assert [r.tag for r in db.recommend()] == ["fusion"]
    assert db.search("vectorize") == [] and len(db.list()) == 1 and db.stats()["total"] == 1
    assert db.stats()["masked"] == 1
    assert {r.tag for r in db.recommend(include_masked=True)} == {"fusion", "vectorize"}
    assert db.set_masked("session:r1/v2", False) == 1 and len(db.list()) == 2
    assert db.set_masked("session:nothing", True) == 0


def test_interpreter_runs_weigh_less_and_are_flagged(db):
    db.add(entry("vectorize loads", measured=False, arch=None, source="s:cpu"))
    db.add(entry("fuse the passes", source="s:gpu"))
    recs = by_tag(db.recommend(kernel_type="softmax", arch="sm_90"))
    assert recs["fusion"].score > recs["vectorize"].score > 0
    # the CPU run counts a quarter, and half-way on the arch it does not name
    assert recs["vectorize"].score == pytest.approx(recs["fusion"].score * UNMEASURED_WEIGHT * (1 + 0.7) / 2, rel=1e-4)
    assert recs["vectorize"].warning == "interpreter runs only: not measurements"
    assert recs["vectorize"].n_unmeasured == 1 and recs["fusion"].warning is None


def test_values_of_outcomes():
    assert value(entry(outcome="invalid", speedup=None)) == -CAP
    assert value(entry(outcome="neutral", speedup=1.02)) == 0.0
    assert value(entry(outcome="improved", speedup=None)) > 0 > value(entry(outcome="regressed", speedup=None))
    assert 0 < value(entry(speedup=10.0)) <= CAP


def test_recommend_refuses_bad_options(db):
    with pytest.raises(OptionError):
        db.recommend(limit=0)
    with pytest.raises(OptionError):
        db.recommend(bottleneck="disk")
    with pytest.raises(OptionError):
        db.recommend(backend="opencl")
    assert db.recommend() == []


# ------------------------------------------------------------------------------------------ search, list, stats


def test_search_needs_every_word_case_insensitive_and_wildcards_literal(db):
    db.add(entry("Vectorize loads with tl.multiple_of", source="s:1"))
    db.add(entry("vectorize stores", kernel="ln", kernel_type="layer_norm", source="s:2"))
    db.add(entry("numXwarps 4 -> 8", source="s:3"))
    assert [e.source for e in db.search("vectorize")] == ["s:2", "s:1"]  # newest first (same second: insert order)
    assert [e.source for e in db.search("VECTORIZE layer_norm")] == ["s:2"]
    assert [e.source for e in db.search("multiple_of")] == ["s:1"]
    assert db.search("num_warps") == []  # "_" is not a wildcard
    assert [e.source for e in db.search("vectorize", limit=1)] == ["s:2"]
    with pytest.raises(OptionError):
        db.search("   ")


def test_list_filters(db):
    db.add(entry("num_warps 4 -> 8", source="s:1"))
    db.add(entry("vectorize loads", outcome="regressed", speedup=0.9, kernel_type="layer-norm", source="s:2"))
    db.add(entry("vectorize loads", measured=False, arch=None, source="s:3"))
    assert [e.source for e in db.list(tag="vectorize")] == ["s:3", "s:2"]
    assert [e.source for e in db.list(tag="num_warps-up")] == ["s:1"]
    assert [e.source for e in db.list(kernel_type="Layer Norm")] == ["s:2"]
    assert [e.source for e in db.list(outcome="regressed")] == ["s:2"]
    assert [e.source for e in db.list(measured=False)] == ["s:3"]
    assert [e.source for e in db.list(arch="SM_90", outcome=None)] == ["s:2", "s:1"]
    assert len(db.list(limit=1)) == 1 and len(db.list(limit=None)) == 3
    with pytest.raises(OptionError):
        db.list(colour="red")
    with pytest.raises(OptionError):
        db.list(outcome="better")


def test_stats_counts(db):
    db.add(entry("num_warps 4 -> 8", source="s:1"))
    db.add(entry("vectorize loads", outcome="regressed", speedup=0.9, source="s:2", bottleneck=None))
    db.add(entry("vectorize loads", outcome="invalid", speedup=None, measured=False, source="s:3",
                 kernel_type="matmul", backend="cuda"))
    db.add(entry("fuse", source="s:4"))
    db.set_masked("s:4", True)
    s = db.stats()
    assert (s["total"], s["masked"], s["measured"], s["unmeasured"], s["sources"]) == (3, 1, 2, 1, 3)
    assert s["by_outcome"] == {"improved": 1, "invalid": 1, "regressed": 1}
    assert s["by_kernel_type"] == {"softmax": 2, "matmul": 1}
    assert s["by_backend"] == {"triton": 2, "cuda": 1}
    assert s["by_bottleneck"] == {"memory": 2, "none": 1}
    assert s["by_tag"]["vectorize"] == 2
    assert db.stats(include_masked=True)["total"] == 4


# ------------------------------------------------------------------------------------- merge, export, import


def test_merge_adds_only_new_entries_and_twice_adds_nothing(tmp_path):
    a_path, b_path = tmp_path / "a.db", tmp_path / "b.db"
    with ExperienceDB.open(a_path) as a, ExperienceDB.open(b_path) as b:
        a.add(entry("one", source="s:1"))
        a.add(entry("two", source="s:2"))
        b.add(entry("two", source="s:2", recorded_utc="1999-01-01T00:00:00+00:00"))  # the same result, elsewhere
        b.add(entry("three", source="s:3"))
        b.set_masked("s:3", True)
    with ExperienceDB.open(a_path) as a:
        assert a.merge(b_path) == 1
        assert a.merge(b_path) == 0
        assert sorted(e.change for e in a.entries(include_masked=True)) == ["one", "three", "two"]
        assert [e.change for e in a.list()] == ["two", "one"]  # the merged one kept its mask
        assert a.merge(a_path) == 0
    with ExperienceDB.open(b_path) as b:  # the other file was only read
        assert len(b.entries(include_masked=True)) == 2


def test_merge_of_a_missing_or_foreign_file_is_a_typed_error(db, tmp_path):
    with pytest.raises(ExperienceError, match="no experience log"):
        db.merge(tmp_path / "none.db")
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(ExperienceError, match="not a kernelpilot experience log"):
        db.merge(foreign)


def test_export_import_round_trip(tmp_path, db):
    db.add(entry("vectorize loads", metrics_moved={"duration_ns": -0.31, "dram_throughput_pct": 0.4},
                 source="s:1", recorded_utc="2026-01-02T00:00:00+00:00"))
    db.add(entry("fuse", outcome="invalid", speedup=None, measured=False, arch=None, source="s:2",
                 recorded_utc="2026-01-01T00:00:00+00:00", tags=["fusion", "custom"]))
    db.set_masked("s:2", True)
    out = tmp_path / "team" / "experience.jsonl"
    assert db.export_jsonl(out) == 2
    lines = out.read_text().splitlines()
    assert [json.loads(x)["source"] for x in lines] == ["s:2", "s:1"]  # oldest first
    first = out.read_bytes()
    assert db.export_jsonl(out) == 2 and out.read_bytes() == first  # stable for a repository
    with ExperienceDB.open(tmp_path / "fresh.db") as fresh:
        assert fresh.import_jsonl(out) == 2
        assert fresh.import_jsonl(out) == 0
        got = sorted((e.as_record() for e in fresh.entries(include_masked=True)), key=lambda r: r["key"])
    want = sorted((e.as_record() for e in db.entries(include_masked=True)), key=lambda r: r["key"])
    assert got == want and any(r["masked"] for r in got)


def test_import_checks_every_line_before_adding_any(tmp_path, db):
    good = json.dumps(entry(source="s:ok").as_record())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + "\n\n" + '{"kernel": "k", "change": "c", "outcome": "better", "source": "s", '
                   '"measured": true}\n')
    with pytest.raises(ExperienceError, match=r"bad\.jsonl:3: .*outcome"):
        db.import_jsonl(bad)
    bad.write_text(good + "\nnot json\n")
    with pytest.raises(ExperienceError, match=r"bad\.jsonl:2"):
        db.import_jsonl(bad)
    assert db.list() == []
    with pytest.raises(ExperienceError, match="cannot read"):
        db.import_jsonl(tmp_path / "none.jsonl")


# ------------------------------------------------------------------------------------------- unusable files


def test_a_corrupt_file_is_a_typed_error(tmp_path):
    bad = tmp_path / "experience.db"
    bad.write_bytes(b"this is not sqlite at all\n" * 100)
    with pytest.raises(ExperienceError) as info:
        ExperienceDB.open(bad)
    assert str(bad) in info.value.message and "move the file aside" in info.value.hint
    assert bad.read_bytes().startswith(b"this is not sqlite")  # left as it was


def test_another_sqlite_file_a_newer_schema_or_a_folder_are_typed_errors(tmp_path):
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE notes (x)").connection.commit()
    with pytest.raises(ExperienceError, match="not a kernelpilot experience log"):
        ExperienceDB.open(other)
    newer = tmp_path / "newer.db"
    ExperienceDB.open(newer).close()
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(ExperienceError, match="newer kernelpilot") as info:
        ExperienceDB.open(newer)
    assert "upgrade" in info.value.hint
    with pytest.raises(ExperienceError, match="is a folder"):
        ExperienceDB.open(tmp_path)


def test_the_environment_variable_picks_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KERNELPILOT_EXPERIENCE", raising=False)
    assert default_db_path() == tmp_path / "home" / "experience.db"
    target = tmp_path / "elsewhere" / "team.db"
    monkeypatch.setenv("KERNELPILOT_EXPERIENCE", str(target))
    assert default_db_path() == target
    with ExperienceDB.open() as log:
        assert log.path == target
        log.add(entry())
    assert target.is_file() and not (tmp_path / "home").exists()


def test_two_handles_on_one_file_see_each_others_entries(tmp_path):
    path = tmp_path / "shared.db"
    with ExperienceDB.open(path) as a, ExperienceDB.open(path) as b:
        assert a.add(entry(source="s:a")) and b.add(entry(source="s:b"))
        assert not b.add(entry(source="s:a"))
        assert len(a.list()) == len(b.list()) == 2


def test_no_torch_import():
    code = ("import sys, kernelpilot.experience, kernelpilot.api.experience, kernelpilot.cli.experience; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------------------------------------- the guide


def test_every_guide_entry_has_a_source_tags_from_the_vocabulary_and_a_unique_id():
    entries = guide_entries()
    assert len({e.id for e in entries}) == len(entries)
    for e in entries:
        assert e.source.startswith("https://") and e.source_title
        assert e.tags and set(e.tags) <= set(TAG_PATTERNS), e.id
        assert e.id.startswith(f"{e.backend}-{e.bottleneck}-")
    for backend in ("triton", "cuda"):
        for cls in ("memory", "compute", "latency", "occupancy"):
            assert 5 <= len(guide_for(cls, backend)) <= 8, (cls, backend)


def test_guide_for_other_classes_and_bad_names():
    small = guide_for("small_grid")
    assert small and all("grid-size" in e.tags for e in small)
    assert guide_for("balanced") == [] and guide_for("unknown", "cuda") == []
    with pytest.raises(OptionError):
        guide_for("disk")
    with pytest.raises(OptionError):
        guide_for("memory", "opencl")


def test_a_card_move_links_to_the_guide():
    assert "triton-latency-num-stages" in guide_ids_for(role_tags(["stages"]), "latency")
    assert guide_ids_for(role_tags(["group"]), "memory") == ["triton-memory-l2-grouping"]
    assert role_tags(["warps", "tile", "unknown"]) == ["num_warps", "block_size"]


def test_bottleneck_classes_are_the_cards():
    from kernelpilot.profile.card import CardClass

    assert BOTTLENECK_CLASSES == get_args(CardClass)


# ------------------------------------------------------------------------------------ from optimize and tune


def _ev(**kw: Any):
    from kernelpilot.records.evaluation import Evaluation

    base: dict[str, Any] = dict(config={"BLOCK": 64, "num_warps": 4}, status="ok", duration_ns=100.0)
    base.update(kw)
    return Evaluation(**base)


def _move(tunable: str, old: Any, new: Any):
    from kernelpilot.records.evaluation import Move

    return Move(tunable=tunable, old=old, new=new, direction="up" if new > old else "down", rule="card:memory",
                why="more loads in flight", expected_metric="dram", expected="up")


def test_entries_from_an_optimize_run():
    v0 = _ev(index=0, accepted=True, bound="memory", static={"registers_per_thread": 32})
    v1 = _ev(index=1, parent=0, move=_move("num_warps", 4, 8), duration_ns=80.0, speedup_vs_parent=1.25,
             accepted=True, static={"registers_per_thread": 40}, config={"BLOCK": 64, "num_warps": 8})
    v2 = _ev(index=2, parent=1, move=_move("BLOCK", 64, 128), duration_ns=90.0, speedup_vs_parent=80 / 90,
             accepted=False, decision_detail={"ratio": 1.12, "ci_low": 1.08, "ci_high": 1.15}, config={"BLOCK": 128})
    v3 = _ev(index=3, parent=1, move=_move("BLOCK", 64, 32), duration_ns=81.0, speedup_vs_parent=80 / 81,
             accepted=False, decision_detail={"ratio": 1.01, "ci_low": 0.98, "ci_high": 1.03}, config={"BLOCK": 32})
    v4 = _ev(index=4, parent=1, move=_move("num_warps", 8, 16), status="compile_error", duration_ns=None)
    v5 = _ev(index=5, parent=1, move=_move("num_warps", 8, 32), status="pruned", duration_ns=None)
    for v in (v2, v3, v4, v5):  # each config is its parent's with the move applied: the change is computed from them
        v.config = {**v1.config, **v.config, v.move.tunable: v.move.new}
    got = entries_from_optimize([v0, v1, v2, v3, v4, v5], run="r", kernel="softmax", kernel_type="softmax",
                                arch="sm_90")
    assert [(e.source, e.outcome) for e in got] == [("optimize:r/v1", "improved"), ("optimize:r/v2", "regressed"),
                                                    ("optimize:r/v3", "neutral"), ("optimize:r/v4", "invalid")]
    v1e = got[0]
    assert v1e.bottleneck == "memory" and v1e.speedup == pytest.approx(1.25)
    assert v1e.tags == ["num_warps", "num_warps-up"] and v1e.change.startswith("num_warps 4→8")
    assert v1e.metrics_moved == {"duration_ns": pytest.approx(-0.2), "registers_per_thread": pytest.approx(0.25)}
    assert got[3].speedup is None


def test_entry_from_a_tune_run():
    evs = [_ev(accepted=True), _ev(config={"BLOCK": 128, "num_warps": 8}, duration_ns=50.0, accepted=True),
           _ev(config={"BLOCK": 256, "num_warps": 8}, duration_ns=40.0, accepted=False), _ev(status="timeout")]
    e = entry_from_tune(evs, run="t1", kernel="vector_add", kernel_type="vector_add", strategy="guided")
    assert e is not None and e.outcome == "improved" and e.speedup == pytest.approx(2.0)
    assert e.source == "tune:t1" and "block-up" in e.tags and "num_warps-up" in e.tags
    assert entry_from_tune([_ev(status="timeout")], run="t", kernel="k", kernel_type="other") is None


# ---------------------------------------------------------------------------------------------------- the CLI


runner = CliRunner()


def cli(*args: str) -> tuple[int, Any]:
    from kernelpilot.cli import app

    result = runner.invoke(app, ["experience", *args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_cli_json_outputs(tmp_path):
    log = str(tmp_path / "x.db")
    code, added = cli("add", "--db", log, "--kernel", "softmax", "--kernel-type", "softmax", "--change",
                      "vectorize loads", "--outcome", "improved", "--speedup", "1.3", "--metric",
                      "duration_ns=-0.23", "--bottleneck", "memory", "--arch", "sm_90")
    assert code == 0 and added["added"] is True and added["entry"]["tags"] == ["vectorize"]
    assert added["entry"]["metrics_moved"] == {"duration_ns": -0.23} and added["db"] == log
    entry_file = tmp_path / "e.json"
    entry_file.write_text(json.dumps(entry("fuse the passes").as_record()))
    code, again = cli("add", "--db", log, "--file", str(entry_file))
    assert code == 0 and again["added"] is True
    assert cli("add", "--db", log, "--file", str(entry_file))[1]["added"] is False
    code, rec = cli("recommend", "--db", log, "--kernel-type", "softmax", "--bottleneck", "memory")
    assert code == 0 and {r["tag"] for r in rec["recommendations"]} == {"vectorize", "fusion"}
    assert set(rec["recommendations"][0]) >= {"tag", "n_tried", "n_improved", "n_failed", "median_speedup",
                                              "similarity", "score", "warning", "examples", "guide"}
    code, found = cli("search", "--db", log, "vectorize", "loads")
    assert code == 0 and [e["change"] for e in found["entries"]] == ["vectorize loads"]
    code, listed = cli("list", "--db", log, "--tag", "fusion")
    assert code == 0 and len(listed["entries"]) == 1 and len(listed["entries"][0]["key"]) == 64
    code, stats = cli("stats", "--db", log)
    assert code == 0 and stats["total"] == 2 and stats["by_outcome"] == {"improved": 2}
    code, exported = cli("export", str(tmp_path / "x.jsonl"), "--db", log)
    assert code == 0 and exported["written"] == 2
    code, imported = cli("import", str(tmp_path / "x.jsonl"), "--db", str(tmp_path / "y.db"))
    assert code == 0 and (imported["read"], imported["added"]) == (2, 2)
    code, merged = cli("merge", log, "--db", str(tmp_path / "y.db"))
    assert code == 0 and (merged["added"], merged["total"]) == (0, 2)
    code, masked = cli("mask", "session:r1/v1", "--db", log)
    assert code == 0 and masked["entries"] == 1
    code, guide = cli("guide", "--bottleneck", "memory", "--backend", "cuda")
    assert code == 0 and all(g["source"].startswith("https://") for g in guide["entries"])


def test_cli_errors_exit_non_zero_with_a_json_error(tmp_path):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_text("not a database" * 100)
    code, err = cli("stats", "--db", str(corrupt))
    assert code == 1 and err["error"] == "ExperienceError" and str(corrupt) in err["message"] and err["hint"]
    code, err = cli("list", "--db", str(tmp_path))
    assert code == 1 and err["error"] == "ExperienceError" and "folder" in err["message"]
    code, err = cli("import", str(tmp_path / "none.jsonl"), "--db", str(tmp_path / "x.db"))
    assert code == 1 and err["error"] == "ExperienceError"
    code, err = cli("merge", str(tmp_path / "none.db"), "--db", str(tmp_path / "x.db"))
    assert code == 1 and err["error"] == "ExperienceError"
    code, err = cli("recommend", "--bottleneck", "disk", "--db", str(tmp_path / "x.db"))
    assert code == 2 and err["error"] == "OptionError"
    code, err = cli("add", "--kernel", "k", "--db", str(tmp_path / "x.db"))
    assert code == 2 and "outcome" in err["message"] and "change" in err["message"]
    code, err = cli("guide", "--bottleneck", "disk")
    assert code == 2 and err["error"] == "OptionError"
