"""``report.html``: one self-contained page per run, search or session folder.

The page holds plotly's JavaScript inline once, gzip-compressed and base85-encoded (1.8 MB instead of 4.8 MB: a
run's folder of 1,000 versions stays under issue 25's 10 MB), and the four charts of
:mod:`kernelpilot.report.charts` (the roofline with every version as a point, time per version with its spread,
speedup over PyTorch eager and torch.compile, the search trace with failures by kind), then one card per version or
evaluation (outcome, config, median and IQR, hypothesis, what was expected and observed, the decision, the bottleneck
card) with relative links to the ``.ncu-rep`` files and reports in the folder. It loads nothing from the network:
a Content-Security-Policy allows only its own two scripts and plotly's source (each by hash) and no connections.

How the page draws: the first script decodes plotly (base85, then the browser's own
``DecompressionStream('gzip')``), inserts it as an inline script (allowed by its hash in the policy, removed once run)
and resolves a promise; the last script, after the page's elements, waits for it, then decompresses the figures'
JSON (compressed the same way) and draws each chart, then sets ``data-charts="drawn"`` on the body (``failed``,
with a console error, when it could not: what a test or a screenshot waits for). A browser without
``DecompressionStream`` (Chromium 80, Firefox 113, Safari 16.4 and later have it) shows the cards and says so in the
console.

Every string from the records is HTML-escaped where it is written: a hypothesis, a config value, a kernel name or
a failure message is text, never markup, whatever it holds. The page is rebuilt from the records alone
(:func:`write_report_html`; ``kernelpilot report FOLDER``) and the same records give the same bytes.

Written by ``kernelpilot optimize`` (the run folder), ``kernelpilot tune --out`` (the search folder),
``kernelpilot session finish`` (the session folder) and ``kernelpilot report``.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import math
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kernelpilot.fmt import format_duration_ns
from kernelpilot.report.html_data import Entry, PageData, read_folder

if TYPE_CHECKING:
    from kernelpilot.report.charts import Chart

__all__ = ["REPORT_FILE", "gzip_b85", "render_report_html", "try_write_report_html", "write_report_html"]

REPORT_FILE = "report.html"
#: plotly's options for every chart: no logo, resizes with the window.
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
#: Most suggested changes and stalls listed per bottleneck card.
MAX_LISTED = 5

_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:0 18px 40px;
color:#1d1d1f;background:#fff}
h1{font-size:1.6em;margin:.8em 0 .2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table.facts{border-collapse:collapse;margin:.6em 0}table.facts th{text-align:left;padding:2px 14px 2px 0;
color:#555;font-weight:600;vertical-align:top}table.facts td{padding:2px 0}
nav a{margin-right:14px}.banner{background:#fff8e1;border:1px solid #e0c36c;padding:8px 12px;border-radius:4px}
.note{color:#6b5200;background:#fffbea;padding:6px 10px;border-left:3px solid #e0c36c}
.explain{color:#444}.info{color:#333;font-size:.92em}.chart{width:100%;min-height:440px}
ul.citations{font-size:.85em;color:#444}
details.entry{border:1px solid #ddd;border-radius:4px;margin:6px 0;padding:4px 10px}
details.entry summary{cursor:pointer}details.entry[open]{background:#fafafa}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:.85em;background:#eee;margin:0 6px}
.badge.good{background:#d9f2d9}.badge.bad{background:#f8d7d7}.badge.masked{background:#e6e6e6;color:#777}
pre{white-space:pre-wrap;word-break:break-word;background:#f5f5f7;padding:8px;border-radius:4px;margin:4px 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:8px 0}dt{color:#555;font-weight:600}
dd{margin:0}code{background:#f0f0f0;padding:0 3px;border-radius:3px}
"""


def _e(text: Any) -> str:
    """``text`` escaped for HTML text and attribute values (quotes included)."""
    return escape(str(text), quote=True)


def _href(rel: str) -> str:
    """A relative link to ``rel`` (a path inside the folder), percent-encoded and escaped."""
    return _e(quote(rel, safe="/"))


def _facts(data: PageData) -> str:
    """The header's table: what ran where, why it stopped, the best entry."""
    best = next((e for e in data.entries if e.label == data.best), None)
    best_text = "none (no correct version)" if best is None else (
        f"{best.label}" + (f": {format_duration_ns(best.median_ns)}" if best.median_ns is not None else "")
        + (f" ({best.pct_of_roofline:.1f} % of the roofline)" if best.pct_of_roofline is not None else "")
        + (f", config {json.dumps(best.config, sort_keys=True, default=str)}" if best.config else ""))
    mode = {"cuda": "CUDA events on the GPU", "interpreter": "Triton interpreter on the CPU (not a measurement)",
            "replay": "replayed from a cache measured on a GPU"}.get(data.mode, data.mode)
    rows = [("folder", f"{data.kind} — {data.folder.name}"), ("kernel", data.kernel),
            ("shape", json.dumps(data.shape, default=str)), ("device", data.device), ("times", mode),
            ("versions" if data.kind != "tune" else "evaluations", str(len(data.entries))),
            ("stopped" if data.kind != "session" else "state", data.stop_reason or "—"), ("best", best_text)]
    if data.roofline is not None:
        r = data.roofline
        rows.append(("speed of light", f"floor {format_duration_ns(r.floor_ns)} ({r.bound}-bound on {r.gpu}), target "
                                       f"{format_duration_ns(r.target_ns)} = {r.target_fraction:.0%} of the roofline"))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<table class="facts">{body}</table>'


