"""The bottleneck card: one versioned JSON record of why a kernel is not faster and what to change next.

A card holds the bottleneck class and the rule that chose it, the evidence (metric, value, threshold), Nsight
Compute's own rule results with their estimated speedups, the top 5 warp stall reasons, all 14 numeric patterns
of docs/measuring.md (fired, not fired, or not evaluated), and the suggested changes with the tunable roles that
implement them (issue 3, items 1 and 2). It says which evidence it had (``evidence_sources``) and whether it
was built without ncu counters (``light``; issue 3, item 6).

Two builders:

- :func:`card_from_metrics`: from Nsight Compute metrics; the class is the verdict's (Nsight Compute's SOL rule
  plus the occupancy rules of :mod:`kernelpilot.profile.verdict`).
- :func:`light_card`: when ncu is missing or counters are not permitted: timing + the analytic roofline +
  compile metadata. Its class rule is kernelpilot's own (see :func:`light_card`).

Suggested changes are ordered (fired defects first, then the patterns behind the class, then the class's default
moves) by :mod:`kernelpilot.profile.card_suggest`.

The JSON Schema ships as ``kernelpilot/profile/schema/bottleneck_card.v1.json`` (:func:`schema_path`); it is
``BottleneckCard.model_json_schema()``, and ``python -m kernelpilot.profile.card --write-schema`` rewrites it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from kernelpilot.profile.card_suggest import (  # DEFECT_PRIORITY_AT_MOST, DRAM_CEILING_PCT: re-exported
    CLASS_LEADS,
    DEFECT_PRIORITY_AT_MOST,
    DRAM_CEILING_PCT,
    CardChange,
    fired_in_order,
    merged_suggestions,
)
from kernelpilot.profile.metrics import KernelMetrics, StallReason
from kernelpilot.profile.patterns import LightInputs, PatternResult, evaluate_light_patterns, evaluate_patterns
from kernelpilot.profile.verdict import FEW_WARPS_THEORETICAL_AT_MOST_PCT, LATENCY_BELOW_PCT, Evidence, Verdict, judge

if TYPE_CHECKING:
    from kernelpilot.hardware.roofline import Roofline

__all__ = [
    "SCHEMA_VERSION",
    "CARD_KIND",
    "BottleneckCard",
    "CardChange",
    "NcuRule",
    "card_from_metrics",
    "light_card",
    "card_json_schema",
    "schema_path",
    "load_schema",
    "write_schema",
]

SCHEMA_VERSION = "1"
CARD_KIND = "kernelpilot.bottleneck_card"
CardClass = Literal["memory", "compute", "latency", "occupancy", "balanced", "small-grid", "unknown"]
EvidenceSource = Literal["ncu", "timing", "compile", "roofline"]

#: Nsight Compute's "latency" mark; <= 25 % theoretical occupancy is the verdict's few-warps rule).
LIGHT_FAR_FROM_ROOFLINE_BELOW_PCT = LATENCY_BELOW_PCT
LIGHT_FEW_WARPS_OCCUPANCY_AT_MOST_PCT = FEW_WARPS_THEORETICAL_AT_MOST_PCT

_SCHEMA_FILE = Path(__file__).resolve().parent / "schema" / "bottleneck_card.v1.json"


class NcuRule(BaseModel):
    """One of Nsight Compute's own rule results, as the card shows it.

    Attributes:
        identifier: ncu rule id (``SOLBottleneck``, ``CPIStall``, ``LaunchConfiguration`` ...).
        section: the ncu section the rule belongs to.
        title: the rule message's title (may be empty).
        message: the rule's message text.
        type: ncu message type: ok, optimization, warning, error, none.
        estimated_speedup_pct: ncu's estimated runtime improvement, percent; None when ncu gives none.
    """

    identifier: str
    section: str = ""
    title: str = ""
    message: str
    type: str = ""
    estimated_speedup_pct: Optional[float] = None



def _require_version(schema: dict[str, Any]) -> None:
    """JSON Schema hook: a card file must state its schema version and kind, though the model defaults them."""
    schema["required"] = ["schema_version", "kind", *schema.get("required", [])]


class BottleneckCard(BaseModel):
    """The bottleneck card of one kernel launch (schema version 1).

    Serialized with the alias ``class`` for ``class_`` (``model_dump`` / ``model_dump_json`` default to aliases).

    Attributes:
        schema_version: "1".
        kind: "kernelpilot.bottleneck_card".
        kernel_name: the kernel's name.
        device_name: the GPU's name (e.g. "NVIDIA H200"), None when unknown.
        class_ ("class" in JSON): memory, compute, latency, occupancy, balanced, small-grid; unknown when the
            evidence cannot decide (SOL metrics missing, or no roofline in a light profile).
        rule: the rule that chose the class: ``ncu-sol:<branch>[+...]`` (see :class:`Verdict`) or
            ``light:roofline-<bound>`` / ``light:roofline+compile:few-warps`` / ``light:no-roofline``.
        summary: one sentence.
        memory_unit: DRAM, L1 or L2 for memory cards (DRAM in a light profile), else None.
        occupancy_limiter: registers, shared_mem, warps or blocks when occupancy decided the class, else None.
        evidence: the comparisons behind the class: metric, value, unit, threshold, comparison, holds.
        ncu_rules: Nsight Compute's own rule results (SOLBottleneck first, then by estimated speedup).
        top_stalls: the top 5 warp stall reasons: reason, ratio (cycles per issued instruction), share_pct.
        patterns: all 14 numeric patterns with status and evidence.
        fired_patterns: ids of the patterns that fired, in card order.
        suggested_changes: ordered changes (see the module docstring).
        evidence_sources: what the card was built from: ncu, timing, compile, roofline.
        light: True when built without ncu counters.
        light_reason: why the profile is light (e.g. "ncu missing", "ERR_NVGPUCTRPERM"), None otherwise.
    """

    model_config = ConfigDict(populate_by_name=True, json_schema_extra=_require_version)

    schema_version: Literal["1"] = SCHEMA_VERSION
    kind: Literal["kernelpilot.bottleneck_card"] = CARD_KIND
    kernel_name: str
    device_name: Optional[str] = None
    class_: CardClass = Field(alias="class")
    rule: str
    summary: str
    memory_unit: Optional[str] = None
    occupancy_limiter: Optional[str] = None
    evidence: list[Evidence] = Field(default_factory=list)
    ncu_rules: list[NcuRule] = Field(default_factory=list)
    top_stalls: list[StallReason] = Field(default_factory=list)
    patterns: list[PatternResult] = Field(default_factory=list)
    fired_patterns: list[str] = Field(default_factory=list)
    suggested_changes: list[CardChange] = Field(default_factory=list)
    evidence_sources: list[EvidenceSource] = Field(default_factory=list)
    light: bool = False
    light_reason: Optional[str] = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """Like pydantic's, with ``by_alias=True`` unless told otherwise (so the key is ``class``)."""
        kwargs.setdefault("by_alias", True)
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:  # type: ignore[override]
        """Like pydantic's, with ``by_alias=True`` unless told otherwise (so the key is ``class``)."""
        kwargs.setdefault("by_alias", True)
        return super().model_dump_json(**kwargs)

    def pattern(self, pattern_id: str) -> PatternResult:
        """The result of one pattern.

        Raises:
            KeyError: the card has no pattern with that id.
        """
        for p in self.patterns:
            if p.id == pattern_id:
                return p
        raise KeyError(f"card has no pattern {pattern_id!r}")

    def moves(self) -> list[tuple[str, str]]:
        """The tunable moves of the suggested changes, in card order, each (role, direction) once.

        This is what a search steps through: e.g. ``[("stages", "up"), ("tile_k", "up"), ("tile", "down")]``.
        """
        seen: list[tuple[str, str]] = []
        for change in self.suggested_changes:
            for step in change.tunables:
                key = (step.role, step.direction)
                if key not in seen:
                    seen.append(key)
        return seen

    def to_markdown(self) -> str:
        """The card as Markdown: class and rule, summary, fired patterns, first suggested changes, evidence sources."""
        lines = [f"**{self.class_}** ({self.rule}){' — light profile: ' + self.light_reason if self.light else ''}",
                 "", self.summary, "", f"Evidence from: {', '.join(self.evidence_sources) or 'nothing'}", ""]
        fired = [p for p in self.patterns if p.fired]
        lines.append("Patterns fired: " + (", ".join(p.title for p in fired) if fired else "none"))
        not_evaluated = [p.title for p in self.patterns if p.status == "not_evaluated"]
        if not_evaluated:
            lines.append("Not evaluated: " + ", ".join(not_evaluated))
        if self.top_stalls:
            lines.append("Top stalls: " + ", ".join(f"{s.reason} {s.share_pct:.0f} %" for s in self.top_stalls))
        if self.suggested_changes:
            lines += ["", "Suggested changes:"]
            for c in self.suggested_changes:
                steps = ", ".join(f"{s.role} {s.direction}" for s in c.tunables) or "code change"
                lines.append(f"- {c.action} [{steps}] ({', '.join(c.patterns)}): {c.why}")
        return "\n".join(lines)


