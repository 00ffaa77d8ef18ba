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


class RacingTwoWorkerReplay(TwoWorkerReplay):
    """Two workers that also record the time each batch was raced against."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.races: list[float | None] = []

    def map(self, configs, race_against_ns=None):
        self.races.append(race_against_ns)
        return super().map(configs, race_against_ns)


def test_a_known_plan_is_measured_a_window_at_a_time_racing_the_incumbent():
    """An exhaustive plan over several workers goes to the runner in windows (``plan_ahead``), not as one batch of
    the whole space: each window after the first races against the incumbent judged so far, and every planned
    config is answered once."""
    from kernelpilot.app.tune import _prefetch

    runner = RacingTwoWorkerReplay(DATA / "softmax-h100.jsonl")
    space = SearchSpace(TUNABLES, ["num_stages == 2"])
    tuner = Tuner(space, runner, budget=Budget(), ab_samples=0, race=True)
    strat = get_strategy("exhaustive")
    _prefetch(strat, tuner, 0, START)
    strat.search(space, tuner, seed=0, start=START)
    window = max(runner.batches)
    assert len(runner.batches) >= 3 and window <= 8 * runner.parallel  # windows, not one batch of the plan
    assert runner.races[0] is None  # nothing judged before the first window
    assert all(r is not None for r in runner.races[1:])  # later windows race the incumbent of their moment
    assert runner.races[-1] <= runner.races[1]  # which only gets faster
    assert len({e.key for e in tuner.order}) == len(tuner.order) == space.size
    assert sum(runner.batches) + runner.singles == tuner.n_new


def test_plan_ahead_refuses_an_empty_window():
    tuner = Tuner(SearchSpace(TUNABLES), TwoWorkerReplay(DATA / "softmax-h100.jsonl"), budget=Budget())
    with pytest.raises(ValueError, match="window"):
        tuner.plan_ahead([START], 0)


class _TimedWorker:
    """A stand-in for :class:`kernelpilot.search.worker.Worker`: answers after ``delay_s``, noting what it ran."""

    def __init__(self, name: str, delay_s: float, fail_on: str | None = None) -> None:
        self.name, self.delay_s, self.fail_on, self.ran = name, delay_s, fail_on, []

    def evaluate(self, config, race_against_ns=None):
        import time

        from kernelpilot.search.model import Evaluation

        if config["id"] == self.fail_on:
            raise RuntimeError(f"worker {self.name} broke on {config['id']}")
        time.sleep(self.delay_s)
        self.ran.append(config["id"])
        return Evaluation(config=config, status="ok", duration_ns=1000.0, worker=self.name)


def _pool(*workers):
    from kernelpilot.search.worker import WorkerPool

    pool = WorkerPool.__new__(WorkerPool)  # no processes: the dispatch is what is tested
    pool.workers, pool._closed = list(workers), False
    return pool


def test_the_pool_hands_each_config_to_the_first_free_worker_and_yields_in_order():
    """A slow device does not hold a fixed share of the configs: the fast one takes the rest; results come in input
    order, each as soon as it and those before it are in."""
    slow, fast = _TimedWorker("slow", 0.4), _TimedWorker("fast", 0.01)
    configs = [{"id": str(i)} for i in range(12)]
    got = list(_pool(slow, fast).map(configs))
    assert [e.config["id"] for e in got] == [c["id"] for c in configs]
    assert len(fast.ran) >= 9 and len(slow.ran) + len(fast.ran) == 12  # a fixed split would give each 6


def test_a_worker_exception_reaches_the_caller():
    broken, fine = _TimedWorker("a", 0.01, fail_on="3"), _TimedWorker("b", 0.05)
    with pytest.raises(RuntimeError, match="broke on 3"):
        list(_pool(broken, fine).map([{"id": str(i)} for i in range(8)]))


class ConcurrentReplay(RacingTwoWorkerReplay):
    """Two workers that take requests from several threads: each window's map notes how many evaluations the
    main thread had judged when it started."""

    concurrent = True

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.judged_at_start: list[int] = []
        self.tuner = None

    def map(self, configs, race_against_ns=None):
        self.judged_at_start.append(len(self.tuner.order))
        return super().map(configs, race_against_ns)


def _exhaustive(runner, budget: Budget):
    from kernelpilot.app.tune import _prefetch

    space = SearchSpace(TUNABLES, ["num_stages == 2"])
    tuner = runner.tuner = Tuner(space, runner, budget=budget, ab_samples=0, race=True)
    strat = get_strategy("exhaustive")
    _prefetch(strat, tuner, 0, START)
    try:
        strat.search(space, tuner, seed=0, start=START)
    except BudgetExhausted:
        pass
    tuner.finish_plan()
    return tuner, space


def test_with_a_concurrent_runner_the_next_window_is_measured_while_this_one_is_judged():
    runner = ConcurrentReplay(DATA / "softmax-h100.jsonl")
    tuner, space = _exhaustive(runner, Budget())
    window = 8 * runner.parallel
    # window k (k >= 1) started before window k-1 was judged: at most (k-1) windows judged, not k
    assert len(runner.judged_at_start) >= 3
    assert all(n <= (k - 1) * window for k, n in enumerate(runner.judged_at_start[1:], 1))
    assert len({e.key for e in tuner.order}) == len(tuner.order) == space.size  # each config answered once
    assert sum(runner.batches) + runner.singles == tuner.n_new


def test_a_concurrent_plan_keeps_the_evaluation_budget():
    runner = ConcurrentReplay(DATA / "softmax-h100.jsonl")
    tuner, _ = _exhaustive(runner, Budget(max_evals=20))
    assert tuner.budget.evals <= 20 and tuner.n_new <= 20


def test_a_window_whose_map_raised_raises_in_the_search():
    class Broken(ConcurrentReplay):
        def map(self, configs, race_against_ns=None):
            if self.batches:
                raise RuntimeError("the second window's workers are gone")
            return super().map(configs, race_against_ns)

    with pytest.raises(RuntimeError, match="second window"):
        _exhaustive(Broken(DATA / "softmax-h100.jsonl"), Budget())


def test_a_spent_budget_ends_the_search_before_waiting_for_a_compile():
    """Once the budget is spent, the next config ends the search at once: no wait for its compile-ahead verdict
    (up to 30 s per config; an H200 run waited that long after its 200 s budget)."""
    import time

    from kernelpilot.engine.seams import PrunerBase

    class SlowCompiles(PrunerBase):
        def __init__(self):
            self.asked: list[dict] = []

        def reason(self, config):
            self.asked.append(config)
            time.sleep(0.2)
            return None

    pruner = SlowCompiles()
    space = SearchSpace(TUNABLES, ["num_stages == 2"])
    tuner = Tuner(space, ReplayRunner(DATA / "softmax-h100.jsonl"), budget=Budget(max_evals=1), pruner=pruner,
                  ab_samples=0)
    tuner(START)
    with pytest.raises(BudgetExhausted):
        tuner({**START, "num_warps": 8})
    assert pruner.asked == [START]
