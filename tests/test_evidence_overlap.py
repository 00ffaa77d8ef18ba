"""A new incumbent's GPU-free card (a light card: a compile on the CPU) is made while the worker audits the same
config, so the incumbent waits for the longer of the two, not their sum (session 13: on the attention tutorial's
H200 run, audits took 2.1-4.6 s and light cards 0.9-3.5 s per incumbent, one after the other). An ncu card shares
the GPU with nothing: it waits for the audit. A card of a config the audit refuses is dropped."""

from __future__ import annotations

import threading
import time
from typing import Any

from kernelpilot.engine.evaluator import Evaluator
from kernelpilot.engine.runner import RunnerBase
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.search.space import SearchSpace

SPACE = SearchSpace({"B": [1, 2, 3, 4]})
WORK_S = 0.3


class Log:
    """(what, config B, start, end) of every audit and card, from any thread."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, int, float, float]] = []
        self.lock = threading.Lock()

    def timed(self, what: str, b: int) -> None:
        t0 = time.monotonic()
        time.sleep(WORK_S)
        with self.lock:
            self.spans.append((what, b, t0, time.monotonic()))

    def span(self, what: str, b: int) -> tuple[float, float]:
        return next((s, e) for w, bb, s, e in self.spans if w == what and bb == b)


class AuditingRunner(RunnerBase):
    """1000 / B ns per config; its audit takes WORK_S and refuses B = 4."""

    parallel, audits, timeout_s = 1, True, 30.0

    def __init__(self, log: Log) -> None:
        self.log = log

    def evaluate(self, config: dict[str, Any], race_against_ns: float | None = None) -> Evaluation:
        t = 1000.0 / config["B"]
        return Evaluation(config=config, status="ok", duration_ns=t, samples_ns=[t] * 5, wall_s=0.1, measured=True)

    def map(self, configs: Any, race_against_ns: float | None = None) -> Any:
        return iter([self.evaluate(c) for c in configs])

    def ab_samples(self, a: dict[str, Any], b: dict[str, Any], n: int) -> None:
        return None

    def audit(self, config: dict[str, Any]) -> dict[str, Any] | None:
        self.log.timed("audit", config["B"])
        return {"status": "unjoined_stream", "message": "work on an unjoined stream"} if config["B"] == 4 else None


class Cards:
    """An evidence source whose card takes WORK_S; ``gpu`` says whether it profiles on the GPU."""

    def __init__(self, log: Log, gpu: bool) -> None:
        self.log, self.gpu = log, gpu
        self.thread_names: list[str] = []

    def needs_gpu(self, ev: Evaluation) -> bool:
        return self.gpu

    def warm(self, config: dict[str, Any]) -> None:
        self.warmed = [*getattr(self, "warmed", []), dict(config)]

    def evidence(self, ev: Evaluation) -> Evaluation:
        self.thread_names.append(threading.current_thread().name)
        self.log.timed("card", ev.config["B"])
        return ev.model_copy(update={"card": {"class": "memory"}, "bound": "memory", "verdict_summary": "card"})


def _run(gpu: bool) -> tuple[Log, Cards, list[Evaluation], Evaluator]:
    log = Log()
    cards = Cards(log, gpu)
    ev = Evaluator(SPACE, AuditingRunner(log), evidence=cards, ab_samples=0, race=False)
    return log, cards, [ev({"B": 1}), ev({"B": 2}), ev({"B": 4})], ev


def test_a_light_card_is_made_while_the_worker_audits_and_kept_with_its_own_seconds():
    log, cards, (first, faster, _), ev = _run(gpu=False)
    for b in (1, 2):
        (a0, a1), (c0, c1) = log.span("audit", b), log.span("card", b)
        assert c0 < a1 and a0 < c1, f"B={b}: the card and the audit did not overlap"
    assert all(name.startswith("kp-card") for name in cards.thread_names)
    assert faster.accepted and faster.card == {"class": "memory"} and faster.bound == "memory"
    assert WORK_S * 0.9 <= faster.phases_s["evidence"] < 2 * WORK_S  # the card's own seconds, not the wait
    assert ev.incumbent is not None and ev.incumbent.config == {"B": 2} and ev.incumbent.card is not None


def test_an_ncu_card_waits_for_the_audit_and_a_refused_configs_card_is_dropped():
    log, cards, (_, faster, cheat), ev = _run(gpu=True)
    for b in (1, 2):
        (_, a1), (c0, _) = log.span("audit", b), log.span("card", b)
        assert c0 >= a1, f"B={b}: an ncu card started before the audit ended"
    assert cards.thread_names and not any(n.startswith("kp-card") for n in cards.thread_names)
    assert cheat.status == "unjoined_stream" and cheat.card is None and ev.incumbent is faster
    assert not any(what == "card" and b == 4 for what, b, *_ in log.spans)  # no ncu run for a refused config
    _, _, (_, _, cheat_light), _ = _run(gpu=False)
    assert cheat_light.status == "unjoined_stream" and cheat_light.card is None and cheat_light.accepted is None


def test_only_the_first_configs_card_and_drawn_shapes_are_started_before_it_is_measured():
    """Later leaders hide their compiles behind the A/B timing (CompileAhead.warm before the A/B); the first has
    none, so its light card's compile and its drawn shapes' compiles start when it is sent to be measured."""
    from kernelpilot.engine.seams import PrunerBase

    class Pruner(PrunerBase):
        def __init__(self) -> None:
            self.warmed: list[dict[str, Any]] = []

        def warm(self, config: dict[str, Any]) -> None:
            self.warmed.append(dict(config))

    log, pruner = Log(), Pruner()
    cards = Cards(log, gpu=False)
    ev = Evaluator(SPACE, AuditingRunner(log), evidence=cards, pruner=pruner, ab_samples=0, race=False)
    ev({"B": 1})
    assert cards.warmed == [{"B": 1}] and pruner.warmed == [{"B": 1}]
    ev({"B": 2})  # faster: the pruner compiles its drawn shapes before the A/B; its card is made beside the audit
    assert cards.warmed == [{"B": 1}] and pruner.warmed == [{"B": 1}, {"B": 2}]
    ev({"B": 3})  # 333 ns against B=2's 500 ns: about to lead, warmed too
    assert pruner.warmed[-1] == {"B": 3} and cards.warmed == [{"B": 1}]
