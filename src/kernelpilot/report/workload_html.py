"""``report.html`` of a ``tune --workload`` run (issue 26): the workload, shape by shape.

Three parts, drawn with the machinery of :mod:`kernelpilot.report.html` (plotly inline and compressed, the figures'
JSON compressed, a Content-Security-Policy allowing no connection, ``data-charts="drawn"`` on the body once drawn):

1. **Time per shape**: the median of the dispatch table's config, of the best single config and of the library
   default (the kernel file's own config) at every workload shape, in µs, the shapes along the dispatched key (a log
   axis; with several dispatched keys, one position per shape in the result's order), the bucket boundaries as
   dashed lines with each bucket's name. The times are the result's rows (``workload.json``).
2. **Every candidate at every shape** (a heatmap): rows the candidate configs, columns the workload shapes, each
   cell the config's median at that shape (``shapes/<i>/tune.json``) over the fastest there (1.0 = fastest); a
   config that failed or was not evaluated there is a blank cell whose hover says why; each bucket's chosen config
   is marked (a star) at its bucket's shapes.
3. **Weighted totals**: the table, the best single config and the library default (sum of weight x median, the
   result's), each one's loss against the table, and the buckets with their configs and decisions.

Where the result and its records disagree (:mod:`kernelpilot.report.workload_data`) the page says so at its top. The
page is rebuilt from the folder alone (:func:`write_workload_html` reads ``workload.json``); the same records give
the same bytes. Every record string is escaped (HTML text here, plotly's markup in the figures).

Traces carry ``meta = {"role": ...}`` as the run page's do: ``table``, ``single``, ``default`` (one marker per shape
with a time), ``bucket-boundary``, ``bucket-label``, ``cells`` (the heatmap) and ``chosen`` (the stars).
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from kernelpilot.report.workload_data import WorkloadPage, config_text, read_workload

__all__ = ["render_workload_html", "try_write_workload_html", "write_workload_html"]

#: series of the per-shape chart: (result row column, role, name, colour, marker symbol)
#: (the table's line is wide and under the others: where the single config is the table's, both stay visible)
SERIES = (("table_ns", "table", "dispatch table (config of the shape's bucket)", "#2ca02c", "circle", 14, 6, "solid"),
          ("single_ns", "single", "best single config for all shapes", "#1f77b4", "diamond", 8, 2, "dot"),
          ("default_ns", "default", "library default (the kernel file's config)", "#7f7f7f", "square-open", 9, 2,
           "dash"))
#: Heatmap height per config row, CSS pixels (at least the chart height of the other charts).
ROW_PX = 34


def _us(ns: Optional[float]) -> Optional[float]:
    return ns / 1000.0 if ns is not None else None


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def _shape_text(shape: Mapping[str, Any], keys: list[str]) -> str:
    """A shape by the keys that tell workload shapes apart (the dispatched keys), ``N=4096``."""
    shown = [k for k in keys if k in shape] or sorted(shape)
    return ", ".join(f"{k}={shape[k]}" for k in shown)


def _unique(labels: list[str]) -> list[str]:
    """``labels`` with a ``#n`` suffix on repeats (axis categories must differ)."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        n = seen.get(label, 0)
        seen[label] = n + 1
        out.append(label if n == 0 else f"{label} #{n + 1}")
    return out


def _axis(page: WorkloadPage) -> tuple[list[float], dict[str, Any], Optional[str]]:
    """(x per row, the x axis' layout, the key along it or None): one dispatched key with positive whole values gives
    its values on a log axis; otherwise each row at its position with its shape as the tick."""
    from kernelpilot.report.charts import esc

    if len(page.keys) == 1 and all(_num(r["shape"].get(page.keys[0])) for r in page.rows):
        key = page.keys[0]
        return ([float(r["shape"][key]) for r in page.rows],
                dict(type="log", title=dict(text=f"{esc(key)} (log scale)")), key)
    return ([float(i) for i in range(len(page.rows))],
            dict(tickmode="array", tickvals=list(range(len(page.rows))),
                 ticktext=[esc(_shape_text(r["shape"], page.keys)) for r in page.rows],
                 title=dict(text="workload shape")), None)


