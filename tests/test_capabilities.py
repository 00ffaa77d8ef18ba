"""Capabilities on the protocols that use them (issue 28): the optional parts of a Runner (``timeout_s``, ``knows``,
``audits``/``audit``, ``ab_error``, ``abort``), a Pruner (``failure``, ``facts``), a Recorder (``skipped``,
``describe``), a StopRule (``version_cap``), a Strategy (``plan``, ``search_first``) and what a strategy calls, an
Evaluate (``parallel``, ``many``), are declared, have their defaults in a base class, and are called directly: no
``getattr``/``hasattr`` probe on those objects is left in the package."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from kernelpilot.engine.evaluator import (Evaluator, MaxVersions, Pruner, PrunerBase, Recorder, RecorderBase,
                                          TargetMet)
from kernelpilot.engine.runner import ReplayRunner, Runner, RunnerBase
from kernelpilot.engine.stops import StopRule, StopRuleBase
from kernelpilot.errors import KernelFailed, SearchError
from kernelpilot.progress import ProgressLine
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.search.model import Budget, BudgetExhausted, Evaluate, EvaluateBase, OneByOne
from kernelpilot.search.ray_pool import RayPool
from kernelpilot.search.space import SearchSpace
from kernelpilot.search.strategies import STRATEGIES, Strategy, StrategyBase, get_strategy, register
from kernelpilot.search.worker import WorkerPool
from kernelpilot.versions.candidates import SampledOnce, VersionRunner, version_config

SRC = Path(__file__).resolve().parents[1] / "src" / "kernelpilot"
SPACE = SearchSpace({"B": [1, 2, 3, 4]})


class Timed(RunnerBase):
    """A runner with a fixed time per config (``1000 / B`` ns, no noise) that logs what it was asked."""

    parallel = 1

    def __init__(self) -> None:
        self.asked: list[str] = []

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        self.asked.append(f"evaluate {config['B']}")
        t = 1000.0 / config["B"]
        return Evaluation(config=config, status="ok", duration_ns=t, samples_ns=[t] * 5, wall_s=0.1)

    def map(self, configs: Any, race_against_ns: float | None = None) -> Any:
        return iter([self.evaluate(c) for c in configs])

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> None:
        return None


class Auditing(Timed):
    """A runner that audits: B = 4 launches work on a stream it never joins."""

    audits = True
    timeout_s = 30.0

    def audit(self, config: dict[str, Any]) -> dict[str, Any] | None:
        self.asked.append(f"audit {config['B']}")
        return {"status": "unjoined_stream", "message": "work on an unjoined stream"} if config["B"] == 4 else None


def test_a_runner_that_audits_is_audited_before_a_config_leads_and_one_that_does_not_is_never_asked():
    runner = Auditing()
    ev = Evaluator(SPACE, runner, ab_samples=0, race=False)
    first, faster, cheat = ev({"B": 1}), ev({"B": 2}), ev({"B": 4})
    assert runner.asked == ["evaluate 1", "audit 1", "evaluate 2", "audit 2", "evaluate 4", "audit 4"]
    assert first.accepted and faster.accepted and "audit" in faster.phases_s
    assert cheat.status == "unjoined_stream" and cheat.accepted is None and ev.incumbent is faster
    assert ev.timeout_s == 30.0 and cheat.timeout_s == 30.0  # the runner's declared limit, recorded with each answer
    plain = Timed()
    ev = Evaluator(SPACE, plain, ab_samples=0, race=False)
    led = ev({"B": 4})
    assert plain.asked == ["evaluate 4"] and led.accepted and "audit" not in led.phases_s
    assert ev.timeout_s is None and led.timeout_s is None


def test_a_runner_that_does_not_know_a_config_skips_it_without_a_run():
    class Partial(Timed):
        def knows(self, config: dict[str, Any]) -> bool:
            return config["B"] != 3

    runner = Partial()
    ev = Evaluator(SPACE, runner, ab_samples=0, race=False)
    got = ev({"B": 3})
    assert got.status == "not_in_cache" and got.index is None and runner.asked == []
    assert ev({"B": 2}).ok and runner.asked == ["evaluate 2"]


def test_a_pruners_failure_status_replaces_pruned_and_the_base_prunes_nothing():
    class Hung(PrunerBase):
        def reason(self, config: dict[str, Any]) -> str | None:
            return "its compile hung" if config["B"] in (2, 3) else None

        def failure(self, config: dict[str, Any]) -> str | None:
            return "timeout" if config["B"] == 2 else None

    runner = Timed()
    ev = Evaluator(SPACE, runner, pruner=Hung(), ab_samples=0, race=False)
    assert ev({"B": 1}).ok  # a first config that hung would stop the search (engine/guards.py)
    assert [ev({"B": b}).status for b in (2, 3)] == ["timeout", "pruned"] and runner.asked == ["evaluate 1"]
    base = PrunerBase()
    assert base.reason({"B": 1}) is None and base.failure({"B": 1}) is None and base.facts({"B": 1}) is None


def test_a_recorder_names_the_progress_line_or_leaves_it_to_the_evaluator():
    lines: list[str] = []

    class Plain(RecorderBase):
        def before(self, index: int, config: dict[str, Any], parent: Any, move: Any, incumbent: Any) -> None:
            pass

        def after(self, ev: Evaluation, incumbent: Evaluation | None) -> Evaluation:
            return ev

    class Named(Plain):
        def describe(self, ev: Evaluation) -> str | None:
            return f"version {ev.index}"

    def log(line: ProgressLine) -> None:
        lines.append(str(line))

    Evaluator(SPACE, Timed(), recorder=Plain(), ab_samples=0, race=False, log=log)({"B": 1})
    Evaluator(SPACE, Timed(), recorder=Named(), ab_samples=0, race=False, log=log)({"B": 1})
    assert "eval 1" in lines[0] and "version 0" not in lines[0]
    assert "version 0" in lines[1] and "eval 1" not in lines[1]
    skipped = Evaluation(config={"B": 9}, status="invalid_config")
    assert Plain().skipped(skipped) is skipped  # the base records a skipped config nowhere


def test_only_a_stop_rule_that_caps_versions_bounds_the_estimate():
    assert MaxVersions(2).version_cap() == 2 and TargetMet(90.0, {}).version_cap() is None
    assert Evaluator(SPACE, Timed(), stop=[MaxVersions(2)]).total_estimate() == 2
    assert Evaluator(SPACE, Timed(), stop=[TargetMet(90.0, {})]).total_estimate() == SPACE.size


def test_abort_defaults_to_close_and_the_pools_declare_what_they_do():
    closed: list[str] = []

    class Closing(Timed):
        def close(self) -> None:
            closed.append("close")

    Closing().abort()
    assert closed == ["close"]
    assert WorkerPool.audits is True and WorkerPool.abort is not RunnerBase.abort
    assert ReplayRunner.audits is False and ReplayRunner.timeout_s is None


def test_every_strategy_declares_plan_and_search_first_and_registration_refuses_one_that_does_not():
    planned = {n for n in STRATEGIES if get_strategy(n).plan(SPACE, seed=0, start={"B": 1}) is not None}
    assert planned == {"exhaustive", "random"}
    assert {n for n in STRATEGIES if get_strategy(n).search_first} == {"auto"}

    class Bare:
        name = "bare-for-test"

        def search(self, space: Any, evaluate: Any, *, seed: int, start: Any = None) -> None:
            pass

    with pytest.raises(SearchError, match="needs a `plan` method"):
        register(Bare)
    assert "bare-for-test" not in STRATEGIES

    class Based(StrategyBase, Bare):
        name = "based-for-test"

    try:
        assert register(Based) is Based and get_strategy("based-for-test").plan(SPACE, seed=0) is None
    finally:
        STRATEGIES.pop("based-for-test", None)


def test_a_plain_function_evaluates_one_config_at_a_time_and_the_tuner_declares_its_width():
    asked: list[int] = []
    budget = Budget(max_evals=2).start()

    def fn(config: dict[str, Any]) -> Evaluation:
        budget.check()
        budget.charge()
        asked.append(config["B"])
        return Evaluation(config=config, status="ok", duration_ns=1000.0 / config["B"], samples_ns=[1.0] * 5)

    one = OneByOne(fn)
    assert one.parallel == 1
    assert [e.config["B"] for e in one.many([{"B": 3}, {"B": 1}])] == [3, 1] == asked  # input order, one by one
    with pytest.raises(BudgetExhausted):  # the budget stops the rest of a batch
        one.many([{"B": 2}, {"B": 4}])
    assert asked == [3, 1]

    class Wide(Timed):
        parallel = 3

    ev = Evaluator(SPACE, Wide(), ab_samples=0, race=False)
    assert ev.parallel == 3 and [e.config["B"] for e in ev.many([{"B": 2}, {"B": 1}])] == [2, 1]


def test_a_runner_keeps_why_its_ab_failed_and_a_wrapper_passes_it_on():
    failed = KernelFailed("A/B timing hung", failure="timeout")

    class Failing(Timed):
        def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> None:
            return None

        def ab_error(self, config: dict[str, Any]) -> KernelFailed | None:
            return failed if config == version_config(1) else None

    once = SampledOnce(Failing())
    assert once.ab_samples(version_config(1), version_config(0), 5) is None
    assert once.ab_error(version_config(1)) is failed and once.ab_error(version_config(0)) is None
    assert Timed().ab_error(version_config(1)) is None  # the base keeps no error
    assert SampledOnce(Timed()).ab_error(version_config(1)) is None


def _members(protocol: type) -> set[str]:
    """The names a Protocol declares: its methods, properties and annotated attributes (``__call__`` included)."""
    own = {n for n in vars(protocol) if not n.startswith("_") or n == "__call__"}
    return own | set(vars(protocol).get("__annotations__", {}))


#: (protocol, base class with the defaults, what every implementation must define itself)
PROTOCOLS = [
    (Runner, RunnerBase, {"parallel", "evaluate", "map", "ab_samples"}),
    (Pruner, PrunerBase, set()),
    (Recorder, RecorderBase, {"before", "after"}),
    (StopRule, StopRuleBase, {"check"}),
    (Strategy, StrategyBase, {"name", "search"}),
    (Evaluate, EvaluateBase, {"__call__"}),
]

#: the package's implementations of each protocol, each of which the callers use without a probe
IMPLEMENTATIONS = {
    Runner: [WorkerPool, RayPool, ReplayRunner, VersionRunner, SampledOnce],
    Strategy: [get_strategy(n).__class__ for n in sorted(STRATEGIES)],
    StopRule: [MaxVersions, TargetMet],
    Evaluate: [Evaluator, OneByOne],
}


@pytest.mark.parametrize(("protocol", "base", "required"), PROTOCOLS, ids=[p[0].__name__ for p in PROTOCOLS])
def test_every_optional_part_of_a_protocol_has_its_default_in_the_base_and_every_implementation_has_all(
        protocol: type, base: type, required: set[str]):
    members = _members(protocol)
    assert required <= members, f"{protocol.__name__} does not declare {sorted(required - members)}"
    optional = members - required
    assert {n for n in optional if not hasattr(base, n)} == set(), f"{base.__name__} lacks a default"
    public = {n for n in vars(base) if not n.startswith("_")} | set(vars(base).get("__annotations__", {}))
    assert public <= members, f"{base.__name__} has parts {protocol.__name__} does not declare: {sorted(public - members)}"
    for cls in IMPLEMENTATIONS.get(protocol, []):
        missing = {n for n in members if not hasattr(cls, n)} - set(vars(protocol).get("__annotations__", {}))
        assert missing == set(), f"{cls.__name__} lacks {sorted(missing)} of {protocol.__name__}"


def test_the_protocol_list_catches_a_default_the_protocol_does_not_declare():
    class Loose(RunnerBase):
        def warm_up(self) -> None:
            """Not on the Runner protocol."""

    public = {n for n in vars(Loose) if not n.startswith("_")}
    assert public - _members(Runner) == {"warm_up"}
    assert _members(Evaluate) == {"parallel", "__call__", "many"}


#: names the package gives the objects that implement the engine's and the search's protocols
PROTOCOL_OBJECTS = {"runner", "pruner", "recorder", "strategy", "strat", "rule", "replay", "replayer", "evaluate"}


def _probes(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, text)`` of each ``getattr``/``hasattr`` call whose object is named as a protocol object (``runner``,
    ``self.pruner``, ``s.recorder``, ``evaluate``, ...)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and node.args:
            obj = node.args[0]
            name = obj.attr if isinstance(obj, ast.Attribute) else obj.id if isinstance(obj, ast.Name) else None
            if name in PROTOCOL_OBJECTS:
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_probe_scan_finds_a_probe():
    assert _probes(ast.parse("x = getattr(self.runner, 'knows', None)\ny = hasattr(strat, 'plan')\n"
                             "z = getattr(evaluate, 'many', None)")) == [
        (1, "getattr(self.runner, 'knows', None)"), (2, "hasattr(strat, 'plan')"),
        (3, "getattr(evaluate, 'many', None)")]


def test_no_capability_probe_on_a_protocol_object_is_left_in_the_package():
    left = {f"{path.relative_to(SRC).as_posix()}: {text}" for path in sorted(SRC.rglob("*.py"))
            for _line, text in _probes(ast.parse(path.read_text(), str(path)))}
    assert left == set(), sorted(left)
