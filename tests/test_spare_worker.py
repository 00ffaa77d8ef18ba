"""The spare worker: started by ``prepare`` before the FLOP count, taken over by the search's first worker."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from kernelpilot.app.context import prepare
from kernelpilot.app.tune import make_runner
from kernelpilot.search.worker import Worker

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vector_add.py"


def test_the_search_takes_over_the_spare_prepare_started():
    ctx = prepare(EXAMPLE, spare_worker=True)
    pid = ctx.spare._proc.pid
    pool = make_runner(ctx, ref=None, timeout_s=120)
    try:
        assert ctx.spare is None  # handed over: nobody else can take it
        ev = pool.evaluate(ctx.start)
        assert ev.status == "ok", ev.message
        assert pool.workers[0]._proc.pid == pid and pool.restarts == 0
    finally:
        pool.close()


def test_a_spare_for_other_options_is_killed_and_a_fresh_worker_starts():
    ctx = prepare(EXAMPLE, spare_worker=True)
    spare = ctx.spare
    proc = spare._proc
    other = spare.opts.model_copy(update={"shape": {**spare.opts.shape, "N": 1000}})
    worker = Worker(other, spare.device, spare=spare)
    try:
        ev = worker.evaluate(ctx.start)
        assert ev.status == "ok", ev.message
        assert worker._proc.pid != proc.pid
        proc.join(timeout=10)
        assert not proc.is_alive()
    finally:
        worker.close()


def test_an_unused_spare_dies_with_its_context():
    ctx = prepare(EXAMPLE, spare_worker=True)
    proc = ctx.spare._proc
    del ctx
    gc.collect()
    proc.join(timeout=10)
    assert not proc.is_alive()


def test_no_spare_unless_asked():
    assert prepare(EXAMPLE).spare is None


@pytest.mark.gpu
def test_gpu_the_floor_reaches_a_spare_started_before_it_was_known():
    """The spare boots with no floor; the floor arrives with the options once it is ready. A floor of one second
    makes every real time impossible, so ``impossible`` proves the child judged with it."""
    ctx = prepare(EXAMPLE, spare_worker=True, shape={"N": 1 << 20})
    assert ctx.roofline is not None and ctx.spare.opts.floor_ns is None
    # both floors: the one reported and the datasheet's, which sets how far under the first a time may fall
    ctx.roofline = ctx.roofline.model_copy(update={"floor_ns": 1e9, "physical_floor_ns": 1e9})
    pid = ctx.spare._proc.pid
    pool = make_runner(ctx, ref=None, timeout_s=120)
    try:
        ev = pool.evaluate(ctx.start)
        assert pool.workers[0]._proc.pid == pid
        assert ev.status == "impossible", (ev.status, ev.message)
    finally:
        pool.close()


@pytest.mark.parametrize("command", ["tune", "optimize"])
def test_a_run_that_fails_before_its_first_worker_kills_the_spare(command, tmp_path, monkeypatch):
    """A run folder that is not empty stops tune and optimize after prepare started the spare: it must not outlive
    the call (an API user's process would keep a booted worker, and on a GPU its CUDA context)."""
    import kernelpilot.app.context as context
    from kernelpilot.app.optimize import optimize
    from kernelpilot.app.tune import tune
    from kernelpilot.errors import KernelpilotError

    procs = []
    real = context._spare

    def spy(*args):
        spare = real(*args)
        procs.append(spare._proc)
        return spare

    monkeypatch.setattr(context, "_spare", spy)
    (tmp_path / "taken").write_text("x")
    with pytest.raises(KernelpilotError, match="empty|exists|not") as raised:
        if command == "tune":
            tune(EXAMPLE, out=tmp_path, budget_evals=1)
        else:
            optimize(EXAMPLE, out=tmp_path, iterations=1)
    assert len(procs) == 1 and raised.tb is not None  # the traceback (and with it the run's frames) still held
    procs[0].join(timeout=10)
    assert not procs[0].is_alive()