def _boundaries(page: WorkloadPage, xs: list[float], key: Optional[str]) -> tuple[list[float], list[tuple[float, str]]]:
    """(x of every bucket boundary, (x, name) of every bucket's label). Along a key: each bucket's range ends
    (``lo`` and ``hi + 1``, the class boundaries); by position: between two rows of different buckets."""
    if key is not None:
        edges: set[float] = set()
        labels = []
        for b in page.buckets:
            lo, hi = (b.get("ranges") or {}).get(key, [None, None])
            if _num(lo) and _num(hi):
                edges |= {float(lo), float(hi) + 1}
            member = [x for x, r in zip(xs, page.rows) if r.get("bucket") == b.get("name")]
            if member:
                labels.append((math.exp(math.fsum(math.log(x) for x in member) / len(member)), str(b.get("name"))))
        return sorted(edges), labels
    edges_pos = [i - 0.5 for i in range(1, len(page.rows))
                 if page.rows[i].get("bucket") != page.rows[i - 1].get("bucket")]
    labels = []
    for b in page.buckets:
        member = [x for x, r in zip(xs, page.rows) if r.get("bucket") == b.get("name")]
        if member:
            labels.append((math.fsum(member) / len(member), str(b.get("name"))))
    return edges_pos, labels


def shapes_chart(page: WorkloadPage) -> Any:
    """Part 1 (module docstring) as a :class:`kernelpilot.report.charts.Chart`."""
    import plotly.graph_objects as go

    from kernelpilot.fmt import format_duration_ns
    from kernelpilot.report.charts import HEIGHT_PX, Chart, _layout, esc

    xs, xaxis, key = _axis(page)
    order = sorted(range(len(page.rows)), key=lambda i: xs[i]) if key else list(range(len(page.rows)))
    fig = go.Figure()
    times = []
    configs = {"table_ns": None, "single_ns": page.result.get("single_config"),
               "default_ns": page.result.get("default_config")}
    config_of = {b.get("name"): b.get("config") for b in page.buckets}
    points = 0
    for col, role, name, colour, symbol, size, width, dash in SERIES:
        x, y, hover = [], [], []
        for i in order:
            r = page.rows[i]
            ns = r.get(col)
            config = configs[col] if col != "table_ns" else config_of.get(r.get("bucket"))
            x.append(xs[i])
            y.append(_us(ns))
            hover.append(f"<b>{esc(_shape_text(r['shape'], page.keys))}</b> (weight {r.get('weight'):g})<br>"
                         f"bucket {esc(r.get('bucket'))}<br>{esc(name)}: "
                         + (format_duration_ns(ns) if ns is not None else "no correct measurement")
                         + (f"<br>{esc(config_text(config))}" if isinstance(config, dict) else ""))
            if ns is not None:
                times.append(ns / 1000.0)
                points += 1
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=esc(name), meta={"role": role},
                                 marker=dict(color=colour, symbol=symbol, size=size),
                                 line=dict(color=colour, width=width, dash=dash),
                                 opacity=0.75 if role == "table" else 1,
                                 hovertext=hover, hoverinfo="text", connectgaps=False))
    log_y = bool(times) and min(times) > 0 and max(times) / min(times) > 20
    lo_y, hi_y = (min(times), max(times)) if times else (0.0, 1.0)
    y0, y1 = (lo_y / 1.3, hi_y * 1.3) if log_y else (0.0, hi_y * 1.15 or 1.0)
    edges, labels = _boundaries(page, xs, key)
    bx: list[Optional[float]] = []
    by: list[Optional[float]] = []
    for e in edges:
        bx += [e, e, None]
        by += [y0, y1, None]
    fig.add_trace(go.Scatter(x=bx, y=by, mode="lines", name="bucket boundary", meta={"role": "bucket-boundary"},
                             line=dict(color="#b0b0b0", dash="dash", width=1), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[x for x, _ in labels], y=[y1] * len(labels), mode="text", showlegend=False,
                             text=[esc(n.split(",")[0]) for _, n in labels], textposition="bottom center",
                             hovertext=[esc(n) for _, n in labels], hoverinfo="text", meta={"role": "bucket-label"},
                             textfont=dict(color="#555", size=11)))
    unit = "median, µs" + ("" if page.measured else " (Triton interpreter: not a measurement)")
    _layout(fig, xaxis=xaxis, yaxis=dict(title=dict(text=unit), type="log" if log_y else "linear",
                                         range=[math.log10(y0), math.log10(y1)] if log_y else [y0, y1]))
    fig.update_layout(height=HEIGHT_PX)
    note = "" if page.measured else "Times from the Triton interpreter: they order configs there, not GPU speed."
    return Chart(key="shapes", title="Time per shape: the table, one config for all, the library default",
                 explain="The median at every workload shape of the config the dispatch table picks for the shape's "
                 "bucket, of the best single config for the whole workload and of the kernel file's own config; "
                 "dashed lines are the bucket boundaries.", figure=fig, note=note, points=points)


