"""A version's correctness record without what every version repeats (records/checks.py, issue 25 "Records that
scale"): lossless, kept once per run in ``checks.json``, validated by ``report``, and refused by name when the kept
blocks are gone."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from conftest import EXAMPLES
from kernelpilot.records.cards import LIKE
from kernelpilot.records.checks import CHECKS_FILE, pack_checks, read_checks, unpack_checks

ROOT = Path(__file__).resolve().parents[1]
#: a correctness record an H100 wrote for the attention tutorial (two outputs, five seed/shape entries)
GPU_RECORD = ROOT / "docs" / "device-runs" / "2026-11-27-s7" / "call4-attention-check-bn64.json"


def _size(data) -> int:
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False))


def test_a_gpu_correctness_record_packs_to_under_two_thirds_and_unpacks_to_itself():
    record = json.loads(GPU_RECORD.read_text())
    kept: dict = {}
    packed, changed = pack_checks(copy.deepcopy(record), kept)
    assert changed and len(kept) == 2  # rule and tolerances (this record's roles are null)
    assert all(packed[n] == {LIKE: CHECKS_FILE, "id": packed[n]["id"]} for n in ("rule", "tolerances"))
    # seeds are rows of seed_columns, their outputs rows of output_columns; the check's seeds (at the record's shape)
    # write "shape", the audit's derived shapes keep theirs
    cols = packed["seed_columns"]
    assert packed["output_columns"][0] == "name" and cols[0] == "seed" and all(
        isinstance(r, list) and len(r) == len(packed["output_columns"])
        for s in packed["seeds"] for r in s[cols.index("outputs")])
    shapes = [s[cols.index("shape")] for s in packed["seeds"]]
    assert shapes[:3] == ["shape"] * 3 and all(isinstance(x, dict) and x != record["shape"] for x in shapes[3:])
    reasons = [r[packed["output_columns"].index("reason")] for s in packed["seeds"] for r in s[cols.index("outputs")]]
    assert reasons == ["="] * len(reasons)  # every output passed with the sentence its own numbers give
    assert _size(packed) < 0.5 * _size(record), (_size(packed), _size(record))
    assert unpack_checks(packed, kept) == record
    # a second version with the same blocks adds nothing; one with other tolerances adds its own
    assert pack_checks(copy.deepcopy(record), kept) == (packed, False)
    other = {**record, "tolerances": {**record["tolerances"], "extra": 1}}
    again, changed = pack_checks(other, kept)
    assert changed and len(kept) == 3 and unpack_checks(again, kept) == other
    # a block the run does not keep stays a reference; a record written whole (before this) reads as written
    assert unpack_checks(packed, {})["rule"] == packed["rule"]
    assert unpack_checks(record, kept) == record


def test_outputs_with_different_keys_are_written_whole():
    seeds = [{"seed": 0, "outputs": [{"name": "a", "x": 1}, {"name": "b", "y": 2}]}, {"seed": 1, "outputs": []}]
    for seed in seeds:
        packed, _ = pack_checks({"seeds": [seed, {"seed": 2, "outputs": [{"name": "a", "x": 1}]}]}, {})
        assert packed["seeds"][0] == seed and "output_columns" not in packed
    # seeds with different keys stay objects (the outputs may still be rows), and read back as written
    record = {"shape": {"N": 1}, "seeds": [{"seed": 0, "outputs": [{"name": "a"}], "shape": {"N": 1}},
                                           {"seed": 1, "outputs": [{"name": "a"}], "shape": {"N": 1}, "error": "x"}]}
    packed, _ = pack_checks(copy.deepcopy(record), {})
    assert "seed_columns" not in packed and packed["seeds"][1]["error"] == "x"
    assert unpack_checks(packed, {}) == record


def test_a_reason_is_packed_only_when_its_own_numbers_give_it_back():
    """A failed output, and a passed one whose text is not the sentence its numbers give (rounded otherwise,
    edited, another rtol), keep their reason; a passed one that is gets "=" and reads back as the sentence."""
    from kernelpilot.measure.compare import verdict

    ok, text = verdict(4096, 0, 0, None, None, 2.72e-08, 1e-3)
    assert ok and text == "relative L2 error 2.72e-08 <= 0.001; every element and row within tolerance"
    row = {"name": "out", "rel_l2_error": 2.72e-08, "rtol": 1e-3, "passed": True, "reason": text}
    bad = {**row, "passed": False, "reason": "relative L2 error 0.5 > rtol 0.001", "rel_l2_error": 0.5}
    odd = {**row, "reason": text.replace("2.72e-08", "2.7e-08")}
    record = {"shape": {"N": 1}, "seeds": [{"seed": i, "outputs": [o], "shape": {"N": 1}}
                                           for i, o in enumerate((row, bad, odd))]}
    packed, _ = pack_checks(copy.deepcopy(record), {})
    col = packed["output_columns"].index("reason")
    got = [s[packed["seed_columns"].index("outputs")][0][col] for s in packed["seeds"]]
    assert got == ["=", bad["reason"], odd["reason"]]
    assert unpack_checks(packed, {}) == record


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    from kernelpilot import api

    out = tmp_path_factory.mktemp("checks") / "run"
    result = api.optimize(EXAMPLES / "vector_add.py", out=out, iterations=2, benchmark=False)
    assert len(result.versions) == 3
    return out


def test_a_run_keeps_the_repeated_blocks_once_and_report_reads_every_record_whole(run):
    from kernelpilot.app.validate import validate_run
    from kernelpilot.measure.correctness import CorrectnessResult

    kept = read_checks(run)
    assert kept and (run / CHECKS_FILE).is_file()
    for vdir in sorted(run.glob("v*/")):
        written = json.loads((vdir / "correctness.json").read_text())
        assert written["rule"][LIKE] == CHECKS_FILE and written["roles"][LIKE] == CHECKS_FILE
        whole = CorrectnessResult.model_validate(unpack_checks(written, kept))
        assert whole.passed and whole.rule and set(whole.roles.tensors) == {"x", "y", "out"}
        assert whole.seeds and all([o.name for o in s.outputs] == ["out"] and s.outputs[0].passed
                                   for s in whole.seeds)
    assert validate_run(run).problems == []


def test_report_names_the_kept_blocks_when_they_are_gone(run, tmp_path):
    from kernelpilot.app.validate import validate_run

    damaged = tmp_path / "run"
    shutil.copytree(run, damaged, symlinks=True)
    (damaged / CHECKS_FILE).write_text("{}\n")
    problems = validate_run(damaged).problems
    assert any(p.file == CHECKS_FILE and "changed since it was committed" in p.problem for p in problems), problems
    assert any(p.file.endswith("correctness.json") and "schema" in p.problem for p in problems), problems
