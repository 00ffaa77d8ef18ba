"""final_report.md: the top versions, a summary of the rest and of the configs skipped without a run, what worked
and what did not, and the best config.

A run may measure a thousand configs and skip thousands more (issue 25, "Records that scale"): the report lists
the versions that matter (:func:`shown_versions`: v0, every incumbent, the fastest correct ones) and counts the rest
by outcome; skipped configs (``skipped.jsonl``) are counted by status and reason, one example each.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kernelpilot.fmt import format_duration_ns, format_ratio
from kernelpilot.hardware.roofline import Roofline
from kernelpilot.records.evaluation import Evaluation, version_change
from kernelpilot.records.models import RunInfo, SkippedRow
from kernelpilot.report.hypothesis import DECISION_RULE


def _change(v: Evaluation, versions: list[Evaluation]) -> str:
    """The change from the recorded parent, computed from the two configs (never the move's declared tunable)."""
    return version_change(v, {e.index: e for e in versions if e.index is not None})


def _why(v: Evaluation) -> str:
    return (v.decision or v.message or "").replace("|", "/").replace("\n", " ")


def versions_table(info: RunInfo, versions: list[Evaluation], every: list[Evaluation] | None = None) -> str:
    """The Markdown versions table of ``versions``: status, median and IQR (each in the unit that fits it; the median
    the decision used), % of roofline, the card's class, speedup vs the first correct version (``—`` for a failed
    version and the first itself). ``every``: the run's versions, where parents are looked up for the change column
    (None: ``versions``)."""
    lookup = versions if every is None else every
    rows = ["| version | change | status | median | IQR | % of roofline | verdict | speedup vs first |",
            "|---|---|---|---|---|---|---|---|"]
    for v in versions:
        pct = "—" if v.pct_of_roofline is None else f"{v.pct_of_roofline:.1f}"
        status = v.version_status + ("" if v.ok or v.status == "ok" else f" ({v.status})")
        rows.append(f"| v{v.index} | {_change(v, lookup)} | {status} | {format_duration_ns(v.duration_ns)} | "
                    f"{format_duration_ns(v.iqr_ns)} | {pct} | {v.bound or '—'} | "
                    f"{format_ratio(v.speedup_vs_first, decimals=3, suffix='x')} |")
    return "\n".join(rows)


#: The fastest correct versions listed in the report besides v0 and the incumbents.
TOP_N = 10
#: Failed or rejected versions listed one by one under "What did not" (the rest are counted).
LIST_N = 10


def shown_versions(versions: list[Evaluation], top_n: int = TOP_N) -> list[Evaluation]:
    """The versions the report lists, in version order: v0, every accepted one (the incumbent history), the
    ``top_n`` fastest correct ones, and the last one. Skipped configs (``index`` None) are never listed. Raises
    nothing."""
    real = [v for v in versions if v.index is not None]
    fastest = sorted((v for v in real if v.ok and not v.raced_out), key=lambda v: v.objective)[:top_n]
    keep = {id(v) for v in fastest} | {id(v) for v in real if v.accepted or v.index == 0}
    if real:
        keep.add(id(real[-1]))
    return [v for v in real if id(v) in keep]


def with_failure_examples(versions: list[Evaluation], shown: list[Evaluation]) -> list[Evaluation]:
    """``shown`` and the first version of each failure status not among them, in version order: a search's page
    and tune.md show what each kind of failure said, while a count stands for the rest. Raises nothing."""
    keep = {id(v) for v in shown}
    seen = {v.status for v in shown if not v.ok}
    for v in versions:
        if v.index is not None and not v.ok and v.status not in seen:
            seen.add(v.status)
            keep.add(id(v))
    return [v for v in versions if id(v) in keep]


def _reason_kind(reason: str) -> str:
    """A skip reason with its numbers and quoted values blanked, so that rows of one rule group together."""
    first = (reason or "no reason given").strip().splitlines()[0] if (reason or "").strip() else "no reason given"
    return re.sub(r"\d+(\.\d+)?", "N", re.sub(r"'[^']*'|\"[^\"]*\"", "…", first))[:120]


def rest_summary(versions: list[Evaluation], shown: list[Evaluation],
                 where: str = "every version has its folder `vN/`", noun: str = "versions") -> list[str]:
    """Markdown lines counting the versions not in ``shown`` by outcome (``- 812 more versions not listed: 640
    rejected (raced out 600), 172 failed (compile_error 90, timeout 82) (every version has its folder `vN/`)``);
    ``where`` says where the unlisted ones are kept, ``noun`` what they are (a tune's ``evaluations``). Empty when
    every version is shown. Raises nothing."""
    ids = {id(v) for v in shown}
    rest = [v for v in versions if v.index is not None and id(v) not in ids]
    if not rest:
        return []
    by = Counter(v.version_status for v in rest)
    detail = {"failed": ", ".join(f"{k} {n}" for k, n in Counter(v.status for v in rest if not v.ok).most_common()),
              "rejected": (f"raced out {raced}" if (raced := sum(1 for v in rest if v.ok and v.raced_out)) else "")}
    parts = ", ".join(f"{n} {k}" + (f" ({detail[k]})" if detail.get(k) else "") for k, n in by.most_common())
    return [f"- {len(rest)} more {noun} not listed: {parts} ({where})"]


def _reason_of(row: Evaluation | SkippedRow) -> str:
    """A skipped row's reason, or a skipped evaluation's message."""
    return (row.reason if isinstance(row, SkippedRow) else row.message) or ""


def skipped_summary(skipped: Sequence[Evaluation | SkippedRow],
                    where: str = "every one is a row of `skipped.jsonl` with its reason") -> list[str]:
    """Markdown lines for the configs answered without a run (``Evaluation`` with ``index`` None, or
    :class:`~kernelpilot.records.models.SkippedRow`): a count, then one line per status and kind of reason with
    its count and one example config; ``where`` says where each one is kept (a tune's lines of
    ``evaluations.jsonl``). Empty when none was skipped. Raises nothing."""
    if not skipped:
        return []
    groups: dict[tuple[str, str], list[Evaluation | SkippedRow]] = {}
    for row in skipped:
        reason = _reason_of(row)
        groups.setdefault((row.status, _reason_kind(reason)), []).append(row)
    out = [f"{len(skipped)} configs were answered without a run (no version; {where}):", ""]
    for (status, _), rows in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        ex = rows[0]
        reason = _reason_of(ex).replace("|", "/").replace("\n", " ")
        out.append(f"- {status} × {len(rows)}: {reason[:200]} (e.g. `{ex.config}`)")
    return out


def listed_view(evaluations: list[Evaluation], noun: str, where: str) -> tuple[list[Evaluation], list[str]]:
    """What a report lists of a long search, and the rest in a few lines: ``(listed, not_listed)``. ``listed``: the
    measured evaluations of :func:`shown_versions` and :func:`with_failure_examples` (the first, every incumbent,
    the fastest, the first of each failure, the last), in order; ``not_listed``: :func:`rest_summary` of the other
    measured ones (``noun``: what they are, ``where``: where they are kept) and :func:`skipped_summary` of the
    configs answered without a run, by reason with an example each, without Markdown list marks. Raises nothing."""
    shown = with_failure_examples(evaluations, shown_versions(evaluations))
    keep = {id(ev) for ev in shown if ev.index is not None}
    skipped = [ev for ev in evaluations if ev.index is None]
    rest = [line.removeprefix("- ") for line in
            [*rest_summary(evaluations, shown, where, noun), *skipped_summary(skipped, where)] if line]
    return [ev for ev in evaluations if id(ev) in keep], rest


def best_version(versions: list[Evaluation]) -> Evaluation | None:
    """The fastest accepted version (the incumbent at the end), or None when no version was correct."""
    accepted = [v for v in versions if v.ok and v.accepted]
    return min(accepted, key=lambda v: v.objective) if accepted else None


def _gb(n: float) -> str:
    """Bytes as decimal GB from 1 GB (``2.10 GB``), else MB (``201.3 MB``)."""
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def floor_check_lines(versions: list[Evaluation]) -> list[str]:
    """One line per version whose ncu profile checked the floor's bytes (``Evaluation.floor_check``, made by
    :func:`kernelpilot.profile.floor_check.confirm_floor_bytes`): ``floor bytes 2.10 GB vs DRAM 1.05 GB measured by
    ncu on v0: over-counted ×2.0``, then the check's reason. Empty when no version has one; raises nothing."""
    lines = []
    for v in versions:
        check = v.floor_check or {}
        floor, dram, verdict = check.get("floor_bytes"), check.get("dram_bytes"), check.get("verdict")
        where = f"v{v.index}" if v.index is not None else "this config"
        if floor is None or dram is None or verdict not in ("confirmed", "over_counted"):
            lines.append(f"- {where}: floor bytes not checked: {check.get('message', 'no DRAM bytes')}")
            continue
        ratio = check.get("ratio")
        words = ("over-counted " + (f"×{ratio:.1f}" if ratio else "(no DRAM bytes moved)")
                 if verdict == "over_counted" else "confirmed" + (f" (×{ratio:.2f})" if ratio else ""))
        lines.append(f"- floor bytes {_gb(floor)} vs DRAM {_gb(dram)} measured by ncu on {where}: {words} — "
                     f"{check.get('reason', '')}".rstrip(" —"))
    return lines


def render_final_report(info: RunInfo, versions: list[Evaluation], roofline: Roofline | None,
                        skipped: list[Any] | None = None) -> str:
    """The whole final_report.md for a run (also rebuilt by ``kernelpilot report RUN``).

    Args:
        info: run.json. versions: the run's evaluations (versions; skipped ones, ``index`` None, may be mixed in).
        roofline: the run's roofline, None without one.
        skipped: the configs answered without a run (rows of ``skipped.jsonl``); None: those mixed into
            ``versions``.
    """
    if skipped is None:
        skipped = [v for v in versions if v.index is None]
    versions = [v for v in versions if v.index is not None]
    best = best_version(versions)
    timing_note = ("Times are CUDA-event medians with L2 flushed between samples."
                   if info.mode == "cuda" else
                   "**Interpreted — not a measurement.** No GPU: kernels ran under the Triton interpreter on the "
                   "CPU; times only order configs under the interpreter and say nothing about GPU speed."
                   if info.mode == "interpreter" else "Times replayed from a cache measured on the GPU named above.")
    out = [f"# {info.kernel_name}: final report", "",
           f"Kernel `{info.kernel}` (sha256 {info.source_sha256[:12]}), shape `{info.shape}`, on "
           f"{info.device_name}. Started {info.started_utc}, finished {info.finished_utc or '—'}.", "",
           timing_note, "", f"Decision rule for every version after the first: {DECISION_RULE}.", ""]
    if roofline is not None:
        out += [f"Roofline ({roofline.gpu}): floor {format_duration_ns(roofline.floor_ns)} ({roofline.bound}-bound), "
                f"target {format_duration_ns(roofline.target_ns)} = {roofline.target_fraction * 100:.0f} % of the "
                "roofline; see roofline.md for the cited specs.", ""]
        checked = floor_check_lines([v for v in versions if v.floor_check])
        if checked:
            out += ["The floor's bytes against the DRAM bytes Nsight Compute measured (cold caches; L2's write-back "
                    "tolerated):", "", *checked, ""]
    shown = shown_versions(versions)
    of_space = f" of a {info.space_size}-config space" if info.space_size else ""
    head = (f"{len(versions)} versions{of_space} (one per measured config); listed: v0, every incumbent, the {TOP_N} "
            "fastest correct ones and the last." if len(shown) < len(versions)
            else f"{len(versions)} versions{of_space}.")
    out += ["## Versions", "", head, "", versions_table(info, shown, versions), "", *rest_summary(versions, shown)]
    skip_lines = skipped_summary(skipped)
    out += (["", "## Skipped without a run", "", *skip_lines] if skip_lines else [])
    out += ["", f"Stopped: {info.stop_reason}.", ""]
    worked = [v for v in versions if v.version_status == "accepted"]
    failed = [v for v in versions if v.version_status in ("rejected", "failed")]
    out += ["## What worked", ""]
    out += [f"- v{v.index}: {_change(v, versions)} ({v.move.rule}) — {_why(v)}"
            + (f"; observed {v.observed}" if v.observed else "")
            for v in worked if v.move] or ["- nothing beat the first correct version beyond the measured spread"]
    out += ["", "## What did not", ""]
    out += [f"- v{v.index}: {_change(v, versions)}" + (f" ({v.move.rule})" if v.move else "")
            + f" — {v.version_status}"
            f"{'' if v.ok else ' (' + v.status + ')'}: {_why(v)[:300]}" for v in failed[:LIST_N]] or [
        "- every change tried was accepted"]
    if len(failed) > LIST_N:
        more = Counter(v.version_status + ("" if v.ok else f" ({v.status})") for v in failed[LIST_N:])
        out.append(f"- and {len(failed) - LIST_N} more: " + ", ".join(f"{k} × {n}" for k, n in more.most_common()))
    out += ["", "## Best", ""]
    if best is None:
        out.append("No correct version.")
    else:
        sp = (f"{format_ratio(best.speedup_vs_first, decimals=3, suffix='x')} vs the first correct version"
              if best.speedup_vs_first else "the first correct version")
        pct = f", {best.pct_of_roofline:.1f} % of the roofline" if best.pct_of_roofline is not None else ""
        out += [f"v{best.index}: `{best.config}` — median {format_duration_ns(best.duration_ns)} ({sp}{pct}).", "",
                "As `triton.Config`-style keyword arguments: " + ", ".join(f"{k}={v!r}" for k, v in best.config.items())]
    notes = [v for v in versions if v.profile_error]
    if notes:
        out += ["", "## Profiling notes", ""] + sorted({f"- {v.profile_error}" for v in notes})
    return "\n".join(out) + "\n"