def heatmap_chart(page: WorkloadPage) -> Any:
    """Part 2 (module docstring) as a :class:`kernelpilot.report.charts.Chart`."""
    import plotly.graph_objects as go

    from kernelpilot.fmt import format_duration_ns
    from kernelpilot.report.charts import Chart, _layout, _wrap, esc

    names = []
    for i, c in enumerate(page.configs):
        tags = [t for t, j in (("library default", page.default_index), ("single config", page.single_index)) if j == i]
        names.append(config_text(c) + (f" ({', '.join(tags)})" if tags else ""))
    ylab = [esc(n) for n in _unique(names)]
    # a column: the shape, and under it its bucket (the name's first part: the range of the first key)
    xlab = [f"{esc(s)}<br>{esc(str(r.get('bucket', '')).split(',')[0])}"
            for s, r in zip(_unique([_shape_text(r["shape"], page.keys) for r in page.rows]), page.rows)]
    z, median, hover = [], [], []
    for i, row in enumerate(page.cells):
        z.append([c.ratio for c in row])
        median.append([c.median_ns for c in row])
        hover.append([f"<b>{ylab[i]}</b><br>at {xlab[s]} (bucket {esc(page.rows[s].get('bucket'))})<br>"
                      + (f"median {format_duration_ns(c.median_ns)}, {c.ratio:.3f}x the fastest here<br>{esc(c.record)}"
                         if c.median_ns is not None else "blank: " + _wrap(c.reason, 70))
                      for s, c in enumerate(row)])
    ratios = [v for r in z for v in r if v is not None]
    fig = go.Figure(go.Heatmap(z=z, x=xlab, y=ylab, customdata=median, text=hover,
                               hovertemplate="%{text}<extra></extra>",
                               texttemplate="%{z:.2f}", colorscale="RdYlGn", reversescale=True, zmin=1.0,
                               zmax=max(max(ratios, default=1.0), 1.0 + 1e-6), xgap=2, ygap=2, meta={"role": "cells"},
                               colorbar=dict(title=dict(text="× fastest"))))
    sx = [xlab[s] for s, i in enumerate(page.chosen) if i is not None]
    sy = [ylab[i] for i in page.chosen if i is not None]
    fig.add_trace(go.Scatter(x=sx, y=sy, mode="markers", name="the bucket's chosen config", meta={"role": "chosen"},
                             marker=dict(symbol="star-open", size=20, color="#000", line=dict(width=2)),
                             hovertext=[f"chosen for bucket {esc(page.rows[s].get('bucket'))}"
                                        for s, i in enumerate(page.chosen) if i is not None], hoverinfo="text"))
    _layout(fig, xaxis=dict(type="category", title=dict(text="workload shape")),
            yaxis=dict(type="category", automargin=True, autorange="reversed"))
    fig.update_layout(height=max(440, 160 + ROW_PX * len(ylab)), margin=dict(l=40), shapes=[
        dict(type="line", xref="x", yref="paper", x0=s - 0.5, x1=s - 0.5, y0=0, y1=1, line=dict(color="#000", width=2))
        for s in range(1, len(page.rows)) if page.rows[s].get("bucket") != page.rows[s - 1].get("bucket")])
    cells = len(page.configs) * len(page.rows)
    blank = sum(v is None for r in z for v in r)
    return Chart(key="heatmap", title="Every candidate at every shape",
                 explain="Each cell is a candidate config's median at a workload shape over the fastest median there "
                 "(1.0 = the fastest; from shapes/<i>/tune.json); a blank cell failed or was not evaluated there "
                 "(its hover says why); a star marks the config the dispatch table picks for the shape's bucket; "
                 "black lines separate the buckets.",
                 figure=fig, points=cells,
                 info=f"{len(page.configs)} candidate configs x {len(page.rows)} shapes = {cells} cells, "
                      f"{blank} blank.")


