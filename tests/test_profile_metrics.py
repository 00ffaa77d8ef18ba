"""Reading Nsight Compute reports into KernelMetrics (kernelpilot.profile.metrics / report_reader).

Expected numbers come from /work/shared/fixtures/ncu/README.md (what ncu showed for the two H200 reports).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelpilot.errors import ReportError, ToolMissingError
from kernelpilot.profile import metrics as metrics_mod
from kernelpilot.profile import report_reader
from kernelpilot.profile.metrics import KernelMetrics, main_kernel, metrics_from_action, read_report, read_report_here

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
ADD = FIXTURES / "h200_add_fp32_memory_bound.ncu-rep"
MATMUL = FIXTURES / "h200_matmul_bf16_4096.ncu-rep"


@pytest.fixture(scope="module")
def add() -> KernelMetrics:
    launches = read_report(ADD)
    assert len(launches) == 1
    return launches[0]


@pytest.fixture(scope="module")
def matmul() -> KernelMetrics:
    launches = read_report(MATMUL)
    assert len(launches) == 1
    return launches[0]


# --- the two real reports -----------------------------------------------------------------------------------


def test_add_fixture_values_match_readme(add: KernelMetrics) -> None:
    assert add.kernel_name == "add_k"
    assert add.device_name == "NVIDIA H200"
    assert add.compute_capability == (9, 0)
    assert add.duration_ns == pytest.approx(46_100, abs=50)  # README: 46.1 us
    assert add.memory_sol_pct == pytest.approx(81.9, abs=0.05)
    assert add.compute_sol_pct == pytest.approx(5.6, abs=0.05)
    assert add.dram_pct == pytest.approx(81.9, abs=0.05)
    assert add.waves_per_sm == pytest.approx(7.76, abs=0.005)
    assert add.achieved_occupancy_pct == pytest.approx(81.7, abs=0.05)
    assert add.theoretical_occupancy_pct == pytest.approx(100.0)
    assert (add.grid_size, add.block_size, add.sm_count) == (16384, 128, 132)
    assert add.registers_per_thread == 26
    assert add.shared_mem_per_block_bytes == 0
    assert add.shared_mem_driver_bytes == 1024
    assert add.shared_mem_config_bytes == 32768


def test_matmul_fixture_values_match_readme(matmul: KernelMetrics) -> None:
    assert matmul.kernel_name == "mm_k"
    assert matmul.duration_ns == pytest.approx(204_400, abs=50)  # README: 204.4 us
    assert matmul.compute_sol_pct == pytest.approx(78.7, abs=0.05)
    assert matmul.memory_sol_pct == pytest.approx(74.8, abs=0.05)
    assert matmul.dram_pct == pytest.approx(20.3, abs=0.05)
    assert matmul.registers_per_thread == 110
    assert (matmul.grid_size, matmul.block_size) == (1024, 256)  # grid 32x32, block 256
    assert matmul.shared_mem_per_block_bytes == 98304  # static 0 + dynamic 98304
    assert matmul.shared_mem_config_bytes == 233472
    assert matmul.theoretical_occupancy_pct == pytest.approx(25.0)
    assert matmul.waves_per_sm == pytest.approx(1024 / (2 * 132))  # 2 blocks/SM on 132 SMs


def test_l1_l2_throughput_and_hit_rates(add: KernelMetrics, matmul: KernelMetrics) -> None:
    # GPU Speed Of Light section header values of the reports.
    assert matmul.l1_throughput_pct == pytest.approx(66.61, abs=0.01)
    assert matmul.l2_throughput_pct == pytest.approx(74.81, abs=0.01)
    assert matmul.l2_hit_rate_pct == pytest.approx(79.61, abs=0.01)
    assert add.l2_hit_rate_pct == pytest.approx(34.04, abs=0.01)
    # Memory-SOL breakdown per unit: the memory SOL % is the largest of them.
    assert max(add.memory_units_pct.values()) == pytest.approx(add.memory_sol_pct)
    assert max(add.memory_units_pct, key=add.memory_units_pct.__getitem__) == "DRAM"
    assert max(matmul.memory_units_pct, key=matmul.memory_units_pct.__getitem__) == "L2"


def test_clocks_in_hz(add: KernelMetrics, matmul: KernelMetrics) -> None:
    # H200: SM clock at most 1.98 GHz, HBM3e 3.2 GHz (device__attribute_max_*_frequency_khz in the reports).
    for m in (add, matmul):
        assert m.sm_frequency_hz is not None and 1.0e9 < m.sm_frequency_hz <= 1.981e9
        assert m.dram_frequency_hz == pytest.approx(3.2e9, rel=0.01)


def test_occupancy_limits_and_limiter(add: KernelMetrics, matmul: KernelMetrics) -> None:
    assert matmul.occupancy_limits_blocks["registers"] == 2
    assert matmul.occupancy_limits_blocks["shared_mem"] == 2
    assert matmul.occupancy_limits_blocks["warps"] == 8
    assert matmul.occupancy_limits_blocks["blocks"] == 32
    assert matmul.occupancy_limiter == "registers"
    assert matmul.occupancy_limiters == ["registers", "shared_mem"]
    # add: registers and warps both allow 16 blocks of 4 warps = 64 warps; the warp cap is what binds.
    assert add.occupancy_limits_blocks["registers"] == 16 and add.occupancy_limits_blocks["warps"] == 16
    assert add.occupancy_limiter == "warps"
    assert add.occupancy_limiters == ["warps", "registers"]


def test_no_spills(add: KernelMetrics, matmul: KernelMetrics) -> None:
    for m in (add, matmul):
        assert m.local_load_inst_count == 0 and m.local_store_inst_count == 0
        assert m.register_spill_inst_count == 0


def test_stalls_sorted_selected_excluded_and_shares_consistent(add: KernelMetrics, matmul: KernelMetrics) -> None:
    ncu_report = report_reader.import_ncu_report()
    for path, m, top in ((ADD, add, "long_scoreboard"), (MATMUL, matmul, "barrier")):
        assert len(m.top_stalls) == 5
        assert m.top_stalls[0].reason == top
        ratios = [s.ratio for s in m.top_stalls]
        assert ratios == sorted(ratios, reverse=True)
        assert all(s.reason != "selected" for s in m.top_stalls)
        # Shares are of the sum over all stall reasons (selected excluded), recomputed here from the report.
        action = ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)
        total = sum(
            action[n].value()
            for n in action.metric_names()
            if n.startswith("smsp__average_warps_issue_stalled_")
            and n.endswith("_per_issue_active.ratio")
            and n != "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio"
        )
        for s in m.top_stalls:
            assert s.share_pct == pytest.approx(s.ratio / total * 100)
        assert 50 < sum(s.share_pct for s in m.top_stalls) <= 100
    assert add.top_stalls[0].share_pct == pytest.approx(72.56, abs=0.01)


def test_rules(add: KernelMetrics, matmul: KernelMetrics) -> None:
    sol = {m.kernel_name: next(r for r in m.rules if r.identifier == "SOLBottleneck") for m in (add, matmul)}
    assert sol["mm_k"].title == "Balanced Throughput"
    assert sol["add_k"].title == "High Throughput"
    assert "DRAM" in sol["add_k"].message
    assert sol["mm_k"].section == "SpeedOfLight" and sol["mm_k"].type == "ok"
    assert sol["mm_k"].estimated_speedup_pct is None
    tail = next(r for r in matmul.rules if r.identifier == "LaunchConfiguration")
    assert tail.title == "Tail Effect"
    assert tail.estimated_speedup_pct == pytest.approx(25.0)
    assert tail.speedup_type == "global" and tail.type == "optimization"


def test_sources_name_the_metrics(add: KernelMetrics) -> None:
    expected = {
        "duration_ns": "gpu__time_duration.sum",
        "compute_sol_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "memory_sol_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
        "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
        "registers_per_thread": "launch__registers_per_thread",
        "waves_per_sm": "launch__waves_per_multiprocessor",
        "l1_throughput_pct": "l1tex__throughput.avg.pct_of_peak_sustained_active",
        "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm_frequency_hz": "gpc__cycles_elapsed.avg.per_second",
        "occupancy_limits_blocks.registers": "launch__occupancy_limit_registers",
        "memory_units_pct.DRAM": "dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
    }
    for field, metric in expected.items():
        assert add.sources[field] == metric
    # Every filled scalar field has a source.
    for field, value in add.model_dump().items():
        if field != "sources" and value not in (None, [], {}):
            assert field in add.sources, field


# --- bad files --------------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="does not exist"):
        read_report(tmp_path / "nope.ncu-rep")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.ncu-rep"
    path.write_bytes(b"")
    with pytest.raises(ReportError, match="empty") as info:
        read_report(path)
    assert str(path) in info.value.message and info.value.hint


def test_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "garbage.ncu-rep"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(ReportError, match="not an Nsight Compute report"):
        read_report(path)


def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "report.csv"
    path.write_text('"ID","Kernel Name"\n"0","add_k"\n')
    with pytest.raises(ReportError, match="not an Nsight Compute report"):
        read_report(path)


def test_truncated_report(tmp_path: Path) -> None:
    path = tmp_path / "truncated.ncu-rep"
    path.write_bytes(ADD.read_bytes()[:3000])
    with pytest.raises(ReportError, match="no profiled kernels"):
        read_report(path)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="not a file"):
        read_report(tmp_path)


def test_main_kernel_empty_list() -> None:
    with pytest.raises(ReportError):
        main_kernel([])


# --- normalizer on hand-made actions (reduced section sets, units) ------------------------------------------


class _Metric:
    def __init__(self, value: Any, unit: str) -> None:
        self._value, self._unit = value, unit

    def value(self) -> Any:
        return self._value

    def unit(self) -> str:
        return self._unit


class _Action:
    """Stands in for ncu_report.IAction with only the given metrics (like a report made with few sections)."""

    def __init__(self, name: str, metrics: dict[str, tuple[Any, str]]) -> None:
        self._name = name
        self._metrics = {k: _Metric(*v) for k, v in metrics.items()}

    def name(self) -> str:
        return self._name

    def metric_names(self) -> tuple[str, ...]:
        return tuple(self._metrics)

    def __getitem__(self, key: str) -> _Metric:
        return self._metrics[key]


def test_reduced_report_loads_with_none_fields() -> None:
    m = metrics_from_action(_Action("k", {
        "gpu__time_duration.sum": (12.5, "usecond"),
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": (10.0, "%"),
    }))
    assert m.duration_ns == pytest.approx(12_500)  # converted from microseconds
    assert m.compute_sol_pct == 10.0
    assert m.memory_sol_pct is None and m.achieved_occupancy_pct is None and m.registers_per_thread is None
    assert m.top_stalls == [] and m.rules == [] and m.occupancy_limits_blocks == {}
    assert m.occupancy_limiter is None and m.memory_units_pct == {}
    assert set(m.sources) == {"kernel_name", "duration_ns", "compute_sol_pct"}


@pytest.mark.parametrize(
    "value, unit, duration_ns",
    [(5.0, "msecond", 5e6), (5.0, "ms", 5e6), (7.0, "us", 7e3), (300.0, "nsecond", 300.0), (2.0, "second", 2e9)],
)
def test_duration_units(value: float, unit: str, duration_ns: float) -> None:
    m = metrics_from_action(_Action("k", {"gpu__time_duration.sum": (value, unit)}))
    assert m.duration_ns == pytest.approx(duration_ns)


def test_frequency_and_bytes_units() -> None:
    m = metrics_from_action(_Action("k", {
        "gpc__cycles_elapsed.avg.per_second": (1.755, "Ghz"),
        "dram__cycles_elapsed.avg.per_second": (2619.0, "Mhz"),
        "launch__shared_mem_per_block_static": (2.0, "Kbyte/block"),
        "launch__shared_mem_per_block_dynamic": (98.304, "Kbyte/block"),
        "launch__shared_mem_config_size": (233.472, "Kbyte"),
    }))
    assert m.sm_frequency_hz == pytest.approx(1.755e9)
    assert m.dram_frequency_hz == pytest.approx(2.619e9)
    assert m.shared_mem_per_block_bytes == 2000 + 98304
    assert m.shared_mem_config_bytes == 233472


def test_unknown_unit_is_an_error() -> None:
    with pytest.raises(ReportError, match="cannot convert"):
        metrics_from_action(_Action("k", {"gpu__time_duration.sum": (1.0, "fortnight")}))


def test_stall_shares_sum_to_100_and_selected_excluded() -> None:
    stall = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    m = metrics_from_action(_Action("k", {
        stall.format("long_scoreboard"): (6.0, "inst"),
        stall.format("barrier"): (3.0, "inst"),
        stall.format("not_selected"): (1.0, "inst"),
        stall.format("selected"): (1.0, "inst"),
    }))
    assert [s.reason for s in m.top_stalls] == ["long_scoreboard", "barrier", "not_selected"]
    assert [s.share_pct for s in m.top_stalls] == pytest.approx([60.0, 30.0, 10.0])
    assert sum(s.share_pct for s in m.top_stalls) == pytest.approx(100.0)


def test_read_report_keeps_order_and_main_kernel_is_longest(monkeypatch: pytest.MonkeyPatch) -> None:
    actions = [
        _Action("short", {"gpu__time_duration.sum": (10.0, "ns")}),
        _Action("long", {"gpu__time_duration.sum": (30.0, "ns")}),
        _Action("mid", {"gpu__time_duration.sum": (20.0, "ns")}),
    ]
    monkeypatch.setattr(metrics_mod, "load_actions", lambda path: actions)
    launches = read_report_here("three.ncu-rep")
    assert [m.kernel_name for m in launches] == ["short", "long", "mid"]
    assert main_kernel(launches).kernel_name == "long"


# --- finding ncu_report -----------------------------------------------------------------------------------


def _hide_pip_ncu_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a plain `import ncu_report` fail for the duration of a test."""
    monkeypatch.delitem(sys.modules, "ncu_report", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not os.path.exists(os.path.join(p or ".", "ncu_report"))])


