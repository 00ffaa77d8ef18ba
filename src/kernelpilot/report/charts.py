"""The plotly figures of ``report.html``: the roofline with every version as a point, time per version with its
spread, speedup over the PyTorch baselines, and the search trace (order vs time, the incumbent, failures by kind).

Each builder takes a :class:`~kernelpilot.report.html_data.PageData` and returns a :class:`Chart`: a figure, or
None with a note saying why there is none (no roofline, no measured times, no baselines); a chart whose data is only
partly there keeps a note too. Nothing is measured here: points are the records' medians; the only arithmetic is
unit conversion (ns to µs), the declared work over a median (FLOP/ns = GFLOP/s, byte/ns = GB/s) and a baseline's
median over a version's (the speedup).

Every trace that stands for entries carries ``meta = {"role": ...}``: ``points`` (one marker per timed entry;
speedup: per timed entry and baseline), ``evaluations`` (the trace's status row: one marker per entry), and
``ceiling`` / ``spread`` / ``incumbent`` / ``reference`` for the rest, so a reader (or a test) can count what a
chart plots. Text from the records (config values, labels, messages) is escaped for plotly's own markup.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kernelpilot.fmt import format_duration_ns
from kernelpilot.report.html_data import Entry, PageData

__all__ = ["Chart", "all_charts", "roofline_chart", "speedup_chart", "time_chart", "trace_chart"]

#: outcome -> (colour, marker symbol). Failures not listed get :data:`FAILURE_COLOUR` and a symbol of their own.
STYLE: dict[str, tuple[str, str]] = {
    "baseline": ("#1f77b4", "diamond"), "accepted": ("#2ca02c", "circle"), "improved": ("#2ca02c", "circle"),
    "rejected": ("#7f7f7f", "circle-open"), "neutral": ("#7f7f7f", "circle-open"),
    "regressed": ("#ff7f0e", "triangle-down"), "mixed": ("#bcbd22", "square"),
    "unmeasured": ("#17becf", "circle"), "raced out": ("#9e9e9e", "x-thin-open"),
}
FAILURE_COLOUR = "#d62728"
FAILURE_SYMBOLS = ("x", "triangle-up", "square-x", "star", "hourglass", "cross", "bowtie", "hexagram",
                   "diamond-x", "pentagon")
BASELINE_COLOURS = ("#9467bd", "#8c564b", "#e377c2")
#: Chart height, CSS pixels.
HEIGHT_PX = 440


@dataclass
class Chart:
    """One section of the page.

    Attributes:
        key: the figure's element id suffix (``roofline``, ``time``, ``speedup``, ``trace``).
        title: the section heading. explain: one sentence on what the chart shows.
        figure: the plotly figure, None when there is nothing to draw (``note`` says why).
        note: why there is no figure, or what is missing from it (plain text; empty when nothing is).
        info: where the chart's reference values came from, or a count (plain text).
        points: how many markers stand for entries (``points`` role; the trace: its ``evaluations`` role).
        citations: the sources of the ceilings drawn (roofline only).
    """

    key: str
    title: str
    explain: str
    figure: go.Figure | None
    note: str = ""
    info: str = ""
    points: int = 0
    citations: tuple[str, ...] = ()


def esc(text: Any) -> str:
    """``text`` as a string safe in plotly's text markup (which reads ``<br>``, ``<a href>`` ...): ``&``, ``<`` and
    ``>`` become entities, so record text can never form a tag. Raises nothing."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _wrap(text: str, width: int = 90) -> str:
    """Escaped ``text`` broken into lines of about ``width`` characters with ``<br>`` (plotly does not wrap)."""
    lines, line = [], ""
    for word in str(text).split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join(esc(x) for x in [*lines, line])


def _style(outcome: str, failures: list[str]) -> tuple[str, str]:
    if outcome in STYLE:
        return STYLE[outcome]
    return FAILURE_COLOUR, FAILURE_SYMBOLS[failures.index(outcome) % len(FAILURE_SYMBOLS)]


