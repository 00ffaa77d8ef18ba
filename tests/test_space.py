"""The search space: constraints solved by python-constraint2, device limits, safe expressions, neighbourhoods."""

from __future__ import annotations

import itertools
import random
import textwrap

import pytest
from conftest import TORCH_KERNEL

from kernelpilot.errors import SearchError
from kernelpilot.hardware.specs import GpuSpec, find_spec
from kernelpilot.kernels.contract import load_kernel
from kernelpilot.search.space import SearchSpace, limits_from_spec

TUNABLES = {
    "BLOCK_M": [16, 32, 64, 128, 256],
    "BLOCK_N": [16, 32, 64, 128, 256],
    "BLOCK_K": [16, 32, 64, 128],
    "num_warps": [1, 2, 4, 8, 16, 32, 64],
    "num_stages": [1, 2, 3, 4],
}
CONSTRAINTS = [
    "(BLOCK_M + BLOCK_N) * BLOCK_K * 2 * num_stages <= max_shared_mem_per_block_bytes",
    "BLOCK_M * BLOCK_N // (32 * num_warps) <= 256",
    "BLOCK_M >= BLOCK_N or num_stages > 1",
]
LIMITS = {"max_threads_per_block": 1024, "threads_per_warp": 32, "max_shared_mem_per_block_bytes": 101_376}


def brute_force(tunables, predicate):
    """Every config of the product, in tunable/value order, that ``predicate`` accepts."""
    names = list(tunables)
    return [c for c in (dict(zip(names, vals)) for vals in itertools.product(*tunables.values())) if predicate(c)]


