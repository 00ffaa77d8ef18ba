"""``kernelpilot kernelbench run PROBLEMS SOLUTIONS``: a folder in KernelBench's naming, each solution in its own
worker under the Triton interpreter (docs/kernelbench.md, "kernelbench run"); fast_p on given rows."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kernelpilot import api
from kernelpilot.app.kernelbench_pairs import pair_folder, solution_key
from kernelpilot.app.kernelbench_run import KernelBenchRow, _row, fast_p, fast_p_table
from kernelpilot.errors import OptionError

DATA = Path(__file__).parent / "data" / "kernelbench"
CRASH = "\n        import os\n        os._exit(3)  # the worker dies mid-check\n"


def _crashing() -> str:
    src = (DATA / "1_ReLU_small_triton.py").read_text()
    head = "    def forward(self, x: torch.Tensor) -> torch.Tensor:"
    assert head in src
    return src.replace(head, head + CRASH, 1)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """KernelBench's layout: problems under level1/ and level2/; solutions in its generated naming, one named like
    its problem file, one crashing, one naming a problem that does not exist, and a file that is no solution."""
    root = tmp_path_factory.mktemp("kb")
    (root / "P" / "level1").mkdir(parents=True)
    (root / "P" / "level2").mkdir()
    (root / "S" / "level2").mkdir(parents=True)
    shutil.copy(DATA / "1_ReLU_small.py", root / "P" / "level1")
    shutil.copy(DATA / "76_Gemm_Add_ReLU_small.py", root / "P" / "level2")
    (root / "P" / "level1" / "2_Other_small.py").write_text((DATA / "1_ReLU_small.py").read_text())
    for sample, name in enumerate(("triton", "wrong", "library")):
        shutil.copy(DATA / f"1_ReLU_small_{name}.py", root / "S" / f"level_1_problem_1_sample_{sample}_kernel.py")
    (root / "S" / "level_1_problem_1_sample_3_kernel.py").write_text(_crashing())
    shutil.copy(DATA / "76_Gemm_Add_ReLU_small_triton.py", root / "S" / "level2" / "76_Gemm_Add_ReLU_small.py")
    shutil.copy(DATA / "1_ReLU_small_triton.py", root / "S" / "level_1_problem_9_sample_0_kernel.py")
    (root / "S" / "notes.py").write_text("x = 1\n")
    return root


@pytest.fixture(scope="module")
def ran(folder: Path) -> Any:
    lines: list[str] = []
    return api.kernelbench_run(folder / "P", folder / "S", out=folder / "out", timeout_s=120, log=lines.append), lines


def test_each_solution_gets_its_status_by_name_and_a_crash_stops_nothing(ran: Any, folder: Path) -> None:
    res, lines = ran
    got = [(r.level, r.problem_id, r.sample_id, r.status, r.failure) for r in res.rows]
    assert got == [(1, 1, 0, "correct", None), (1, 1, 1, "incorrect", "wrong_result"),
                   (1, 1, 2, "kernel_not_launched", "kernel_not_launched"), (1, 1, 3, "worker_crash", "worker_crash"),
                   (2, 76, 0, "correct", None)]  # the pair after the crash still ran
    assert "relu_kernel" in res.rows[2].message and "exit code 3" in res.rows[3].message
    assert (res.n_problems, res.n_correct, res.device, res.measured) == (5, 2, "cpu", False)
    # nothing timed without a GPU: no duration, no speedup, no fast_p made up
    assert all(r.durations_ns == {"solution": None, "eager": None, "compile": None} for r in res.rows)
    assert all(r.speedup_vs_eager is None and r.speedup_vs_compile is None for r in res.rows)
    assert res.fast_p == {b: {"0": None, "1": None, "1.5": None, "2": None} for b in ("eager", "compile")}
    assert len(lines) == 5 and "[4/5] level 1 problem 1 sample 3: worker_crash" in lines[3]
    sol = folder / "S" / "level_1_problem_1_sample_0_kernel.py"
    assert res.rows[0].files["solution"] == {"path": str(sol.resolve()),
                                             "sha256": hashlib.sha256(sol.read_bytes()).hexdigest()}


def test_unpaired_files_are_listed_with_why(ran: Any, folder: Path) -> None:
    res, _ = ran
    assert set(res.unpaired_solutions) == {str(folder / "S" / "level_1_problem_9_sample_0_kernel.py"),
                                           str(folder / "S" / "notes.py")}
    assert "no problem 9 of level 1" in res.unpaired_solutions[str(folder / "S" / "level_1_problem_9_sample_0_kernel.py")]
    assert "no top-level class ModelNew" in res.unpaired_solutions[str(folder / "S" / "notes.py")]
    assert list(res.unpaired_problems) == [str((folder / "P" / "level1" / "2_Other_small.py").resolve())]


def test_the_json_csv_and_page_say_the_same(ran: Any, folder: Path) -> None:
    pd = pytest.importorskip("pandas")
    res, _ = ran
    out = folder / "out"
    assert set(res.files) == {"json", "csv", "html"}
    data = json.loads((out / "kernelbench.json").read_text())
    assert [r["status"] for r in data["rows"]] == [r.status for r in res.rows] and data["fast_p"] == res.fast_p
    frame = pd.read_csv(out / "kernelbench.csv")
    assert list(frame["status"]) == [r.status for r in res.rows]
    assert frame["speedup_vs_eager"].isna().all() and list(frame["problem_id"]) == [1, 1, 1, 1, 76]
    again = api.kernelbench_frame(out)  # from the JSON
    assert list(again["status"]) == list(frame["status"]) and list(again.columns) == list(frame.columns)
    page = (out / "report.html").read_text()
    for status in ("correct", "incorrect", "wrong_result", "kernel_not_launched", "worker_crash"):
        assert f">{status}<" in page
    assert "<script" not in page and "connect-src &#x27;none&#x27;" in page  # nothing timed: no chart, nothing loaded
    assert "level_1_problem_9_sample_0_kernel.py: no problem 9" in page


def _r(correct: bool, eager: float | None, compile_: float | None = None) -> KernelBenchRow:
    return KernelBenchRow(level=1, problem_id=1, problem="1_X", sample_id=0, files={}, status="correct" if correct
                          else "incorrect", correct=correct, speedup_vs_eager=eager, speedup_vs_compile=compile_)


def test_fast_p_is_kernelbench_s_over_every_row() -> None:
    rows = [_r(True, 0.5, 0.4), _r(True, 1.0, 0.9), _r(True, 1.2, 1.6), _r(True, 3.0, 2.0), _r(False, None),
            _r(False, None), _r(False, None), _r(False, None)]
    assert [fast_p(rows, p) for p in (0, 1, 1.5, 2)] == [4 / 8, 2 / 8, 1 / 8, 1 / 8]  # strictly over p
    assert [fast_p(rows, p, "compile") for p in (0, 1, 1.5, 2)] == [4 / 8, 2 / 8, 2 / 8, 0.0]  # 2.0 is not over 2
    assert fast_p_table(rows)["compile"] == {"0": 0.5, "1": 0.25, "1.5": 0.25, "2": 0.0}
    # a correct row whose speedup was not measured: fast_p cannot be known, never counted as 0 or as fast
    assert fast_p([*rows, _r(True, None, 2.0)], 1.0) is None and fast_p([*rows, _r(True, None, 2.0)], 1, "compile") == 3 / 9
    assert fast_p([_r(False, None)], 0.0) == 0.0 and fast_p([], 1.0) == 0.0
    with pytest.raises(ValueError):
        fast_p(rows, 1.0, "inductor")


def test_a_row_s_speedups_and_the_over_10x_flag() -> None:
    from kernelpilot.app.kernelbench_pairs import Pair, Problem

    pair = Pair(problem=Problem(level=1, problem_id=1, name="1_X", path=Path("1_X.py")), solution=Path("s.py"),
                sample_id=0)
    timed = {"measured": True, "device": "cuda:0", "durations_ns": {"solution": 100.0, "eager": 1500.0,
                                                                    "compile": 800.0}}
    row = _row(pair, {}, {"failure": None, **timed})
    assert (row.speedup_vs_eager, row.speedup_vs_compile, row.excessive_speedup) == (15.0, 8.0, True)
    assert row.status == "correct"  # flagged, not refused: kernelpilot's stages already passed it
    wrong = _row(pair, {}, {"failure": "stale_result", **timed})
    assert (wrong.status, wrong.failure, wrong.speedup_vs_eager) == ("incorrect", "stale_result", None)
    unmeasured = _row(pair, {}, {"failure": None, **timed, "measured": False})
    assert unmeasured.speedup_vs_eager is None  # an interpreter's time is no speed


def test_the_page_of_a_measured_run_draws_the_speedups_offline() -> None:
    pytest.importorskip("plotly")
    from kernelpilot.report.kernelbench_html import render_kernelbench_html

    def row(pid: int, correct: bool, s: float | None) -> dict[str, Any]:
        return {"level": 1, "problem_id": pid, "problem": f"{pid}_X<b>", "sample_id": 0, "status": "correct",
                "correct": correct, "failure": None, "message": "", "excessive_speedup": bool(s and s > 10),
                "files": {"solution": {"path": f"/s/{pid}.py"}}, "speedup_vs_eager": s, "speedup_vs_compile": s,
                "durations_ns": {"solution": 10.0, "eager": 10.0 * (s or 1), "compile": 10.0}}

    page = render_kernelbench_html({"measured": True, "rows": [row(1, True, 2.0), row(2, True, 12.0),
                                                               row(3, False, None)],
                                    "fast_p": {"eager": {"0": 2 / 3, "1": 2 / 3}}, "device": "cuda:0"})
    assert 'data-points="2"' in page and "over 10× (flagged)" in page and "1_X&lt;b&gt;" in page
    assert "connect-src &#x27;none&#x27;" in page and "http://" not in page.split("<script")[0]
    assert "0.667" in page


def test_pairing_by_level_folder_name_and_level_option(folder: Path, tmp_path: Path) -> None:
    assert solution_key(Path("level_1_problem_19_sample_0_kernel.py")) == (1, 19, 0)
    assert solution_key(Path("level2_problem_7.py")) == (2, 7, 0) and solution_key(Path("19_ReLU.py")) is None
    only1 = pair_folder(folder / "P", folder / "S", level=1)  # --level 1: the level-2 solution is listed, not run
    assert [p.sample_id for p in only1.pairs] == [0, 1, 2, 3]
    assert "level 2" in only1.unpaired_solutions[str(folder / "S" / "level2" / "76_Gemm_Add_ReLU_small.py")]
    one = pair_folder(folder / "P" / "level2", folder / "S")  # one level folder as PROBLEMS
    assert [(p.problem.level, p.problem.problem_id) for p in one.pairs] == [(2, 76)]
    assert "no problem 1 of level 1" in one.unpaired_solutions[str(folder / "S" / "level_1_problem_1_sample_0_kernel.py")]
    # a solution named like a problem file that two levels hold: ambiguous without a level folder or --level
    (tmp_path / "P" / "level1").mkdir(parents=True)
    (tmp_path / "P" / "level3").mkdir()
    (tmp_path / "S").mkdir()
    for lv in ("level1", "level3"):
        shutil.copy(DATA / "1_ReLU_small.py", tmp_path / "P" / lv)
    shutil.copy(DATA / "1_ReLU_small_triton.py", tmp_path / "S" / "1_ReLU_small.py")
    amb = pair_folder(tmp_path / "P", tmp_path / "S")
    assert not amb.pairs and "levels [1, 3]" in amb.unpaired_solutions[str(tmp_path / "S" / "1_ReLU_small.py")]
    assert [p.problem.level for p in pair_folder(tmp_path / "P", tmp_path / "S", level=3).pairs] == [3]
    with pytest.raises(OptionError, match="no solution file pairs"):
        api.kernelbench_run(tmp_path / "P", tmp_path / "S", out=tmp_path / "o")
    with pytest.raises(OptionError, match="not a folder"):
        api.kernelbench_run(tmp_path / "nope", tmp_path / "S", out=tmp_path / "o")


def test_a_solution_that_rewrites_its_problem_is_refused_and_so_is_the_next_on_it(tmp_path: Path) -> None:
    (tmp_path / "P").mkdir()
    (tmp_path / "S").mkdir()
    problem = tmp_path / "P" / "1_ReLU_small.py"
    shutil.copy(DATA / "1_ReLU_small.py", problem)
    tamper = (f"import pathlib\n_p = pathlib.Path({str(problem)!r})\n"
              "_p.write_text(_p.read_text().replace('torch.relu(x)', 'torch.relu(x) * 0'))\n")
    (tmp_path / "S" / "level_1_problem_1_sample_0_kernel.py").write_text(
        tamper + (DATA / "1_ReLU_small_wrong.py").read_text())
    shutil.copy(DATA / "1_ReLU_small_triton.py", tmp_path / "S" / "level_1_problem_1_sample_1_kernel.py")
    res = api.kernelbench_run(tmp_path / "P", tmp_path / "S", out=tmp_path / "out", level=1)
    assert [r.status for r in res.rows] == ["files_changed", "files_changed"]
    assert "1_ReLU_small.py" in res.rows[0].message and "not evaluated" in res.rows[1].message
    assert res.n_correct == 0 and res.rows[0].files["problem"]["sha256"] == hashlib.sha256(
        (DATA / "1_ReLU_small.py").read_bytes()).hexdigest()  # the hash taken before anything ran


@pytest.mark.gpu
def test_on_a_gpu_correct_solutions_are_timed_against_eager_and_compile(folder: Path, tmp_path: Path) -> None:
    res = api.kernelbench_run(folder / "P", folder / "S", out=tmp_path / "out", timeout_s=300)
    assert res.measured and [r.status for r in res.rows][:3] == ["correct", "incorrect", "kernel_not_launched"]
    for r in (r for r in res.rows if r.correct):
        assert r.measured and r.durations_ns["solution"] and r.durations_ns["eager"]
        assert r.speedup_vs_eager == pytest.approx(r.durations_ns["eager"] / r.durations_ns["solution"])
    assert res.fast_p["eager"]["0"] == pytest.approx(res.n_correct / res.n_problems)
    import importlib.util

    if importlib.util.find_spec("plotly") is not None:  # the chart is drawn where plotly imports (docs/reports.md)
        assert "<script" in (tmp_path / "out" / "report.html").read_text()
