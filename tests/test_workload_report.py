"""report.html of a ``tune --workload`` run (issue 26): built from a real small workload run under the interpreter,
its numbers compared with the records they come from (``workload.json``, ``shapes/<i>/tune.json``), and opened
offline in headless Chromium (skipped where there is none)."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import CHROMIUM, chromium_args, open_offline
from kernelpilot import api

REPO = Path(__file__).resolve().parents[1]
VECTOR_ADD = REPO / "src" / "kernelpilot" / "examples" / "vector_add.py"
WORKLOAD = [{"shape": {"N": 1024}, "weight": 1}, {"shape": {"N": 1536}, "weight": 2}, {"shape": {"N": 4096}, "weight": 3}]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("wlr")
    (root / "w.json").write_text(json.dumps(WORKLOAD))
    result = api.tune_workload(VECTOR_ADD, out=root / "run", workload=root / "w.json", budget_evals=4, store=False)
    return root / "run", result


def _figures(html: str) -> dict:
    """The figures' JSON embedded in a page (the draw script's compressed text, decoded as the page does)."""
    [packed] = re.findall(r"return kpInflate\('([^']*)'\)", html)
    raw = base64.b64decode(packed[1:]) if packed.startswith(".") else base64.b85decode(packed)
    return json.loads(gzip.decompress(raw))


def _drawn(v: float) -> float:
    """A number as the page draws it (7 significant digits, kernelpilot.report.html.DRAWN_DIGITS)."""
    return float(f"{v:.7g}")


def _records(out: Path) -> dict[str, dict]:
    """shape (canonical JSON) -> that shape's cross-check tune.json."""
    found = {}
    for p in (out / "shapes").glob("*/tune.json"):
        data = json.loads(p.read_text())
        found[json.dumps(data["shape"], sort_keys=True)] = data
    return found


def _medians(tune: dict, candidates: list[dict]) -> list[float | None]:
    """Each candidate's correct median in one tune.json, None where it has none."""
    ok = {json.dumps(e["config"], sort_keys=True): e["duration_ns"] for e in tune["evaluations"]
          if e["status"] == "ok" and e.get("duration_ns") and e.get("samples_ns")}
    return [ok.get(json.dumps(c, sort_keys=True)) for c in candidates]


def test_the_run_writes_the_page_and_the_folder_alone_rebuilds_it_byte_for_byte(run) -> None:
    from kernelpilot.report.workload_html import write_workload_html

    out, result = run
    assert result.files.get("report") == "report.html"
    before = (out / "report.html").read_bytes()
    assert b'id="problems"' not in before  # the result and its records agree
    write_workload_html(out)  # from workload.json and the tune.json files only
    assert (out / "report.html").read_bytes() == before


def test_every_heatmap_cell_and_every_time_is_the_records_number(run) -> None:
    out, result = run
    figs = _figures((out / "report.html").read_text())
    heat = next(t for t in figs["chart-heatmap"]["data"] if t["meta"]["role"] == "cells")
    rows = json.loads((out / "workload.json").read_text())["rows"]
    records = _records(out)
    assert len(heat["z"]) == len(result.candidates) and all(len(r) == len(rows) for r in heat["z"])
    for s, row in enumerate(rows):
        medians = _medians(records[json.dumps(row["shape"], sort_keys=True)], result.candidates)
        best = min(m for m in medians if m is not None)
        for c, m in enumerate(medians):
            assert heat["customdata"][c][s] == (_drawn(m) if m is not None else None)
            assert heat["z"][c][s] == (_drawn(m / best) if m is not None else None)
    # part 1 draws the result's rows, which are the records' medians of the configs they name
    series = {t["meta"]["role"]: t for t in figs["chart-shapes"]["data"]}
    for role in ("table", "single", "default"):
        order = sorted(range(len(rows)), key=lambda i: rows[i]["shape"]["N"])
        assert series[role]["y"] == [_drawn(rows[i][f"{role}_ns"] / 1000) for i in order]
    # the star of each shape is its bucket's config
    chosen = next(t for t in figs["chart-heatmap"]["data"] if t["meta"]["role"] == "chosen")
    config_of = {b.name: b.config for b in result.buckets}
    labels = heat["y"]
    assert [labels.index(y) for y in chosen["y"]] == [result.candidates.index(config_of[r["bucket"]]) for r in rows]