def _fmt_us(ns: Optional[float]) -> str:
    return f"{ns / 1000:.3f} µs" if ns is not None else "—"


def totals_html(page: WorkloadPage) -> str:
    """Part 3 (module docstring): the weighted totals table and the buckets' table, as HTML (escaped)."""
    from kernelpilot.report.html import _e

    r = page.result
    loss = lambda x: f"{x:+.1f} %" if x is not None else "—"  # noqa: E731
    rows = [("dispatch table (per bucket)", "one per bucket (below)", r.get("table_ns"), "—"),
            ("best single config", config_text(r["single_config"]) if r.get("single_config") else
             "none: no config ran correctly at every shape", r.get("single_ns"), loss(r.get("single_loss_pct"))),
            ("library default", config_text(r["default_config"]) if r.get("default_config") else "—",
             r.get("default_ns"), loss(r.get("default_loss_pct")))]
    body = "".join(f'<tr id="total-{i}"><th>{_e(a)}</th><td><code>{_e(b)}</code></td><td>{_e(_fmt_us(c))}</td>'
                   f"<td>{_e(d)}</td></tr>" for i, (a, b, c, d) in enumerate(rows))
    buckets = "".join(f"<tr><td>{_e(b.get('name'))}</td>"
                      f"<td><code>{_e(config_text(b['config']) if b.get('config') else '—')}</code></td>"
                      f"<td>{_e(json.dumps(b.get('representative'), sort_keys=True, default=str))}</td>"
                      f"<td>{_e(b.get('decision', ''))}</td></tr>" for b in page.buckets)
    return ('<section id="totals"><h2>Weighted totals</h2><p class="explain">Sum over the workload of weight x median '
            "(the result's, workload.json); the loss is how much slower than the table, percent.</p>"
            '<table class="facts" id="totals-table"><tr><th></th><th>config</th><th>weighted time</th>'
            f"<th>vs the table</th></tr>{body}</table>"
            '<h3>Buckets</h3><table class="facts" id="buckets-table"><tr><th>bucket</th><th>config</th>'
            f"<th>searched at</th><th>decision</th></tr>{buckets}</table></section>")


def _files(page: WorkloadPage) -> str:
    from kernelpilot.report.html import _e, _href

    names = {"workload.md": "per-shape table", "dispatch.json": "the dispatch table and its evidence",
             "dispatch_autotune.py": "triton.autotune config list", "dispatch_select.py": "plain Python dispatcher",
             "workload.json": "this run's result"}
    items = [f'<li><a href="{_href(n)}">{_e(n)}</a> — {_e(w)}</li>' for n, w in names.items()
             if (page.folder / n).is_file() or n == "workload.json"]  # the run writes workload.json last
    for b in page.buckets:
        rel = f"{b.get('tune_folder')}/report.html"
        if (page.folder / rel).is_file():
            items.append(f'<li><a href="{_href(rel)}">{_e(rel)}</a> — the search of bucket {_e(b.get("name"))}</li>')
    for rel in sorted(set(f for f in page.folders if f), key=lambda f: (len(f), f)):
        if (page.folder / rel / "report.html").is_file():
            items.append(f'<li><a href="{_href(rel + "/report.html")}">{_e(rel)}/report.html</a> — the cross-check '
                         "at one shape</li>")
    return f'<section id="files"><h2>Files</h2><ul>{"".join(items)}</ul></section>'


