"""The floor's bytes held against the DRAM bytes ncu measured (kernelpilot.profile.floor_check; issue 23 "Work
observed"), on the saved H200 reports.

What the two kernels' tensors hold:

- ``h200_add_fp32_memory_bound``: Triton ``add_k``, out = x + y, fp32, n = 2^24 (tests/fixtures README row, and
  grid 16384 × BLOCK 1024 in the report): x and y read, out written: 3 × 4 × 2^24 = 201,326,592 bytes;
- ``h200_stream_copy_fp32``: ``stream_axpb_kernel``, y = a·x + b, fp32, N = 132·16·31·1024 (scripts/
  capture_fixtures.py, and grid 65472 × BLOCK 1024 in the report): x read, y written: 2 × 4 × N bytes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpilot.profile.floor_check import (FLOOR_TOLERANCE_FRACTION, L2_DIRTY_FRACTION, FloorBytesCheck,
                                             confirm_floor_bytes)
from kernelpilot.profile.kernel_metrics import KernelMetrics
from kernelpilot.profile.metrics import read_report

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
ADD = FIXTURES / "h200_add_fp32_memory_bound.ncu-rep"
STREAM = FIXTURES / "h200_stream_copy_fp32.ncu-rep"
ADD_N = 1 << 24
ADD_FLOOR = 3 * 4 * ADD_N
STREAM_N = 132 * 16 * 31 * 1024
STREAM_FLOOR = 2 * 4 * STREAM_N
H200_L2 = 60 * 1024 * 1024  # 62,914,560 bytes: device__attribute_l2_cache_size of both reports


@pytest.fixture(scope="module")
def add() -> list[KernelMetrics]:
    return read_report(ADD)


@pytest.fixture(scope="module")
def stream() -> list[KernelMetrics]:
    return read_report(STREAM)


def test_dram_bytes_and_l2_size_are_read_from_the_report(add, stream) -> None:
    (a,), (s,) = add, stream
    assert (a.dram_bytes_read, a.dram_bytes_write) == (134_226_176, 47_365_376)
    assert (s.dram_bytes_read, s.dram_bytes_write) == (268_182_784, 243_656_704)
    assert a.l2_cache_bytes == s.l2_cache_bytes == H200_L2
    assert a.sources["dram_bytes_read"] == "dram__bytes_read.sum"
    assert a.sources["dram_bytes_write"] == "dram__bytes_write.sum"
    assert a.sources["l2_cache_bytes"] == "device__attribute_l2_cache_size"
    # the reads are what the tensors hold (cold caches: ncu flushes them before each pass), to within 0.01 %
    assert a.dram_bytes_read == pytest.approx(2 * 4 * ADD_N, rel=1e-4)
    assert s.dram_bytes_read == pytest.approx(4 * STREAM_N, rel=1e-4)


def test_a_report_without_the_metric_leaves_the_fields_none() -> None:
    m = KernelMetrics(kernel_name="k")  # what metrics_from_action gives for a report made without the sections
    assert m.dram_bytes_read is None and m.dram_bytes_write is None and m.l2_cache_bytes is None


def test_add_floor_is_confirmed_within_the_l2_write_back_allowance(add) -> None:
    check = confirm_floor_bytes(ADD_FLOOR, add)
    assert check.verdict == "confirmed"
    assert check.dram_bytes == 134_226_176 + 47_365_376 and check.launches == 1
    assert check.ratio == pytest.approx(ADD_FLOOR / 181_591_552)
    # 19.7 MB short (writes still in L2): past 5 % of the floor, within the whole L2
    assert ADD_FLOOR - check.dram_bytes > FLOOR_TOLERANCE_FRACTION * ADD_FLOOR
    assert check.tolerance_bytes == L2_DIRTY_FRACTION * H200_L2
    assert "L2 write-back allowance" in check.reason and check.message.startswith("floor bytes 201.3 MB vs DRAM 181.6 MB")


def test_stream_floor_is_confirmed_within_five_percent(stream) -> None:
    check = confirm_floor_bytes(STREAM_FLOOR, stream)
    assert check.verdict == "confirmed" and "within the 5 % tolerance" in check.reason
    assert check.ratio == pytest.approx(STREAM_FLOOR / (268_182_784 + 243_656_704))


@pytest.mark.parametrize("which", ["add", "stream"])
def test_a_doubled_floor_is_over_counted(which, add, stream) -> None:
    launches, floor = (add, ADD_FLOOR) if which == "add" else (stream, STREAM_FLOOR)
    check = confirm_floor_bytes(2 * floor, launches)
    assert check.verdict == "over_counted"
    assert check.ratio == pytest.approx(2 * floor / check.dram_bytes) and check.ratio > 2.0
    assert f"over-counted ×{check.ratio:.1f}" in check.message


def test_the_verdict_turns_at_the_tolerance(add) -> None:
    dram = 134_226_176 + 47_365_376
    at = confirm_floor_bytes(dram + H200_L2, add)  # short by exactly the allowance
    past = confirm_floor_bytes(dram + H200_L2 + 4096, add)
    assert (at.verdict, past.verdict) == ("confirmed", "over_counted")


def test_a_report_without_dram_bytes_gives_unknown(add) -> None:
    bare = add[0].model_copy(update={"dram_bytes_read": None, "dram_bytes_write": None})
    check = confirm_floor_bytes(ADD_FLOOR, [bare])
    assert check.verdict == "unknown" and check.dram_bytes is None and check.ratio is None
    assert "dram__bytes_read.sum" in check.message and "add_k" in check.message
    # one launch of two without the metric: the sum would undercount, so nothing is judged
    assert confirm_floor_bytes(ADD_FLOOR, [add[0], bare]).verdict == "unknown"


@pytest.mark.parametrize("floor", [None, 0, -1.0, float("inf"), float("nan")])
def test_no_floor_gives_unknown(add, floor) -> None:
    assert confirm_floor_bytes(floor, add).verdict == "unknown"


def test_without_an_l2_size_only_five_percent_is_tolerated(add) -> None:
    no_l2 = [add[0].model_copy(update={"l2_cache_bytes": None})]
    short = confirm_floor_bytes(ADD_FLOOR, no_l2)  # 9.8 % short: write-back or over-count, nothing bounds it
    assert short.verdict == "unknown" and "no L2 size" in short.reason
    assert confirm_floor_bytes(181_591_552, no_l2).verdict == "confirmed"
    assert confirm_floor_bytes(ADD_FLOOR, no_l2, l2_cache_bytes=50 * 2**20).verdict == "confirmed"  # H100's L2


def test_launches_of_one_call_are_summed(add, stream) -> None:
    both = add + stream  # a kernel of two launches moves its bytes in each
    check = confirm_floor_bytes(ADD_FLOOR + STREAM_FLOOR, both)
    assert check.launches == 2 and check.verdict == "confirmed"
    assert check.dram_bytes == pytest.approx(add[0].dram_bytes_read + add[0].dram_bytes_write
                                             + stream[0].dram_bytes_read + stream[0].dram_bytes_write)
    # the main kernel alone would have called the two-launch floor over-counted
    assert confirm_floor_bytes(ADD_FLOOR + STREAM_FLOOR, stream).verdict == "over_counted"


def test_nothing_moved_is_over_counted_without_a_ratio(add) -> None:
    zero = [add[0].model_copy(update={"dram_bytes_read": 0.0, "dram_bytes_write": 0.0})]
    check = confirm_floor_bytes(ADD_FLOOR * 10, zero)
    assert check.verdict == "over_counted" and check.ratio is None and "no DRAM bytes measured" in check.message


def test_the_check_round_trips_through_json(add) -> None:
    check = confirm_floor_bytes(2 * ADD_FLOOR, add)
    assert FloorBytesCheck.model_validate_json(check.model_dump_json()) == check


def test_ncu_evidence_records_the_floor_check(monkeypatch, tmp_path) -> None:
    """The engine's ncu evidence carries ``floor_check`` on the evaluation it returns, from the report's DRAM
    bytes and the run's roofline bytes (only the ncu run is replaced: it copies the saved H200 add report)."""
    import torch

    import kernelpilot.profile.ncu_run as ncu_run
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence
    from kernelpilot.hardware.roofline import compute_roofline
    from kernelpilot.hardware.specs import find_spec
    from kernelpilot.records.evaluation import Evaluation

    def profile_kernel(_kernel, _shape, _config, report_path, **_k):
        shutil.copy(ADD, report_path)
        return Path(report_path)

    monkeypatch.setattr(ncu_run, "profile_kernel", profile_kernel)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    kernel = Path(__file__).resolve().parent.parent / "examples" / "vector_add.py"
    logged: list[str] = []
    got = {}
    for label, floor in (("honest", ADD_FLOOR), ("doubled", 2 * ADD_FLOOR)):
        roof = compute_roofline(ADD_N, floor, "fp32", find_spec("H200"))
        light = LightEvidence(kernel, {"N": ADD_N}, roof, "NVIDIA H200", "vector_add", "unused", arch="sm_90")
        ncu = NcuEvidence(kernel, None, {"N": ADD_N}, lambda ev: tmp_path / f"{label}.ncu-rep", light,
                          log=logged.append)
        got[label] = ncu.profile(Evaluation(config={"BLOCK_SIZE": 1024, "num_warps": 4}, status="ok",
                                            duration_ns=60_000.0, index=0))
    assert got["honest"].card is not None and not got["honest"].card.get("light")
    assert got["honest"].floor_check["verdict"] == "confirmed"
    assert got["doubled"].floor_check["verdict"] == "over_counted"
    assert got["doubled"].floor_check["floor_bytes"] == 2 * ADD_FLOOR
    assert any("over-counted" in line for line in logged)
    # the field survives the evaluation's JSON (outcome.json)
    again = Evaluation.model_validate_json(got["doubled"].model_dump_json())
    assert again.floor_check == got["doubled"].floor_check


