"""report.html in a real browser: real runs on the CPU, the page opened offline in headless Chromium (Playwright).

Three folders, each made once per module by the command that writes it:

* a ``tune --out`` search under the interpreter on a kernel whose configs fail in two ways (a runtime error, a wrong
  result), with a tunable value that is HTML, and ``--gpu H100-SXM`` so the roofline has ceilings but no points;
* an ``optimize --replay`` of the committed H100 softmax cache (tests/data/search): measured times, a roofline, the
  baselines measured on that GPU, light cards, hypotheses;
* a ``session`` whose second version's hypothesis is a script tag, finished with ``session finish``.

Each page must load with no console error, no page error and no request leaving file://, draw every chart (a
``.js-plotly-plot`` of non-zero size that is not one colour) and plot exactly as many points as the records hold.
The browser is Debian's Chromium (``$KERNELPILOT_CHROMIUM``, default /usr/bin/chromium), never a Playwright
download; without it these tests fail and say how to install it (CI installs it in .ci/run).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import CHROMIUM, EXAMPLES, FIXTURES, ROOT, TORCH_KERNEL, chromium_args, open_offline

DATA = Path(__file__).parent / "data" / "search"
SCRIPT = ROOT / "scripts" / "screenshot_report.py"
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"> & "quoted"'
HOSTILE_TAG = "<img src=y onerror=alert(3)></script><script>alert(4)</script>"

# BLOCK 64 / 8 warps raises, BLOCK 128 / 2 warps is wrong; TAG is a tunable whose one value is markup
FAILING_BODY = '''if (BLOCK, num_warps) == (64, 8):
        raise RuntimeError("boom: <b>not bold</b>")
    if (BLOCK, num_warps) == (128, 2):
        out.copy_(x - y)
        return
    out.copy_(x + y)'''


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (fails, never skips, when Chromium or Playwright is missing)."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: report.html's browser test needs it (apt-get install -y chromium; "
                    "or set KERNELPILOT_CHROMIUM); .ci/run installs it")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: python3 -m pip install -e '.[test]'")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=chromium_args())
        yield b
        b.close()


@pytest.fixture(scope="module")
def tune_run(tmp_path_factory):
    from kernelpilot.app.tune import tune

    base = tmp_path_factory.mktemp("tune")
    kernel = base / "k.py"
    source = textwrap.dedent(TORCH_KERNEL).replace("BODY", FAILING_BODY)
    kernel.write_text(source.replace('"num_warps": [2, 4, 8]}', f'"num_warps": [2, 4, 8], "TAG": [{HOSTILE_TAG!r}]}}'))
    out = base / "run"
    result = tune(kernel, strategy="exhaustive", budget_evals=4, out=out, prune=False, use_cache=False, ab_samples=3,
                  gpu="H100-SXM", timeout_s=60)
    return out, result


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory):
    """The replayed run (first in the module: a light card's compile after an interpreted run in this process is
    slower)."""
    from kernelpilot import api

    out = tmp_path_factory.mktemp("replay") / "run"
    baselines = json.loads((DATA / "baselines-h100.json").read_text())["softmax"]
    result = api.optimize(EXAMPLES / "softmax.py", out=out, replay=str(DATA / "softmax-h100.jsonl"),
                          constraints=["num_stages == 2"], iterations=3, benchmark=False, baselines_ns=baselines,
                          config={"BLOCK_N": 256, "ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 2})
    return out, result


@pytest.fixture(scope="module")
def session_run(tmp_path_factory):
    from kernelpilot.api import session as api_session

    base = tmp_path_factory.mktemp("session")
    kernel = base / "k.py"
    kernel.write_text(textwrap.dedent(TORCH_KERNEL).replace("BODY", "out.copy_(x + y)"))
    out = base / "run"
    api_session.session_start(kernel, out=out, no_experience=True)
    api_session.session_try(out, kernel, hypothesis=HOSTILE)
    finished = api_session.session_finish(out, benchmark=False)
    return out, finished


@pytest.fixture
def browse(browser):
    """Open a report.html offline (:func:`conftest.open_offline`); every page opened is closed after the test."""
    pages = []

    def open_report(report: Path):
        page, seen = open_offline(browser, report)
        pages.append(page)
        return page, seen

    yield open_report
    for page in pages:
        page.close()


def _charts(page) -> dict[str, dict]:
    """Each rendered chart by key: its size and its traces (role, name, number of x values)."""
    charts = page.evaluate("""Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
        key: gd.id.replace('chart-', ''), w: gd.getBoundingClientRect().width, h: gd.getBoundingClientRect().height,
        traces: gd.data.map(t => ({role: t.meta ? t.meta.role : null, name: t.name, n: (t.x || []).length}))}))""")
    return {c["key"]: c for c in charts}


def _count(chart: dict, role: str) -> int:
    return sum(t["n"] for t in chart["traces"] if t["role"] == role)


def _colours(browser, png: bytes, boxes: list[dict]) -> list[int]:
    """Distinct colours (sampled) in each box (CSS pixels of the screenshot) of a PNG, and in the whole image last;
    decoded by the browser's canvas on a blank page."""
    page = browser.new_page()
    try:
        return page.evaluate("""async ([b64, boxes]) => {
            const img = new Image(); img.src = 'data:image/png;base64,' + b64; await img.decode();
            const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
            const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
            const count = (b) => {
                const d = ctx.getImageData(b.x, b.y, b.width, b.height).data, seen = new Set();
                for (let i = 0; i < d.length; i += 4 * 5) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
                return seen.size; };
            return [...boxes.map(count), count({x: 0, y: 0, width: img.width, height: img.height})]; }""",
                             [base64.b64encode(png).decode(), boxes])
    finally:
        page.close()