def _groups(entries: list[Entry]) -> dict[str, list[Entry]]:
    """Entries by outcome, outcomes in order of first appearance."""
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.outcome, []).append(e)
    return out


def _hover(e: Entry) -> str:
    """One entry's hover text (escaped)."""
    parts = [f"<b>{esc(e.label)}</b> — {esc(e.outcome)}" + (" (masked)" if e.masked else "")]
    if e.config:
        parts.append(_wrap(json.dumps(e.config, sort_keys=True, default=str), 70))
    if e.median_ns is not None:
        parts.append(f"median {format_duration_ns(e.median_ns)}, IQR {format_duration_ns(e.iqr_ns)}"
                     + (f", {e.pct_of_roofline:.1f} % of the roofline" if e.pct_of_roofline is not None else ""))
    if e.decision:
        parts.append(_wrap(e.decision[:240], 70))
    return "<br>".join(parts)


def _layout(fig: go.Figure, **extra: Any) -> go.Figure:
    fig.update_layout(template="plotly_white", height=HEIGHT_PX, margin=dict(l=70, r=30, t=30, b=60), showlegend=True,
                      legend=dict(orientation="h", yanchor="top", y=-0.18, x=0), hovermode="closest", **extra)
    return fig


def _order_title(data: PageData) -> str:
    return "evaluation order" if data.kind == "tune" else "version, in the order tried"


def _ticks(entries: list[Entry]) -> dict[str, Any]:
    """x-axis ticks naming each entry at its order (plotly's own ticks beyond 40 entries)."""
    if not entries or len(entries) > 40:
        return {}
    return dict(tickmode="array", tickvals=[e.order for e in entries], ticktext=[esc(e.label) for e in entries])


def _failures(data: PageData) -> list[str]:
    return sorted({e.outcome for e in data.entries if e.outcome not in STYLE})


