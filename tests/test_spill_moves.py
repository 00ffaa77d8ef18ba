"""Spills as seen in the binary drive the guided search (issue 15, last bullet): static pruning's facts mark an
evaluation (``static["spills"]``) and the guided strategy's next move from a spilling incumbent reduces the tile,
the stages and the warps before anything else."""

from __future__ import annotations

from typing import Any

from kernelpilot.engine.evaluator import Evaluator, PrunerBase
from kernelpilot.search.guided import propose_moves
from kernelpilot.search.model import Evaluation, OneByOne
from kernelpilot.search.space import SearchSpace
from kernelpilot.search.strategies.guided import GuidedStrategy

TUNABLES = {"BLOCK_M": [32, 64, 128], "num_warps": [2, 4, 8], "num_stages": [2, 3, 4]}
MID = {"BLOCK_M": 64, "num_warps": 4, "num_stages": 3}


def test_a_spilling_binary_moves_tile_stages_warps_down_first_without_a_card() -> None:
    moves = propose_moves(MID, TUNABLES, [], spills=12)
    assert [(m.tunable, m.new) for m in moves[:3]] == [("BLOCK_M", 32), ("num_stages", 2), ("num_warps", 2)]
    assert all(m.rule == "binary spills" and "12" in m.why for m in moves[:3])
    plain = propose_moves(MID, TUNABLES, [])
    assert plain[0].rule.startswith("exploration") and (plain[0].tunable, plain[0].new) == ("BLOCK_M", 128)
    assert propose_moves(MID, TUNABLES, [], spills=0)[0].rule.startswith("exploration")


class _Pruner(PrunerBase):
    """A compile-ahead stand-in: no config pruned; the binary of BLOCK_M=128 spills."""

    def reason(self, config: dict[str, Any]) -> str | None:
        return None

    def facts(self, config: dict[str, Any]) -> dict[str, Any] | None:
        return {"registers_per_thread": 255, "spills": 40 if config["BLOCK_M"] == 128 else 0}


def test_the_evaluator_marks_spilling_configs_and_guided_steps_down_from_them() -> None:
    space = SearchSpace({"BLOCK_M": [32, 64, 128], "num_warps": [4, 8]})
    order: list[dict[str, Any]] = []

    def evaluate(config: Any) -> Evaluation:
        cfg = getattr(config, "config", config)
        order.append(dict(cfg))
        facts = _Pruner().facts(cfg)
        # the fastest config spills; the strategy must try the smaller tile next, not the other neighbours first
        return Evaluation(config=cfg, status="ok", duration_ns=1000.0 / cfg["BLOCK_M"], static=facts, accepted=True)

    GuidedStrategy(card_for=lambda ev: None).search(space, OneByOne(evaluate), seed=0,
                                                    start={"BLOCK_M": 128, "num_warps": 4})
    assert order[:2] == [{"BLOCK_M": 128, "num_warps": 4}, {"BLOCK_M": 64, "num_warps": 4}]  # not warps up first


def test_evaluator_attaches_the_pruners_binary_facts() -> None:
    ev = Evaluation(config={"BLOCK_M": 128}, status="ok", duration_ns=5.0)
    fake = Evaluator.__new__(Evaluator)
    fake.pruner = _Pruner()
    marked = Evaluator._with_static(fake, ev, {"BLOCK_M": 128})
    assert marked.static["spills"] == 40 and ev.static == {}
    kept = ev.model_copy(update={"static": {"spills": 1}})
    assert Evaluator._with_static(fake, kept, {"BLOCK_M": 128}).static == {"spills": 1}
    fake.pruner = None
    assert Evaluator._with_static(fake, ev, {"BLOCK_M": 128}) is ev
