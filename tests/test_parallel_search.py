"""Adaptive strategies over several workers: each step proposes one config per worker and the tuner measures the
batch in parallel (``Tuner.many`` -> the pool's ``map``), then judges the results one by one in order.

The runner is the replay of device measurements (tests/data/search) with two "workers": its ``map`` answers a
batch and records its size, as a two-GPU :class:`kernelpilot.search.worker.WorkerPool` would measure it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.engine.runner import ReplayRunner
from kernelpilot.search.model import Budget, BudgetExhausted
from kernelpilot.search.space import SearchSpace
from kernelpilot.search.strategies import get_strategy
from kernelpilot.search.tune import Tuner

DATA = Path(__file__).parent / "data" / "search"
TUNABLES = {"BLOCK_N": [128, 256, 512, 1024, 2048, 4096, 8192], "ROWS_PER_PROGRAM": [1, 2, 4],
            "num_warps": [1, 2, 4, 8, 16], "num_stages": [1, 2, 3]}
START = {"BLOCK_N": 256, "ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 2}


class TwoWorkerReplay(ReplayRunner):
    """The softmax cache answered as if by two workers: ``parallel`` 2 and a ``map`` that logs batch sizes."""

    parallel = 2

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.batches: list[int] = []
        self.singles = 0

    def map(self, configs, race_against_ns=None):
        configs = list(configs)
        self.batches.append(len(configs))
        return [self(c) for c in configs]

    def evaluate(self, config, race_against_ns=None):
        self.singles += 1
        return self(config)


def _search(strategy: str, runner: ReplayRunner, budget: int, seed: int = 0) -> Tuner:
    space = SearchSpace(TUNABLES, ["num_stages == 2"])
    tuner = Tuner(space, runner, budget=Budget(max_evals=budget), ab_samples=0, race=False)
    try:
        get_strategy(strategy).search(space, tuner, seed=seed, start=START)
    except BudgetExhausted:
        pass
    return tuner


@pytest.mark.parametrize("strategy", ["guided", "local", "bayes"])
def test_adaptive_strategies_measure_batches_over_the_workers(strategy):
    if strategy == "bayes":
        pytest.importorskip("optuna")
    runner = TwoWorkerReplay(DATA / "softmax-h100.jsonl")
    tuner = _search(strategy, runner, budget=24)
    assert tuner.n_new == 24 and len({e.key for e in tuner.order}) == len(tuner.order)  # nothing measured twice
    assert runner.batches and max(runner.batches) >= 2
    if strategy != "local":  # one config per worker per step; local measures a whole neighbourhood at once
        assert max(runner.batches) == 2
    in_batches = sum(runner.batches)
    assert in_batches >= tuner.n_new * 0.6, (runner.batches, runner.singles)  # most of the work was parallel
    assert in_batches + runner.singles == tuner.n_new
    assert tuner.incumbent is not None and tuner.incumbent.ok


def test_one_worker_is_the_sequential_walk():
    """With one worker the guided walk is the same as before batching: same configs in the same order."""
    class OneWorker(TwoWorkerReplay):
        parallel = 1

    one = _search("guided", OneWorker(DATA / "softmax-h100.jsonl"), budget=15)
    plain = _search("guided", ReplayRunner(DATA / "softmax-h100.jsonl"), budget=15)
    assert [e.key for e in one.order] == [e.key for e in plain.order]


def test_a_batch_never_exceeds_the_budget():
    runner = TwoWorkerReplay(DATA / "softmax-h100.jsonl")
    tuner = _search("local", runner, budget=5)
    assert tuner.n_new == 5 and tuner.budget.evals == 5
