"""The winner of a bucket: the same config every time, whatever order the candidates come in.

The rule (docs/dispatch.md, "The winner rule"):

1. **Eligible** candidates are measured at every workload shape of the bucket (a config correct and fast at one
   shape is not assumed to be at another); the others are listed in ``excluded`` with the shapes they lack.
2. **Score**: a candidate's weighted median time ``sum(weight_s * median(samples_s))`` over the bucket's shapes, ns.
   Its **spread** is the same sum over the first and third quartiles of each shape's samples (``[q1_sum, q3_sum]``;
   quartiles by :func:`statistics.quantiles`, method ``inclusive``; one sample is its own quartiles).
3. **The fastest** is the eligible candidate with the lowest score (equal scores: the earlier in the stable order).
4. **Tied with the fastest** (inside the noise) is every eligible candidate whose score is within
   ``tie_pct`` percent of the fastest's (default :data:`TIE_PCT`), or whose spread reaches down into the fastest's
   (its ``q1_sum`` <= the fastest's ``q3_sum``). A difference that small is not a reason to pick one config in one
   process and another in the next (flashinfer #4433: the same tuning picked different configs in 18 of 60
   processes); 1 % is a typical run-to-run spread of a GPU kernel's median between processes.
5. **The winner** is the tied candidate first in the **stable order**: fewer resources first — the smaller
   ``num_warps * num_stages`` (an absent one counts as 1), then the smaller product of the integer ``BLOCK*`` and
   ``TILE*`` values (the tile roles of :mod:`kernelpilot.search.guided`), then the config's canonical JSON (keys
   sorted), which no two distinct configs share.

Every step depends on the set of candidates only, never on their order, so reordering them cannot change the
winner. Times are nanoseconds throughout.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any, Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from kernelpilot.errors import DispatchError

__all__ = ["TIE_PCT", "CandidateScore", "Winner", "choose_winner", "config_json", "stable_order_key"]

#: Scores within this many percent of the fastest are a tie (rule step 4).
TIE_PCT = 1.0
_TILE_PREFIXES = ("BLOCK", "TILE")


def config_json(config: Mapping[str, Any]) -> str:
    """A config's canonical JSON: keys sorted, no spaces (``{"BLOCK":64,"num_warps":4}``). Raises nothing."""
    return json.dumps(dict(config), sort_keys=True, separators=(",", ":"), default=str)


