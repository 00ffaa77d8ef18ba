"""Issue 16, the terminal side: progress on stderr (also under --json, silent with --quiet, no control codes when
stderr is not a terminal, a bar when it is), tables that wrap to the width instead of cutting, and the slips users
reported ("PASS PASS", "not probed — not probed", "0.00x", an 18 s time written in µs).

The search runs are real (a pure-torch kernel file, a few seconds on the CPU); nothing is mocked."""

from __future__ import annotations

import io
import json
import re
import textwrap

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kernelpilot.cli import app
from tests.conftest import TORCH_KERNEL

runner = CliRunner()

#: A progress line of one evaluation, as printed when stderr is not a terminal: time, [done/total], eval N.
EVAL_LINE = re.compile(r"^\d\d:\d\d:\d\d \[(\d+)/(\d+)\] eval (\d+) \{.*\}: (\w+)")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A 9-config torch kernel whose config (256, 8) raises: one failure row in every search."""
    body = ('if (BLOCK, num_warps) == (256, 8):\n        raise RuntimeError("boom: BLOCK 256 with 8 warps")\n'
            '    out.copy_(x + y)')
    path = tmp_path_factory.mktemp("ux") / "k.py"
    path.write_text(textwrap.dedent(TORCH_KERNEL).replace("BODY", body))
    return path


@pytest.fixture(scope="module")
def tuned(kernel, tmp_path_factory):
    """``kernelpilot tune --json`` over the whole space, through the CLI (stderr is not a terminal here)."""
    cache = tmp_path_factory.mktemp("cache")
    res = runner.invoke(app, ["tune", str(kernel), "--strategy", "exhaustive", "--prune", "off", "--ab-samples", "3",
                              "--json"], env={"KERNELPILOT_CACHE": str(cache), "COLUMNS": None})
    return res, cache


def test_tune_json_keeps_stdout_one_object_and_prints_progress_with_totals_on_stderr(tuned):
    res, _ = tuned
    assert res.exit_code == 0, res.stdout + res.stderr
    data = json.loads(res.stdout)  # the whole of stdout is one JSON object
    assert len(data["evaluations"]) == 9 and data["failures"] == {"runtime_error": 1}
    lines = [m for m in map(EVAL_LINE.match, res.stderr.splitlines()) if m]
    assert [int(m[1]) for m in lines] == list(range(1, 10))  # one line per evaluation, counted
    assert {int(m[2]) for m in lines} == {9}  # the total: the space (no evaluation budget)
    assert [m[4] for m in lines].count("runtime_error") == 1
    assert "best " in res.stderr and "ETA 0:" in res.stderr  # best so far and the time left
    assert "\x1b" not in res.stderr  # not a terminal: no control codes


def test_quiet_silences_the_progress(kernel, tmp_path):
    res = runner.invoke(app, ["tune", str(kernel), "--strategy", "exhaustive", "--prune", "off", "--budget-evals",
                              "2", "--no-cache", "--ab-samples", "3", "--json", "--quiet"])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert len(json.loads(res.stdout)["evaluations"]) == 2
    assert not any(EVAL_LINE.match(line) for line in res.stderr.splitlines()) and "eval 1" not in res.stderr


def _reporter(terminal: bool):
    from kernelpilot.cli.progress import Reporter

    buf = io.StringIO()
    return Reporter(console=Console(file=buf, force_terminal=terminal, width=100)), buf


def _feed(reporter) -> None:
    from kernelpilot.progress import ProgressLine, Step, counter

    with reporter:
        for i in range(1, 4):
            step = Step("search", i, 12, best_ns=80_900.0, elapsed_s=7.0 * i)
            reporter(ProgressLine(f"{step.counts} eval {i}: ok 81.40 µs ({step.status})", step))
        tick = counter(reporter, "compile-ahead", "configs compiled", every=True)
        for i in range(1, 201):
            tick(i, 200)


def test_a_terminal_gets_a_bar_with_totals_best_and_eta():
    reporter, buf = _reporter(terminal=True)
    assert reporter.live
    _feed(reporter)
    text = buf.getvalue()
    assert "\x1b[" in text and "━" in text  # drawn as a Rich bar
    assert "search · best 80.90 µs" in text and "3/12" in text and "ETA 0:00:" in text
    assert "eval 3: ok 81.40 µs" in text  # the lines scroll above the bar
    assert "compile-ahead [100/200]" not in text  # counter ticks only move the bar


def test_no_terminal_gets_plain_lines_and_thinned_counter_ticks():
    reporter, buf = _reporter(terminal=False)
    assert not reporter.live
    _feed(reporter)
    lines = buf.getvalue().splitlines()
    assert "\x1b" not in buf.getvalue() and "━" not in buf.getvalue()
    assert lines[2].endswith("[3/12] eval 3: ok 81.40 µs (best 80.90 µs · ETA 0:01:03)")
    ticks = [line for line in lines if "configs compiled" in line]
    assert 10 <= len(ticks) <= 21 and ticks[-1].endswith("compile-ahead [200/200] configs compiled")


def _cells_in(text: str, cells: list[str]) -> None:
    """Every cell's full text is in a rendered table (columns read top to bottom, whitespace removed), uncut."""
    columns: dict[int, str] = {}
    for line in text.splitlines():
        for i, part in enumerate(re.split(r"[│┃]", line)):
            columns[i] = columns.get(i, "") + re.sub(r"\s", "", part)
    joined = "".join(columns.values())
    assert "…" not in text
    for cell in cells:
        assert re.sub(r"\s", "", cell) in joined, (cell, text)