def matmul_ok(c, limits=LIMITS):
    return ((c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 * c["num_stages"] <= limits["max_shared_mem_per_block_bytes"]
            and c["BLOCK_M"] * c["BLOCK_N"] // (32 * c["num_warps"]) <= 256
            and (c["BLOCK_M"] >= c["BLOCK_N"] or c["num_stages"] > 1)
            and c["num_warps"] * limits["threads_per_warp"] <= limits["max_threads_per_block"])


@pytest.fixture(scope="module")
def space():
    return SearchSpace(TUNABLES, CONSTRAINTS, LIMITS)


# ------------------------------------------------------------------------------------------------ solving


def test_solution_matches_brute_force_in_lexicographic_order(space):
    expected = brute_force(TUNABLES, matmul_ok)
    assert space.configs() == expected  # same configs, same order (tunables' order, then values' order)
    assert space.size == len(expected) == len(space)
    assert space.total_size == 5 * 5 * 4 * 7 * 4
    assert 0 < space.size < space.total_size
    assert [space.index(c) for c in expected[:50]] == list(range(50))


def test_configs_are_cached_but_returned_as_copies(space):
    first = space.configs()
    first[0]["BLOCK_M"] = 999
    assert space.configs()[0]["BLOCK_M"] == 16


def test_no_constraints_is_the_full_product():
    s = SearchSpace({"a": [3, 1, 2], "b": ["x", "y"]})
    assert s.configs() == [{"a": 3, "b": "x"}, {"a": 3, "b": "y"}, {"a": 1, "b": "x"}, {"a": 1, "b": "y"},
                           {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]  # the given value order, not sorted
    assert s.constraints == []


def test_allowed_syntax_min_max_abs_bitops_not_chained():
    tun = {"a": [1, 2, 3, 4, 8], "b": [0, 1, 2, 4]}
    exprs = ["max(a, b) - min(a, b) <= 3", "abs(a - 2 * b) < 5", "a & (a - 1) == 0", "not (b == 1)",
             "0 <= b < a", "a ** 2 % 3 != 2 or b >> 1 == 0", "-a + +b <= -(-4) and a / 2 >= 0.5"]
    s = SearchSpace(tun, exprs)
    expected = brute_force(tun, lambda c: all(eval(e, {}, dict(c)) for e in exprs))  # test oracle only
    assert s.configs() == expected
    assert 0 < s.size < s.total_size


# ----------------------------------------------------------------------------------------- device limits


def test_device_limit_on_num_warps_added_automatically():
    tun = {"BLOCK": [64, 128], "num_warps": [1, 2, 4, 8, 16, 32, 64]}
    s = SearchSpace(tun, [], {"max_threads_per_block": 1024})
    assert "num_warps * threads_per_warp <= max_threads_per_block" in s.constraints
    assert sorted({c["num_warps"] for c in s.configs()}) == [1, 2, 4, 8, 16, 32]  # 64 * 32 = 2048 > 1024
    assert s.limits["threads_per_warp"] == 32  # the default, filled in
    reason = s.why_invalid({"BLOCK": 64, "num_warps": 64})
    assert "device limit" in reason and "num_warps=64" in reason and "max_threads_per_block=1024" in reason

    wave64 = SearchSpace(tun, [], {"max_threads_per_block": 1024, "threads_per_warp": 64})
    assert max(c["num_warps"] for c in wave64.configs()) == 16

    assert SearchSpace(tun).size == 14  # no limits: nothing added
    assert SearchSpace({"BLOCK": [64]}, [], {"max_threads_per_block": 1024}).constraints == []  # no num_warps


def test_limits_from_spec_h100():
    limits = limits_from_spec(find_spec("H100-SXM"))
    assert limits["max_threads_per_block"] == 1024
    assert limits["threads_per_warp"] == 32
    assert limits["max_shared_mem_per_block_bytes"] == 227 * 1024
    assert limits["sm_count"] == 132
    s = SearchSpace(TUNABLES, CONSTRAINTS, limits)
    assert s.size == len(brute_force(TUNABLES, lambda c: matmul_ok(c, limits)))


def test_limits_from_a_bare_spec_keep_only_the_defaults():
    assert limits_from_spec(GpuSpec(name="bare")) == {"max_threads_per_block": 1024, "threads_per_warp": 32}
    assert limits_from_spec(GpuSpec(name="mi300x", vendor="AMD", arch="gfx942"))["threads_per_warp"] == 64


def test_constraint_on_an_absent_known_limit_is_skipped_and_listed():
    s = SearchSpace({"BLOCK": [64, 128]}, ["BLOCK * 4 <= max_shared_mem_per_block_bytes"])
    assert s.size == 2 and s.constraints == []
    assert s.skipped and "max_shared_mem_per_block_bytes" in s.skipped[0][1]


def test_limits_alone_can_empty_the_space():
    s = SearchSpace({"BLOCK": [64, 128]}, ["sm_count >= 200"], {"sm_count": 132})
    assert s.size == 0 and s.configs() == []
    assert "sm_count >= 200" in s.why_invalid({"BLOCK": 64})


# ---------------------------------------------------------------------------------------- refusals


def test_unknown_name_is_named_and_tunables_listed():
    with pytest.raises(SearchError) as err:
        SearchSpace(TUNABLES, ["BLOCK_M * BLOCK_Q <= 4096"], LIMITS)
    text = str(err.value)
    assert "`BLOCK_Q`" in err.value.message and "CONSTRAINTS[0]" in err.value.message
    assert all(name in err.value.hint for name in TUNABLES)
    assert "max_shared_mem_per_block_bytes" in text  # the limits it could have used


@pytest.mark.parametrize("expr, what", [
    ("__import__('os').system('true')", "call"),
    ("open('x') + 1 > 0", "call"),
    ("BLOCK_M.bit_length() > 2", "call"),
    ("BLOCK_M.real > 2", "attribute"),
    ("[BLOCK_M][0] > 1", "indexing"),
    ("BLOCK_M in (32, 64)", "In"),
    ("BLOCK_M if BLOCK_N else 1", "conditional"),
    ("(x := 3) > 1", "assignment"),
    ("(lambda: 1)() > 0", "call"),
    ("'a' < 'b'", "str constant"),
    ("max(*[BLOCK_M]) > 1", "starred"),
    ("BLOCK_M @ BLOCK_N", "MatMult"),
    ("BLOCK_M is BLOCK_N", "Is"),
    ("BLOCK_M >", "not a Python expression"),
    ("", "non-empty"),
])
def test_forbidden_syntax_is_refused_with_the_expression(expr, what):
    with pytest.raises(SearchError) as err:
        SearchSpace(TUNABLES, [expr], LIMITS)
    assert what.lower() in err.value.message.lower()
    if expr:
        assert expr in err.value.message
    assert "min/max/abs" in err.value.hint or "tunables" in err.value.hint


def test_bad_tunables_refused():
    with pytest.raises(SearchError, match="at least one tunable"):
        SearchSpace({})
    with pytest.raises(SearchError, match="no candidate values"):
        SearchSpace({"BLOCK": []})
    with pytest.raises(SearchError, match="twice"):
        SearchSpace({"BLOCK": [64, 64]})


def test_zero_division_breaks_the_config_other_errors_are_reported():
    s = SearchSpace({"a": [0, 1, 2]}, ["4 // a >= 2"])
    assert s.configs() == [{"a": 1}, {"a": 2}]
    assert not s.is_valid({"a": 0})
    mixed = SearchSpace({"layout": ["row", "col"], "a": [1, 2]}, ["layout < a"])
    with pytest.raises(SearchError, match="TypeError"):
        mixed.configs()


# ---------------------------------------------------------------------------------- validity & queries


def test_is_valid_and_why_invalid(space):
    good = space.configs()[0]
    assert space.is_valid(good) and space.why_invalid(good) is None
    assert "`BLOCK_Q` is not a tunable" in space.why_invalid({**good, "BLOCK_Q": 1})
    missing = dict(good)
    del missing["num_stages"]
    assert "`num_stages` is missing" in space.why_invalid(missing)
    assert "BLOCK_M=48 is not one of" in space.why_invalid({**good, "BLOCK_M": 48})
    assert space.why_invalid({**good, "num_warps": True}) is not None  # True is not the value 1
    smem = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4}
    reason = space.why_invalid(smem)
    assert reason.startswith("breaks the constraint `(BLOCK_M + BLOCK_N) * BLOCK_K")
    assert "max_shared_mem_per_block_bytes=101376" in reason
    assert not space.is_valid(smem)
    with pytest.raises(SearchError, match="not a valid config"):
        space.index(smem)


def test_neighbours_match_brute_force(space):
    valid = {tuple(c.values()) for c in space.configs()}
    names = list(TUNABLES)
    for config in random.Random(1).sample(space.configs(), 25):
        for adjacent in (True, False):
            expected = []
            for t, name in enumerate(names):
                pos = TUNABLES[name].index(config[name])
                options = [pos - 1, pos + 1] if adjacent else range(len(TUNABLES[name]))
                for j in options:
                    if j != pos and 0 <= j < len(TUNABLES[name]):
                        cand = {**config, name: TUNABLES[name][j]}
                        if tuple(cand[n] for n in names) in valid:
                            expected.append(cand)
            got = space.neighbours(config, adjacent=adjacent)
            assert got == expected
            assert all(sum(g[n] != config[n] for n in names) == 1 for g in got)


def test_neighbours_of_an_invalid_config_are_valid_and_outside_configs_refused(space):
    smem = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4}
    assert all(space.is_valid(n) for n in space.neighbours(smem, adjacent=False))
    with pytest.raises(SearchError):
        space.neighbours({**smem, "BLOCK_M": 48})


