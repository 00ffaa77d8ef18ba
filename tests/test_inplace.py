"""In-place outputs (``setup()["inplace"]``): restored before every launch outside the timed region, never
NaN-poisoned, the reference sees the original values, counted once in bytes, bad names refused."""

from __future__ import annotations

import time

import pytest
import torch

from kernelpilot.errors import ContractError
from kernelpilot.kernels.contract import load_kernel, make_case, run_kernel
from kernelpilot.target import Target

# RoPE-like: q and k are inputs the kernel rewrites in place. k starts as all ones, and run_kernel refuses a k it
# has already modified, so any second launch without a restore raises.
INPLACE = '''
import torch
SHAPE = {"N": 1000}
CPU_SHAPE = {"N": 200}
TUNABLES = {"BLOCK": [64, 128]}
SEEN_BY_REFERENCE = []

def setup(N, seed=0, device="cpu", INPLACE=("q", "k"), **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randn(N, generator=g).to(device)
    return {"inputs": {"q": q, "k": torch.ones(N, device=device), "N": N}, "outputs": ["q", "k"],
            "inplace": list(INPLACE) if isinstance(INPLACE, tuple) else INPLACE}

def run_kernel(q, k, N, *, BLOCK, **_):
    if not bool((k < 1.5).all()):  # restored: 1, or 1 scaled by under 2.4 % (timers refresh inputs)
        raise RuntimeError("run_kernel saw an input it had already modified")
    q.mul_(2.0).add_(1.0)
    k.add_(1.0)

def reference(q, k, N, **_):
    SEEN_BY_REFERENCE.append((q.clone(), k.clone()))
    return q * 2.0 + 1.0, k + 1.0
'''


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "kp_home"))


@pytest.fixture
def inplace(write_kernel):
    return load_kernel(write_kernel(source=INPLACE, name="rope_like.py"), interpreted=True)


def test_case_keeps_pristine_copies_and_restores_them(inplace):
    case = make_case(inplace, {"N": 200}, 3, "cpu")
    assert case.inplace == ["q", "k"] and case.before_launch == case.restore
    q0 = case.inputs["q"].clone()
    run_kernel(inplace, case.inputs, {"BLOCK": 64})
    assert not torch.equal(case.inputs["q"], q0)
    q_storage = case.inputs["q"].data_ptr()
    case.restore()
    assert torch.equal(case.inputs["q"], q0) and bool((case.inputs["k"] == 1).all())
    assert case.inputs["q"].data_ptr() == q_storage, "restored in place: pointers stay valid"
    run_kernel(inplace, case.inputs, {"BLOCK": 64})  # would raise without the restore


def test_a_case_without_inplace_has_no_restore(write_kernel):
    case = make_case(load_kernel(write_kernel(), interpreted=True), {"N": 10}, 0, "cpu")
    assert case.inplace == [] and case.pristine == {} and case.before_launch is None


def test_inplace_kernel_passes_check_on_three_seeds_twice(inplace):
    from kernelpilot.measure.correctness import check_correctness

    for _ in range(2):
        result = check_correctness(inplace, {"N": 200}, {"BLOCK": 64}, "cpu")
        assert result.passed, result.summary
        assert result.deterministic is True, "the determinism re-run restores the inputs first"
        assert [s.seed for s in result.seeds] == [0, 1, 2, 1000, 1000]  # 1000: the two drawn shapes


def test_reference_sees_the_original_values(inplace):
    from kernelpilot.measure.correctness import check_correctness

    seen = inplace.module.SEEN_BY_REFERENCE
    seen.clear()
    check_correctness(inplace, {"N": 200}, {"BLOCK": 64}, "cpu", seeds=(5,), other_shapes=False)
    fresh = make_case(inplace, {"N": 200}, 5, "cpu")
    q, k = seen[-1]  # the check's own call: the ones before it observed the roles, on other values
    assert torch.equal(q, fresh.inputs["q"].double()) and bool((k == 1).all())


def test_timers_call_before_each_before_every_launch_outside_the_clock():
    from kernelpilot.measure.timing import time_callable, time_interleaved

    calls: list[str] = []
    restore = lambda: (calls.append("restore"), time.sleep(0.02))  # 20 ms that must not be timed
    launch = lambda: calls.append("launch")
    timing = time_callable(launch, Target.cpu(), before_each=restore, min_samples=4, max_samples=4, rep_ms=0.0)
    assert timing.n_samples == 4 and calls == ["restore", "launch"] * 5, "warm-up launch included"
    assert max(timing.samples_ns) < 10e6, "the restore is outside the timed region"
    calls.clear()
    a, b = time_interleaved(launch, launch, 3, Target.cpu(), before_each=restore)
    assert len(a) == len(b) == 3 and calls == ["restore", "launch"] * 6
    assert max(a + b) < 10e6


def test_bench_and_tune_time_an_inplace_kernel(inplace):
    from kernelpilot.api import bench
    from kernelpilot.search.tune import tune

    result = bench(inplace.path)  # interpreted here: several launches on one case
    assert result.timing.n_samples >= 3
    r = tune(inplace.path, strategy="exhaustive", ab_samples=3, prune=False)  # pure torch: no Triton compile
    assert [e.status for e in r.evaluations] == ["ok", "ok"], [e.message for e in r.evaluations]


def test_default_bytes_count_an_inplace_tensor_read_and_written(inplace):
    from kernelpilot.kernels.workload import workload

    case = make_case(inplace, {"N": 200}, 0, "cpu")
    assert workload(inplace, case).bytes_moved == 2 * 2 * 200 * 4, "q and k read and written; pristine copies not counted"


@pytest.mark.parametrize("bad, match", [(["x"], "not among the outputs"), ("q", "must be a list"),
                                         (["q", "q"], "repeats a name"), (["N"], "not among the outputs")])
def test_bad_inplace_names_are_contract_errors(write_kernel, bad, match):
    kf = load_kernel(write_kernel(source=INPLACE.replace('INPLACE=("q", "k")', f"INPLACE={bad!r}"),
                                  name="bad_inplace.py"), interpreted=True)
    with pytest.raises(ContractError, match=match) as err:
        make_case(kf, {"N": 10}, 0, "cpu")
    assert "inplace" in err.value.hint


@pytest.mark.gpu
def test_cuda_timer_restores_before_every_launch_and_check_passes_on_gpu(write_kernel):
    from kernelpilot.measure.correctness import check_correctness
    from kernelpilot.measure.timing import time_cuda

    kf = load_kernel(write_kernel(source=INPLACE, name="rope_like_gpu.py"), interpreted=False)
    assert check_correctness(kf, {"N": 1 << 20}, {"BLOCK": 64}, "cuda").passed
    case = make_case(kf, {"N": 1 << 20}, 0, "cuda")
    calls, launches = [], []
    timing = time_cuda(lambda: (launches.append(1), run_kernel(kf, case.inputs, {"BLOCK": 64})),
                       before_each=lambda: (calls.append(1), case.restore()), min_samples=20, max_samples=40)
    # once before every launch; a chunk the host outran is timed again (timing.COVER_TRIES), so a busy host
    # launches more than n_warmup + n_samples times (session 14: 118 launches for 51 + 40)
    assert len(calls) == len(launches) >= timing.n_warmup + timing.n_samples