def _assert_clean_and_drawn(browser, page, seen, shots: Path) -> dict[str, dict]:
    """No error, nothing but file:// loaded, every chart rendered with a size and more than one colour; the page's
    full screenshot (saved under ``shots``) is not blank."""
    assert not seen["console"] and not seen["pageerror"], (seen["console"], seen["pageerror"])
    assert not seen["blocked"] and all(u.startswith("file:") for u in seen["requests"]), seen["requests"]
    assert not seen["dialogs"], seen["dialogs"]
    charts = _charts(page)
    assert len(charts) == page.locator("div.chart").count() > 0
    for key, chart in charts.items():
        assert chart["w"] > 100 and chart["h"] > 100, (key, chart["w"], chart["h"])
    boxes = page.evaluate("""Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => {
        const r = gd.getBoundingClientRect();
        return {x: Math.round(r.left + scrollX), y: Math.round(r.top + scrollY), width: Math.floor(r.width),
                height: Math.floor(r.height)}; })""")
    shots.mkdir(parents=True, exist_ok=True)
    full = page.screenshot(path=str(shots / "report.png"), full_page=True)
    *per_chart, whole = _colours(browser, full, boxes)
    assert whole > 16, "the page's screenshot is blank"
    blank = [key for key, n in zip(charts, per_chart) if n <= 8]
    assert not blank, f"charts drawn in one or two colours (blank): {blank}"
    return charts