def roofline_chart(data: PageData) -> Chart:
    """The roofline of this GPU at the run's workload, every timed version or evaluation a point.

    x: arithmetic intensity (declared FLOPs / declared bytes, FLOP/byte: the same for every config of one
    workload); y: performance, GFLOP/s (declared FLOPs / the record's median in ns). The two ceilings are the ones
    roofline.json used, named in the legend with their source (measured or datasheet, spec file and line). A
    workload with no FLOPs has no intensity on a log axis: then each point is the achieved bandwidth (bytes / median,
    GB/s) under the bandwidth ceiling. Raises nothing.
    """
    title, explain = "Roofline", ("Speed of light on this GPU: the memory roof (bandwidth × arithmetic intensity) up "
                                  "to the ridge point, the compute roof after it; one point per timed version at its "
                                  "achieved rate.")
    roof = data.roofline
    if roof is None:
        return Chart("roofline", title, explain, None, note=data.roofline_note)
    timed = [e for e in data.entries if e.timed]
    failures = _failures(data)
    bw_gbps, bw = roof.bandwidth.value, roof.bandwidth
    peak_g = roof.peak.value * 1e3  # TFLOP/s (TOP/s) -> GFLOP/s (GOP/s)
    op = "OP" if roof.peak.unit == "TOP/s" else "FLOP"

    def cite(v: Any) -> str:
        kind = "measured" if v.metric.startswith("measured_") else "datasheet"
        return f"{v.metric} {v.value_text or v.value} {v.unit} — {kind}, {v.path}:{v.line}"

    citations = tuple(roof.citations)
    fig = go.Figure()
    note = "" if timed else data.timing_note or "no version has a measured time"
    if roof.flops <= 0 or roof.arithmetic_intensity_flop_per_byte <= 0:
        orders = [e.order for e in (timed or data.entries)] or [1]
        x0, x1 = min(orders) - 0.5, max(orders) + 0.5
        fig.add_trace(go.Scatter(x=[x0, x1], y=[bw_gbps, bw_gbps], mode="lines",
                                 name=esc(f"bandwidth ceiling: {cite(bw)}"), line=dict(color="#444", width=3),
                                 meta={"role": "ceiling"}, hovertext=_wrap(bw.source[:300], 70), hoverinfo="text"))
        for outcome, group in _groups(timed).items():
            colour, symbol = _style(outcome, failures)
            fig.add_trace(go.Scatter(x=[e.order for e in group], y=[roof.bytes_moved / e.median_ns for e in group],
                                     mode="markers", name=esc(outcome), meta={"role": "points"},
                                     marker=dict(color=colour, symbol=symbol, size=10),
                                     hovertext=[_hover(e) for e in group], hoverinfo="text"))
        if not timed:
            fig.add_annotation(x=(x0 + x1) / 2, y=bw_gbps / 2, showarrow=False, text=_wrap(f"no points: {note}", 70),
                               bgcolor="#fff8e1", bordercolor="#c9a227")
        _layout(fig, xaxis=dict(title=_order_title(data), range=[x0, x1], **_ticks(data.entries)),
                yaxis=dict(title="achieved DRAM bandwidth, GB/s (declared bytes / median)", rangemode="tozero"))
        note = "; ".join(x for x in ("the workload declares no FLOPs: achieved bandwidth is shown instead of a "
                                     "log-log roofline", note) if x)
        return Chart("roofline", title, explain, fig, note=note, points=len(timed), citations=citations)
    ai, ridge = roof.arithmetic_intensity_flop_per_byte, roof.ridge_point_flop_per_byte
    lo, hi = min(ai, ridge) / 8, max(ai, ridge) * 8
    fig.add_trace(go.Scatter(x=[lo, ridge], y=[lo * bw_gbps, ridge * bw_gbps], mode="lines",
                             name=esc(f"memory roof: {cite(bw)}"), line=dict(color="#444", width=3),
                             meta={"role": "ceiling"}, hovertext=_wrap(bw.source[:300], 70), hoverinfo="text"))
    fig.add_trace(go.Scatter(x=[ridge, hi], y=[peak_g, peak_g], mode="lines",
                             name=esc(f"compute roof: {cite(roof.peak)}"), line=dict(color="#888", width=3),
                             meta={"role": "ceiling"}, hovertext=_wrap(roof.peak.source[:300], 70), hoverinfo="text"))
    sol = (f"speed of light at this intensity (floor {format_duration_ns(roof.floor_ns)}) and target "
           f"({roof.target_fraction:.0%}: {format_duration_ns(roof.target_ns)})")
    fig.add_trace(go.Scatter(x=[ai, ai], y=[roof.flops / roof.floor_ns, roof.flops / roof.target_ns],
                             mode="markers", name=esc(sol),
                             marker=dict(color="#444", symbol=["star", "line-ew-open"], size=[14, 18]),
                             meta={"role": "reference"}, hoverinfo="x+y+name"))
    for outcome, group in _groups(timed).items():
        colour, symbol = _style(outcome, failures)
        fig.add_trace(go.Scatter(x=[ai] * len(group), y=[roof.flops / e.median_ns for e in group], mode="markers",
                                 name=esc(outcome), meta={"role": "points"},
                                 marker=dict(color=colour, symbol=symbol, size=10, line=dict(width=1)),
                                 hovertext=[_hover(e) for e in group], hoverinfo="text"))
    if not timed:
        fig.add_annotation(x=math.log10(math.sqrt(lo * hi)), y=math.log10(peak_g) - 1, showarrow=False,
                           text=_wrap(f"no points: {note}", 70), bgcolor="#fff8e1", bordercolor="#c9a227")
    _layout(fig, xaxis=dict(title=f"arithmetic intensity, {op}/byte (declared {op}s / declared bytes)", type="log"),
            yaxis=dict(title=f"G{op}/s (declared {op}s / median)", type="log"))
    return Chart("roofline", title, explain, fig, note=note, points=len(timed), citations=citations)