def test_sample_distinct_valid_uniform_and_seeded(space):
    picks = space.sample(random.Random(7), 40)
    assert len(picks) == 40 and len({tuple(p.values()) for p in picks}) == 40
    assert all(space.is_valid(p) for p in picks)
    assert picks == space.sample(random.Random(7), 40)
    assert picks != space.sample(random.Random(8), 40)
    everything = space.sample(random.Random(0), space.size + 10)
    assert sorted(map(space.index, everything)) == list(range(space.size))
    # uniform: over many draws of one config each, every config of a tiny space comes up about equally often
    tiny = SearchSpace({"a": [1, 2, 3, 4]}, ["a != 3"])
    rng = random.Random(0)
    counts = {1: 0, 2: 0, 4: 0}
    for _ in range(3000):
        counts[tiny.sample(rng, 1)[0]["a"]] += 1
    assert all(900 < n < 1100 for n in counts.values()), counts


def test_nearest_valid_config(space):
    smem = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_warps": 8, "num_stages": 4}
    near = space.nearest(smem)
    assert space.is_valid(near)
    assert sum(near[n] != smem[n] for n in TUNABLES) == 1  # one tunable changed is enough here
    good = space.configs()[3]
    assert space.nearest(good) == good
    other = space.nearest(good, exclude=[good])
    assert other != good and sum(other[n] != good[n] for n in TUNABLES) == 1
    tiny = SearchSpace({"a": [1, 2]})
    assert tiny.nearest({"a": 1}, exclude=tiny.configs()) is None


def test_from_kernel_reads_tunables_and_constraints(write_kernel):
    source = TORCH_KERNEL.replace("BODY", "out.copy_(x + y)") + textwrap.dedent("""
        CONSTRAINTS = ["BLOCK // num_warps >= 16", "num_warps * threads_per_warp <= 128"]
    """)
    kf = load_kernel(write_kernel(source=source))
    assert kf.constraints
    s = SearchSpace.from_kernel(kf, {"threads_per_warp": 32, "max_threads_per_block": 1024})
    expected = brute_force(kf.tunables, lambda c: c["BLOCK"] // c["num_warps"] >= 16 and c["num_warps"] * 32 <= 128)
    assert s.configs() == expected and s.size == 6
    assert SearchSpace.from_kernel(kf).skipped  # no limits: the threads_per_warp constraint cannot be checked
    bad = TORCH_KERNEL.replace("BODY", "out.copy_(x + y)") + '\nCONSTRAINTS = ["BLOK >= 64"]\n'
    with pytest.raises(SearchError) as err:
        SearchSpace.from_kernel(load_kernel(write_kernel(source=bad, name="bad.py")))
    assert "bad.py" in err.value.message and "`BLOK`" in err.value.message