@pytest.mark.parametrize("width", [60, 200])
def test_tables_wrap_to_the_width_and_never_cut(width):
    from kernelpilot.cli.common import table

    cells = ['{"BLOCK_SIZE":1024,"num_stages":3,"num_warps":8}', "21449.33", "wrong_result",
             "outputs outside atol: 1234 of 4096 elements differ; the first at index 17 (reference 0.5, kernel 0.25)"]
    t = table("config", "median", "status", "message")
    t.add_row(*cells)
    console = Console(file=io.StringIO(), width=width)
    console.print(t)
    text = console.file.getvalue()
    assert max(map(len, text.splitlines())) <= width
    _cells_in(text, cells)


def test_cache_show_fits_a_narrow_pipe_without_cutting_configs(tuned):
    res, cache = tuned
    shown = runner.invoke(app, ["cache", "show", "k-", "--root", str(cache)], env={"COLUMNS": "60"})
    assert shown.exit_code == 0, shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines() if line[:1] in "┏┃┡│└") <= 60, shown.stdout  # table lines
    keys = [json.dumps(e["config"], sort_keys=True, separators=(",", ":")) for e in json.loads(res.stdout)["evaluations"]]
    _cells_in(shown.stdout, keys + ["RuntimeError: boom: BLOCK 256 with 8 warps"])
    wide = runner.invoke(app, ["cache", "show", "k-", "--root", str(cache)], env={"COLUMNS": None})
    assert max(map(len, wide.stdout.splitlines())) > 80  # a pipe gets 120 columns, not Rich's 80


# -- the slips --------------------------------------------------------------------------------------------------------
def test_check_says_pass_once(write_kernel):
    res = runner.invoke(app, ["check", str(write_kernel())])
    assert res.exit_code == 0, res.stdout
    assert res.stdout.startswith("PASS on 3 seeds") and res.stdout.count("PASS") == 1  # it said "PASS PASS on ..."


def test_env_says_not_probed_once_and_why():
    from kernelpilot.measure.env import EnvInfo, NcuInfo, collect_env, render_env_md

    md = render_env_md(collect_env(probe_ncu=False))
    line = next(line for line in md.splitlines() if line.startswith("| ncu counters"))
    assert line.count("not probed") == 1 and " — " in line  # "not probed — no GPU to profile", say
    ncu = NcuInfo(path=None, version=None, counters_readable=None, counters_detail="not probed")  # an old env.json
    old = collect_env(probe_ncu=False).model_copy(update={"ncu": ncu})
    assert "| not probed |" in render_env_md(EnvInfo.model_validate(old.model_dump()))


def _timing(median_ns: float, measured: bool):
    from kernelpilot.measure.timing import TimingResult

    return TimingResult(timer="cuda events" if measured else "perf_counter", is_measurement=measured,
                        samples_ns=[median_ns], n_samples=1, median_ns=median_ns, q1_ns=median_ns, q3_ns=median_ns,
                        iqr_ns=0.0, min_ns=median_ns, mean_ns=median_ns, n_warmup=0, warmup_ms=0.0,
                        warmup_stable=True, flush_bytes=0, l2_bytes=None)


def test_benchmark_never_prints_0_00x_and_says_why_there_is_no_ratio():
    from kernelpilot.report.benchmark import BenchmarkResult, BenchmarkRow, render_benchmark_md

    rows = [BenchmarkRow(name="k (Triton, best config)", timing=_timing(18e9, measured=False)),
            BenchmarkRow(name="PyTorch eager (reference)", timing=_timing(3_890.0, measured=False))]
    md = render_benchmark_md(BenchmarkResult(shape={"N": 1}, config={}, device="cpu", rows=rows))
    assert "0.00x" not in md and "| 3.89 µs |" in md
    assert "— because the kernel ran under the Triton interpreter" in md
    gpu = [BenchmarkRow(name="k", timing=_timing(1e6, measured=True)),
           BenchmarkRow(name="eager", timing=_timing(3_100.0, measured=True))]
    md = render_benchmark_md(BenchmarkResult(shape={"N": 1}, config={}, device="cuda", rows=gpu))
    assert "| 0.0031x |" in md and "0.00x" not in md  # enough digits, never rounded to nothing


def test_an_18_s_time_is_written_in_seconds():
    from kernelpilot.fmt import format_duration_ns
    from kernelpilot.report.benchmark import BenchmarkResult, BenchmarkRow, render_benchmark_md

    assert [format_duration_ns(v) for v in (512, 81_400, 21_449_330, 18e9, None)] == [
        "512 ns", "81.40 µs", "21.449 ms", "18.000 s", "—"]
    rows = [BenchmarkRow(name="k", timing=_timing(18e9, measured=False))]
    md = render_benchmark_md(BenchmarkResult(shape={"N": 1}, config={}, device="cpu", rows=rows))
    assert "| 18.000 s |" in md and "18000000" not in md


def test_tune_report_and_cli_use_adaptive_units(tuned):
    from kernelpilot.app.tune import TuneResult
    from kernelpilot.report.tune_md import render_tune_md

    res, _ = tuned
    result = TuneResult.model_validate_json(res.stdout)
    slow = result.evaluations[0].model_copy(update={"duration_ns": 18e9, "iqr_ns": 2e6})
    md = render_tune_md(result.model_copy(update={"evaluations": [slow, *result.evaluations[1:]]}))
    assert "| 18.000 s | 2.000 ms |" in md and "18000000.00" not in md