def time_chart(data: PageData) -> Chart:
    """Time per version: each timed entry's samples as a box (quartiles by the records' 'inclusive' method; only the
    entries the page lists, :attr:`PageData.listed`, when it lists a selection), its recorded median (the one its
    decision used) as a marker; µs. Raises nothing."""
    title, explain = "Time per version", ("The recorded median of each timed version (marker) and the spread of its "
                                          "samples (box: quartiles, whiskers to 1.5 IQR); µs.")
    timed = [e for e in data.entries if e.timed]
    if not timed:
        return Chart("time", title, explain, None, note=data.timing_note or "no version has a measured time")
    failures = _failures(data)
    fig = go.Figure()
    boxed = [e for e in timed if data.listed is None or e.label in data.listed]  # a page of 1,000 stays small
    for e in boxed:
        if len(e.samples_ns) > 1:
            fig.add_trace(go.Box(x=[e.label] * len(e.samples_ns), y=[s / 1e3 for s in e.samples_ns],
                                 name=esc(e.label), boxpoints=False, quartilemethod="inclusive", showlegend=False,
                                 marker=dict(color=_style(e.outcome, failures)[0]), line=dict(width=1),
                                 meta={"role": "spread"}, hoverinfo="y"))
    for outcome, group in _groups(timed).items():
        colour, symbol = _style(outcome, failures)
        fig.add_trace(go.Scatter(x=[e.label for e in group], y=[e.median_ns / 1e3 for e in group], mode="markers",
                                 name=esc(f"median: {outcome}"), meta={"role": "points"},
                                 marker=dict(color=colour, symbol=symbol, size=9, line=dict(width=1, color="#222")),
                                 hovertext=[_hover(e) for e in group], hoverinfo="text"))
    medians = [e.median_ns for e in timed]
    log = max(medians) / min(medians) > 20
    no_spread = [e.label for e in boxed if len(e.samples_ns) <= 1]
    note = (f"no samples recorded for {', '.join(no_spread[:12])}{' …' if len(no_spread) > 12 else ''}: median "
            "only (its IQR is in the hover text)") if no_spread else ""
    if len(boxed) < len(timed):
        note = (note + "; " if note else "") + (f"boxes for the {len(boxed)} versions listed below; the other "
                                                f"{len(timed) - len(boxed)}: median only")
    _layout(fig, xaxis=dict(title="version" if data.kind != "tune" else "evaluation", type="category",
                            categoryorder="array", categoryarray=[e.label for e in timed]),
            yaxis=dict(title="kernel time, µs" + (" (log)" if log else ""), type="log" if log else "linear"),
            boxmode="overlay")
    return Chart("time", title, explain, fig, note=note, points=len(timed))


def speedup_chart(data: PageData) -> Chart:
    """Speedup of each timed version over each measured baseline (PyTorch eager, torch.compile): the baseline's
    median / the version's median (> 1: the version is faster). Raises nothing."""
    title, explain = "Speedup over PyTorch", ("Baseline median / version median for every timed version; above the "
                                              "line at 1 the version is faster than the baseline.")
    timed = [e for e in data.entries if e.timed]
    if not data.baselines_ns:
        return Chart("speedup", title, explain, None, note=data.baselines_note)
    if not timed:
        return Chart("speedup", title, explain, None, note=data.timing_note or "no version has a measured time")
    fig = go.Figure()
    for n, (name, base_ns) in enumerate(sorted(data.baselines_ns.items())):
        fig.add_trace(go.Scatter(x=[e.label for e in timed], y=[base_ns / e.median_ns for e in timed],
                                 mode="lines+markers", name=esc(f"vs {name} ({format_duration_ns(base_ns)})"),
                                 meta={"role": "points"},
                                 line=dict(color=BASELINE_COLOURS[n % len(BASELINE_COLOURS)]),
                                 hovertext=[f"{esc(e.label)}: {base_ns / e.median_ns:.3f}× vs {esc(name)}"
                                            for e in timed], hoverinfo="text"))
    fig.add_hline(y=1.0, line=dict(color="#444", dash="dash"), annotation_text="same speed as the baseline")
    _layout(fig, xaxis=dict(title="version" if data.kind != "tune" else "evaluation", type="category",
                            categoryorder="array", categoryarray=[e.label for e in timed]),
            yaxis=dict(title="speedup, × (baseline median / version median)"))
    return Chart("speedup", title, explain, fig, info=data.baselines_note, points=len(timed) * len(data.baselines_ns))


