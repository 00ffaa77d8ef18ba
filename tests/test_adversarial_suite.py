"""The adversarial suite through `kernelpilot verify` on the CPU (Triton interpreter): every cheat that a CPU can
expose is refused at the stage its manifest names, every honest control is accepted. The GPU-only cases run in
scripts/device-integrity.sh (docs/device-runs/2026-11-24-h100/adversarial-gpu.json)."""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = [c for c in json.loads((ROOT / "tests" / "adversarial" / "cases.json").read_text()) if not c["needs_gpu"]]


#: Where a ``traced`` cheat notes each launch it cut short (its trigger rests on the host's timing).
TRACE_DIR = Path(tempfile.mkdtemp(prefix="kp-cheat-trace-"))


#: Runs of a traced case that must all accept it while it cut launches short before the test fails: the timing
#: stage compares a secret random sample of the timed launches (up to 8 of about 21 under the interpreter), so a
#: cheat that happened to cut only a few of them (a loaded host) escapes one run by chance (7 cut of 21: 1.5 %);
#: three runs in a row about 3 in a million times, while a check that kept no timed launch fails every time.
TRACED_RUNS = 3


@pytest.fixture(scope="module")
def runner():
    spec = importlib.util.spec_from_file_location("kp_adversarial_runner", ROOT / "scripts" / "adversarial.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def _tracing():
    os.environ["KERNELPILOT_CHEAT_TRACE_DIR"] = str(TRACE_DIR)  # the workers inherit it
    try:
        yield
    finally:
        del os.environ["KERNELPILOT_CHEAT_TRACE_DIR"]


@pytest.fixture(scope="module")
def outcomes(runner) -> dict[str, dict]:
    with _tracing(), ThreadPoolExecutor(max_workers=2) as pool:  # each case in its own isolated worker process
        return {r["file"]: r for r in pool.map(runner.run_case, CASES)}


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_case_is_caught_at_its_stage(runner, outcomes: dict[str, dict], case: dict) -> None:
    got = outcomes[case["file"]]
    trace = TRACE_DIR / f"{Path(case['file']).stem}.log"
    cut = ""
    for _ in range(TRACED_RUNS - 1):  # accepted while it cut launches short: again (the sample may have missed them)
        if not (case.get("traced") and got["observed"] == "none" and trace.exists()):
            break
        cut = trace.read_text()
        trace.unlink()
        with _tracing():
            got = runner.run_case(case)
    if case.get("traced") and got["observed"] == "none":
        # a loaded host spaced the timed launches too far for the trigger: accepted only if no launch was cut short
        assert not trace.exists(), (f"{case['file']} cut launches short and was accepted in {TRACED_RUNS} runs "
                                    f"in a row: {trace.read_text()[:300]} (first runs: {cut[:200]})")
        return
    # a catch that rests on the secret sample of timed launches may fall to the later stage the manifest names
    assert got["observed"] in (case["stage"], case.get("stage_sampled")), \
        f"{case['file']}: {got['status']}: {got['message']}"
    assert (got["observed"] == "none") == (case["kind"] in ("honest", "defused"))
