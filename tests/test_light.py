"""The light profile: a card from timing, the roofline and the kernel compiled for sm_90 on the CPU (no ncu)."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES
from kernelpilot.hardware.roofline import compute_roofline
from kernelpilot.hardware.specs import find_spec
from kernelpilot.profile.light import light_profile


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