def test_import_falls_back_to_nsight_compute_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install = tmp_path / "nsight-compute" / "2099.1.0"
    (install / "extras" / "python").mkdir(parents=True)
    (install / "extras" / "python" / "ncu_report.py").write_text("FROM_INSTALL = True\n")
    (install / "ncu").write_text("#!/bin/sh\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").symlink_to(install / "ncu")  # like /usr/local/bin/ncu -> <install>/ncu
    _hide_pip_ncu_report(monkeypatch)
    monkeypatch.setattr(report_reader.shutil, "which", lambda name: str(bin_dir / "ncu"))
    monkeypatch.setattr(report_reader, "_INSTALL_GLOBS", ())
    module = report_reader.import_ncu_report()
    assert getattr(module, "FROM_INSTALL", False) is True
    assert str(install / "extras" / "python") in sys.path


def test_import_missing_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_pip_ncu_report(monkeypatch)
    monkeypatch.setattr(report_reader.shutil, "which", lambda name: None)
    monkeypatch.setattr(report_reader, "_INSTALL_GLOBS", ())
    with pytest.raises(ToolMissingError) as info:
        report_reader.import_ncu_report()
    assert "pip install ncu-report" in info.value.hint


def test_reader_crash_becomes_a_report_error(tmp_path: Path) -> None:
    """A reader that dies (as ncu's SWIG build did beside torch) is an error, not a crash of the caller."""
    bad = tmp_path / "garbage.ncu-rep"
    bad.write_bytes(b"NVR\0" + os.urandom(4096))
    with pytest.raises(ReportError):
        read_report(bad)