# --- builders -----------------------------------------------------------------------------------------------

def card_from_metrics(metrics: KernelMetrics, verdict: Optional[Verdict] = None) -> BottleneckCard:
    """The bottleneck card of one kernel from its Nsight Compute metrics.

    Args:
        metrics: normalized metrics of the launch (:func:`kernelpilot.profile.metrics.read_report`).
        verdict: its verdict; computed with :func:`kernelpilot.profile.verdict.judge` when None.

    Returns:
        A card with ``evidence_sources == ["ncu"]`` and ``light == False``. The class is the verdict's
        ``bound`` (Nsight Compute's SOL rule and the occupancy rules; "unknown" when SOL metrics are missing).
        Patterns whose metrics the report lacks are ``not_evaluated``. Raises nothing.
    """
    verdict = verdict if verdict is not None else judge(metrics)
    class_ = verdict.bound if verdict.bound in CLASS_LEADS else "unknown"
    patterns = evaluate_patterns(metrics)
    rules = [NcuRule(identifier=r.identifier, section=r.section, title=r.title, message=r.message, type=r.type,
                     estimated_speedup_pct=r.estimated_speedup_pct)
             for r in verdict.ncu_rules if r.title or r.message]
    limiter = verdict.occupancy_limiter or (metrics.occupancy_limiter if class_ == "occupancy" else None)
    return BottleneckCard(
        kernel_name=metrics.kernel_name,
        device_name=metrics.device_name,
        **{"class": class_},
        rule=verdict.rule,
        summary=verdict.summary,
        memory_unit=verdict.memory_unit,
        occupancy_limiter=limiter,
        evidence=verdict.evidence,
        ncu_rules=rules,
        top_stalls=metrics.top_stalls,
        patterns=patterns,
        fired_patterns=fired_in_order(patterns, class_),
        suggested_changes=merged_suggestions(patterns, class_, verdict.memory_unit, limiter, metrics.dram_pct),
        evidence_sources=["ncu"],
        light=False,
    )


