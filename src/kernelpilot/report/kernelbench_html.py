"""``report.html`` of ``kernelpilot kernelbench run``: fast_p, one table row per solution, and (when anything was
timed) a plotly chart of each correct solution's speedup over PyTorch eager and torch.compile.

It follows :mod:`kernelpilot.report.html`: plotly's source inline once (compressed, allowed by its hash in a
Content-Security-Policy that allows no connection), the figures' JSON compressed, every string from the records
HTML-escaped (a solution's file name or failure message is text, never markup). A run with nothing timed (no GPU)
has no chart, so the page holds no script at all. Drawn from the result's JSON (``kernelbench.json``) alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelpilot.fmt import format_duration_ns

__all__ = ["render_kernelbench_html", "speedup_figure"]

_CSS = ("table.rows{border-collapse:collapse;font-size:.9em}table.rows th,table.rows td{border-bottom:1px solid #e4e4e4;"
        "padding:3px 10px 3px 0;text-align:left;vertical-align:top}td.correct{color:#1b7f1b;font-weight:600}"
        "td.bad{color:#b00020;font-weight:600}td.msg{max-width:420px;color:#555;font-size:.9em}"
        ".flag{background:#fff3cd;padding:0 5px;border-radius:6px}")


def _ns(v: Any) -> str:
    return format_duration_ns(float(v)) if isinstance(v, (int, float)) else "not measured"


def _x(v: Any) -> str:
    return f"{float(v):.2f}×" if isinstance(v, (int, float)) else "—"


def speedup_figure(rows: list[Mapping[str, Any]]) -> Any:
    """A plotly bar chart: per correct row with a measured speedup, its speedup over eager and over torch.compile
    (log axis, a line at 1×); None when no row has one. Raises ImportError: plotly is not installed."""
    import plotly.graph_objects as go

    from kernelpilot.report.charts import esc

    timed = [r for r in rows if r.get("speedup_vs_eager") is not None or r.get("speedup_vs_compile") is not None]
    if not timed:
        return None
    labels = [esc(f"L{r.get('level')} #{r['problem_id']} s{r['sample_id']} {r['problem']}") for r in timed]
    fig = go.Figure()
    for key, name, colour in (("speedup_vs_eager", "vs PyTorch eager", "#9467bd"),
                              ("speedup_vs_compile", "vs torch.compile", "#8c564b")):
        fig.add_bar(x=labels, y=[r.get(key) for r in timed], name=name, marker_color=colour, meta={"role": "points"})
    fig.add_hline(y=1.0, line_dash="dot", line_color="#555")
    fig.update_layout(barmode="group", height=440, yaxis={"type": "log", "title": "speedup (baseline / solution)"},
                      margin={"l": 60, "r": 20, "t": 30, "b": 120}, legend={"orientation": "h"})
    return fig


def render_kernelbench_html(result: Mapping[str, Any]) -> str:
    """The page for a ``kernelbench run`` result (its JSON as a dict: ``kernelbench.json``). Raises ImportError:
    plotly is not installed and a chart is to be drawn."""
    from kernelpilot.report import html as h

    rows = list(result.get("rows") or [])
    fig = speedup_figure(rows) if result.get("measured") else None
    head_script, draw, csp_scripts = "", "", ""
    if fig is not None:
        import plotly.offline

        from kernelpilot.report.charts import Chart

        chart = Chart(key="speedup", title="Speedup of each correct solution", figure=fig,
                      explain="Baseline median over the solution's, same inputs and timer; above the dotted line is "
                      "faster. Incorrect and refused solutions have no bar.", points=len(fig.data[0].x))
        packed, source_hash = h._plotly_packed(plotly.offline.get_plotlyjs())
        head_script, lib_hash = h._script(h._loader_js(packed))
        draw, draw_hash = h._script(h._figures_js([chart]))
        csp_scripts = f"script-src {lib_hash} {source_hash} {draw_hash}; "
        chart_html = h._chart_section(chart)
    else:
        chart_html = ('<section id="speedup"><h2>Speedup</h2><p class="note" id="note-speedup">Nothing was timed '
                      "(no GPU: the solutions were checked under the Triton interpreter, whose times are no speed); "
                      "no speedup is shown rather than a made-up one.</p></section>")
    csp = (f"default-src 'none'; {csp_scripts}style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
           "connect-src 'none'; base-uri 'none'; form-action 'none'")
    fp = result.get("fast_p") or {}
    ps = list((fp.get("eager") or {}).keys())
    fast = ("<table class=\"rows\" id=\"fast-p\"><tr><th>baseline</th>"
            + "".join(f"<th>fast_{h._e(p)}</th>" for p in ps) + "</tr>"
            + "".join(f"<tr><th>{h._e(b)}</th>" + "".join(
                f"<td>{'not measured' if fp[b].get(p) is None else f'{fp[b][p]:.3f}'}</td>" for p in ps) + "</tr>"
                for b in ("eager", "compile") if b in fp) + "</table>")
    facts = [("problems", result.get("problems")), ("solutions", result.get("solutions")),
             ("device", result.get("device") or "—"),
             ("times", "measured on the GPU" if result.get("measured") else "not measured (no GPU)"),
             ("solutions evaluated", result.get("n_problems")), ("correct", result.get("n_correct"))]
    body = []
    for r in rows:
        cls = "correct" if r.get("correct") else "bad"
        d = r.get("durations_ns") or {}
        flag = ' <span class="flag">over 10× (flagged)</span>' if r.get("excessive_speedup") else ""
        body.append(
            "<tr>" + "".join(f"<td>{h._e(v)}</td>" for v in (r.get("level"), r.get("problem_id"), r.get("problem"),
                                                                  r.get("sample_id")))
            + f"<td>{h._e(str(r['files']['solution']['path']).rsplit('/', 1)[-1])}</td>"
            + f'<td class="{cls}">{h._e(r.get("status"))}</td><td>{h._e(r.get("failure") or "")}</td>'
            + "".join(f"<td>{h._e(_ns(d.get(k)))}</td>" for k in ("solution", "eager", "compile"))
            + f"<td>{h._e(_x(r.get('speedup_vs_eager')))}{flag}</td><td>{h._e(_x(r.get('speedup_vs_compile')))}</td>"
            + f'<td class="msg">{h._e(str(r.get("message") or "")[:300])}</td></tr>')
    headers = ("level", "id", "problem", "sample", "solution", "status", "failure", "solution", "eager",
               "torch.compile", "vs eager", "vs compile", "message")
    table = ('<table class="rows" id="rows"><tr>' + "".join(f"<th>{h._e(c)}</th>" for c in headers) + "</tr>"
             + "".join(body) + "</table>")
    unpaired = [*(f"solution {k}: {v}" for k, v in (result.get("unpaired_solutions") or {}).items())]
    n_prob = len(result.get("unpaired_problems") or {})
    unpaired_html = ("<section id=\"unpaired\"><h2>Unpaired</h2><ul>" + "".join(f"<li>{h._e(u)}</li>" for u in unpaired)
                     + (f"<li>{n_prob} problem file(s) without a solution (listed in kernelbench.json)</li>"
                        if n_prob else "") + "</ul></section>") if unpaired or n_prob else ""
    notes = "".join(f'<p class="banner">{h._e(n)}</p>' for n in result.get("notes") or [])
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{h._e(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>kernelpilot kernelbench run</title><style>{h._STYLE}{_CSS}</style>{head_script}</head><body>",
        "<header><h1>KernelBench run — kernelpilot</h1><table class=\"facts\">"
        + "".join(f"<tr><th>{h._e(k)}</th><td>{h._e(v)}</td></tr>" for k, v in facts) + "</table></header>", notes,
        "<section id=\"fastp\"><h2>fast_p</h2><p class=\"explain\">The fraction of all solutions that are correct and "
        "faster than the baseline by more than p (KernelBench's fastp).</p>", fast, "</section>", chart_html,
        "<section id=\"solutions\"><h2>Solutions</h2>", table, "</section>", unpaired_html, draw,
        "</body></html>\n"])
