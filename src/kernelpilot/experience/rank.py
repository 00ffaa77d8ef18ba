"""How ``recommend`` ranks past changes. The rule is kernelpilot's own (no published method behind it); its
constants are here so that a test and docs/experience.md can name them.

**Groups.** Entries are grouped by tag (an entry with tags ``num_warps`` and ``num_warps-up`` counts in both
groups); an entry with no tag forms a group with the entries of the same change text.

**Weight of an entry** = similarity x measurement weight:

- similarity to the query: 1.0, multiplied for each field the query names (kernel type, back end, arch,
  bottleneck) by 1 when the entry matches, by :data:`MISMATCH_FACTOR` when it differs, and half-way between the
  two when the entry does not say (an interpreter run has no arch). A past change on a softmax counts half as
  much for a layer-norm query; one from the other back end counts 0.3.
- measurement weight: 1 for a GPU measurement, :data:`UNMEASURED_WEIGHT` (0.25) for an interpreter run.

**Value of an entry**: its log speedup, softly capped at +-:data:`CAP` (``CAP * tanh(ln(speedup) / CAP)``; 0.2 is
about +-22 %), so that one large win never outweighs several smaller ones; ``neutral`` counts 0 whatever its
speedup (it was not beyond noise), ``mixed`` half its value, an ``improved`` or ``regressed`` entry without a
usable speedup +-:data:`SMALL`, and ``invalid`` -:data:`CAP` (a broken change costs as much as the largest
regression).

**Score of a group** = sum of weight x value over its entries: how often and how much it helped on similar
kernels. Groups are sorted by score, then by the number of improvements and of tries, then by name. A group
that failed (regressed or invalid) more than half the times it was tried carries a warning, and so does a group
known only from interpreter runs.

**Claims.** An entry whose source did not validate (:attr:`ExperienceEntry.claim`: a made-up source, records that do
not validate or do not hold its numbers) is the user's word, not a lesson on record: in a group with a lesson on
record it is counted (``n_claims``) but adds nothing to the score; a group of claims only (``claims_only``) is
scored from them but ranks below every group with a lesson on record, and its warning says so.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Callable, Iterable, Optional

from kernelpilot.experience.model import FAILED_OUTCOMES, ExperienceEntry, Recommendation

__all__ = ["CAP", "SMALL", "UNMEASURED_WEIGHT", "MISMATCH_FACTOR", "similarity", "value", "weight", "rank"]

#: Soft cap of an entry's value (natural log of the speedup): about +-22 %.
CAP = 0.2
#: Value of an improved (regressed) entry that has no speedup > 1 (< 1) to read.
SMALL = 0.05
#: Weight of an interpreter (CPU) run against a GPU measurement.
UNMEASURED_WEIGHT = 0.25
#: Per query field, the factor applied to an entry that differs from the query there.
MISMATCH_FACTOR: dict[str, float] = {"kernel_type": 0.5, "backend": 0.3, "arch": 0.7, "bottleneck": 0.5}
#: Change texts and examples kept per recommendation.
KEEP = 3


def similarity(entry: ExperienceEntry, query: dict[str, Optional[str]]) -> float:
    """How close ``entry``'s kernel is to the query, 0 to 1 (see the module docstring).

    Args:
        entry: a past change.
        query: field -> asked value for ``kernel_type``, ``backend``, ``arch``, ``bottleneck``; a None value (or a
            missing field) is not asked and does not count.
    """
    s = 1.0
    for field, factor in MISMATCH_FACTOR.items():
        asked = query.get(field)
        if asked is None:
            continue
        have = getattr(entry, field)
        if have is None:
            s *= (1.0 + factor) / 2.0
        elif have != asked:
            s *= factor
    return s


def weight(entry: ExperienceEntry, query: dict[str, Optional[str]]) -> float:
    """Similarity x measurement weight (1, or :data:`UNMEASURED_WEIGHT` for an interpreter run)."""
    return similarity(entry, query) * (1.0 if entry.measured else UNMEASURED_WEIGHT)


def _capped(speedup: float) -> float:
    return CAP * math.tanh(math.log(speedup) / CAP)


def value(entry: ExperienceEntry) -> float:
    """What one entry says about its change, in capped log-speedup units (see the module docstring)."""
    s = entry.speedup
    if entry.outcome == "invalid":
        return -CAP
    if entry.outcome == "neutral":
        return 0.0
    if entry.outcome == "mixed":
        return 0.5 * _capped(s) if s else 0.0
    if entry.outcome == "improved":
        return _capped(s) if s and s > 1.0 else SMALL
    return _capped(s) if s and s < 1.0 else -SMALL  # regressed


def _groups(entries: Iterable[ExperienceEntry]) -> dict[tuple[str, str], list[ExperienceEntry]]:
    groups: dict[tuple[str, str], list[ExperienceEntry]] = {}
    for e in entries:
        keys = [("tag", t) for t in e.tags] or [("change", " ".join(e.change.lower().split()))]
        for k in keys:
            groups.setdefault(k, []).append(e)
    return groups


def _warning(n_tried: int, n_failed: int, n_invalid: int, n_unmeasured: int, n_claims: int = 0) -> Optional[str]:
    parts = []
    if n_claims == n_tried:
        parts.append("the user's claims only: no source that validates")
    elif n_claims:
        parts.append(f"{n_claims} of {n_tried} are the user's claims (not counted)")
    if 2 * n_failed > n_tried:
        parts.append(f"failed {n_failed} of {n_tried} time{'s' if n_tried != 1 else ''}"
                     + (f" ({n_invalid} invalid)" if n_invalid else ""))
    if n_unmeasured == n_tried:
        parts.append("interpreter runs only: not measurements")
    return "; ".join(parts) or None


def rank(entries: Iterable[ExperienceEntry], query: dict[str, Optional[str]], limit: int = 10,
         guide_ids: Callable[[str], list[str]] = lambda tag: []) -> list[Recommendation]:
    """Rank the groups of past changes for ``query`` (the rule is in the module docstring).

    Args:
        entries: the entries to rank (masked ones already left out by the caller).
        query: ``kernel_type``, ``backend``, ``arch``, ``bottleneck`` -> the value asked, or None.
        limit: most recommendations returned (>= 1).
        guide_ids: tag -> ids of the strategy guide's entries for it (for :attr:`Recommendation.guide`).

    Returns:
        At most ``limit`` recommendations, best first. Raises nothing.
    """
    out: list[Recommendation] = []
    for (kind, name), group in _groups(entries).items():
        on_record = [e for e in group if e.claim is None]
        scored = sorted(((weight(e, query) * value(e), e) for e in (on_record or group)), key=lambda p: -abs(p[0]))
        speedups = [e.speedup for e in group if e.speedup is not None]
        texts = Counter(e.change for e in group)
        last_seen = {e.change: i for i, e in enumerate(sorted(group, key=lambda e: e.recorded_utc))}
        ordered_texts = sorted(texts, key=lambda t: (-texts[t], -last_seen[t]))
        n_failed = sum(e.outcome in FAILED_OUTCOMES for e in group)
        n_invalid = sum(e.outcome == "invalid" for e in group)
        n_unmeasured = sum(not e.measured for e in group)
        out.append(Recommendation(
            tag=name if kind == "tag" else None,
            change=ordered_texts[0], changes=ordered_texts[:KEEP],
            n_tried=len(group), n_improved=sum(e.outcome == "improved" for e in group),
            n_failed=n_failed, n_invalid=n_invalid, n_unmeasured=n_unmeasured,
            median_speedup=statistics.median(speedups) if speedups else None,
            best_speedup=max(speedups) if speedups else None,
            similarity=round(sum(similarity(e, query) for e in group) / len(group), 6),
            score=round(sum(p[0] for p in scored), 6),
            n_claims=len(group) - len(on_record), claims_only=not on_record,
            warning=_warning(len(group), n_failed, n_invalid, n_unmeasured, len(group) - len(on_record)),
            examples=list(dict.fromkeys(e.source for _, e in scored))[:KEEP],
            guide=guide_ids(name) if kind == "tag" else []))
    out.sort(key=lambda r: (r.claims_only, -r.score, -r.n_improved, -r.n_tried, r.tag or "", r.change))
    return out[:limit]
