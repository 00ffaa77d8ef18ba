"""The light profile: a card from timing, the roofline and the kernel compiled for sm_90 on the CPU (no ncu)."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES
from kernelpilot.hardware.roofline import compute_roofline
from kernelpilot.hardware.specs import find_spec
from kernelpilot.profile.light import light_profile
from kernelpilot.target import Target


@pytest.fixture(scope="module")
def matmul_light():
    shape = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16"}
    roof = compute_roofline(2 * 4096**3, 3 * 4096**2 * 2, "bf16_tensor", find_spec("H200"))
    config = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 2}
    # 439.4 µs: the time v0 of this config measured on the H200 (docs/device-runs/2026-11-22-h200/matmul)
    return light_profile(EXAMPLES / "matmul.py", config, shape, timing_ns=439_360.0, roofline=roof,
                         device_name="NVIDIA H200", kernel_name="matmul", reason="ERR_NVGPUCTRPERM", arch="sm_90"), roof


def test_light_card_records_its_evidence(matmul_light):
    (card, error), _ = matmul_light
    assert error is None and card.light and "ERR_NVGPUCTRPERM" in card.light_reason
    assert set(card.evidence_sources) == {"timing", "roofline", "compile"} and "ncu" not in card.evidence_sources
    assert card.class_ == "compute"  # the roofline bound at 42 % of the floor's rate, 50 % compile-time occupancy


def test_light_card_sees_tensor_cores_in_the_sass(matmul_light):
    (card, _), _ = matmul_light
    assert card.pattern("no_tensor_cores").status == "not_fired"
    assert card.pattern("register_spill").status == "not_fired"  # 64 registers, no spills in the binary


def test_time_under_the_floor_is_refused(matmul_light):
    _, roof = matmul_light
    with pytest.raises(ValueError):
        light_profile(EXAMPLES / "vector_add.py", {"BLOCK_SIZE": 1024, "num_warps": 4}, {"N": 65536},
                      timing_ns=roof.floor_ns / 2, roofline=roof, device_name=None, kernel_name="x", reason="test")


# ---------------------------------------------------------------------------------------------------------------
# The arch follows the device; ncu missing or refused -> the light card (api.profile and the optimize loop).

VECTOR_ADD = EXAMPLES / "vector_add.py"
SMALL = {"N": 1 << 20, "dtype": "float32"}  # 12 MiB moved: a 2.6 µs floor on an H200


@pytest.mark.parametrize("capability,arch", [((8, 0), "sm_80"), ((9, 0), "sm_90"), ((8, 9), "sm_89"),
                                             ((10, 0), "sm_100")])
def test_default_arch_follows_the_device(monkeypatch, capability, arch):
    import torch

    from kernelpilot.profile.static import default_arch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: capability)
    assert default_arch() == arch


def test_default_arch_without_a_usable_gpu_is_sm90(monkeypatch):
    import torch

    from kernelpilot.profile.static import DEFAULT_CPU_ARCH, default_arch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_arch() == DEFAULT_CPU_ARCH == "sm_90"

    def broken(*_a, **_k):
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", broken)
    assert default_arch() == "sm_90"


def test_static_inspection_without_arch_compiles_for_the_device(monkeypatch):
    import torch

    from kernelpilot.profile.static import inspect_config

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: (8, 0))
    r = inspect_config(VECTOR_ADD, {"BLOCK_SIZE": 1024, "num_warps": 4}, SMALL)
    assert r.arch == "sm_80" and r.compute_capability == (8, 0) and r.occupancy is not None


def _fake_timing(median_ns: float):
    from kernelpilot.measure.timing import TimingResult

    return TimingResult(timer="test", is_measurement=True, samples_ns=[median_ns] * 3, n_samples=3,
                        median_ns=median_ns, q1_ns=median_ns, q3_ns=median_ns, iqr_ns=0.0, min_ns=median_ns,
                        mean_ns=median_ns, n_warmup=0, warmup_ms=0.0, warmup_stable=True, flush_bytes=0,
                        l2_bytes=None)


def _small_roofline():
    # vector_add at N = 2^20 fp32: N FLOPs, 3 * 4 * N bytes, on the H200 spec.
    return compute_roofline(1 << 20, 12 * (1 << 20), "fp32", find_spec("H200"))


NCU_FAILURES = {
    "ncu_missing": ("ToolMissingError", "ncu not found on PATH or under /usr/local/cuda/bin"),
    "ERR_NVGPUCTRPERM": ("CountersNotPermitted", "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                                         "NVIDIA GPU Performance Counters on the target device 0."),
}


@pytest.fixture
def gpu_without_ncu(monkeypatch):
    """api.profile on a pretend GPU: inputs on the CPU, a fixed time, the H200 roofline; ncu fails as asked."""
    import torch

    import kernelpilot.api as api
    import kernelpilot.kernels.contract as contract
    import kernelpilot.measure.timing as timing
    from kernelpilot import errors

    real_make_case = contract.make_case
    monkeypatch.setattr(api, "detect_target", lambda *a, **k: Target.gpu())
    monkeypatch.setattr(contract, "make_case", lambda kf, shape, seed, device: real_make_case(kf, shape, seed, "cpu"))
    monkeypatch.setattr(timing, "time_callable", lambda fn, device, *a, **k: _fake_timing(10_000.0))
    monkeypatch.setattr(api, "roofline_for", lambda kf, shape, device, gpu, roles=None: (_small_roofline(), None, ""))
    # the profile subset of the stage table launches the kernel (a GPU launch here); its stages have their own tests
    # (tests/test_stages.py): here it answers a checked timing of 10 µs, as on a GPU
    import kernelpilot.search.stages as stages

    def checked_timing(name, kf, opts, target, config, **_):
        ctx = stages.StageContext(kf, opts, target, config)
        ctx.results["timing"] = _fake_timing(10_000.0)
        return None, ctx

    monkeypatch.setattr(stages, "run_command", checked_timing)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # static inspection compiles for sm_90
    from kernelpilot.search.isolated import InProcessKernel  # the patches above hold in this process only

    monkeypatch.setattr(api, "IsolatedKernel", InProcessKernel)

    def failing(kind: str):
        cls, message = NCU_FAILURES[kind] if kind in NCU_FAILURES else ("ProfileError", kind)

        def profile_kernel(*_a, **_k):
            raise getattr(errors, cls)(message, "test")

        monkeypatch.setattr(api, "profile_kernel", profile_kernel)

    return api, failing


@pytest.mark.parametrize("failure", sorted(NCU_FAILURES))
def test_api_profile_falls_back_to_the_light_card(gpu_without_ncu, failure):
    api, fail = gpu_without_ncu
    fail(failure)
    result = api.profile(VECTOR_ADD, shape=SMALL, config={"BLOCK_SIZE": 1024, "num_warps": 4})
    card = result.card
    assert result.report is None and result.main is None and result.verdict is None and not result.kernels
    assert card.light and NCU_FAILURES[failure][1] in card.light_reason
    assert set(card.evidence_sources) == {"timing", "roofline", "compile"}
    assert card.device_name == "NVIDIA H200" and card.class_ == "memory"


def test_api_profile_reraises_other_ncu_failures(gpu_without_ncu):
    from kernelpilot.errors import ProfileError

    api, fail = gpu_without_ncu
    fail("ncu exited with 1: ==ERROR== unknown option --set fuller")
    with pytest.raises(ProfileError, match="unknown option"):
        api.profile(VECTOR_ADD, shape=SMALL, config={"BLOCK_SIZE": 1024, "num_warps": 4})


@pytest.mark.parametrize("failure,note", [("ncu_missing", "profiling disabled: ncu not found"),
                                          ("ERR_NVGPUCTRPERM", "profiling disabled: ==ERROR== ERR_NVGPUCTRPERM")])
def test_ncu_evidence_turns_profiling_off_and_falls_back_to_a_light_card(monkeypatch, tmp_path, failure, note):
    """The engine's evidence source: a typed ncu failure (tool missing, counters refused) switches ncu off for the
    rest of the run and every later card is a light one saying why; ncu is not tried again."""
    import torch

    import kernelpilot.profile.ncu_run as ncu_run
    from kernelpilot import errors
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence
    from kernelpilot.records.evaluation import Evaluation

    cls, message = NCU_FAILURES[failure]
    calls: list[int] = []

    def profile_kernel(*_a, **_k):
        calls.append(1)
        raise getattr(errors, cls)(message, "test")

    monkeypatch.setattr(ncu_run, "profile_kernel", profile_kernel)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # static inspection compiles for sm_90
    light = LightEvidence(VECTOR_ADD, SMALL, _small_roofline(), "NVIDIA H200", "vector_add", "unused", arch="sm_90")
    ncu = NcuEvidence(VECTOR_ADD, None, SMALL, lambda ev: tmp_path / "p.ncu-rep", light)
    config = {"BLOCK_SIZE": 1024, "num_warps": 4}
    ev = Evaluation(config=config, status="ok", duration_ns=10_000.0, samples_ns=[10_000.0])
    got = ncu.evidence(ev)
    assert ncu.disabled.startswith(note) and got.profile_error.startswith(note)
    assert got.card is not None and got.card["light"] and got.card["light_reason"].startswith(note)
    assert set(got.card["evidence_sources"]) == {"timing", "roofline", "compile"}
    assert got.bound == got.card["class"] == "memory"
    again = ncu.evidence(ev.model_copy(update={"config": {"BLOCK_SIZE": 512, "num_warps": 4}}))
    assert len(calls) == 1 and again.card["light"]  # ncu is not tried again once it is known to be unusable


def test_other_ncu_failures_fall_back_for_that_config_only(monkeypatch, tmp_path):
    import torch

    import kernelpilot.profile.ncu_run as ncu_run
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence
    from kernelpilot.errors import ProfileError
    from kernelpilot.records.evaluation import Evaluation

    def profile_kernel(*_a, **_k):
        raise ProfileError("ncu exited with 1: the target crashed", "test")

    monkeypatch.setattr(ncu_run, "profile_kernel", profile_kernel)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    light = LightEvidence(VECTOR_ADD, SMALL, _small_roofline(), "NVIDIA H200", "vector_add", "no ncu", arch="sm_90")
    ncu = NcuEvidence(VECTOR_ADD, None, SMALL, lambda ev: tmp_path / "p.ncu-rep", light)
    got = ncu.evidence(Evaluation(config={"BLOCK_SIZE": 1024, "num_warps": 4}, status="ok", duration_ns=10_000.0))
    assert ncu.disabled is None and "target crashed" in got.profile_error and got.card["light"]