def _int_value(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stable_order_key(config: Mapping[str, Any]) -> tuple[int, int, str]:
    """The tie-break order of rule step 5: ``(num_warps * num_stages, product of BLOCK*/TILE* ints, canonical
    JSON)``; smaller comes first. Raises nothing."""
    warps = _int_value(config.get("num_warps")) or 1
    stages = _int_value(config.get("num_stages")) or 1
    tiles = 1
    for name, value in config.items():
        number = _int_value(value)
        if number is not None and name.upper().startswith(_TILE_PREFIXES):
            tiles *= number
    return warps * stages, tiles, config_json(config)


class CandidateScore(BaseModel):
    """One eligible candidate's numbers.

    Attributes:
        config: the config.
        weighted_median_ns: ``sum(weight * median)`` over the bucket's shapes, ns.
        q1_ns / q3_ns: the same sum over each shape's first / third quartile, ns.
        tied: inside the noise of the fastest (rule step 4; the fastest itself is tied).
    """

    model_config = ConfigDict(frozen=True)
    config: dict[str, Any]
    weighted_median_ns: float
    q1_ns: float
    q3_ns: float
    tied: bool


class Winner(BaseModel):
    """The decision for one bucket.

    Attributes:
        config: the winning config.
        weighted_median_ns: its score, ns.
        fastest: the config with the lowest score (the winner unless a tied one comes first in the stable order).
        ranking: every eligible candidate, by score then stable order.
        excluded: canonical JSON of a config -> why it could not win (the shapes it was not measured at).
        tie_pct: the tolerance used. reason: one sentence for the report.
    """

    model_config = ConfigDict(frozen=True)
    config: dict[str, Any]
    weighted_median_ns: float
    fastest: dict[str, Any]
    ranking: list[CandidateScore]
    excluded: dict[str, str]
    tie_pct: float
    reason: str


def _shape_key(shape: Mapping[str, Any]) -> str:
    return json.dumps(dict(shape), sort_keys=True, separators=(",", ":"), default=str)


def _quartiles(samples: list[float]) -> tuple[float, float, float]:
    if len(samples) == 1:
        return samples[0], samples[0], samples[0]
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, median, q3


def choose_winner(candidates: Iterable[tuple[Mapping[str, Any], Iterable[tuple[Mapping[str, Any], Sequence[float]]]]],
                  workload: Iterable[tuple[Mapping[str, Any], float]], *, tie_pct: float = TIE_PCT) -> Winner:
    """Pick a bucket's config by the rule of the module docstring.

    Args:
        candidates: ``(config, [(shape, samples_ns), ...])`` per config: its timing samples (ns, finite, > 0) at
            each shape it was measured at (only correct runs; a failed config is not a candidate).
        workload: the bucket's shapes with their weights, ``[(shape, weight), ...]`` (weights > 0).
        tie_pct: the tie tolerance in percent (>= 0).

    Returns:
        A :class:`Winner`.

    Raises:
        DispatchError: no workload shape, a weight or sample that is not a finite number > 0, a config listed
            twice, a shape given twice, or no candidate measured at every shape.
    """
    if not (math.isfinite(tie_pct) and tie_pct >= 0):
        raise DispatchError(f"tie_pct must be a finite number >= 0, got {tie_pct!r}", "use the default, 1.0")
    weights: dict[str, float] = {}
    for shape, weight in workload:
        key = _shape_key(shape)
        if key in weights:
            raise DispatchError(f"the bucket's workload lists shape {key} twice", "merge the two weights")
        if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight > 0):
            raise DispatchError(f"shape {key} has weight {weight!r}", "weights are finite numbers > 0")
        weights[key] = float(weight)
    if not weights:
        raise DispatchError("no workload shape to choose a winner for", "give the bucket's shapes and weights")
    scored: list[tuple[tuple[int, int, str], CandidateScore]] = []
    excluded: dict[str, str] = {}
    seen: set[str] = set()
    for config, times in candidates:
        cfg = dict(config)
        ident = config_json(cfg)
        if ident in seen:
            raise DispatchError(f"config {ident} is a candidate twice", "give each config once, all its samples")
        seen.add(ident)
        per_shape: dict[str, list[float]] = {}
        for shape, samples in times:
            key = _shape_key(shape)
            values = [float(s) for s in samples]
            if key in per_shape:
                raise DispatchError(f"config {ident} has two sample lists for shape {key}", "give one per shape")
            if not values or not all(math.isfinite(v) and v > 0 for v in values):
                raise DispatchError(f"config {ident} at shape {key}: samples must be finite times > 0 ns, got "
                                    f"{values[:5]!r}", "pass only correct, timed runs")
            per_shape[key] = values
        lacking = sorted(set(weights) - set(per_shape))
        if lacking:
            excluded[ident] = f"not measured at {', '.join(lacking)}"
            continue
        sums = [0.0, 0.0, 0.0]
        for key, weight in sorted(weights.items()):
            for i, value in enumerate(_quartiles(per_shape[key])):
                sums[i] += weight * value
        scored.append((stable_order_key(cfg), CandidateScore(config=cfg, weighted_median_ns=sums[1], q1_ns=sums[0],
                                                             q3_ns=sums[2], tied=False)))
    if not scored:
        raise DispatchError(f"no candidate is measured at every shape of the bucket ({len(excluded)} excluded: "
                            + "; ".join(f"{k} {v}" for k, v in sorted(excluded.items())[:3]) + ")",
                            "measure the candidates at every shape in the bucket")
    scored.sort(key=lambda item: (item[1].weighted_median_ns, item[0]))
    fastest = scored[0][1]
    bound = fastest.weighted_median_ns * (1 + tie_pct / 100)
    ranking = [score.model_copy(update={"tied": score.weighted_median_ns <= bound or score.q1_ns <= fastest.q3_ns})
               for _, score in scored]
    order = {id(score): key for (key, _), score in zip(scored, ranking)}
    tied = sorted((s for s in ranking if s.tied), key=lambda s: order[id(s)])
    win = tied[0]
    if win is ranking[0]:
        reason = (f"fastest by weighted median ({win.weighted_median_ns:.0f} ns); {len(tied) - 1} other config(s) "
                  f"inside the noise came later in the stable order")
    else:
        reason = (f"inside the noise of the fastest ({win.weighted_median_ns:.0f} vs "
                  f"{fastest.weighted_median_ns:.0f} ns, within {tie_pct:g} % or overlapping quartiles) and first "
                  f"in the stable order (fewer warps x stages, smaller tiles, canonical JSON)")
    return Winner(config=win.config, weighted_median_ns=win.weighted_median_ns, fastest=fastest.config,
                  ranking=ranking, excluded=excluded, tie_pct=tie_pct, reason=reason)
