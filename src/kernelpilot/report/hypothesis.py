"""hypothesis.md: written BEFORE a version runs — the variable changed, why, what should move, and the rule that will
decide."""

from __future__ import annotations

from typing import Any

from kernelpilot.fmt import format_duration_ns
from kernelpilot.hardware.roofline import Roofline
from kernelpilot.records.evaluation import Evaluation, Move, change_sentence

#: The one decision rule, in words (the code is :meth:`kernelpilot.engine.evaluator.Evaluator._judge` with
#: :func:`kernelpilot.search.stats.decide`): written once per run, in run.json's ``decision_rule`` and the final
#: report; each hypothesis names its incumbent and points there (:data:`RULE_WHERE`). Until session 13 every
#: hypothesis.md repeated the sentence, 330 of its bytes in each of a run's versions (issue 25, "Records that
#: scale").
DECISION_RULE = ("correct on 3 fresh seeds (NaN-poisoned outputs, dtype-aware tolerances), median under the "
                 "incumbent's, and faster beyond noise on interleaved A/B samples of both on the same inputs: a "
                 "one-sided Mann–Whitney U test at α = 0.05 and a 95 % bootstrap CI of the ratio of medians entirely "
                 "below 1; never faster than the speed-of-light floor")
#: where a hypothesis sends its reader for the rule's words
RULE_WHERE = "run.json: decision_rule"


def render_hypothesis(index: int, config: dict[str, Any], move: Move | None, parent: Evaluation | None,
                      roofline: Roofline | None, incumbent: Evaluation | None = None) -> str:
    """The hypothesis of version ``index`` (Markdown).

    Args:
        index: the version number. config: the config about to run.
        move: why ``config`` was proposed (None for the baseline v0); the change itself is computed from ``config``
            and ``parent.config`` (:func:`change_sentence`), never taken from the move's declared tunable.
        parent: the evaluation it derives from (None for v0). incumbent: the version it must beat (default: parent).
        roofline: the run's roofline, for the target line (None without a spec).
    """
    incumbent = incumbent or parent
    lines = [f"# v{index} — hypothesis", "", f"Config: `{config}`", ""]
    target = (f"Speed-of-light floor {format_duration_ns(roofline.floor_ns)}, target {format_duration_ns(roofline.target_ns)} "
              f"({roofline.target_fraction * 100:.0f} % of the roofline, {roofline.bound}-bound)."
              if roofline else "No roofline for this device (no spec or no GPU).")
    if move is None or parent is None:
        lines += ["Baseline: the starting config, nothing changed.", "",
                  "Expected: correct on 3 fresh seeds; the measured time and the profile say where it stands.",
                  "", target]
        return "\n".join(lines) + "\n"
    lines += [f"{change_sentence(parent.config, config)}; everything else as v{parent.index}.", "",
              f"Rule: {move.rule}.", "", f"Why: {move.why}."]
    card = parent.card
    if card:
        fired = ", ".join(card.get("fired_patterns") or []) or "none"
        source = "light card" if card.get("light") else "ncu"
        lines += ["", f"Evidence from v{parent.index} ({source}): {card.get('class')} — {card.get('summary')} "
                      f"Patterns fired: {fired}."]
    lines += ["", f"Expected: `{move.expected_metric}` — {move.expected}.", ""]
    if incumbent is not None and incumbent.ok:
        lines += [f"Accept if: correct on 3 fresh seeds and faster beyond noise than v{incumbent.index}, "
                  f"{format_duration_ns(incumbent.duration_ns)} (IQR {format_duration_ns(incumbent.iqr_ns)}), by "
                  f"the run's decision rule ({RULE_WHERE}).", ""]
    else:
        lines += ["Accept if: correct on 3 fresh seeds — no correct version yet, so the first correct one becomes the "
                  "incumbent.", ""]
    lines.append(target)
    return "\n".join(lines) + "\n"
