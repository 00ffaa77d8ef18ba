"""Typed failures from real broken ``@triton.jit`` kernels under the Triton interpreter (CPU): a search survives a
compile error, NaN, a wrong result, an endless loop (the timeout) and a segfaulting worker, records each as typed
data in the cache, and still finds the good config after them.

The kernel file is tests/data/broken/modes.py: one tunable, MODE, with the failures first and ``ok`` last. On a GPU
machine the same file is searched compiled by tests/test_tune_gpu.py (there ``illegal`` is an illegal memory
access); here the interpreter runs it, so this module is skipped where a GPU is present.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import has_gpu

pytestmark = pytest.mark.skipif(has_gpu(), reason="interpreter run; the compiled run is tests/test_tune_gpu.py")

BROKEN = Path(__file__).parent / "data" / "broken" / "modes.py"
TIMEOUT_S = 20
# MODE -> the status the search must record under the interpreter. ``illegal`` stores 2**40 elements past the
# output without a mask: the interpreter writes through that raw host address and the worker dies of SIGSEGV.
EXPECTED = {"compile_error": "compile_error", "nan": "nan", "wrong": "wrong_result", "hang": "timeout",
            "illegal": "worker_crash", "ok": "ok"}


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """One exhaustive search of the broken kernel (shared by the tests below: the hang costs TIMEOUT_S)."""
    from kernelpilot.search.tune import tune

    root = tmp_path_factory.mktemp("broken")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELPILOT_HOME", str(root / "home"))
        mp.setenv("KERNELPILOT_CACHE", str(root / "cache"))
        t0 = time.monotonic()
        result = tune(BROKEN, strategy="exhaustive", prune=False, timeout_s=TIMEOUT_S, ab_samples=3,
                      out=root / "run")
        wall = time.monotonic() - t0
        t1 = time.monotonic()
        rerun = tune(BROKEN, strategy="exhaustive", prune=False, timeout_s=TIMEOUT_S, ab_samples=3)
        rerun_wall = time.monotonic() - t1
    return {"result": result, "wall": wall, "rerun": rerun, "rerun_wall": rerun_wall, "root": root}


def test_every_broken_config_gets_its_typed_status(searched):
    r = searched["result"]
    order = [e.config["MODE"] for e in r.evaluations]
    assert order == list(EXPECTED), "exhaustive visits TUNABLES in order: every failure before the ok config"
    got = {e.config["MODE"]: e.status for e in r.evaluations}
    assert got == EXPECTED
    by = {e.config["MODE"]: e for e in r.evaluations}
    assert "power of 2" in by["compile_error"].message  # the front end's own error, not a simulated one
    assert "NaN/Inf" in by["nan"].message
    assert "elements outside" in by["wrong"].message
    assert f"no answer within {TIMEOUT_S} s" in by["hang"].message
    assert by["illegal"].message.startswith("worker process died (exit code -")  # killed by a signal
    assert r.failures == {s: 1 for s in EXPECTED.values() if s != "ok"}
    assert not r.measured and all(e.worker == "cpu" for e in r.evaluations)


def test_the_search_goes_on_in_a_fresh_worker(searched):
    r = searched["result"]
    assert r.stopped == "strategy finished" and r.n_new == len(EXPECTED)
    last = r.evaluations[-1]
    assert last.config["MODE"] == "ok" and last.status == "ok" and last.duration_ns
    assert r.best is not None and r.best.config["MODE"] == "ok"
    # the hang and the dead process each cost one worker; nothing else does
    assert r.worker_restarts == 2
    md = (searched["root"] / "run" / "tune.md").read_text()
    assert "worker restarts 2" in md and "| timeout | 1 |" in md and "| worker_crash | 1 |" in md
    assert searched["wall"] < TIMEOUT_S + 70, f"the search took {searched['wall']:.0f} s"


def test_every_failure_is_in_the_cache_and_a_rerun_runs_nothing(searched):
    files = list((searched["root"] / "cache").glob("*.jsonl"))
    assert len(files) == 1
    lines = [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]
    assert lines[0]["kind"] == "kernelpilot.cache" and lines[0]["context"]["interpreted"] is True
    cached = {rec["evaluation"]["config"]["MODE"]: rec["evaluation"]["status"] for rec in lines[1:]}
    assert cached == EXPECTED
    rerun = searched["rerun"]
    assert rerun.n_new == 0 and rerun.n_cached == len(EXPECTED) and rerun.worker_restarts == 0
    assert {e.config["MODE"]: e.status for e in rerun.evaluations} == EXPECTED
    assert searched["rerun_wall"] < TIMEOUT_S, "the hang is answered from the cache, not run again"


def test_interpreter_front_end_faults_classify_as_compile_errors():
    """Under the interpreter a config that would not compile raises an InterpreterError at launch; the front
    end's error (non-power-of-2 tl.arange) and a failed tl.static_assert are compile errors, as when compiled."""
    import torch
    import triton
    import triton.language as tl

    from kernelpilot.kernels.contract import load_kernel, make_case, run_kernel
    from kernelpilot.search.worker import classify_exception

    kf = load_kernel(BROKEN, interpreted=True)
    case = make_case(kf, {"N": 64}, 0, "cpu")
    with pytest.raises(Exception) as arange:
        run_kernel(kf, case.inputs, {"MODE": "compile_error", "BLOCK": 64})
    assert type(arange.value).__name__ == "InterpreterError"
    assert classify_exception(arange.value) == "compile_error"

    @triton.jit
    def _asserting(out_ptr, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK <= 32, "BLOCK too large for this kernel")
        tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))

    with pytest.raises(Exception) as static:
        _asserting[(1,)](torch.empty(64), BLOCK=64)
    assert "BLOCK too large" in str(static.value)
    assert classify_exception(static.value) == "compile_error"

    @triton.jit
    def _assuming(x_ptr, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        tl.assume(x > 0)  # the interpreter checks it on the data: a fault of the running program, not of compiling

    with pytest.raises(Exception) as runtime:
        _assuming[(1,)](-torch.ones(16), BLOCK=16)
    assert "Assume failed" in str(runtime.value)
    assert classify_exception(runtime.value) == "runtime_error"
