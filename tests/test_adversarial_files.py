"""The adversarial suite's own files (tests/adversarial): the manifest is complete, every file loads and runs under
the Triton interpreter, each cheat is a *working* cheat (right where it means to be right, wrong where it means to
be caught), and the static screen refuses exactly the cheats whose stage is ``screen``.

These tests check the suite, not kernelpilot's verdicts on it: the harness's own stages are tested against the
manifest by the hardening work (CPU stages in CI, GPU-only ones on the device).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.measure.screen import screen_file

SUITE = Path(__file__).resolve().parent / "adversarial"
CASES = json.loads((SUITE / "cases.json").read_text())
STAGES = {"screen", "timer_guard", "check", "shapes", "recheck", "device_activity", "declaration", "floor", "none"}
FIELDS = {"file", "kind", "what", "source", "expected", "stage", "needs_gpu", "correct_at_cpu_shape"}
IDS = [c["file"] for c in CASES]


def test_manifest_is_complete_and_consistent():
    on_disk = {f"{d}/{p.name}" for d in ("cheats", "honest") for p in (SUITE / d).glob("*.py")}
    assert {c["file"] for c in CASES} == on_disk
    assert len(IDS) == len(set(IDS))
    for case in CASES:
        assert FIELDS <= set(case), case
        assert case["kind"] in ("cheat", "honest") and case["stage"] in STAGES
        assert case["expected"] == ("accepted" if case["kind"] == "honest" else "rejected")
        assert (case["stage"] == "none") == (case["kind"] == "honest")
        assert isinstance(case["needs_gpu"], bool) and case["what"].strip() and case["source"].strip()
        assert case["file"].startswith(f"{'honest' if case['kind'] == 'honest' else 'cheats'}/")
        assert case.get("fools") in (None, "reference_after_kernel", "allclose")
    cheats = [c for c in CASES if c["kind"] == "cheat"]
    assert len(cheats) >= 20 and len(CASES) - len(cheats) >= 4
    honest_text = " ".join((SUITE / c["file"]).read_text() for c in CASES if c["kind"] == "honest")
    assert '"inplace": ["x"]' in honest_text and "wait_stream" in honest_text


@pytest.fixture(scope="module")
def cpu_rows() -> dict[str, dict]:
    """Every manifest file run once by tests/adversarial/run_cpu.py (one process, a forked child per file)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, str(SUITE / "run_cpu.py")], capture_output=True, text=True, env=env,
                          timeout=600, cwd=SUITE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {row["file"]: row for row in json.loads(proc.stdout)}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_file_loads_and_runs_under_the_interpreter(case, cpu_rows):
    row = cpu_rows[case["file"]]
    assert row["loaded"] and row["error"] is None, row


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_cheats_work_and_honest_files_are_right(case, cpu_rows):
    """A cheat meant to be right at CPU_SHAPE is right on its first call (under the comparison used before
    hardening); one that is wrong on purpose is wrong, and fools the naive comparison its manifest names."""
    row = cpu_rows[case["file"]]
    assert row["matches"] == case["correct_at_cpu_shape"], row
    if case.get("fools") == "reference_after_kernel":
        assert row["reference_after_kernel"], row
    if case.get("fools") == "allclose":
        assert row["allclose_after_load"], row
    if case["kind"] == "honest":
        assert row["matches_halved"] and row["recheck_stale_matches"] and row["recheck_poisoned_matches"], row
    if case["stage"] == "shapes":
        assert not row["matches_halved"], row
    if case["stage"] == "recheck":  # fresh values in the same tensors after 20 calls: the stale result shows
        assert not row["recheck_stale_matches"], row


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_screen_refuses_exactly_the_screen_stage(case):
    report = screen_file(SUITE / case["file"])
    assert report.refused == (case["stage"] == "screen"), report.lines()
