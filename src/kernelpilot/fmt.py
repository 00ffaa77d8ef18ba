"""How kernelpilot writes numbers for people: durations with an adaptive unit, ratios that never read ``0.00x``, and
time left as ``H:MM:SS``. One place, used by the CLI renderers, the Markdown reports and the progress lines; records
(JSON) keep raw numbers in their base units (``*_ns``, ``*_s``).
"""

from __future__ import annotations

import math

__all__ = ["NONE", "format_clock", "format_duration_ns", "format_ratio"]

#: What a missing value prints as (a number that does not exist, never a made-up 0).
NONE = "—"


def _real(value: float | None) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def format_duration_ns(ns: float | None) -> str:
    """A duration given in nanoseconds, in the unit that fits it: ``512 ns``, ``81.40 µs``, ``21.449 ms``,
    ``18.031 s`` — never an 18 s time written in µs. The resolution is 10 ns in the µs range (the convention of
    every kernelpilot table), 1 µs in the ms range and 1 ms in the s range.

    Args:
        ns: nanoseconds (None, NaN or infinite: there is no time).

    Returns:
        The text with its unit, or :data:`NONE` when there is no time. Raises nothing.
    """
    if not _real(ns):
        return NONE
    value = float(ns)  # type: ignore[arg-type]
    size = abs(value)
    if size < 1e3:
        return f"{value:.0f} ns" if size >= 100 else f"{value:.3g} ns"
    if size < 1e6:
        return f"{value / 1e3:.2f} µs"
    if size < 1e9:
        return f"{value / 1e6:.3f} ms"
    return f"{value / 1e9:.3f} s"


def format_ratio(ratio: float | None, *, decimals: int = 2, suffix: str = "×") -> str:
    """A ratio (a speedup, a time relative to another) with ``decimals`` decimals, and more digits when those would
    round it to nothing: 0.0031 prints ``0.0031×``, not ``0.00×``.

    Args:
        ratio: the dimensionless ratio (None, NaN, infinite or not positive: nothing to compare).
        decimals: decimals for ratios that survive the rounding (2 in tables, 3 where A/B decisions are shown).
        suffix: ``×`` or ``x`` (the report's own convention).

    Returns:
        The text, or :data:`NONE` when there is nothing to compare (say why next to it). Raises nothing.
    """
    if not _real(ratio) or ratio <= 0:  # type: ignore[operator]
        return NONE
    value = float(ratio)  # type: ignore[arg-type]
    text = f"{value:.{decimals}f}"
    if abs(float(text) - value) > 0.05 * value:  # the rounding lost the value: two significant digits instead
        text = f"{value:.2g}"
    return text + suffix


def format_clock(seconds: float | None) -> str:
    """Seconds as ``H:MM:SS`` (``0:00:21``) for elapsed time and ETAs; ``?`` when unknown. Raises nothing."""
    if not _real(seconds):
        return "?"
    total = max(0, int(round(float(seconds))))  # type: ignore[arg-type]
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