def _light_class(timing_ns: Optional[float], roofline: Optional["Roofline"], static: dict[str, Any],
                 evidence: list[Evidence]) -> tuple[str, str, Optional[float]]:
    """(class, rule, % of roofline) of a light profile; appends the comparisons made to ``evidence``."""
    if roofline is None:
        return "unknown", "light:no-roofline", None
    bound = roofline.bound
    evidence.append(Evidence(metric="roofline.memory_time_ns vs roofline.compute_time_ns",
                             value=roofline.memory_time_ns, unit="ns", threshold=roofline.compute_time_ns,
                             comparison=">=", holds=bound == "memory"))
    pct = None
    if timing_ns is not None:
        pct = roofline.pct_of_roofline(timing_ns)
        far = pct < LIGHT_FAR_FROM_ROOFLINE_BELOW_PCT
        evidence.append(Evidence(metric="roofline.floor_ns / timing_ns", value=pct, unit="%",
                                 threshold=LIGHT_FAR_FROM_ROOFLINE_BELOW_PCT, comparison="<", holds=far))
        occupancy = static.get("occupancy_pct")
        if far and isinstance(occupancy, (int, float)):
            few = occupancy <= LIGHT_FEW_WARPS_OCCUPANCY_AT_MOST_PCT
            evidence.append(Evidence(metric="static.occupancy_pct", value=float(occupancy), unit="%",
                                     threshold=LIGHT_FEW_WARPS_OCCUPANCY_AT_MOST_PCT, comparison="<=", holds=few))
            if few:
                return "occupancy", "light:roofline+compile:few-warps", pct
    return bound, f"light:roofline-{bound}", pct


