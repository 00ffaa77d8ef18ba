"""How a version's outcome is judged: the metrics it is compared on, its expectations, and its class.

The rules are kernelpilot's own (the seed workflows name the classes; they do not define them):

* **invalid** — the version did not run correctly (any failed status, including ``check_changed``).
* **improved** — faster than its parent beyond noise (:func:`kernelpilot.search.stats.decide` on interleaved A/B
  samples: Mann–Whitney one-sided at 5 % *and* a bootstrap CI of the ratio of medians below 1), with no expectation
  contradicted and not slower than the incumbent beyond noise.
* **regressed** — the parent is faster than the version beyond noise (the same rule, sides swapped).
* **mixed** — faster than the parent beyond noise, but an expectation was contradicted or the incumbent (another
  version than the parent) is faster beyond noise.
* **neutral** — neither side faster beyond noise.
* **unmeasured** — correct, but run under the Triton interpreter: its times are not measurements, so no speed is
  claimed (the A/B samples are still recorded, labelled).

An expectation (``--expect metric:up|down``) on ``duration`` is judged by the same A/B decision; on any other metric
it is ``met`` when the metric moved the predicted way by more than :data:`EXPECT_THRESHOLD_REL` (relative),
``contradicted`` when it moved the other way by more than that, else ``unchanged``; ``not measured`` when a side lacks
it (e.g. an ncu metric where only a light card was possible).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelpilot.records.evaluation import Evaluation
from kernelpilot.versions.records import Expectation, Outcome

if TYPE_CHECKING:
    from kernelpilot.profile.kernel_metrics import KernelMetrics

__all__ = ["EXPECT_THRESHOLD_REL", "METRIC_ALIASES", "classify", "flat_metrics", "judge_expectations",
           "parse_expect"]

#: A metric other than duration "moved" when it changed by more than 5 % of its parent's value (kernelpilot's rule:
#: ncu's counters repeat within about 1-2 % run to run for the same launch; 5 % keeps noise out).
EXPECT_THRESHOLD_REL = 0.05

#: Names a user may write in ``--expect`` -> the metric recorded in memory.json.
METRIC_ALIASES = {"duration": "duration_ns", "time": "duration_ns", "dram_throughput_pct": "dram_pct",
                  "dram_throughput": "dram_pct", "occupancy": "achieved_occupancy_pct",
                  "roofline": "pct_of_roofline"}


def parse_expect(items: list[str] | None) -> list[Expectation]:
    """``["dram_throughput_pct:up", "duration:down"]`` -> expectations (aliases resolved).

    Raises:
        OptionError: an item is not ``metric:up`` or ``metric:down``.
    """
    from kernelpilot.errors import OptionError

    out = []
    for item in items or []:
        metric, _, direction = item.rpartition(":")
        if not metric or direction not in ("up", "down"):
            raise OptionError(f"--expect {item!r} is not METRIC:up or METRIC:down",
                              "e.g. --expect dram_throughput_pct:up --expect duration:down")
        out.append(Expectation(metric=METRIC_ALIASES.get(metric, metric), direction=direction))  # type: ignore[arg-type]
    return out


def flat_metrics(ev: Evaluation, kernel_metrics: KernelMetrics | None = None) -> dict[str, float]:
    """The numbers a version is compared on: its median/IQR (ns) and % of roofline, the numeric fields of its ncu
    metrics (when profiled) and the numeric evidence of its card."""
    out: dict[str, float] = {}
    for name in ("duration_ns", "iqr_ns", "pct_of_roofline"):
        value = getattr(ev, name, None)
        if isinstance(value, (int, float)):
            out[name] = float(value)
    if kernel_metrics is not None:
        for name, value in kernel_metrics.model_dump().items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and name != "duration_ns":
                out.setdefault(name, float(value))
    for item in (ev.card or {}).get("evidence", []):
        if isinstance(item.get("value"), (int, float)):
            out.setdefault(item["metric"], float(item["value"]))
    return out


def judge_expectations(expects: list[Expectation], before: dict[str, float], after: dict[str, float],
                       faster: bool | None, slower: bool | None) -> list[Expectation]:
    """Each expectation with its sides, relative change and verdict (rules in the module docstring);
    ``faster``/``slower``: the A/B decisions against the parent (None: no A/B)."""
    out = []
    for e in expects:
        b, a = before.get(e.metric), after.get(e.metric)
        rel = (a - b) / abs(b) if a is not None and b not in (None, 0) else None
        if e.metric == "duration_ns" and (faster is not None or slower is not None):
            went_down, went_up = bool(faster), bool(slower)
        elif rel is None:
            out.append(e.model_copy(update={"before": b, "after": a, "verdict": "not measured"}))
            continue
        else:
            went_up, went_down = rel > EXPECT_THRESHOLD_REL, rel < -EXPECT_THRESHOLD_REL
        predicted, opposite = (went_up, went_down) if e.direction == "up" else (went_down, went_up)
        verdict = "met" if predicted else ("contradicted" if opposite else "unchanged")
        out.append(e.model_copy(update={"before": b, "after": a, "change_rel": rel, "verdict": verdict}))
    return out


def classify(ok: bool, faster_than_parent: bool | None, slower_than_parent: bool | None,
             slower_than_incumbent: bool, expectations: list[Expectation], *, measured: bool = True,
             first: bool = False) -> Outcome:
    """The outcome class (rules in the module docstring). ``first``: v0 (``baseline``)."""
    if not ok:
        return "invalid"
    if first:
        return "baseline"
    if not measured:
        return "unmeasured"
    if faster_than_parent:
        contradicted = any(e.verdict == "contradicted" for e in expectations)
        return "mixed" if contradicted or slower_than_incumbent else "improved"
    if slower_than_parent:
        return "regressed"
    return "neutral"
