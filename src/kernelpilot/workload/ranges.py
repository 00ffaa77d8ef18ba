"""Workloads generated from ranges: ``M=1:16384`` becomes the shapes a serving stack sees along M, weight 1 each.

The point rules (the shapes a range ``lo..hi``, both inclusive, stands for):

- ``pow2``: every power of two in ``[lo, hi]``, and ``lo`` and ``hi`` themselves (the range's ends are shapes the
  program runs at, so they are measured whether or not they are powers of two);
- ``pow2-mid`` (the default): those, and every midpoint of two consecutive powers of two in the range,
  ``(2^k + 2^(k+1)) / 2 = 3·2^(k-1)`` (3, 6, 12, 24, ...; 1.5 is not a size), so each ``[2^k, 2^(k+1))`` bucket holds
  two measured shapes and a config is checked at more than one shape per bucket;
- ``all``: every integer in ``[lo, hi]`` (small ranges: a head count, a batch of 1..8).

Several keys give the cartesian product of their points (at most :data:`MAX_SHAPES` shapes); keys without a range
take the base shape's value. A range ``KEY=V`` (one value) fixes the key at V. The rule is ours (issue 26: "powers
of two and their midpoints"); the midpoints split every power-of-two bucket in two, so a config tuned at one point of
a bucket is checked at the other.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from kernelpilot.workload.model import Workload, WorkloadError, build_workload, value_kind

__all__ = ["POINT_RULES", "MAX_SHAPES", "range_points", "parse_ranges", "workload_from_ranges", "format_ranges"]

#: The point rules :func:`range_points` knows.
POINT_RULES = ("pow2-mid", "pow2", "all")
#: Most shapes a range workload may hold (the product over its keys): more is a mistake, not a workload to measure.
MAX_SHAPES = 4096

_RANGE_HINT = "write KEY=LO:HI (both inclusive, whole numbers >= 0), e.g. M=1:16384, or KEY=V for one value"


def range_points(lo: int, hi: int, rule: str = "pow2-mid") -> list[int]:
    """The sizes a range stands for under a point rule (the module docstring), ascending, each once.

    Args:
        lo, hi: the range, both inclusive, ``0 <= lo <= hi``. rule: one of :data:`POINT_RULES`.

    Returns:
        e.g. ``range_points(1, 16, "pow2-mid") == [1, 2, 3, 4, 6, 8, 12, 16]``,
        ``range_points(100, 300, "pow2") == [100, 128, 256, 300]``.

    Raises:
        WorkloadError: ``lo``/``hi`` not whole numbers, ``lo < 0`` or ``lo > hi``, an unknown rule, ``all`` over
            more than :data:`MAX_SHAPES` values.
    """
    if value_kind(lo) != "int" or value_kind(hi) != "int" or lo < 0 or lo > hi:
        raise WorkloadError(f"range {lo!r}:{hi!r} is not 0 <= LO <= HI in whole numbers", _RANGE_HINT)
    if rule not in POINT_RULES:
        raise WorkloadError(f"unknown point rule {rule!r}", f"use one of {', '.join(POINT_RULES)}")
    if rule == "all":
        if hi - lo + 1 > MAX_SHAPES:
            raise WorkloadError(f"range {lo}:{hi} under rule 'all' is {hi - lo + 1} shapes (most {MAX_SHAPES})",
                                "use rule pow2-mid or pow2 for a wide range")
        return list(range(lo, hi + 1))
    points = {lo, hi}
    p = 1
    while p <= hi:
        if p >= lo:
            points.add(p)
        mid = 3 * p // 2  # the midpoint of p and 2p; for p = 1 it is 1.5, not a size
        if rule == "pow2-mid" and p >= 2 and lo <= mid <= hi:
            points.add(mid)
        p *= 2
    return sorted(points)


def parse_ranges(text: str | Sequence[str]) -> dict[str, tuple[int, int]]:
    """Parse the command-line form: ``"M=1:16384"``, ``"M=1:16384,N=4096"`` or a list of such strings.

    Returns:
        key -> (lo, hi), both inclusive, in the order given (``N=4096`` -> ``(4096, 4096)``).

    Raises:
        WorkloadError: an item not of the form ``KEY=LO:HI`` or ``KEY=V`` (whole numbers, ``0 <= LO <= HI``), or a
            key given twice.
    """
    items = [text] if isinstance(text, str) else list(text)
    out: dict[str, tuple[int, int]] = {}
    for item in items:
        for part in (p.strip() for p in str(item).split(",")):
            if not part:
                continue
            key, sep, raw = part.partition("=")
            key = key.strip()
            if not sep or not key.isidentifier():
                raise WorkloadError(f"range {part!r} is not of the form KEY=LO:HI", _RANGE_HINT)
            lo_s, colon, hi_s = raw.partition(":")
            try:
                lo = int(lo_s.strip())
                hi = int(hi_s.strip()) if colon else lo
            except ValueError:
                raise WorkloadError(f"range {part!r}: {raw!r} is not LO:HI in whole numbers", _RANGE_HINT) from None
            if lo < 0 or lo > hi:
                raise WorkloadError(f"range {part!r}: need 0 <= LO <= HI", _RANGE_HINT)
            if key in out:
                raise WorkloadError(f"range for {key} given twice ({part!r})", "give each key one range")
            out[key] = (lo, hi)
    if not out:
        raise WorkloadError("no range given", _RANGE_HINT)
    return out


def format_ranges(ranges: Mapping[str, tuple[int, int]]) -> str:
    """The command-line form of ranges, ``M=1:16384,N=4096`` (the inverse of :func:`parse_ranges`)."""
    return ",".join(f"{k}={lo}" if lo == hi else f"{k}={lo}:{hi}" for k, (lo, hi) in ranges.items())


def workload_from_ranges(ranges: Mapping[str, tuple[int, int]] | str | Sequence[str], base_shape: Mapping[str, Any],
                         points: str = "pow2-mid") -> Workload:
    """A workload of every combination of the ranges' points (weight 1 each), other keys from ``base_shape``.

    Args:
        ranges: key -> (lo, hi) inclusive, or the command-line text :func:`parse_ranges` reads.
        base_shape: the kernel's ``SHAPE``; every range key must be one of its whole-number keys.
        points: the point rule (:data:`POINT_RULES`, module docstring).

    Returns:
        The workload, shapes ordered by the ranges' keys (first key slowest), ``source`` = ``ranges:<text>``.

    Raises:
        WorkloadError: a malformed range or rule, a key not in ``base_shape`` (named, with the known keys) or not a
            whole number there, more than :data:`MAX_SHAPES` shapes.
    """
    parsed = parse_ranges(ranges) if isinstance(ranges, (str, list, tuple)) else dict(ranges)
    for key in parsed:
        if key not in base_shape:
            raise WorkloadError(f"range key {key!r} is not in the kernel's SHAPE (known keys: "
                                f"{', '.join(base_shape) or 'none'})", "use the names of the kernel file's SHAPE")
        if value_kind(base_shape[key]) != "int":
            raise WorkloadError(f"range key {key!r} is {base_shape[key]!r} in SHAPE, not a whole number",
                                "ranges are for integer dimensions")
    axes = [range_points(lo, hi, points) for lo, hi in parsed.values()]
    total = 1
    for axis in axes:
        total *= len(axis)
    if total > MAX_SHAPES:
        raise WorkloadError(f"the ranges {format_ranges(parsed)} make {total} shapes (most {MAX_SHAPES})",
                            "narrow a range, or use rule pow2")
    entries = [{"shape": dict(zip(parsed, combo)), "weight": 1.0} for combo in itertools.product(*axes)]
    return build_workload(entries, base_shape, source=f"ranges:{format_ranges(parsed)}:{points}",
                          where=f"ranges {format_ranges(parsed)}")
