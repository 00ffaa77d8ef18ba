"""The pure parts of benchmarks/search_peers.py: triton.Configs from a space, the table, time to within 1 %."""

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sp():
    spec = importlib.util.spec_from_file_location("search_peers", ROOT / "benchmarks" / "search_peers.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["search_peers"] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


def test_triton_configs_split_launch_options_from_constexprs_over_the_whole_space(sp):
    from kernelpilot.kernels.contract import load_kernel

    case = sp.CASES["softmax"]
    kf = load_kernel(case.path, interpreted=True)
    space = sp._space(kf, [])
    shape = {"M": 8192, "N": 4096}
    configs = space.configs()
    tcfgs = sp.triton_configs(configs, lambda c: case.to_meta(c, shape))
    assert len(tcfgs) == len(configs) == 7 * 3 * 5 * 3
    for cfg, t in zip(configs, tcfgs):
        assert t.num_warps == cfg["num_warps"] and t.num_stages == cfg["num_stages"]
        assert t.kwargs == {"BLOCK_N": cfg["BLOCK_N"], "ROWS": cfg["ROWS_PER_PROGRAM"],
                            "SINGLE_TILE": cfg["BLOCK_N"] >= 4096}
        assert "num_warps" not in t.kwargs
    # a shared extra constraint shrinks every tool's list the same way
    small = sp._space(kf, ["num_stages == 1", "ROWS_PER_PROGRAM == 1"]).configs()
    assert len(small) == 7 * 5 and all(c["num_stages"] == 1 for c in small)


def test_time_to_within_takes_the_first_point_within_the_margin(sp):
    trace = [(1.0, 200.0), (2.0, 150.0), (3.0, 101.5), (4.0, 100.9), (9.0, 100.0)]
    assert sp.time_to_within(trace, 100.0) == 4.0
    assert sp.time_to_within(trace, 100.0, pct=2.0) == 3.0
    assert sp.time_to_within(trace, 99.5) == 9.0          # 100.0 <= 100.495 < 100.9
    assert sp.time_to_within(trace, 99.0) is None         # 100.0 > 99.99
    assert sp.time_to_within(trace, 50.0) is None
    assert sp.time_to_within(trace, None) is None


def test_running_best_and_cumulative_worker_seconds(sp):
    assert sp.running_best([(1, None), (2, 5.0), (3, 7.0), (4, None), (5, 4.0)]) == [
        (2, 5.0), (3, 5.0), (4, 5.0), (5, 4.0)]
    evs = [SimpleNamespace(wall_s=2.0, ok=False, duration_ns=None),
           SimpleNamespace(wall_s=1.5, ok=True, duration_ns=300.0),
           SimpleNamespace(wall_s=0.5, ok=True, duration_ns=310.0),
           SimpleNamespace(wall_s=1.0, ok=True, duration_ns=299.0)]
    trace = sp.cumulative(evs)
    assert trace == [(3.5, 300.0), (4.0, 300.0), (5.0, 299.0)]
    assert sp.time_to_within(trace, 299.0) == 3.5   # 300 is within 1 % of 299


def test_table_rows_and_ratios_use_the_common_timer(sp):
    rows = [sp.Row("a", "k", best_us=10.0, common_us=12.0), sp.Row("b", "k", best_us=11.0),
            sp.Row("c", "k", note="failed: ImportError: no kernel_tuner"), sp.Row("d", "j", best_us=3.0)]
    sp.fill_ratios(rows)
    assert rows[0].ratio == pytest.approx(12.0 / 11.0) and rows[1].ratio == 1.0
    assert rows[2].ratio is None and rows[3].ratio == 1.0   # each kernel against its own best
    table = sp.render_table(rows).splitlines()
    assert table[0].split("|")[1:-1] == [f" {c} " for c in sp.COLUMNS]
    assert len(table) == 2 + len(rows)
    failed = table[4].split("|")[1:-1]
    assert failed[0].strip() == "c" and failed[5].strip() == "—" and "ImportError" in failed[-1]
    line = sp.render_row(sp.Row("x|y", "k", wall_s=123.456, best_us=1.23456))
    assert line.startswith("| x\\|y | k | — | — | 123.5 | 1.235 |")  # a pipe in a cell is escaped


def test_kernel_only_source_drops_the_host_wrapper(sp):
    src = sp.kernel_only_source((ROOT / "src/kernelpilot/examples/cuda/sgemm_db.cu").read_text())
    assert "__global__ void __launch_bounds__(THREADS) sgemm_tiled(" in src
    assert 'extern "C"' not in src and "<<<" not in src and "cuda_runtime.h" not in src
    assert src.count("{") == src.count("}")


def test_help_runs(sp, capsys):
    with pytest.raises(SystemExit) as exc:
        sp.main(["--help"])
    assert exc.value.code == 0 and "--budget-s" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        sp.main(["--only", "nope"])
    assert exc.value.code == 2


def test_version_clock_reads_the_search_clock_of_each_version(sp, tmp_path):
    for i, start in enumerate([0.0, 4.0, 9.0]):
        (tmp_path / f"v{i}").mkdir()
        (tmp_path / f"v{i}" / "config.json").write_text(f'{{"config": {{}}, "search_elapsed_s": {start}}}')
    (tmp_path / "v3").mkdir()  # a version with no clock (a run older than the field): left out
    (tmp_path / "v3" / "config.json").write_text('{"config": {}}')
    v = lambda i, wall, ns, acc: SimpleNamespace(index=i, wall_s=wall, ok=ns is not None, duration_ns=ns,  # noqa: E731
                                                 accepted=acc)
    versions = [v(2, 1.0, 90.0, True), v(0, 2.0, 120.0, True), v(1, 3.0, 80.0, False), v(3, 1.0, 70.0, True)]
    # v1 was faster but rejected (not beyond noise): the incumbent stays at v0's 120 until v2 is accepted
    assert sp.version_clock(tmp_path, versions) == [(2.0, 120.0), (7.0, 120.0), (10.0, 90.0)]


def test_a_kernel_that_cannot_run_is_a_row_not_a_crash(sp, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("runs the real benchmark on a GPU")
    out = tmp_path / "rows.json"
    assert sp.main(["--only", "softmax", "--out", str(tmp_path / "o"), "--json-out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| (setup) | softmax |" in text and "failed:" in text and "## With ratios" in text
    data = __import__("json").loads(out.read_text())
    assert data["env"]["torch"] == torch.__version__ and data["rows"][0]["tool"] == "(setup)"
    assert (tmp_path / "o" / "progress.log").read_text().strip()  # the traceback, for whoever reads the run


def test_each_tool_runs_with_its_own_empty_caches_and_the_environment_comes_back(sp, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/else")
    monkeypatch.delenv("KERNELPILOT_CACHE", raising=False)
    import os

    with sp.cold(tmp_path, "softmax-tune"):
        seen = {k: os.environ[k] for k in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "KERNELPILOT_CACHE_DIR",
                                           "KERNELPILOT_CACHE", "KERNELPILOT_EXPERIENCE")}
    with sp.cold(tmp_path, "softmax-optimize"):
        other = os.environ["TRITON_CACHE_DIR"]
    assert all(v.startswith(str(tmp_path / "caches" / "softmax-tune")) for v in seen.values())
    assert other != seen["TRITON_CACHE_DIR"] and not any((tmp_path / "caches" / "softmax-tune" / "triton").iterdir())
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/else" and "KERNELPILOT_CACHE" not in os.environ