def test_a_record_that_says_otherwise_changes_the_page_and_is_named(run, tmp_path: Path) -> None:
    """A tune.json edited after the run: the heatmap shows the record's number, and the page names the row whose
    time the record no longer backs; a failed and an absent evaluation become blank cells saying why."""
    from kernelpilot.report.workload_html import write_workload_html

    out, result = run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    first = json.loads((copy / "workload.json").read_text())["rows"][0]
    folder = next(p.parent for p in (copy / "shapes").glob("*/tune.json")
                  if json.loads(p.read_text())["shape"] == first["shape"])
    tune = json.loads((folder / "tune.json").read_text())
    table_config = next(b.config for b in result.buckets if b.name == first["bucket"])
    edited = next(e for e in tune["evaluations"] if e["config"] == table_config)
    # half the fastest time recorded at that shape: the edited cell is the fastest there, whatever the interpreter's
    # times were (half the table's own time alone left it behind another config in a CI run)
    forged_ns = 0.5 * min(e["duration_ns"] for e in tune["evaluations"] if e["status"] == "ok" and e["duration_ns"])
    edited["duration_ns"] = forged_ns
    others = [e for e in tune["evaluations"] if e["config"] != table_config]
    others[0].update(status="wrong_result", message="max abs error 3.5 at <index 7>")
    tune["evaluations"].remove(others[1])
    (folder / "tune.json").write_text(json.dumps(tune))
    write_workload_html(copy)
    html = (copy / "report.html").read_text()
    heat = next(t for t in _figures(html)["chart-heatmap"]["data"] if t["meta"]["role"] == "cells")
    col = 0  # the first row's shape is the first column
    cell = lambda config: result.candidates.index(config)  # noqa: E731
    assert heat["customdata"][cell(table_config)][col] == _drawn(forged_ns)
    assert heat["z"][cell(table_config)][col] == 1.0  # now the fastest there
    assert heat["z"][cell(others[0]["config"])][col] is None
    assert "wrong_result: max abs error 3.5 at &lt;index 7&gt;" in heat["text"][cell(others[0]["config"])][col]
    assert heat["z"][cell(others[1]["config"])][col] is None
    assert "not evaluated at this shape" in heat["text"][cell(others[1]["config"])][col]
    problems = html.split('id="problems"', 1)[1].split("</div>", 1)[0]
    assert "table_ns" in problems and str(first["table_ns"]) in problems and str(forged_ns) in problems


def test_without_plotly_the_page_is_skipped_with_a_line(run, tmp_path: Path, monkeypatch) -> None:
    from kernelpilot.report.workload_html import try_write_workload_html

    out, _ = run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    (copy / "report.html").unlink()
    monkeypatch.setitem(sys.modules, "plotly", None)  # what an absent package looks like to find_spec and import
    said: list[str] = []
    assert try_write_workload_html(copy, log=said.append) == ""
    assert not (copy / "report.html").exists() and said == [
        "report.html not written: plotly is not installed (python3 -m pip install plotly)"]


def test_the_page_opens_offline_and_draws_every_cell(run) -> None:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set KERNELPILOT_CHROMIUM)")
    playwright = pytest.importorskip("playwright.sync_api")
    out, result = run
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=chromium_args())
        try:
            page, seen = open_offline(browser, out / "report.html", timeout_ms=60_000)
            drawn = page.evaluate("""Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
                id: gd.id, w: gd.getBoundingClientRect().width, h: gd.getBoundingClientRect().height,
                traces: gd.data.map(t => ({role: t.meta ? t.meta.role : null, z: t.z || null,
                                           n: (t.y || []).filter(v => v !== null).length}))}))""")
            totals = page.inner_text("#totals-table")
        finally:
            browser.close()
    assert not seen["console"] and not seen["pageerror"] and not seen["blocked"], seen
    charts = {c["id"]: c for c in drawn}
    assert set(charts) == {"chart-shapes", "chart-heatmap"}
    assert all(c["w"] > 100 and c["h"] > 100 for c in drawn)
    [heat] = [t for t in charts["chart-heatmap"]["traces"] if t["role"] == "cells"]
    assert sum(len(r) for r in heat["z"]) == len(result.candidates) * len(WORKLOAD)
    [chosen] = [t for t in charts["chart-heatmap"]["traces"] if t["role"] == "chosen"]
    assert chosen["n"] == len(WORKLOAD)
    lines = {t["role"]: t["n"] for t in charts["chart-shapes"]["traces"]}
    assert lines["table"] == lines["single"] == lines["default"] == len(WORKLOAD)
    assert f"{result.table_ns / 1000:.3f} µs" in totals and f"{result.default_loss_pct:+.1f} %" in totals