def _chart_section(chart: Chart) -> str:
    parts = [f'<section id="{chart.key}"><h2>{_e(chart.title)}</h2>', f'<p class="explain">{_e(chart.explain)}</p>']
    if chart.figure is not None:
        parts.append(f'<div id="chart-{chart.key}" class="chart" data-points="{chart.points}"></div>')
    if chart.note:
        parts.append(f'<p class="note" id="note-{chart.key}">{_e(chart.note)}</p>')
    if chart.info:
        parts.append(f'<p class="info">{_e(chart.info)}</p>')
    if chart.citations:
        parts.append("<p>Ceilings used (as roofline.json cites them):</p><ul class=\"citations\">"
                     + "".join(f"<li><code>{_e(c)}</code></li>" for c in chart.citations) + "</ul>")
    return "".join(parts) + "</section>"


def _badge(e: Entry) -> str:
    good = e.outcome in ("baseline", "accepted", "improved")
    bad = e.status != "ok"
    cls = "masked" if e.masked else ("good" if good else "bad" if bad else "")
    return f'<span class="badge {cls}">{_e(e.outcome)}{" · masked" if e.masked else ""}</span>'


def _card(card: dict[str, Any]) -> str:
    """A bottleneck card (verdict.json) as HTML: class, rule, summary, fired patterns, stalls, suggested changes."""
    source = "light card (no ncu counters" + (f": {card.get('light_reason')}" if card.get("light_reason") else "") \
        + ")" if card.get("light") else "Nsight Compute"
    lines = [f"<p><b>{_e(card.get('class', 'unknown'))}</b>-bound — {_e(card.get('summary', ''))}</p>",
             f"<p>rule <code>{_e(card.get('rule', ''))}</code>; from {_e(source)}"
             + (f"; occupancy limiter {_e(card['occupancy_limiter'])}" if card.get("occupancy_limiter") else "")
             + "</p>"]
    fired = card.get("fired_patterns") or []
    if fired:
        lines.append("<p>patterns fired: " + ", ".join(f"<code>{_e(p)}</code>" for p in fired) + "</p>")
    stalls = [s for s in card.get("top_stalls") or [] if isinstance(s, dict)][:MAX_LISTED]
    if stalls:
        lines.append("<p>top stalls: " + ", ".join(
            f"{_e(s.get('reason'))} ({float(s.get('share_pct') or 0):.0f} %)" for s in stalls) + "</p>")
    changes = [c for c in card.get("suggested_changes") or [] if isinstance(c, dict)][:MAX_LISTED]
    if changes:
        lines.append("<p>suggested changes:</p><ol>" + "".join(
            f"<li>{_e(c.get('action', ''))} — {_e(c.get('why', ''))}</li>" for c in changes) + "</ol>")
    return "".join(lines)


def _entry(e: Entry, best: str | None) -> str:
    """One version's or evaluation's card (a ``<details>``, open for the best)."""
    head = (f"<b>{_e(e.label)}</b>{_badge(e)}" + (f"<i>{_e(e.change[:100])}</i> · " if e.change else "")
            + (f"median {format_duration_ns(e.median_ns)}, IQR {format_duration_ns(e.iqr_ns)}"
               if e.median_ns is not None else "no measured time" if e.status == "ok" else _e(e.status))
            + (f" · {e.pct_of_roofline:.1f} % of the roofline" if e.pct_of_roofline is not None else "")
            + (f" · {_e(e.card.get('class', ''))}-bound" if e.card else "") + (" · best" if e.label == best else ""))
    rows: list[tuple[str, str]] = []
    if e.config:
        rows.append(("config", f"<code>{_e(json.dumps(e.config, sort_keys=True, default=str))}</code>"))
    rows.append(("hypothesis", f"<pre>{_e(e.hypothesis.strip())}</pre>" if e.hypothesis.strip() else
                 "— (the starting point)" if e.order == 1 else "—"))
    if e.expectations:
        rows.append(("expected / observed", "<ul>" + "".join(f"<li>{_e(x)}</li>" for x in e.expectations) + "</ul>"))
    if e.decision:
        rows.append(("decision" if e.status == "ok" else "failure", f"<pre>{_e(e.decision.strip()[:2000])}</pre>"))
    rows.append(("bottleneck card", _card(e.card) if e.card else "none recorded for this entry"))
    if e.ncu_reports:
        rows.append(("Nsight Compute", ", ".join(f'<a href="{_href(r)}">{_e(r)}</a>' for r in e.ncu_reports)))
    body = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in rows)
    slug = "".join(c if c.isalnum() else "-" for c in e.label)
    return (f'<details class="entry" id="entry-{_e(slug)}"{" open" if e.label == best else ""}>'
            f"<summary>{head}</summary><dl>{body}</dl></details>")


