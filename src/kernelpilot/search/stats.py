"""Decisions with statistics: when a candidate replaces the incumbent, and when a candidate is clearly slower.

* :func:`decide` — a candidate replaces the incumbent only when it is faster beyond noise: a one-sided
  Mann–Whitney U test (SciPy's ``mannwhitneyu``) says its times are stochastically smaller at level ``alpha``,
  **and** a bootstrap confidence interval of the ratio of medians (candidate / incumbent) lies entirely below 1.
  Both are rank/percentile methods, so a few outliers from a clock change or a preemption do not decide it.
  The samples should be interleaved A/B samples taken in one worker on the same inputs
  (:meth:`kernelpilot.search.worker.Worker.ab_samples`), so drift hits both sides alike; from a cache they are
  the stored per-config samples.
* :func:`clearly_slower` — racing: after a few samples, a candidate whose median is above the incumbent's by more
  than a margin *and* whose samples the rank test calls slower is stopped there (the idea of racing in
  algorithm configuration, e.g. irace / F-race; here with a rank test against the incumbent's median).

Times are nanoseconds throughout.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
from pydantic import BaseModel

__all__ = ["Decision", "bootstrap_ratio_ci", "clearly_slower", "decide"]


class Decision(BaseModel):
    """Whether a candidate replaces the incumbent, and the numbers behind it.

    Attributes:
        replace: True when the candidate is faster beyond noise (both tests agree).
        method: how the samples were compared (``mann-whitney-u + bootstrap``).
        p_value: one-sided Mann–Whitney p-value that the candidate is faster (None with too few samples).
        ratio: median(candidate) / median(incumbent) (0.9 = 10 % faster).
        ci_low / ci_high: bootstrap confidence interval of ``ratio`` at level ``confidence``.
        n_candidate / n_incumbent: samples on each side.
        reason: one sentence for the report.
    """

    replace: bool
    method: str = "mann-whitney-u + bootstrap ratio of medians"
    p_value: float | None
    ratio: float
    ci_low: float
    ci_high: float
    n_candidate: int
    n_incumbent: int
    reason: str


def bootstrap_ratio_ci(candidate_ns: list[float], incumbent_ns: list[float], *, confidence: float = 0.95,
                       n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of median(candidate) / median(incumbent).

    Args:
        candidate_ns / incumbent_ns: samples, ns (at least one each).
        confidence: e.g. 0.95.
        n_boot: resamples.
        seed: the resampling seed (decisions are reproducible).

    Returns:
        (low, high) of the ratio.

    Raises:
        ValueError: an empty sample list or a confidence outside (0, 1).
    """
    if not candidate_ns or not incumbent_ns:
        raise ValueError("bootstrap_ratio_ci needs at least one sample on each side")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    a, b = np.asarray(candidate_ns, dtype=float), np.asarray(incumbent_ns, dtype=float)
    ra = np.median(rng.choice(a, size=(n_boot, a.size), replace=True), axis=1)
    rb = np.median(rng.choice(b, size=(n_boot, b.size), replace=True), axis=1)
    ratios = ra / rb
    tail = (1 - confidence) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


def _mann_whitney(x: list[float], y: list[float], alternative: str) -> float | None:
    if len(x) < 3 or len(y) < 3:
        return None
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(x, y, alternative=alternative).pvalue)


def decide(candidate_ns: list[float], incumbent_ns: list[float], *, alpha: float = 0.05,
           confidence: float = 0.95, seed: int = 0) -> Decision:
    """Does the candidate replace the incumbent? Only when faster beyond noise (see the module docstring).

    Args:
        candidate_ns / incumbent_ns: timing samples, ns (interleaved A/B samples where possible).
        alpha: level of the one-sided Mann–Whitney test.
        confidence: level of the bootstrap CI of the ratio of medians.
        seed: bootstrap seed.

    Returns:
        A :class:`Decision`. With fewer than 3 samples on a side the rank test is not run and ``replace`` is
        False (no decision without evidence).

    Raises:
        ValueError: an empty sample list.
    """
    if not candidate_ns or not incumbent_ns:
        raise ValueError("decide needs samples on both sides")
    ratio = statistics.median(candidate_ns) / statistics.median(incumbent_ns)
    low, high = bootstrap_ratio_ci(candidate_ns, incumbent_ns, confidence=confidence, seed=seed)
    p = _mann_whitney(candidate_ns, incumbent_ns, "less")
    replace = p is not None and p < alpha and high < 1.0
    if p is None:
        reason = f"too few samples ({len(candidate_ns)} vs {len(incumbent_ns)}) to decide; incumbent kept"
    elif replace:
        reason = (f"faster beyond noise: ratio {ratio:.3f} (CI {low:.3f}–{high:.3f} < 1), "
                  f"Mann–Whitney p = {p:.2g} < {alpha}")
    else:
        reason = (f"not faster beyond noise: ratio {ratio:.3f} (CI {low:.3f}–{high:.3f}), "
                  f"Mann–Whitney p = {p:.2g}; incumbent kept")
    return Decision(replace=replace, p_value=p, ratio=ratio, ci_low=low, ci_high=high,
                    n_candidate=len(candidate_ns), n_incumbent=len(incumbent_ns), reason=reason)


def clearly_slower(candidate_ns: list[float], incumbent_median_ns: float, *, margin: float = 0.10,
                   alpha: float = 0.01) -> bool:
    """Racing: is a candidate, after a few samples, clearly slower than the incumbent?

    True when its median exceeds ``(1 + margin) × incumbent_median_ns`` and a one-sample sign test says its
    samples lie above that bound more often than chance (binomial tail ≤ ``alpha``). With 8 samples all above
    the bound the tail is 2⁻⁸ ≈ 0.004.

    Args:
        candidate_ns: the candidate's first samples, ns.
        incumbent_median_ns: the incumbent's median, ns (> 0).
        margin: relative slowdown that counts as clear.
        alpha: level of the sign test.

    Returns:
        True to stop timing the candidate. Raises nothing (False for empty input or a non-positive median).
    """
    if not candidate_ns or not (incumbent_median_ns > 0) or not math.isfinite(incumbent_median_ns):
        return False
    bound = (1 + margin) * incumbent_median_ns
    if statistics.median(candidate_ns) <= bound:
        return False
    above = sum(1 for x in candidate_ns if x > bound)
    n = len(candidate_ns)
    tail = sum(math.comb(n, k) for k in range(above, n + 1)) / 2**n
    return tail <= alpha
