"""Issue 24's evaluation rules: shapes the author cannot pick, check what you time, a reference the candidate cannot
reach, a session version's setup compared with v0's on every call (CPU, Triton interpreter)."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kernelpilot import api
from kernelpilot.errors import ContractError
from kernelpilot.kernels.contract import load_kernel, make_case
from kernelpilot.kernels.shapes import derived_shapes, is_prime, parse_rules
from kernelpilot.measure.timed_check import check_timed

ELEMENTWISE = '''
import torch
SHAPE = {"N": 256}
TUNABLES = {"BLOCK": [64, 128]}
CALLS = []

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}

def run_kernel(x, out, N, **_):
    CALLS.append(x.clone())
    BODY

def reference(x, out, N, **_):
    return torch.sin(x)
'''


def _load(tmp_path: Path, body: str, name: str = "k.py"):
    path = tmp_path / name
    path.write_text(ELEMENTWISE.replace("BODY", body))
    return load_kernel(path, None, interpreted=True)


# -- shapes the author cannot pick

def _kf(rules=None, tunables=None, check_shapes=None, config=None):
    return SimpleNamespace(shape_rules=parse_rules(rules or {}), tunables=tunables or {}, path="k.py",
                           check_shapes=check_shapes, default_config=config or {})


def test_drawn_shapes_break_divisibility_and_fit_where_the_declared_one_fits():
    kf = _kf(tunables={"BLOCK": [64, 128, 131], "num_warps": [4, 8]})
    shape = {"M": 4096, "N": 1024, "H": 3, "dtype": "float16", "causal": True}
    seen = set()
    for seed in range(40):
        (small, near), notes = derived_shapes(kf, shape, rng=random.Random(seed))
        assert notes == []
        for dim in ("M", "N"):
            assert small[dim] % 2 == 1 and is_prime(small[dim]) and small[dim] not in (131,)  # no tunable's value
            assert shape[dim] // 4 <= small[dim] <= shape[dim] // 2
            assert near[dim] % 2 == 1 and 0 < abs(near[dim] - shape[dim]) <= 63  # a ragged odd tail
        assert small["H"] == 1 and near["H"] == 3  # small dimensions shrink to 1, or stay
        assert near["M"] > shape["M"] and near["M"] * near["N"] <= 1.25 * shape["M"] * shape["N"]  # larger, capped
        assert small["dtype"] == "float16" and small["causal"] is True  # not integers: kept
        seen.add((small["M"], near["M"]))
    assert len(seen) > 10  # drawn per run, not a function of the shape the author can predict


def test_check_shapes_add_to_the_drawn_ones_and_never_replace_them():
    kf = _kf(check_shapes=[{"N": 512}, {"N": 1024}])
    shapes, _ = derived_shapes(kf, {"N": 1024}, rng=random.Random(1))
    assert len(shapes) == 3 and shapes[-1] == {"N": 512}  # the declared shape itself is not repeated
    assert all(s["N"] % 2 == 1 for s in shapes[:2])


def test_a_declared_domain_is_respected_by_draws_and_recorded():
    kf = _kf(rules={"M": "BM", "K": 16, "D": "power_of_two", "H": "fixed"}, tunables={"BM": [64, 128]})
    for seed in range(20):
        (small, near), notes = derived_shapes(kf, {"M": 4096, "K": 4096, "D": 128, "H": 32}, {"BM": 128},
                                              rng=random.Random(seed))
        assert small["M"] % 128 == 0 and is_prime(small["M"] // 128) and (small["M"] // 128) % 2 == 1
        assert near["M"] % 128 == 0 and near["M"] > 4096 and (near["M"] - 4096) // 128 % 2 == 1
        assert small["K"] % 16 == 0 and (small["K"] // 16) % 2 == 1 and small["K"] % 32 != 0
        assert small["D"] == 64 and near["D"] == 128 and small["H"] == near["H"] == 32
        assert "M a multiple of BM (=128)" in notes[0] and "D a power of two" in notes[0]
    bounded = _kf(rules={"N": "<= BLOCK"}, tunables={"BLOCK": [4096]})
    for seed in range(20):  # an upper bound: the larger shape stays under it, the smaller one is drawn as ever
        (small, larger), notes = derived_shapes(bounded, {"N": 4096}, {"BLOCK": 4096}, rng=random.Random(seed))
        assert small["N"] % 2 == 1 and larger["N"] < 4096 and larger["N"] % 2 == 1 and "N at most BLOCK" in notes[0]
    with pytest.raises(ContractError, match="SHAPE_RULES"):
        parse_rules({"M": 0})
    with pytest.raises(ContractError, match="cannot be evaluated"):
        derived_shapes(_kf(rules={"M": "BQ"}), {"M": 64}, {"BM": 16})


def test_a_declared_lower_bound_keeps_the_draws_at_or_above_it_and_is_recorded():
    """``">= EXPR"`` and ``"power_of_two >= EXPR"``: a config's domain that starts at a tunable's value (Triton's
    fused-attention tutorial asserts BLOCK_N <= HEAD_DIM: its head dimension 64 was drawn for a BLOCK_N 128 config,
    which then could not compile, and an honest config was refused as wrong at that shape)."""
    kf = _kf(rules={"D": "power_of_two >= BN", "S": ">= LO"}, tunables={"BN": [64, 128], "LO": [1000, 3000]})
    shape = {"D": 128, "S": 4096}
    for seed in range(20):
        (small, near), notes = derived_shapes(kf, shape, {"BN": 128, "LO": 1000}, rng=random.Random(seed))
        assert small["D"] == near["D"] == 128  # half of it is under BLOCK_N: not drawn
        assert 1000 <= small["S"] <= 2048 and is_prime(small["S"]) and near["S"] > 4096
        assert "D a power of two >= BN" in notes[0] and "S at least LO" in notes[0]
        (small, _near), _ = derived_shapes(kf, shape, {"BN": 64, "LO": 3000}, rng=random.Random(seed))
        assert small["D"] == 64  # at BLOCK_N 64 the half is in the domain
        assert small["S"] == 4096  # no odd prime in [3000, 2048]: the dimension is kept, never put under the bound
    with pytest.raises(ContractError, match="only '>= EXPR'"):  # refused when the file is read
        parse_rules({"D": "power_of_two <= 4"})


def test_a_kernel_that_raises_at_a_drawn_shape_is_refused_and_told_how_to_declare_its_domain(tmp_path):
    """A raise at a drawn shape is still a failure there (a kernel cannot opt out of the shapes check by raising),
    and the verdict says how an honest kernel declares a domain that excludes it."""
    (tmp_path / "only.py").write_text(ELEMENTWISE.replace(
        "BODY", "if N != SHAPE['N']:\n        raise ValueError('only the declared size')\n    out.copy_(torch.sin(x))"))
    r = api.check(tmp_path / "only.py")
    assert not r.passed and r.failed_stage == "shapes"
    assert "kernel raised ValueError" in r.summary and "declare its domain in SHAPE_RULES" in r.summary


def test_a_kernel_right_only_at_its_declared_check_shapes_fails_at_the_drawn_ones(tmp_path):
    src = ELEMENTWISE.replace("BODY", "out.copy_(torch.sin(x) if N in (256, 64) else x)") + \
        "\nCHECK_SHAPES = [{'N': 64}]\n"
    (tmp_path / "picky.py").write_text(src)
    r = api.check(tmp_path / "picky.py")
    assert not r.passed and r.failed_stage == "shapes"


# -- check what you time

def test_kept_launches_are_an_unannounced_uniform_sample_of_all_launches(tmp_path):
    kf = _load(tmp_path, "out.copy_(torch.sin(x))")
    case = make_case(kf, {"N": 8}, 0, "cpu")
    kept = Counter()
    runs, launches = 400, 10
    for _ in range(runs):
        refresher = case.refresher(keep=2)
        for _ in range(launches):
            refresher()
            refresher.after()
        assert len(refresher.kept) == 2
        kept.update(k[0] for k in refresher.kept)
    expected = runs * 2 / launches  # every launch equally likely to be compared: 80
    assert set(kept) == set(range(1, launches + 1))
    assert all(abs(kept[i] - expected) < 40 for i in kept), kept  # > 4 sigma


def test_a_kept_launch_is_compared_on_exactly_the_values_it_saw(tmp_path):
    kf = _load(tmp_path, "out.copy_(torch.sin(x))")
    case = make_case(kf, {"N": 64}, 0, "cpu")
    refresher = case.refresher(keep=3)
    for _ in range(6):
        refresher()
        kf.run_kernel(**case.inputs)
        refresher.after()
    seen = kf.module.CALLS
    for launch, _, draw, outputs in refresher.kept:
        assert torch.equal(draw.values(case)["x"], seen[launch - 1])  # rebuilt bit for bit
        assert torch.equal(outputs["out"], torch.sin(seen[launch - 1]))
    assert check_timed(kf, refresher).passed


def test_a_kernel_that_does_less_once_it_is_timed_is_wrong_on_the_launches_that_were_timed(tmp_path):
    # right on verify's launches before timing (the first launch, the check's four, the two drawn shapes), then the
    # work of one element in four: every timed launch is wrong, and the kept ones show it
    kf = _load(tmp_path, "out.copy_(torch.sin(x) if len(CALLS) <= 7 else torch.where("
                         "torch.arange(N) % 4 == 0, torch.sin(x), out))")
    case = make_case(kf, {"N": 256}, 0, "cpu")
    for _ in range(7):
        kf.run_kernel(**case.inputs)
    refresher = case.refresher(keep=2)
    for _ in range(20):
        refresher()
        kf.run_kernel(**case.inputs)
        refresher.after()
    timed = check_timed(kf, refresher)
    assert not timed.passed and "kept in secret" in timed.error and "does less when it is timed" in timed.error
    verified = api.verify(tmp_path / "k.py")  # through every stage: the timing stage refuses it
    assert verified.status == "wrong_when_timed" and verified.stage == "timing"


# -- a reference the candidate cannot reach

REACH = '''
import torch
SHAPE = {"N": 256}
TUNABLES = {"BLOCK": [64]}

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}

def _same(t, *a, **k):
    return t * 1.0

_LIB = []

def run_kernel(x, out, N, **_):
    if HOW == "namespace":
        vars(torch).update({"s" "in": _same})  # from now on torch.sin is the identity in this process
    elif not _LIB:  # the dispatcher: aten::sin's CPU kernel replaced, no Python attribute changes
        _LIB.append(torch.library.Library("aten", "IMPL"))
        _LIB[0].impl("sin", _same, "CPU")
    out.copy_(x)                            # wrong: sin(x)

def reference(x, out, N, **_):
    return torch.sin(x)
'''


def test_a_kernel_that_rebinds_what_the_reference_calls_no_longer_fools_it(tmp_path):
    from kernelpilot.errors import KernelFailed
    from kernelpilot.measure.correctness import check_correctness

    path = tmp_path / "reach.py"
    path.write_text(REACH.replace("HOW", '"namespace"'))
    with pytest.raises(KernelFailed, match="torch.sin") as caught:  # the guard watches torch's namespaces
        api.check(path)
    assert caught.value.failure == "timer_tampered"
    sin = torch.sin
    try:  # the same check with the reference in the kernel's own process and no guard: fooled (issue 24)
        fooled = check_correctness(load_kernel(path, None, interpreted=True), {"N": 256}, {"BLOCK": 64}, "cpu")
        assert fooled.passed
    finally:
        vars(torch)["sin"] = sin
    deeper = tmp_path / "dispatch.py"  # below any attribute: only a reference computed elsewhere is untouched
    deeper.write_text(REACH.replace("HOW", '"dispatcher"'))
    r = api.check(deeper)
    assert not r.passed and r.failed_stage == "check"


def test_the_reference_process_caches_by_content_and_passes_errors_by_name(tmp_path):
    from kernelpilot.measure.refproc import ReferenceProcess

    path = tmp_path / "ref.py"
    path.write_text("import torch\ndef reference(x, out, N, **_):\n    if N == 3: raise ValueError('three')\n"
                    "    return torch.sin(x)\n")
    server = ReferenceProcess(path, hashlib.sha256(path.read_bytes()).hexdigest(), "cpu")
    try:
        x = torch.randn(64)
        refs, precision = server.outputs({"x": x, "out": torch.zeros(64), "N": 64}, ["out"])
        assert precision == "float64" and torch.allclose(refs["out"], torch.sin(x.double()))
        again, _ = server.outputs({"x": x.clone(), "out": torch.zeros(64), "N": 64}, ["out"])
        y = x.clone()
        y[17] += 1
        other, _ = server.outputs({"x": y, "out": torch.zeros(64), "N": 64}, ["out"])
        assert (server.calls, server.hits) == (3, 1) and not torch.equal(other["out"], refs["out"])
        with pytest.raises(Exception, match="three") as raised:
            server.outputs({"x": x, "out": torch.empty(64), "N": 3}, ["out"])
        assert type(raised.value).__name__ == "ValueError"
    finally:
        server.close()
    assert not server.proc.is_alive()


# -- a session version's setup, compared with v0's on every call

def test_a_version_setup_friendlier_only_at_seeds_the_check_did_not_show_is_caught_on_that_call():
    from kernelpilot.versions.measure import SetupChanged, _TwinSetup

    def v0(N, seed=0, device="cpu"):
        x = torch.randn(N, generator=torch.Generator().manual_seed(seed))
        return {"inputs": {"x": x, "out": torch.empty(N), "N": N}, "outputs": ["out"]}

    def friendlier(N, seed=0, device="cpu"):  # v0's values at the seeds of the static comparison, zeros elsewhere
        got = v0(N, seed, device)
        if seed not in (0, 1000):
            got["inputs"]["x"].zero_()
        return got

    twin = _TwinSetup(friendlier, v0)
    assert torch.equal(twin(N=8, seed=0)["inputs"]["x"], v0(8, 0)["inputs"]["x"])
    with pytest.raises(SetupChanged, match="other values than v0's at setup\\(N=8, seed=1048577\\)"):
        twin(N=8, seed=(1 << 20) + 1)  # a secret seed of the timed launches' values
    honest = _TwinSetup(v0, v0)
    assert honest(N=8, seed=123)["outputs"] == ["out"]


def test_a_cheap_reference_keeps_more_timed_launches():
    """The timing stage keeps as many launches as 0.3 s of check time allows, 2 to 8: a kernel wrong on a
    fraction f of its timed launches escapes with about (1 - f)^k, so a cheap reference buys a much smaller k-th
    power."""
    from kernelpilot.measure.timed_check import KEEP, KEEP_MAX, keep_for

    assert keep_for(None) == KEEP and keep_for(0.0) == KEEP
    assert keep_for(0.01) == KEEP_MAX  # a CPU-shape check: 8 kept launches
    assert keep_for(0.075) == 4 and keep_for(0.2) == KEEP and keep_for(30.0) == KEEP  # a costly one: never under 2


def test_the_timing_stage_keeps_launches_by_what_the_check_cost(tmp_path):
    kf = _load(tmp_path, "out.copy_(torch.sin(x))")
    verified = api.verify(tmp_path / "k.py")
    assert verified.accepted
    # the interpreter's check of a 256-element sin is far under 1/8 s a seed: 8 launches kept and compared
    assert len(verified.records["timed_check"]["checked"]) == 8