def _light_summary(class_: str, pct: Optional[float], roofline: Optional["Roofline"], static: dict[str, Any],
                   reason: str) -> str:
    """One sentence for a light card."""
    where = f" at {pct:.0f} % of the roofline" if pct is not None else ""
    if class_ == "unknown" or roofline is None:
        return f"No class: no roofline and no ncu counters ({reason}); only compile metadata was checked."
    if class_ == "occupancy":
        return (f"Occupancy-bound (light profile: {reason}): the kernel runs{where} with a theoretical occupancy "
                f"of {static.get('occupancy_pct')} % (limited by {static.get('limiter') or 'unknown'}), too few "
                "warps to hide latency (kernelpilot rule on compile metadata).")
    return (f"{class_.capitalize()}-bound by the roofline (light profile: {reason}): arithmetic intensity "
            f"{roofline.arithmetic_intensity_flop_per_byte:.3g} FLOP/B against a ridge of "
            f"{roofline.ridge_point_flop_per_byte:.3g} FLOP/B{where}; no ncu counters confirm it.")


def light_card(*, timing_ns: Optional[float], roofline: Optional["Roofline"], static: Optional[dict[str, Any]],
               device_name: Optional[str], kernel_name: str, reason: str) -> BottleneckCard:
    """A bottleneck card without Nsight Compute counters: timing + analytic roofline + compile metadata.

    Class rule (kernelpilot's own; thresholds reused from the verdict): the roofline's bound (memory when
    bytes / bandwidth >= FLOPs / peak, else compute) is the class, except that a kernel below 60 % of the
    roofline (Nsight Compute's latency mark) whose compile-time theoretical occupancy is <= 25 % (the verdict's
    few-warps rule) is occupancy-bound. Without a roofline the class is "unknown".

    Patterns from this evidence: register spill (compiler-reported spills > 0 or registers/thread > 128), no
    tensor cores (SASS mix: FFMA > 50 % and MMA < 1 % of FFMA + MMA, for a kernel whose FLOPs are meant for
    tensor cores or that is compute-bound), overall memory-bound (analytic memory % = memory_time / timing >
    1.5 x analytic compute % and > 30 %); the others are ``not_evaluated``.

    Args:
        timing_ns: measured median time, ns; None when not timed.
        roofline: the kernel's :class:`~kernelpilot.hardware.roofline.Roofline` at this shape, or None.
        static: compile metadata: ``registers_per_thread``, ``shared_mem_bytes``, ``threads_per_block``,
            ``occupancy_pct`` (theoretical, %), ``limiter``, ``spills`` (count), ``instruction_mix`` (SASS
            opcode -> count, e.g. ``{"FFMA": 4096, "HGMMA": 0}``; opcodes match by prefix); None or {} if none.
        device_name: the GPU's name.
        kernel_name: the kernel's name.
        reason: why there are no counters (e.g. "ncu not found", "ERR_NVGPUCTRPERM"); recorded on the card.

    Returns:
        A card with ``light=True``, ``light_reason=reason`` and ``evidence_sources`` listing timing, roofline
        and compile for the inputs given (never ncu).

    Raises:
        ValueError: ``timing_ns`` is not a positive finite number of ns, or it is below the roofline floor
            (impossible: docs/measuring.md, "Roofline", says to reject such a time).
    """
    static = dict(static or {})
    if timing_ns is not None and not (isinstance(timing_ns, (int, float)) and math.isfinite(timing_ns)
                                      and timing_ns > 0):
        raise ValueError(f"timing_ns must be a positive finite number of nanoseconds, got {timing_ns!r}")
    if timing_ns is not None and roofline is not None and roofline.is_impossible(timing_ns):
        raise ValueError(f"timing_ns {timing_ns:.4g} ns is below the roofline floor {roofline.floor_ns:.4g} ns: "
                         "impossible; check the timing, the FLOP/byte counts or the ceiling")
    evidence: list[Evidence] = []
    class_, rule, pct = _light_class(timing_ns, roofline, static, evidence)
    inputs = LightInputs(
        timing_ns=timing_ns,
        memory_pct=roofline.memory_time_ns / timing_ns * 100 if roofline is not None and timing_ns else None,
        compute_pct=roofline.compute_time_ns / timing_ns * 100 if roofline is not None and timing_ns else None,
        compute_unit=roofline.compute_unit if roofline is not None else None,
        roofline_bound=roofline.bound if roofline is not None else None,
        static=static,
    )
    patterns = evaluate_light_patterns(inputs, reason)
    memory_unit = "DRAM" if class_ == "memory" else None
    limiter = static.get("limiter") if class_ == "occupancy" else None
    sources: list[EvidenceSource] = []
    if timing_ns is not None:
        sources.append("timing")
    if roofline is not None:
        sources.append("roofline")
    if static:
        sources.append("compile")
    return BottleneckCard(
        kernel_name=kernel_name,
        device_name=device_name,
        **{"class": class_},
        rule=rule,
        summary=_light_summary(class_, pct, roofline, static, reason),
        memory_unit=memory_unit,
        occupancy_limiter=limiter,
        evidence=evidence,
        patterns=patterns,
        fired_patterns=fired_in_order(patterns, class_),
        suggested_changes=merged_suggestions(patterns, class_, memory_unit, limiter, inputs.memory_pct),
        evidence_sources=sources,
        light=True,
        light_reason=reason,
    )


# --- the shipped JSON Schema --------------------------------------------------------------------------------

def card_json_schema() -> dict[str, Any]:
    """The card's JSON Schema as pydantic generates it (``BottleneckCard.model_json_schema()``)."""
    return BottleneckCard.model_json_schema()


def schema_path() -> Path:
    """Where the shipped schema file lies: ``kernelpilot/profile/schema/bottleneck_card.v1.json``."""
    return _SCHEMA_FILE


def load_schema() -> dict[str, Any]:
    """The shipped JSON Schema (the file, not a regeneration).

    Raises:
        FileNotFoundError: the package was installed without its data files.
    """
    return json.loads(_SCHEMA_FILE.read_text(encoding="utf-8"))


def write_schema(path: Optional[Path] = None) -> Path:
    """Write :func:`card_json_schema` as indented JSON to ``path`` (default: the shipped file); returns the path."""
    target = Path(path) if path is not None else _SCHEMA_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(card_json_schema(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--write-schema"]:
        print("usage: python -m kernelpilot.profile.card --write-schema", file=sys.stderr)
        sys.exit(2)
    print(write_schema())
