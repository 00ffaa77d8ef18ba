"""The Markdown of a session: ``README.md`` (task, cited specs, roofline, stop conditions), each version's
``hypothesis.md``, the versions table of ``status`` and ``final_report.md``."""

from __future__ import annotations

from typing import Any

from kernelpilot.fmt import format_duration_ns
from kernelpilot.fmt import format_ratio
from kernelpilot.versions.records import Expectation, MemoryRecord, SessionState

__all__ = ["render_hypothesis_md", "render_readme", "render_session_report", "versions_table"]


def render_readme(state: SessionState, kernel: str, reference: str, roofline: Any, work: Any, note: str,
                  tolerances: str) -> str:
    """``RUN/README.md``: the task, the hardware specs used (each cited ``metric: value unit <- path:line`` by the
    roofline), the roofline analysis and the stop conditions. A value that cannot be cited is written UNKNOWN and
    listed, never guessed."""
    from kernelpilot.hardware.roofline import render_roofline_md

    unknown: list[str] = []
    lines = [f"# Session: {state.kernel_name}", "",
             "## Task", "",
             f"- kernel (v0): `{kernel}`; reference (frozen for every version): `{reference}` → `{state.reference}`",
             f"- shape: `{state.shape}`; device: {state.device_name or 'CPU (Triton interpreter: times are not measurements)'}"
             + (f" ({state.arch})" if state.arch else ""),
             f"- tolerances: {tolerances}",
             f"- kernel type (for the experience log): {state.kernel_type}; backend: {state.backend}",
             "- every version is checked against the same reference, shape, inputs (v0's `setup`), seeds and "
             "tolerances; a version whose `setup` builds other inputs is invalid (`check_changed`).",
             "", "## Workload", "",
             f"- FLOPs: {work.flops:.6g} ({work.flops_source})",
             f"- bytes: {work.bytes_moved:.6g} ({work.bytes_source})", ""]
    if roofline is not None:
        lines += [render_roofline_md(roofline), "", "## Stop conditions", "",
                  f"- time ≤ **{format_duration_ns(roofline.target_ns)}** (the floor "
                  f"{format_duration_ns(roofline.floor_ns)} / 0.9: 90 % of the "
                  f"binding peak, {roofline.bound}-bound, "
                  + ("measured ceiling" if roofline.floor_is_measured else "datasheet peak") + ")",
                  "- or: no hypothesis left that the card or the experience log supports (the author's call)."]
    else:
        unknown.append(f"the roofline: {note}")
        lines += ["## Stop conditions", "", "- time target: UNKNOWN (no roofline: see below)"]
    if not state.target.is_gpu:
        unknown.append("measured times: the Triton interpreter runs on the CPU (no GPU here)")
    if unknown:
        lines += ["", "## UNKNOWN (not guessed)", ""] + [f"- {u}" for u in unknown]
    return "\n".join(lines) + "\n"


def render_hypothesis_md(index: int, parent: int | None, hypothesis: str, expects: list[Expectation],
                         change: str) -> str:
    """``vN/hypothesis.md``, written and committed before the version runs."""
    lines = [f"# v{index}: hypothesis", "", hypothesis or "(none given)", "",
             f"- parent: v{parent}" if parent is not None else "- parent: none (the starting point)",
             f"- change: {change}" if change else "- change: the starting kernel"]
    for e in expects:
        lines.append(f"- expects: {e.metric} {e.direction}")
    return "\n".join(lines) + "\n"


def versions_table(memories: list[MemoryRecord], incumbent: int | None, first_ns: float | None) -> str:
    """One row per version: outcome, time, speedups, bottleneck, expectations, hypothesis (masked ones marked)."""
    rows = ["| version | parent | outcome | time | vs v0 | vs parent (A/B ratio) | bottleneck | expectations | "
            "hypothesis |", "|---|---|---|---|---|---|---|---|---|"]
    for m in memories:
        mark = " (incumbent)" if m.version == incumbent else (" (masked)" if m.masked else "")
        vs0 = format_ratio(first_ns / m.duration_ns) if first_ns and m.duration_ns else "—"
        ratio = format_ratio((m.vs_parent or {}).get("ratio"), decimals=3, suffix="")
        exp = ", ".join(f"{e.metric} {e.direction}: {e.verdict}" for e in m.expectations) or "—"
        what = (m.hypothesis or "").replace("|", "/")[:90] + ("" if m.outcome != "invalid" else f" [{m.status}]")
        when = format_duration_ns(m.duration_ns) + ("" if m.measured or not m.duration_ns else " (interpreted)")
        if not m.measured:
            vs0 = ratio = "—"
        rows.append(f"| v{m.version}{mark} | {'v' + str(m.parent) if m.parent is not None else '—'} | {m.outcome} | "
                    f"{when} | {vs0} | {ratio} | {m.bottleneck_after or '—'} | {exp} | {what} |")
    return "\n".join(rows)


def render_session_report(state: SessionState, memories: list[MemoryRecord], benchmark_md: str | None) -> str:
    """``final_report.md``: the versions (masked ones apart), the incumbent against v0 and the target, what each
    version taught (pitfalls), and the baselines."""
    live = [m for m in memories if not m.masked]
    masked = [m for m in memories if m.masked]
    first = next((m for m in memories if m.version == 0), None)
    best = next((m for m in memories if m.version == state.incumbent), None)
    lines = [f"# Final report: {state.kernel_name}", "",
             f"Device: {state.device_name or 'CPU (Triton interpreter: times are not measurements)'}; "
             f"shape `{state.shape}`; {len(live)} versions ({len(masked)} masked).", ""]
    if best is not None and not best.measured:
        lines.append(f"**Incumbent: v{best.version}** (Triton interpreter: times are not measurements, no speed is "
                     "claimed).")
    elif best is not None and first is not None and best.duration_ns and first.duration_ns:
        lines.append(f"**Incumbent: v{best.version}**, {format_duration_ns(best.duration_ns)}: "
                     f"{format_ratio(first.duration_ns / best.duration_ns)} v0 "
                     f"({format_duration_ns(first.duration_ns)})"
                     + (f", {best.pct_of_roofline:.1f} % of the roofline" if best.pct_of_roofline else "")
                     + (f"; target {format_duration_ns(state.target_ns)} "
                        + ("**met**" if best.duration_ns <= state.target_ns else "not met") if state.target_ns else "")
                     + ".")
    else:
        lines.append("No correct version: no incumbent.")
    lines += ["", "## Versions", "", versions_table(live, state.incumbent, first.duration_ns if first else None)]
    if masked:
        lines += ["", "## Masked (kept, not counted)", ""]
        lines += [f"- v{m.version}: {m.mask_reason or 'masked'} — {m.hypothesis[:120]}" for m in masked]
    lessons = [f"- v{m.version} ({m.outcome}): {p}" for m in live for p in m.pitfalls]
    if lessons:
        lines += ["", "## Pitfalls", ""] + lessons
    if state.restarts:
        lines += ["", "## Restarts", ""] + [f"- from v{r['from']} at {r['at_utc']}: masked "
                                             f"{', '.join('v' + str(i) for i in r['masked']) or 'nothing'}"
                                             for r in state.restarts]
    if benchmark_md:
        lines += ["", benchmark_md.strip()]
    return "\n".join(lines) + "\n"
