"""Static pruning overlapped with measurement: configs compile for sm_90 in a background process pool while the
workers measure, in the order the strategy will ask for them; a config asked for before its compile finished is
measured unchecked instead of keeping the GPU idle."""

from __future__ import annotations

import time

from kernelpilot.api import bundled_example
from kernelpilot.search.model import config_key
from kernelpilot.search.space import SearchSpace
from kernelpilot.search.strategies import get_strategy
from kernelpilot.engine.prune import CompileAhead, compile_order
from kernelpilot.app.tune import tune

VECTOR_ADD = bundled_example("vector_add")
SHAPE = {"N": 4096}


def _space() -> SearchSpace:
    from kernelpilot.kernels.contract import load_kernel

    return SearchSpace.from_kernel(load_kernel(VECTOR_ADD, interpreted=True))


def test_compile_order_follows_the_plan_or_the_start_neighbourhood():
    space = _space()
    start = space.configs()[len(space.configs()) // 2]
    guided = compile_order(get_strategy("guided"), space, 0, start)
    assert guided[0] == start and len(guided) == space.size
    assert len({config_key(c) for c in guided}) == space.size
    near = {config_key(n) for n in space.neighbours(start)}
    assert {config_key(c) for c in guided[1:1 + len(near)]} == near  # one step away come next
    rnd = get_strategy("random")
    assert compile_order(rnd, space, 7, start) == list(rnd.plan(space, seed=7, start=start))


def test_a_config_not_compiled_yet_is_measured_unchecked_not_waited_for():
    configs = _space().configs()
    blocking = CompileAhead(VECTOR_ADD, configs, SHAPE, arch="sm_90", max_spills=0, max_workers=1).finish()
    assert blocking.pruned, "max_spills=0 prunes vector_add's spilling config"
    doomed = next(c for c in configs if config_key(c) in blocking.pruned)
    ahead = CompileAhead(VECTOR_ADD, configs, SHAPE, "sm_90", max_spills=0, wait_s=0.0, max_workers=1)
    t0 = time.monotonic()
    assert ahead.reason(doomed) is None and config_key(doomed) in ahead.unchecked  # answered at once
    assert time.monotonic() - t0 < 1.0
    report = ahead.finish()
    assert report.n_compiled == len(configs) and report.unchecked == [config_key(doomed)]
    # once compiled, the verdicts agree with the blocking pruning of the same configs
    assert report.pruned == blocking.pruned and report.by_reason == blocking.by_reason
    # ... but a config already let through stays measurable: its late verdict does not prune it
    assert ahead.reason(doomed) is None and report.unchecked == [config_key(doomed)]


def test_tune_overlaps_compiles_with_measurements_and_reports_them():
    r = tune(VECTOR_ADD, strategy="exhaustive", max_spills=0, ab_samples=3, budget_evals=3, use_cache=False)
    assert r.prune is not None and r.prune.n_configs == r.space_size
    assert 0 < r.prune.n_compiled <= r.space_size
    pruned = [e for e in r.evaluations if e.status == "pruned"]
    assert all(config_key(e.config) in r.prune.pruned for e in pruned)
    assert all(e.wall_s == 0 and not e.samples_ns for e in pruned), "a pruned config never runs"
    assert r.prune.waited_s <= r.wall_s


def test_a_stopping_search_does_not_wait_for_compile_workers_still_booting(tmp_path):
    """A search that ends (budget spent) stops the compile-ahead at once: workers still booting — here a kernel file
    that takes 20 s to import, as torch and a library can on a GPU host — are left to close themselves, and the
    search's end is not held for them (on an H100 each of nine short workload searches waited ~80 s)."""
    slow = tmp_path / "slow_add.py"
    slow.write_text("import time\ntime.sleep(20)\n" + VECTOR_ADD.read_text())
    configs = _space().configs()[:4]
    ahead = CompileAhead(slow, configs, SHAPE, arch="sm_90", max_spills=0, timeout_s=60, max_workers=2)
    time.sleep(1.0)
    t0 = time.monotonic()
    report = ahead.finish(stop=True)
    assert time.monotonic() - t0 < 6.0
    assert report.n_compiled == 0 and report.wall_s > 0

