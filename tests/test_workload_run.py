"""``tune --workload`` end to end under the interpreter (issue 26): buckets searched, every candidate checked at every
shape, a dispatch table whose every row is a record, generated dispatchers that pick the bucket's config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot import api
from kernelpilot.dispatch import evidence_problems, read_dispatch, select_config
from kernelpilot.app.workload_out import resolve_record

REPO = Path(__file__).resolve().parents[1]
VECTOR_ADD = REPO / "src" / "kernelpilot" / "examples" / "vector_add.py"
WORKLOAD = [{"shape": {"N": 1024}, "weight": 1}, {"shape": {"N": 1536}, "weight": 2}, {"shape": {"N": 4096}, "weight": 3}]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("wl")
    (root / "w.json").write_text(json.dumps(WORKLOAD))
    result = api.tune_workload(VECTOR_ADD, out=root / "run", workload=root / "w.json", budget_evals=4,
                               store=root / "configs.db")
    return root / "run", result


def test_every_candidate_is_checked_at_every_shape_and_every_row_is_a_record(run: tuple[Path, object]) -> None:
    out, result = run
    assert [b.name.split(",")[0] for b in result.buckets] == ["N=1024..2047", "N=4096..8191"]
    assert result.default_config in result.candidates  # the library default competes and is reported
    wanted = {json.dumps(c, sort_keys=True) for c in result.candidates}
    for i in range(len(WORKLOAD)):
        tune = json.loads((out / "shapes" / str(i) / "tune.json").read_text())
        assert tune["shape"]["N"] == WORKLOAD[i]["shape"]["N"]
        assert {json.dumps(e["config"], sort_keys=True) for e in tune["evaluations"]} == wanted
    d = read_dispatch(out / "dispatch.json")
    assert evidence_problems(d, lambda rid: resolve_record(out, rid)) == []
    # a row whose time was edited no longer matches its record
    b0 = d.buckets[0]
    row = b0.measured[0].model_copy(update={"duration_ns": b0.measured[0].duration_ns * 0.5})
    forged = d.model_copy(update={"buckets": [b0.model_copy(update={"measured": [row, *b0.measured[1:]]}),
                                              *d.buckets[1:]]})
    assert evidence_problems(forged, lambda rid: resolve_record(out, rid))


def test_the_table_serves_a_shape_never_measured_and_refuses_one_outside(run: tuple[Path, object]) -> None:
    out, result = run
    d = read_dispatch(out / "dispatch.json")
    assert select_config(d, {"N": 1999}) == result.buckets[0].config  # inside bucket 0's range, never measured
    assert select_config(d, {"N": 8191}) == result.buckets[1].config
    src = (out / "dispatch_select.py").read_text()
    code = (f"import sys; sys.path.insert(0, {str(out)!r}); import dispatch_select as d; "
            "print(d.select({'N': 5000})); d.select({'N': 9000})")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert p.stdout.strip() == str(result.buckets[1].config)
    assert p.returncode != 0 and "9000" in p.stderr and "import torch" not in src


def test_interpreted_times_never_reach_the_store(run: tuple[Path, object]) -> None:
    out, result = run
    assert result.measured is False and "not written" in result.store
    assert not (out.parent / "configs.db").exists()
    assert "not measurements" in (out / "workload.md").read_text()


def test_a_workload_needs_exactly_one_source(tmp_path: Path) -> None:
    from kernelpilot.errors import OptionError

    with pytest.raises(OptionError):
        api.tune_workload(VECTOR_ADD, out=tmp_path / "x")
    with pytest.raises(OptionError):
        api.tune_workload(VECTOR_ADD, out=tmp_path / "x", workload=tmp_path / "w.json", ranges=["N=1:4"])


def test_report_holds_the_table_against_its_records(run: tuple[Path, object], tmp_path: Path) -> None:
    """``kernelpilot report`` on a workload folder: valid as written; a cross-check's record edited afterwards (its
    times halved) makes the table's rows disagree with it, and the report names each row."""
    import shutil

    from kernelpilot.errors import RecordError

    out, _result = run
    assert api.report(out).kind == "workload"
    forged = tmp_path / "forged"
    shutil.copytree(out, forged)
    tune = json.loads((forged / "shapes" / "0" / "tune.json").read_text())
    for e in tune["evaluations"]:
        if e.get("duration_ns"):
            e["duration_ns"] *= 0.5
    (forged / "shapes" / "0" / "tune.json").write_text(json.dumps(tune))
    with pytest.raises(RecordError, match="shapes/0/tune.json"):
        api.report(forged)


def test_a_second_process_looks_the_winners_up_in_the_store_at_shapes_never_measured(run, tmp_path: Path) -> None:
    """What a workload run puts into the config store (its winners, under the kernel's key parts) is what a second
    process — the CLI, another home, no kernel run — gets back for a shape inside a bucket's range that was never
    measured; another arch gets nothing. (Interpreted runs put nothing; here the winners are put as for sm_90.)"""
    import os

    from kernelpilot.app.workload_out import store_winners
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.store.lookup import runtime_toolchain

    out, result = run
    db = tmp_path / "configs.db"
    store_winners(result, load_kernel(VECTOR_ADD, interpreted=True), read_dispatch(out / "dispatch.json"), out, db,
                  runtime_toolchain(), "sm_90", "test GPU")
    env = {**os.environ, "KERNELPILOT_HOME": str(tmp_path / "home2")}

    def lookup(n: int, arch: str) -> dict:
        p = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "configs", "lookup", str(VECTOR_ADD), "--shape",
                            f"N={n}", "--arch", arch, "--store", str(db), "--json"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    assert lookup(5000, "sm_90")["config"] == result.buckets[1].config  # bucket N=4096..8191, never measured at 5000
    assert lookup(1999, "sm_90")["config"] == result.buckets[0].config
    assert lookup(5000, "sm_80")["found"] is False


def test_report_validates_every_bucket_search_as_the_tune_folder_it_is(run: tuple[Path, object], tmp_path: Path) -> None:
    """A bucket search's record edited (a line's median no longer that of its samples), with dispatch.json untouched:
    the report names that search's file, not only dispatch.json's rows."""
    import shutil

    from kernelpilot.errors import RecordError

    out, _result = run
    forged = tmp_path / "forged"
    shutil.copytree(out, forged)
    path = forged / "buckets" / "0" / "evaluations.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["evaluation"]["duration_ns"] = first["evaluation"]["duration_ns"] * 0.5
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(RecordError, match="buckets/0/"):
        api.report(forged)
