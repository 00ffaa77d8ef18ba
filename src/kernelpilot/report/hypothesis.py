"""hypothesis.md: written BEFORE a version runs — the one variable changed, why, and what should move."""

from __future__ import annotations

from typing import Any

from kernelpilot.hardware.roofline import Roofline
from kernelpilot.search.guided import Move


def _fmt_ns(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e3:.2f} µs"


def render_hypothesis(index: int, config: dict[str, Any], move: Move | None, parent: Any,
                      roofline: Roofline | None) -> str:
    """The hypothesis of version ``index``.

    Args:
        config: the config about to run. move: the change from ``parent`` (None for the baseline v0).
        parent: the incumbent it derives from (has ``outcome``, ``timing``, ``card``), or None.
        roofline: the run's roofline, for the target line (None without a spec).
    """
    lines = [f"# v{index} — hypothesis", "", f"Config: `{config}`", ""]
    target = (f"Speed-of-light floor {_fmt_ns(roofline.floor_ns)}, target {_fmt_ns(roofline.target_ns)} "
              f"({roofline.target_fraction * 100:.0f} % of the roofline, {roofline.bound}-bound)."
              if roofline else "No roofline for this device (no spec or no GPU).")
    if move is None:
        lines += ["Baseline: the starting config, nothing changed.", "",
                  "Expected: correct on 3 fresh seeds; the measured time and the profile say where it stands.",
                  "", target]
        return "\n".join(lines) + "\n"
    po = parent.outcome
    what = "Several variables" if move.direction == "jump" else "One variable"
    lines += [f"{what}: `{move.tunable}` {move.old} → {move.new} ({move.direction}); everything else as "
              f"v{po.index}.", "", f"Rule: {move.rule}.", "", f"Why: {move.why}."]
    if parent.card is not None:
        fired = ", ".join(parent.card.fired_patterns) or "none"
        lines += ["", f"Evidence from v{po.index} ({'light card' if parent.card.light else 'ncu'}): "
                      f"{parent.card.class_} — {parent.card.summary} Patterns fired: {fired}."]
    lines += ["", f"Expected: `{move.expected_metric}` — {move.expected}.", "",
              f"Accept if: correct on 3 fresh seeds and median time under v{po.index}'s "
              f"{_fmt_ns(po.median_ns)} by more than the larger IQR (v{po.index} IQR {_fmt_ns(po.iqr_ns)}).", "",
              target]
    return "\n".join(lines) + "\n"
