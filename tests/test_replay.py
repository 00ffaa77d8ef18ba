"""Strategies compared by replay on measurements from the device (tests/data/search, filled on an H100 by
scripts/issue4-device.sh): no GPU, every answer from the cache, the incumbent decided on stored samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.search.cache import NotInCache, ReplayRunner
from kernelpilot.search.model import Budget, BudgetExhausted
from kernelpilot.search.space import SearchSpace
from kernelpilot.search.strategies import get_strategy
from kernelpilot.search.tune import Tuner

DATA = Path(__file__).parent / "data" / "search"
SOFTMAX_TUNABLES = {"BLOCK_N": [128, 256, 512, 1024, 2048, 4096, 8192], "ROWS_PER_PROGRAM": [1, 2, 4],
                    "num_warps": [1, 2, 4, 8, 16], "num_stages": [1, 2, 3]}
MATMUL_TUNABLES = {"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256], "BLOCK_K": [32, 64, 128],
                   "GROUP_M": [1, 8], "num_warps": [2, 4, 8], "num_stages": [2, 3, 4, 5]}
SPACES = {
    "softmax": (SOFTMAX_TUNABLES, ["num_stages == 2"], {"BLOCK_N": 256, "ROWS_PER_PROGRAM": 1, "num_warps": 4,
                                                        "num_stages": 2}),
    "matmul": (MATMUL_TUNABLES, ["GROUP_M == 8", "BLOCK_K <= 64", "num_warps >= 4", "num_stages >= 3",
                                 "num_stages <= 4"], {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8,
                                                       "num_warps": 4, "num_stages": 3}),
}


def _replay(name: str, strategy: str, seed: int = 0, budget: int | None = None):
    tunables, constraints, start = SPACES[name]
    space = SearchSpace(tunables, constraints)
    runner = ReplayRunner(DATA / f"{name}-h100.jsonl")
    tuner = Tuner(space, runner, budget=Budget(max_evals=budget or space.size), ab_samples=0, race=False)
    try:
        get_strategy(strategy).search(space, tuner, seed=seed, start=start)
    except BudgetExhausted:
        pass
    return space, runner, tuner


def _best_ns(runner: ReplayRunner) -> float:
    return min(e.duration_ns for e in runner.evaluations() if e.ok and not e.message.startswith("raced out"))


@pytest.mark.parametrize("name", ["softmax", "matmul"])
def test_cache_covers_the_constrained_space(name):
    tunables, constraints, _ = SPACES[name]
    space, runner = SearchSpace(tunables, constraints), ReplayRunner(DATA / f"{name}-h100.jsonl")
    assert space.size >= 100
    assert all(c in runner for c in space.configs()), "every config of the space was measured on the device"
    with pytest.raises(NotInCache):
        runner({**space.configs()[0], "num_warps": 3})


@pytest.mark.parametrize("name", ["softmax", "matmul"])
def test_exhaustive_replay_finds_the_cached_best(name):
    space, runner, tuner = _replay(name, "exhaustive")
    assert len(tuner.order) == space.size
    assert tuner.incumbent is not None
    # the incumbent is decided with statistics: it is the fastest or indistinguishable from it on stored samples
    assert tuner.incumbent.duration_ns <= _best_ns(runner) * 1.03


@pytest.mark.parametrize("strategy", ["random", "local", "bayes", "guided"])
def test_every_strategy_gets_within_3_percent_on_softmax(strategy):
    space, runner, tuner = _replay("softmax", strategy, seed=1)
    target = _best_ns(runner) * 1.03
    reached = next((i for i, e in enumerate(tuner.order, 1) if e.ok and e.duration_ns <= target), None)
    assert reached is not None and reached < space.size
    keys = [e.key for e in tuner.order]
    assert len(keys) == len(set(keys)), "replay never answers the same config twice"
