"""The next change: the card's suggested changes become one-variable moves; tried configs are never repeated."""

from __future__ import annotations

from kernelpilot.profile.card import BottleneckCard, CardChange
from kernelpilot.profile.patterns import TunableStep
from kernelpilot.search.guided import config_key, neighbour, propose_moves, tunable_role

MATMUL = {"BLOCK_M": [32, 64, 128], "BLOCK_N": [32, 64, 128], "BLOCK_K": [32, 64], "GROUP_M": [1, 8],
          "num_warps": [2, 4, 8], "num_stages": [2, 3, 4]}
START = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 3}


def card(*changes, class_="balanced"):
    """A card whose suggested changes are ``changes``: (action, [(role, direction)], code_change)."""
    return BottleneckCard(**{"class": class_}, kernel_name="k", rule="test", summary="test card",
                          suggested_changes=[CardChange(action=a, why="because", code_change=code,
                                                        tunables=[TunableStep(role=r, direction=d) for r, d in steps],
                                                        patterns=[f"class:{class_}"])
                                             for a, steps, code in changes])


def test_roles():
    assert [tunable_role(n) for n in ("BLOCK_SIZE", "BLOCK_M", "BLOCK_K", "num_warps", "num_stages", "GROUP_M", "X")] \
        == ["tile", "tile", "tile_k", "warps", "stages", "group", "other"]


def test_neighbour_respects_ends_and_numeric_order():
    assert neighbour([256, 64, 128], 128, "up") == 256
    assert neighbour([64, 128], 64, "down") is None


def test_card_order_is_move_order_and_code_changes_are_skipped():
    c = card(("use tl.dot", [], True), ("fewer stages", [("stages", "down")], False),
             ("larger tiles", [("tile", "up")], False))
    moves = propose_moves(START, MATMUL, [], card=c)
    assert [(m.tunable, m.new) for m in moves[:3]] == [("num_stages", 2), ("BLOCK_M", 128), ("BLOCK_N", 128)]
    assert moves[0].rule == "class:balanced" and moves[0].why.startswith("fewer stages")
    assert all(m.direction in ("up", "down") for m in moves)


def test_tried_configs_are_skipped_and_exploration_follows():
    c = card(("more stages", [("stages", "up")], False))
    tried = {config_key({**START, "num_stages": 4})}
    moves = propose_moves(START, MATMUL, tried, card=c)
    assert all(config_key(m.apply(START)) not in tried for m in moves)
    assert moves[0].rule.startswith("exploration after the card")


def test_no_card_explores_and_exhaustion_returns_nothing():
    space = {"BLOCK": [64, 128], "num_warps": [4]}
    moves = propose_moves({"BLOCK": 64, "num_warps": 4}, space, [])
    assert [(m.tunable, m.new) for m in moves] == [("BLOCK", 128)]
    assert moves[0].rule == "exploration (no profile)"
    assert propose_moves({"BLOCK": 64, "num_warps": 4}, space, [config_key({"BLOCK": 128, "num_warps": 4})]) == []
