"""A live search whose best was answered from the evaluation cache measures it again before printing it
(kernelpilot.engine.verify_best): a line signed with the user's key (which kernel code can read) whose time was
never run is not reproduced, and the search's best is the live measurement."""

from __future__ import annotations

import numpy as np

from kernelpilot.engine.evaluator import Evaluator
from kernelpilot.engine.verify_best import remeasure_cached_best
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.search.cache import CacheContext, EvaluationCache
from kernelpilot.search.runner_base import RunnerBase
from kernelpilot.search.space import SearchSpace

SPACE = SearchSpace({"B": [1, 2, 3, 4]}, [])
CONTEXT = CacheContext(kernel="k", kernel_sha256="cd" * 32, shape={"N": 1}, gpu="NVIDIA H200", driver="580",
                       torch="2.11", triton="3.6", python="3.11", interpreted=False)


class Timed(RunnerBase):
    """Measures config B at ``1000 * B`` ns (2 % noise) and counts its runs."""

    parallel = 1

    def __init__(self, fail: bool = False) -> None:
        self.rng, self.runs, self.fail = np.random.default_rng(0), 0, fail

    def evaluate(self, config, race_against_ns=None):
        self.runs += 1
        if self.fail:
            return Evaluation(config=config, status="wrong_result", message="3 of 8 rows wrong", worker="cuda:0")
        s = list(1000.0 * config["B"] * (1 + 0.02 * self.rng.standard_normal(20)))
        return Evaluation(config=config, status="ok", duration_ns=float(np.median(s)), samples_ns=s, wall_s=0.2,
                          worker="cuda:0")

    def map(self, configs, race_against_ns=None):
        return iter([self.evaluate(c) for c in configs])

    def ab_samples(self, a, b, n):
        return None

    def close(self):
        pass


def _forged(cache: EvaluationCache) -> None:
    """A line for B=2 at 300 ns, signed with this user's key as a kernel that read the key would sign it."""
    s = [300.0, 301.0, 299.0, 300.5, 299.5]
    cache.put(Evaluation(config={"B": 2}, status="ok", duration_ns=300.0, samples_ns=s, wall_s=0.2, worker="cuda:0"))


def test_a_best_answered_from_a_forged_line_is_measured_again_and_not_reproduced(tmp_path) -> None:
    cache = EvaluationCache(CONTEXT, tmp_path)
    _forged(cache)
    runner = Timed()
    ev = Evaluator(SPACE, runner, cache=cache)
    for b in (2, 1, 3):
        ev({"B": b})
    assert ev.incumbent.config == {"B": 2} and ev.incumbent.cached and ev.incumbent.duration_ns == 300.0
    assert runner.runs == 2  # B=1 was turned away by the stored median: not faster than 300 ns
    note = remeasure_cached_best(ev, lambda _m: None)
    assert runner.runs == 3 and note is not None and "not reproduced" in note
    best = ev.incumbent
    assert best is ev.order[-1] and not best.cached and 1900 < best.duration_ns < 2100 and best.accepted
    assert best.index == len(ev.versions) - 1 and ev.history[-1].duration_ns == best.duration_ns
    assert EvaluationCache(CONTEXT, tmp_path).get({"B": 2}).duration_ns == best.duration_ns  # the line replaced


def test_an_honest_cached_best_is_reproduced_and_a_live_best_is_not_measured_again(tmp_path) -> None:
    cache = EvaluationCache(CONTEXT, tmp_path)
    warm = Evaluator(SPACE, Timed(), cache=cache)
    for b in (1, 2):
        warm({"B": b})
    assert remeasure_cached_best(warm) is None  # measured in this run
    runner = Timed()
    again = Evaluator(SPACE, runner, cache=EvaluationCache(CONTEXT, tmp_path))
    for b in (1, 2):
        again({"B": b})
    assert runner.runs == 0 and again.incumbent.cached
    note = remeasure_cached_best(again)
    assert runner.runs == 1 and "re-measured live" in note and "not reproduced" not in note


def test_a_cached_best_that_fails_now_leaves_no_best(tmp_path) -> None:
    cache = EvaluationCache(CONTEXT, tmp_path)
    _forged(cache)
    ev = Evaluator(SPACE, Timed(fail=True), cache=cache)
    ev({"B": 2})
    note = remeasure_cached_best(ev)
    assert ev.incumbent is None and "failed now (wrong_result" in note and ev.order[-1].status == "wrong_result"