def trace_chart(data: PageData) -> Chart:
    """The search trace: each entry in the order it was decided; its median (µs) and the incumbent's when times
    are measured; below, every entry's outcome, failures by kind (compile error, wrong result, timeout ...).
    Raises nothing."""
    title = "Search trace" if data.kind != "session" else "Versions in order"
    explain = ("Each evaluation in the order it was decided: its median and the incumbent (the best accepted so far) "
               "above, its outcome below — every failure by its kind.")
    entries = data.entries
    if not entries:
        return Chart("trace", title, explain, None, note="no version or evaluation was recorded")
    failures = _failures(data)
    timed = [e for e in entries if e.timed]
    rows = 2 if timed else 1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        row_heights=[0.68, 0.32] if rows == 2 else [1.0])
    by_label = {e.label: e for e in entries}
    if timed:
        for outcome, group in _groups(timed).items():
            colour, symbol = _style(outcome, failures)
            fig.add_trace(go.Scatter(x=[e.order for e in group], y=[e.median_ns / 1e3 for e in group],
                                     mode="markers", name=esc(outcome), meta={"role": "times"},
                                     marker=dict(color=colour, symbol=symbol, size=9), legendgroup=outcome,
                                     hovertext=[_hover(e) for e in group], hoverinfo="text"), row=1, col=1)
        best = [by_label[e.incumbent].median_ns if e.incumbent in by_label else None for e in entries]
        fig.add_trace(go.Scatter(x=[e.order for e in entries], y=[b / 1e3 if b else None for b in best],
                                 mode="lines", line_shape="hv", name="incumbent (best accepted so far)",
                                 line=dict(color="#2ca02c", width=2), meta={"role": "incumbent"},
                                 hovertext=[f"after {esc(e.label)}: incumbent {esc(e.incumbent or '—')}"
                                            for e in entries], hoverinfo="text"), row=1, col=1)
        medians = [e.median_ns for e in timed]
        log = max(medians) / min(medians) > 20
        fig.update_yaxes(title_text="median, µs" + (" (log)" if log else ""), type="log" if log else "linear",
                         row=1, col=1)
    in_legend = {e.outcome for e in timed}
    for outcome, group in _groups(entries).items():
        colour, symbol = _style(outcome, failures)
        fig.add_trace(go.Scatter(x=[e.order for e in group], y=[esc(outcome)] * len(group), mode="markers",
                                 name=esc(outcome), meta={"role": "evaluations"}, legendgroup=outcome,
                                 showlegend=outcome not in in_legend,
                                 marker=dict(color=colour, symbol=symbol, size=11, line=dict(width=1)),
                                 hovertext=[_hover(e) for e in group], hoverinfo="text"), row=rows, col=1)
    order = [esc(o) for o in _groups(entries)]
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=order[::-1], title_text="outcome",
                     row=rows, col=1)
    fig.update_xaxes(title_text=_order_title(data), row=rows, col=1, **_ticks(entries))
    _layout(fig)
    counts = ", ".join(f"{len(g)} {o}" for o, g in _groups(entries).items())
    note = "" if timed else (data.timing_note or "no version has a measured time") + "; outcomes only"
    return Chart("trace", title, explain, fig, note=note, info=f"Outcomes: {counts}.", points=len(entries))


def all_charts(data: PageData) -> list[Chart]:
    """The page's charts in page order: roofline, time per version, speedup, search trace. Raises nothing."""
    return [roofline_chart(data), time_chart(data), speedup_chart(data), trace_chart(data)]