def _files(data: PageData) -> str:
    items = [f'<li><a href="{_href(name)}">{_e(name)}</a> — {_e(what)}</li>' for name, what in data.documents.items()]
    items += [f'<li><a href="{_href(rel)}">{_e(rel)}</a> — Nsight Compute report (open with <code>ncu-ui</code> or '
              f"<code>kernelpilot profile --report</code>)</li>" for rel in data.ncu_reports]
    if not data.ncu_reports:
        items.append("<li>no <code>.ncu-rep</code> in this folder (profiles are taken on a GPU with counter "
                     "access: v0 and the final best of <code>optimize</code>, each version of a session)</li>")
    return f'<section id="files"><h2>Files</h2><ul>{"".join(items)}</ul></section>'


def _csp_hash(text: str) -> str:
    """The CSP source ``'sha256-…'`` of a script's text."""
    return f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"


def _script(text: str) -> tuple[str, str]:
    """(the ``<script>`` element, its CSP source ``'sha256-…'``)."""
    return f"<script>{text}</script>", _csp_hash(text)


def gzip_b85(text: str) -> str:
    """``text`` (UTF-8) gzip-compressed at level 9 with no timestamp (the same text gives the same bytes), then
    base85-encoded (RFC 1924's alphabet, Python's ``base64.b85encode``: 5 characters per 4 bytes, 6 % fewer than
    base64): what the page's ``kpInflate`` turns back into the text. The alphabet has no ``/``, quote or backslash,
    so nothing in it can end a script element or its string; a text whose encoding holds ``<!--`` or ``<script``
    (which change how a browser reads a script element) is encoded as base64 instead, marked by a leading ``.``
    (in neither alphabet)."""
    packed = gzip.compress(text.encode(), compresslevel=9, mtime=0)
    encoded = base64.b85encode(packed).decode("ascii")
    if "<!--" in encoded or "<script" in encoded.lower():
        return "." + base64.b64encode(packed).decode("ascii")
    return encoded


@functools.lru_cache(maxsize=2)
def _plotly_packed(source: str) -> tuple[str, str]:
    """(plotly's source compressed by :func:`gzip_b85`, the CSP hash of the source): computed once per process."""
    return gzip_b85(source), _csp_hash(source)


#: decodes base85 (or base64 after a leading "."), then gunzips with the browser's DecompressionStream; resolves
#: to the text
_INFLATE_JS = (
    "window.kpInflate=function(s){var u;"
    "if(s.charAt(0)==='.'){var b=atob(s.slice(1));u=new Uint8Array(b.length);"
    "for(var i=0;i<b.length;i++){u[i]=b.charCodeAt(i);}}else{"
    "var A='0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~',"
    "m=new Uint8Array(128);"
    "for(var i=0;i<85;i++){m[A.charCodeAt(i)]=i;}"
    "var n=s.length,r=n%5;u=new Uint8Array(Math.floor(n/5)*4+(r?r-1:0));var o=0;"
    "for(var i=0;i<n;i+=5){var v=0;for(var j=0;j<5;j++){v=v*85+(i+j<n?m[s.charCodeAt(i+j)]:84);}"
    "for(var k=0;k<4&&o<u.length;k++){u[o++]=Math.floor(v/Math.pow(256,3-k))%256;}}}"
    "return new Response(new Blob([u]).stream().pipeThrough(new DecompressionStream('gzip'))).text();};")


def _loader_js(packed: str) -> str:
    """The head's script: defines ``kpInflate`` and ``kpPlotly``, a promise resolved once plotly's source, decoded,
    ran as an inline script (the policy allows it by its hash; the element is removed once it ran)."""
    return (_INFLATE_JS + "window.kpPlotly=kpInflate('" + packed + "').then(function(src){"
            "var s=document.createElement('script');s.textContent=src;document.head.appendChild(s);s.remove();"
            "if(typeof Plotly==='undefined'){throw new Error('plotly did not load');}});")


#: significant digits of a number drawn (a time in µs to 0.1 ns at 1 ms): the page draws, the records keep the exact
#: values; 17-digit floats of every sample made a third of the page's bytes per version
DRAWN_DIGITS = 7


