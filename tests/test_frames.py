"""``to_dataframe()`` of every result (issue 16), checked against the records of real CPU runs: one row per evaluation
or version, units in the column names, failures present as rows with their status and NaN times (never 0)."""

from __future__ import annotations

import json
import math
import sys
import textwrap

import pytest

from kernelpilot import api
from tests.conftest import TORCH_KERNEL

pd = pytest.importorskip("pandas")

#: BLOCK 128 raises: the guided strategy's first move (BLOCK 64→128) is a failed version, every search has failures.
BODY = 'if BLOCK == 128:\n        raise RuntimeError("boom: BLOCK 128")\n    out.copy_(x + y)'


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("frames")
    good = root / "k.py"
    good.write_text(textwrap.dedent(TORCH_KERNEL).replace("BODY", BODY))
    wrong = root / "wrong.py"
    wrong.write_text(textwrap.dedent(TORCH_KERNEL).replace("BODY", "out.copy_(x - y)"))
    return root, good, wrong


def _same(a: float, b: float | None) -> bool:
    return math.isnan(a) if b is None else a == b


def test_tune_frame_matches_the_searchs_records(files):
    from kernelpilot.app.tune_run import read_lines

    root, kernel, _ = files
    result = api.tune(kernel, strategy="exhaustive", prune=False, ab_samples=3, use_cache=False, out=root / "tune")
    df = result.to_dataframe()
    records = [line.evaluation for line in read_lines(root / "tune" / "evaluations.jsonl")[0]]
    assert len(df) == len(records) == 9
    assert list(df.columns[:8]) == ["index", "parent", "config", "status", "version_status", "ok", "accepted",
                                    "duration_ns"]
    assert {"config.BLOCK", "config.num_warps", "iqr_ns", "pct_of_roofline", "speedup_vs_eager"} <= set(df.columns)
    assert df["duration_ns"].dtype == "float64" and df["iqr_ns"].dtype == "float64" and df["index"].dtype == "int64"
    assert df["config.BLOCK"].tolist() == [r.config["BLOCK"] for r in records]
    for (_, row), rec in zip(df.iterrows(), records):
        assert row["status"] == rec.status and row["config"] == rec.key
        assert _same(row["duration_ns"], rec.duration_ns) and _same(row["iqr_ns"], rec.iqr_ns)
        assert row["n_samples"] == len(rec.samples_ns)
    failed = df[df["status"] == "runtime_error"]
    assert len(failed) == 3 and failed["duration_ns"].isna().all() and (failed["ok"] == False).all()  # noqa: E712
    assert failed["accepted"].isna().all() and (failed["version_status"] == "failed").all()
    assert (df.loc[df["ok"], "duration_ns"] > 0).all()
    assert df["pct_of_roofline"].isna().all()  # interpreted: no share of a GPU's roofline is claimed


def test_optimize_and_report_frames_match_the_version_folders(files):
    root, kernel, _ = files
    result = api.optimize(kernel, out=root / "run", iterations=2, benchmark=False)
    df = result.to_dataframe()
    outcomes = [json.loads((root / "run" / f"v{i}" / "outcome.json").read_text()) for i in range(len(df))]
    assert len(df) == 3 and df["index"].tolist() == [0, 1, 2]
    assert df.loc[0, "version_status"] == "baseline" and df.loc[0, "change"] == ""
    for (_, row), rec in zip(df.iterrows(), outcomes):
        # outcome.json leaves out the fields at their default (None here)
        assert row["status"] == rec["status"] and _same(row["duration_ns"], rec.get("duration_ns"))
        assert _same(row["speedup_vs_first"], rec.get("speedup_vs_first"))
        assert (pd.isna(row["parent"]) and rec.get("parent") is None) or row["parent"] == rec["parent"]
    failed = df[df["config.BLOCK"] == 128]
    assert len(failed) == 1 and failed["status"].item() == "runtime_error" and math.isnan(failed["duration_ns"].item())
    assert df["speedup_vs_eager"].isna().all()  # no baselines under the interpreter
    again = api.report(root / "run").to_dataframe()
    pd.testing.assert_frame_equal(again.drop(columns=["cached"]), df.drop(columns=["cached"]))


def test_session_frame_has_every_version_and_the_finish_baselines(files):
    root, kernel, wrong = files
    run = root / "session"
    api.session_start(kernel, out=run, git=False, no_experience=True)
    api.session_try(run, wrong, hypothesis="subtract instead of add")
    status = api.session_finish(run)
    df = status.to_dataframe()
    mems = [json.loads((run / f"v{i}" / "memory.json").read_text()) for i in (0, 1)]
    assert df["version"].tolist() == [0, 1] and df["outcome"].tolist() == ["baseline", "invalid"]
    assert df.loc[0, "duration_ns"] == mems[0]["duration_ns"] and df.loc[0, "iqr_ns"] == mems[0]["iqr_ns"]
    assert df.loc[1, "status"] == "wrong_result" and math.isnan(df.loc[1, "duration_ns"])
    assert df["incumbent"].tolist() == [True, False] and df["parent"].isna().tolist() == [True, False]
    bench = json.loads((run / "benchmark.json").read_text())
    assert status.baselines_ns == {r["name"]: r["timing"]["median_ns"] for r in bench["rows"][1:] if r["timing"]}
    assert df["speedup_vs_eager"].isna().all()  # v0's time is interpreted: no speedup is claimed
    assert df["duration_ns"].dtype == "float64" and df["version"].dtype == "int64"


def test_bench_frame_rows_and_the_skipped_baseline(files):
    _, kernel, _ = files
    result = api.bench(kernel, baselines=True)
    df = result.to_dataframe()
    assert df["name"].tolist() == [r.name for r in result.baselines.rows] and len(df) == 3
    assert df.loc[0, "duration_ns"] == result.timing.median_ns and df.loc[0, "iqr_ns"] == result.timing.iqr_ns
    compiled = df.iloc[2]
    assert math.isnan(compiled["duration_ns"]) and compiled["n_samples"] == 0 and "no GPU" in compiled["skipped"]
    assert df["time_vs_kernel"].isna().all()  # an interpreted kernel time is compared with nothing


def test_baseline_speedups_by_name():
    from kernelpilot.records.frames import baseline_speedups

    got = baseline_speedups({"PyTorch eager (reference)": 300.0, "torch.compile (reference, default mode)": 150.0},
                            100.0)
    assert got == {"speedup_vs_eager": 3.0, "speedup_vs_torch_compile": 1.5}
    assert all(math.isnan(v) for v in baseline_speedups({"eager": 300.0}, 100.0, measured=False).values())
    assert all(math.isnan(v) for v in baseline_speedups({"eager": 300.0}, None).values())


def test_without_pandas_the_error_says_how_to_install_it(monkeypatch):
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.report.benchmark import BenchmarkResult

    monkeypatch.setitem(sys.modules, "pandas", None)  # what an environment without pandas imports
    with pytest.raises(ImportError) as info:
        BenchmarkResult(shape={}, config={}, device="cpu", rows=[]).to_dataframe()
    assert isinstance(info.value, KernelpilotError) and "kernelpilot[dataframe]" in info.value.hint