def test_the_final_report_shows_the_check_under_the_roofline(add) -> None:
    from kernelpilot.hardware.roofline import compute_roofline
    from kernelpilot.hardware.specs import find_spec
    from kernelpilot.records.evaluation import Evaluation
    from kernelpilot.records.models import RunInfo
    from kernelpilot.report.final import render_final_report

    info = RunInfo(kernel="k.py", kernel_name="k", reference="k.py", source_sha256="0" * 64, shape={"N": ADD_N},
                   tunables={"BLOCK": [64]}, compute_unit="fp32", mode="cuda", device_name="NVIDIA H200",
                   gpu_spec="H200", iterations=-1, profile=True, started_utc="2026-01-01T00:00:00+00:00",
                   best_version=1, stop_reason="budget")
    roof = compute_roofline(ADD_N, 2 * ADD_FLOOR, "fp32", find_spec("H200"))
    v0 = Evaluation(config={"BLOCK": 64}, status="ok", duration_ns=60_000.0, index=0, accepted=True,
                    floor_check=confirm_floor_bytes(2 * ADD_FLOOR, add).model_dump())
    v1 = Evaluation(config={"BLOCK": 128}, status="ok", duration_ns=50_000.0, index=1, parent=0, accepted=True)
    text = render_final_report(info, [v0, v1], roof)
    line = next(line for line in text.splitlines() if "measured by ncu" in line)
    assert line.startswith("- floor bytes 402.7 MB vs DRAM 181.6 MB measured by ncu on v0: over-counted ×2.2")
    assert text.index("measured by ncu") < text.index("## Versions")  # in the roofline section
    assert "on v1" not in text  # only profiled versions carry a check
