"""tune.md: a Markdown report of one search — best config, incumbent changes, failures, pruning, and the evaluations
that matter (the first, every incumbent, the fastest correct ones, the last: the final report's selection,
:func:`kernelpilot.report.final.shown_versions`) with a count of the rest; every evaluation stays a line of
``evaluations.jsonl`` and an entry of ``tune.json``. A search of 5,717 configs on an H200 wrote a 1 MB tune.md when
it listed them all."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kernelpilot.fmt import format_duration_ns

if TYPE_CHECKING:
    from kernelpilot.app.tune import TuneResult


def render_tune_md(r: "TuneResult") -> str:
    """A Markdown report of a search (see the module docstring): best config, incumbent changes, failures, pruning,
    the evaluations that matter and a count of the rest. Raises nothing."""
    from kernelpilot.report.final import TOP_N, rest_summary, shown_versions, skipped_summary, with_failure_examples

    note = "" if r.measured else " (interpreted, not a measurement)"
    lines = [f"# tune: {Path(r.kernel).name} ({r.strategy}, seed {r.seed})", "",
             f"Shape `{r.shape}` on {r.gpu or r.device}; space {r.space_size} valid configs of {r.space_total}; "
             f"constraints: {'; '.join(r.constraints) or 'none'}.", "",
             f"Stopped: {r.stopped}. {len(r.evaluations)} evaluations ({r.n_new} new, {r.n_cached} cached), "
             f"{r.device_s:.1f} s of worker time, {r.wall_s:.1f} s wall; worker restarts {r.worker_restarts}.", ""]
    if r.best is not None:
        lines += [f"**Best:** `{r.best.config}` — median {format_duration_ns(r.best.duration_ns)}{note}"
                  + (f", speed-of-light floor {format_duration_ns(r.floor_ns)} ({r.floor_ns / r.best.duration_ns:.1%} "
                     "of the best's time)"
                     if r.floor_ns and r.best.duration_ns else ""), "", f"    {r.triton_config}", ""]
    if r.top_configs:
        lines += ["## Fastest configs as triton.Config lines", "", "```python",
                  *[f"    {c}," for c in r.top_configs], "```", ""]
    if r.history:
        lines += ["## Incumbent changes", "", "| after eval | config | median | why |", "|---|---|---|---|"]
        lines += [f"| {h.evaluations} | `{h.config}` | {format_duration_ns(h.duration_ns)} | {h.decision} |"
                  for h in r.history]
        lines.append("")
    if r.prune is not None:
        pr = r.prune
        lines += ["## Static pruning", "", f"{pr.n_pruned} of {pr.n_compiled} configs compiled for {pr.arch} were "
                  f"pruned before any GPU time ({pr.by_reason}); {pr.n_configs} in the space. Compiles ran "
                  f"{pr.wall_s:.1f} s in parallel with the measurements ({pr.compile_s:.1f} CPU-seconds); the search "
                  f"waited {pr.waited_s:.1f} s for them; {len(pr.unchecked)} configs were measured before their "
                  f"compile finished.", ""]
    if r.failures:
        lines += ["## Failures (kept as data)", "", "| status | count |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(r.failures.items())]
        lines.append("")
    listed = with_failure_examples(r.evaluations, shown_versions(r.evaluations))
    shown = {id(ev) for ev in listed}
    lines += ["## Evaluations", "", f"The first, every incumbent, the {TOP_N} fastest correct ones, the first of each failure and the last.", "",
              "| # | config | status | median | IQR | cached | decision / message |", "|---|---|---|---|---|---|---|"]
    for i, ev in enumerate(r.evaluations, 1):
        if id(ev) not in shown or ev.index is None:  # skipped configs are counted by reason below
            continue
        med, iqr = format_duration_ns(ev.duration_ns), format_duration_ns(ev.iqr_ns)
        note = (ev.decision or ev.message).replace("|", "/").replace("\n", " ")[:160]
        lines.append(f"| {i} | `{ev.key}` | {ev.status} | {med} | {iqr} | {'yes' if ev.cached else ''} | {note} |")
    rest = rest_summary(r.evaluations, listed, _WHERE, "evaluations")
    skipped = skipped_summary([ev for ev in r.evaluations if ev.index is None], _WHERE)
    return "\n".join([*lines, *([""] + rest if rest else []),
                      *(["", "## Skipped configs", "", *skipped] if skipped else [])]) + "\n"


#: where a tune keeps every evaluation, listed or not
_WHERE = "each is a line of evaluations.jsonl and an entry of tune.json"