def _rounded(value: Any) -> Any:
    """``value`` (a figure's JSON) with every float rounded to :data:`DRAWN_DIGITS` significant digits."""
    if isinstance(value, float):
        return float(f"{value:.{DRAWN_DIGITS}g}") if math.isfinite(value) else value
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _figures_js(charts: list[Chart]) -> str:
    """The script that draws every figure once plotly is loaded; the figures' JSON (plotly's) is compressed by
    :func:`gzip_b85`, so no record text appears in the script as text, and parsed with ``JSON.parse``."""
    import plotly.io as pio

    figs = {f"chart-{c.key}": _rounded(json.loads(pio.to_json(c.figure, validate=False, pretty=False)))
            for c in charts if c.figure is not None}
    text = json.dumps(figs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return ("kpPlotly.then(function(){return kpInflate('" + gzip_b85(text) + "');}).then(function(t){"
            f"var figs=JSON.parse(t),config={json.dumps(PLOT_CONFIG)};"
            "return Promise.all(Object.keys(figs).map(function(id){var el=document.getElementById(id);"
            "return el?Plotly.newPlot(el,figs[id].data,figs[id].layout,config):null;}));})"
            ".then(function(){document.body.setAttribute('data-charts','drawn');})"
            ".catch(function(e){document.body.setAttribute('data-charts','failed');"
            "console.error('report.html: charts not drawn: '+e);});")


def render_page(data: PageData) -> str:
    """The whole page for records already read (:func:`kernelpilot.report.html_data.read_folder`). Raises nothing
    for the records' content."""
    import plotly.offline

    from kernelpilot.report.charts import all_charts  # plotly: imported only when a page is drawn

    charts = all_charts(data)
    packed, source_hash = _plotly_packed(plotly.offline.get_plotlyjs())
    lib, lib_hash = _script(_loader_js(packed))
    draw, draw_hash = _script(_figures_js(charts))
    csp = (f"default-src 'none'; script-src {lib_hash} {source_hash} {draw_hash}; style-src 'unsafe-inline'; "
           "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
    what = {"optimize": "optimize run", "tune": "tune search", "session": "session"}[data.kind]
    nav = " ".join(f'<a href="#{c.key}">{_e(c.title)}</a>' for c in charts) + ' <a href="#versions">' \
        + ("Evaluations" if data.kind == "tune" else "Versions") + '</a> <a href="#files">Files</a>'
    banner = f'<p class="banner" id="timing-note">{_e(data.timing_note)}</p>' if data.timing_note else ""
    if data.mode == "replay":
        banner += ('<p class="banner">Times replayed from an evaluation cache measured on a GPU '
                   f"({_e(data.device)}); nothing ran here.</p>")
    listed = [e for e in data.entries if data.listed is None or e.label in data.listed]
    entries = "".join(_entry(e, data.best) for e in listed) or "<p>nothing recorded yet</p>"
    if data.summary:
        entries += "<ul class=\"explain\">" + "".join(f"<li>{_e(line)}</li>" for line in data.summary) + "</ul>"
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>kernelpilot {_e(what)}: {_e(data.title)}</title><style>{_STYLE}</style>{lib}</head><body>",
        f"<header><h1>{_e(data.title)} — kernelpilot {_e(what)}</h1>{_facts(data)}<nav>{nav}</nav></header>",
        banner, *(_chart_section(c) for c in charts),
        f'<section id="versions"><h2>{"Evaluations" if data.kind == "tune" else "Versions"}</h2>'
        "<p class=\"explain\">Each with its outcome, hypothesis, what it expected and observed, the decision and its "
        f"bottleneck card.</p>{entries}</section>",
        _files(data), draw, "</body></html>\n"])


def render_report_html(folder: str | Path) -> str:
    """The page for the records in ``folder`` (an optimize run, a ``tune --out`` search or a session).

    Raises:
        RunFolderError: not a folder of kernelpilot records, or a record is missing or corrupt (named).
    """
    return render_page(read_folder(folder))


def write_report_html(folder: str | Path) -> Path:
    """Write ``folder/report.html`` atomically (:func:`render_report_html`); returns its path.

    Raises:
        RunFolderError: as :func:`render_report_html`. OSError: the folder cannot be written.
    """
    from kernelpilot.records.workspace import write_text

    return write_text(Path(folder) / REPORT_FILE, render_report_html(folder))


def try_write_report_html(folder: str | Path, log: Callable[[str], None] = lambda _m: None) -> str:
    """:func:`write_report_html` for the commands that finish a run: the path written, or ``""`` with one logged
    line saying why not (a page that cannot be drawn never costs the run its records). Raises nothing."""
    try:
        return str(write_report_html(folder))
    except Exception as exc:  # noqa: BLE001 - the records are kept whatever the page does
        log(f"report.html not written: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
        return ""