def test_replayed_run_plots_every_version_on_the_roofline_times_and_speedups(replay_run, browser, browse, tmp_path):
    out, result = replay_run
    from kernelpilot.records.samples import unpack_samples  # samples kept as the event timer's whole ns

    outcomes = [unpack_samples(json.loads((out / f"v{i}" / "outcome.json").read_text()))
                for i in range(len(result.versions))]
    timed = [o for o in outcomes if o["status"] == "ok" and o["duration_ns"]]
    assert len(outcomes) == 4 and len(timed) == 4
    assert result.report_html == str(out / "report.html")
    # written before the final commit: committed, and rebuilt byte for byte by `kernelpilot report RUN --json`
    import git
    from typer.testing import CliRunner

    from kernelpilot.cli import app

    assert not git.Repo(out).is_dirty(untracked_files=True)
    before = (out / "report.html").read_bytes()
    res = CliRunner().invoke(app, ["report", str(out), "--json"])
    assert res.exit_code == 0, res.stdout
    assert json.loads(res.stdout)["report_html"] == str(out / "report.html")
    assert (out / "report.html").read_bytes() == before
    # a profile in the folder is linked relatively
    shutil.copy2(FIXTURES / "ncu" / "h200_softmax_fp32_8192_v0.ncu-rep", out / "v0" / "profile.ncu-rep")
    from kernelpilot.report.html import write_report_html

    write_report_html(out)
    page, seen = browse(out / "report.html")
    charts = _assert_clean_and_drawn(browser, page, seen, tmp_path)
    assert set(charts) == {"roofline", "time", "speedup", "trace"}
    assert _count(charts["roofline"], "points") == len(timed)
    assert _count(charts["time"], "points") == len(timed)
    assert _count(charts["time"], "spread") == sum(len(o["samples_ns"]) for o in timed)
    baselines = json.loads((out / "run.json").read_text())["baselines_ns"]
    assert len(baselines) == 2 and _count(charts["speedup"], "points") == len(timed) * len(baselines)
    assert _count(charts["trace"], "evaluations") == len(outcomes) == _count(charts["trace"], "times")
    roof = json.loads((out / "roofline.json").read_text())
    legend = " ".join(t["name"] for t in charts["roofline"]["traces"] if t["role"] == "ceiling")
    for ceiling in (roof["peak"], roof["bandwidth"]):
        assert f"{ceiling['path']}:{ceiling['line']}" in legend
    for citation in roof["citations"]:
        assert citation in page.inner_text("#roofline")
    links = page.eval_on_selector_all("a[href$='.ncu-rep']", "els => els.map(e => e.href)")
    assert links and all(Path(unquote(urlparse(h).path)).is_file() for h in links)
    assert page.locator("#entry-v0 a[href='v0/profile.ncu-rep']").count() == 1
    # each version's card: its hypothesis and its bottleneck card
    best = result.run.best_version
    text = page.inner_text(f"#entry-v{best}")
    assert "hypothesis" in text and "memory-bound" in text and "suggested changes" in text


def test_tune_page_shows_every_evaluation_and_each_failure_kind_without_times(tune_run, browser, browse, tmp_path):
    out, result = tune_run
    records = json.loads((out / "tune.json").read_text())["evaluations"]
    assert len(records) == 4 and {"runtime_error", "wrong_result"} <= {e["status"] for e in records}
    page, seen = browse(out / "report.html")
    charts = _assert_clean_and_drawn(browser, page, seen, tmp_path)
    # interpreted: no time is plotted; the roofline is drawn with its cited ceilings and no point
    assert set(charts) == {"roofline", "trace"}
    assert _count(charts["trace"], "evaluations") == len(records) and _count(charts["trace"], "times") == 0
    names = {t["name"] for t in charts["trace"]["traces"]}
    assert {"runtime_error", "wrong_result"} <= names
    # the kernel declares no FLOPs: its bandwidth ceiling, cited, and no point
    assert _count(charts["roofline"], "points") == 0
    [ceiling] = [t for t in charts["roofline"]["traces"] if t["role"] == "ceiling"]
    assert "hardware/specs/measured/H100-SXM.md:" in ceiling["name"]
    assert "declares no FLOPs" in page.locator("#note-roofline").inner_text()
    for key in ("time", "speedup", "roofline"):
        assert "Triton interpreter" in page.locator(f"#note-{key}").inner_text() or key == "speedup"
    assert "does not time PyTorch" in page.locator("#note-speedup").inner_text()
    # the markup in a tunable value and in a failure message is text on the page, in the figures' JSON too
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    body = page.inner_text("body")
    assert HOSTILE_TAG in body.replace('"', "'") or HOSTILE_TAG.replace("'", '"') in body
    assert "boom: <b>not bold</b>" in body
    assert page.locator("img").count() == 0 and page.locator("script").count() == 2


