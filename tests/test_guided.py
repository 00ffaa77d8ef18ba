"""The next change: the verdict picks one tunable and a direction; tried configs are never repeated."""

from __future__ import annotations

from types import SimpleNamespace as NS

from kernelpilot.search.guided import config_key, neighbour, propose_moves, tunable_role

MATMUL = {"BLOCK_M": [32, 64, 128], "BLOCK_N": [32, 64, 128], "BLOCK_K": [32, 64], "GROUP_M": [1, 8],
          "num_warps": [2, 4, 8], "num_stages": [2, 3, 4]}
START = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 3}


def verdict(bound, occupancy_bound=False, limiter=None):
    return NS(bound=bound, occupancy_bound=occupancy_bound, occupancy_limiter=limiter, summary="")


def metrics(**kw):
    base = dict(waves_per_sm=4.0, dram_pct=30.0, top_stalls=[], theoretical_occupancy_pct=50.0,
                achieved_occupancy_pct=45.0, occupancy_limiter=None)
    return NS(**{**base, **kw})


def first(v, m, config=START, tried=()):
    return propose_moves(config, MATMUL, tried, verdict=v, metrics=m)[0]


def test_roles():
    assert [tunable_role(n) for n in ("BLOCK_SIZE", "BLOCK_M", "BLOCK_K", "num_warps", "num_stages", "GROUP_M", "X")] \
        == ["tile", "tile", "tile_k", "warps", "stages", "group", "other"]


def test_neighbour_respects_ends_and_numeric_order():
    assert neighbour([256, 64, 128], 128, "up") == 256
    assert neighbour([64, 128], 64, "down") is None


def test_small_grid_shrinks_tiles():
    m = first(verdict("small-grid"), metrics(waves_per_sm=0.4))
    assert (m.tunable, m.new, m.direction) == ("BLOCK_M", 32, "down")
    assert m.expected_metric == "waves_per_sm" and "0.40" in m.expected


def test_register_limited_occupancy_shrinks_tiles_and_shared_limited_drops_stages():
    m = first(verdict("occupancy", True, "registers"), metrics())
    assert m.tunable in ("BLOCK_M", "BLOCK_N") and m.direction == "down"
    m = first(verdict("occupancy", True, "shared_mem"), metrics())
    assert (m.tunable, m.new) == ("num_stages", 2)


def test_memory_bound_with_few_bytes_in_flight_grows_tiles():
    m = first(verdict("memory"), metrics(dram_pct=40.0))
    assert m.direction == "up" and tunable_role(m.tunable) == "tile"
    assert "40 %" in m.why and m.expected_metric == "dram_pct"


def test_latency_with_long_scoreboard_adds_stages():
    m = first(verdict("latency"), metrics(top_stalls=[NS(reason="long_scoreboard", ratio=5.0)]))
    assert (m.tunable, m.new) == ("num_stages", 4)


def test_long_scoreboard_wins_over_register_occupancy():
    """Seen on the H200 (matmul 128x64x32, 25 % occupancy, long-scoreboard ratio 10): pipeline deeper first."""
    long_sb = [NS(reason="long_scoreboard", ratio=10.2)]
    m = first(verdict("occupancy", True, "registers"), metrics(top_stalls=long_sb))
    assert (m.tunable, m.new) == ("num_stages", 4) and m.rule == "long-scoreboard latency"
    weak = [NS(reason="long_scoreboard", ratio=2.0)]  # under the > 3 threshold: occupancy rule applies
    m = first(verdict("occupancy", True, "registers"), metrics(top_stalls=weak))
    assert m.direction == "down" and m.rule == "occupancy limited by registers"


def test_balanced_adds_stages_then_grouping():
    moves = propose_moves(START, MATMUL, [], verdict=verdict("balanced"), metrics=metrics())
    assert [(m.tunable, m.new) for m in moves[:2]] == [("num_stages", 4), ("GROUP_M", 8)]


def test_tried_configs_are_skipped_and_exploration_follows():
    tried = {config_key({**START, "num_stages": 4}), config_key({**START, "GROUP_M": 8})}
    moves = propose_moves(START, MATMUL, tried, verdict=verdict("balanced"), metrics=metrics())
    assert all(config_key(m.apply(START)) not in tried for m in moves)
    assert moves[0].tunable == "BLOCK_M" and moves[0].new == 128
    assert any(m.rule.startswith("exploration") for m in moves)


def test_no_profile_explores_and_exhaustion_returns_nothing():
    space = {"BLOCK": [64, 128], "num_warps": [4]}
    moves = propose_moves({"BLOCK": 64, "num_warps": 4}, space, [])
    assert [(m.tunable, m.new) for m in moves] == [("BLOCK", 128)]
    assert moves[0].rule == "exploration (no profile)"
    assert propose_moves({"BLOCK": 64, "num_warps": 4}, space, [config_key({"BLOCK": 128, "num_warps": 4})]) == []