def render_workload_html(folder: str | Path, result: Optional[Mapping[str, Any]] = None) -> str:
    """The page for the workload run in ``folder`` (``result``: the run's result as a dict, else workload.json).

    Raises:
        RunFolderError: a record missing or not JSON (named). ImportError: plotly is not installed.
    """
    import plotly.offline

    from kernelpilot.report import html as h

    page = read_workload(folder, result)
    charts = [shapes_chart(page), heatmap_chart(page)]
    packed, source_hash = h._plotly_packed(plotly.offline.get_plotlyjs())
    lib, lib_hash = h._script(h._loader_js(packed))
    draw, draw_hash = h._script(h._figures_js(charts))
    csp = (f"default-src 'none'; script-src {lib_hash} {source_hash} {draw_hash}; style-src 'unsafe-inline'; "
           "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
    title = Path(page.kernel).stem or "workload"
    facts = [("kernel", page.kernel), ("dispatch keys", ", ".join(page.keys)),
             ("bucket rule", str(page.result.get("rule", ""))),
             ("workload", f"{len(page.rows)} shapes in {len(page.buckets)} buckets, total weight "
                          f"{math.fsum(float(r.get('weight') or 0) for r in page.rows):g}"),
             ("candidates", f"{len(page.configs)} configs, each checked at every shape"),
             ("times", "CUDA events on the GPU" if page.measured else
              "Triton interpreter on the CPU (not a measurement)")]
    table = "".join(f"<tr><th>{h._e(k)}</th><td>{h._e(v)}</td></tr>" for k, v in facts)
    banner = "" if page.measured else ('<p class="banner" id="timing-note">The times are the Triton interpreter\'s on '
                                       "the CPU: they ordered configs there and are not measurements of GPU speed."
                                       "</p>")
    if page.problems:
        banner += ('<div class="banner" id="problems"><b>The result and its records disagree</b> (the charts draw '
                   "the result's times in part 1 and the records' in part 2):<ul>"
                   + "".join(f"<li>{h._e(p)}</li>" for p in page.problems) + "</ul></div>")
    nav = " ".join(f'<a href="#{c.key}">{h._e(c.title)}</a>' for c in charts) + \
        ' <a href="#totals">Weighted totals</a> <a href="#files">Files</a>'
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{h._e(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>kernelpilot workload run: {h._e(title)}</title>",
        f"<style>{h._STYLE}#totals td,#totals th{{padding-right:16px}}</style>{lib}</head><body>",
        f'<header><h1>{h._e(title)} — kernelpilot workload run</h1><table class="facts">{table}</table>'
        f"<nav>{nav}</nav></header>", banner, *(h._chart_section(c) for c in charts), totals_html(page),
        _files(page), draw, "</body></html>\n"])


def write_workload_html(folder: str | Path, result: Optional[Mapping[str, Any]] = None) -> Path:
    """Write ``folder/report.html`` atomically (:func:`render_workload_html`); returns its path.

    Raises:
        as :func:`render_workload_html`; OSError: the folder cannot be written.
    """
    from kernelpilot.records.workspace import write_text

    return write_text(Path(folder) / "report.html", render_workload_html(folder, result))


def try_write_workload_html(folder: str | Path, result: Optional[Mapping[str, Any]] = None,
                            log: Callable[[str], None] = lambda _m: None) -> str:
    """:func:`write_workload_html` for the end of a workload run: the path written, or ``""`` with one logged line
    saying why not (plotly not installed, a record unreadable): a page never costs the run its records. Raises
    nothing."""
    if importlib.util.find_spec("plotly") is None:
        log("report.html not written: plotly is not installed (python3 -m pip install plotly)")
        return ""
    try:
        return str(write_workload_html(folder, result))
    except Exception as exc:  # noqa: BLE001 - the records are kept whatever the page does
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        log(f"report.html not written: {type(exc).__name__}: {first}")
        return ""