def test_a_hostile_hypothesis_is_text_not_markup(session_run, browser, browse, tmp_path):
    out, finished = session_run
    assert finished.report_html == str(out / "report.html") and (out / "report.html").is_file()
    page, seen = browse(out / "report.html")
    charts = _assert_clean_and_drawn(browser, page, seen, tmp_path)
    memories = sorted(out.glob("v*/memory.json"))
    assert _count(charts["trace"], "evaluations") == len(memories) == 2
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert HOSTILE in page.inner_text("#entry-v1")
    assert not seen["dialogs"] and page.locator("img").count() == 0 and page.locator("script").count() == 2
    assert "not measurements" in page.inner_text("#timing-note")
    # `kernelpilot report` rebuilds a session's page too, byte for byte
    from typer.testing import CliRunner

    from kernelpilot.cli import app

    before = (out / "report.html").read_bytes()
    res = CliRunner().invoke(app, ["report", str(out), "--json"])
    assert res.exit_code == 0, res.stdout
    data = json.loads(res.stdout)
    assert data["kind"] == "session" and data["report_html"] == str(out / "report.html")
    assert (out / "report.html").read_bytes() == before


def test_the_screenshot_script_writes_a_png_of_a_clean_page(replay_run, tmp_path):
    out, _ = replay_run
    png = tmp_path / "shot.png"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out / "report.html"), str(png), "--chromium", CHROMIUM],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "4 charts" in proc.stdout and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_folder_without_records_is_refused_by_name(tmp_path):
    from kernelpilot.errors import RunFolderError
    from kernelpilot.report.html import write_report_html

    with pytest.raises(RunFolderError, match="no kernelpilot records"):
        write_report_html(tmp_path)


def test_an_expectation_shows_its_change_in_the_metric_unit() -> None:
    from kernelpilot.report.html_data import _change

    assert _change("duration_ns", 292_800.0, 182_600.0) == "292.80 µs → 182.60 µs, -37.6 %"
    assert _change("dram_pct", 82.83, 88.71) == "82.83 → 88.71, +7.1 %"


def test_the_page_decodes_what_it_packs_at_every_length(browser):
    """report.html holds plotly and the figures gzip-compressed and base85-encoded (base64 after a ".": the fallback
    when base85 would hold ``<!--`` or ``<script``); the page's own decoder gives back every text, whatever the length
    of its compressed bytes modulo 4, and the page stays small (plotly inline uncompressed was 4.8 MB)."""
    import gzip

    from kernelpilot.report import html

    texts = ["", "a", "héllo µs — ✓ <script>", "x" * 1000] + ["".join(str(j * j) for j in range(i))
                                                             for i in range(1, 24)]
    packed = [html.gzip_b85(t) for t in texts]
    assert {len(base64.b85decode(p)) % 4 for p in packed} == {0, 1, 2, 3}
    assert not any("/" in p or "'" in p or "\\" in p for p in packed)
    fallback = ["." + base64.b64encode(gzip.compress(t.encode(), 9, mtime=0)).decode() for t in texts]
    page = browser.new_page()
    try:
        page.evaluate("() => {" + html._INFLATE_JS + "}")
        got = page.evaluate("async (xs) => { const out = []; for (const x of xs) out.push(await kpInflate(x)); "
                            "return out; }", packed + fallback)
    finally:
        page.close()
    assert got == texts + texts
    assert len(html._plotly_packed(__import__("plotly.offline").offline.get_plotlyjs())[0]) < 2_000_000
