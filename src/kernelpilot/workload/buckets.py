"""Buckets: the groups of a workload's shapes one config is expected to serve (issue 26, "search per bucket").

The rule (``rule="pow2"``, the default): along every bucketed key, a shape whose value ``v >= 1`` lies in
``[2^k, 2^(k+1))`` falls in class ``k`` (``k = floor(log2 v)``; the inclusive range is ``2^k .. 2^(k+1) - 1``);
``v = 0`` is its own class ``0..0``. Every other key is matched exactly: two shapes share a bucket when every
bucketed key is in the same class and every other key has the same value. So a bucket's ``ranges`` gives every
whole-number key an inclusive ``lo..hi`` (a bucketed key its class, another key ``v..v``) and ``fixed`` gives every
other value (``dtype``, flags). ``rule="exact"`` makes every value its own class (one bucket per shape).

Why powers of two: a block size, a split count or a warp count that suits ``M = 700`` suits ``M = 900``
far more often than ``M = 90`` or ``M = 9000`` — tile counts and occupancy change by factors of two, and this is
the bucketing Triton's own autotune key (``next_power_of_2``) and Inductor use. The winner of a bucket is still
checked at its other shapes (a config correct at one shape is not assumed correct at another).

Deterministic: the same workload gives the same buckets, names and order (ascending by the bucketed keys' classes
in the order of ``keys``, then by the other keys' values), whatever the entries' order.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from pydantic import BaseModel, ConfigDict

from kernelpilot.workload.model import ShapeValue, Workload, WorkloadEntry, WorkloadError, shape_id, value_kind

__all__ = ["BUCKET_RULES", "Bucket", "bucket_workload", "varying_keys", "bucket_neighbours", "bucket_for", "class_range"]

#: The bucketing rules :func:`bucket_workload` knows.
BUCKET_RULES = ("pow2", "exact")


def class_range(value: int, rule: str = "pow2") -> tuple[int, int]:
    """The inclusive range of the class ``value`` falls in: ``pow2``: ``(2^k, 2^(k+1) - 1)`` for ``v >= 1``
    (``class_range(700) == (512, 1023)``, ``class_range(1) == (1, 1)``), ``(0, 0)`` for 0; ``exact``: ``(v, v)``.

    Raises:
        WorkloadError: ``value`` is not a whole number >= 0, or the rule is unknown.
    """
    if rule not in BUCKET_RULES:
        raise WorkloadError(f"unknown bucket rule {rule!r}", f"use one of {', '.join(BUCKET_RULES)}")
    if value_kind(value) != "int" or value < 0:
        raise WorkloadError(f"cannot bucket {value!r}: a bucketed key must be a whole number >= 0",
                            "bucket only integer dimensions (M, N, K, ...)")
    if rule == "exact" or value == 0:
        return value, value
    lo = 1 << (value.bit_length() - 1)
    return lo, 2 * lo - 1


class Bucket(BaseModel):
    """Shapes of a workload one config is expected to serve.

    Attributes:
        name: ``M=512..1023,N=4096,dtype=bfloat16``: every key in the workload's key order, a range as ``lo..hi``
            when ``lo != hi`` (unique within one bucketing; stable across runs).
        keys: the bucketed keys, in the order given to :func:`bucket_workload`.
        ranges: every whole-number key -> ``(lo, hi)`` inclusive (a bucketed key: its class; another: ``(v, v)``).
        fixed: every other key (words, flags, fractions) -> its value.
        entries: the member shapes with their weights, sorted by the bucketed keys' values then :func:`shape_id`.
        weight: the members' total weight.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    keys: tuple[str, ...]
    ranges: dict[str, tuple[int, int]]
    fixed: dict[str, ShapeValue]
    entries: list[WorkloadEntry]
    weight: float

    def shapes(self) -> list[dict[str, ShapeValue]]:
        """The member shapes, in order (copies)."""
        return [dict(e.shape) for e in self.entries]

    def contains(self, shape: Mapping[str, Any]) -> bool:
        """True when ``shape`` has every key of the bucket, each whole-number key inside its range and every other
        key equal to the fixed value (a shape never measured may fall in a bucket). Raises nothing."""
        for key, (lo, hi) in self.ranges.items():
            v = shape.get(key)
            if value_kind(v) != "int" or not lo <= v <= hi:
                return False
        return all(key in shape and value_kind(shape[key]) == value_kind(v) and shape[key] == v
                   for key, v in self.fixed.items())

    def representative(self) -> dict[str, ShapeValue]:
        """The shape to tune the bucket at: the heaviest member; among equal weights the one whose bucketed keys
        are nearest the bucket's geometric centre (``sqrt(lo * hi)``, in log2 distance), then the first in order.
        Deterministic; raises nothing."""
        def centre_distance(e: WorkloadEntry) -> float:
            d = 0.0
            for key in self.keys:
                lo, hi = self.ranges[key]
                v = e.shape[key]
                d += abs(math.log2(max(v, 1)) - (math.log2(max(lo, 1)) + math.log2(max(hi, 1))) / 2)
            return d
        best = min(range(len(self.entries)),
                   key=lambda i: (-self.entries[i].weight, centre_distance(self.entries[i]), i))
        return dict(self.entries[best].shape)

    def span(self) -> dict[str, tuple[int, int]]:
        """Per whole-number key, the smallest and largest value among the members (inside :attr:`ranges`): what was
        measured, where ``ranges`` is what the bucket claims to serve (a shape between the two was never measured
        and is served by the rule). Raises nothing."""
        return {k: (min(e.shape[k] for e in self.entries), max(e.shape[k] for e in self.entries))
                for k in self.ranges}

    def store_range(self) -> dict[str, Any]:
        """The bucket as a config store's shape range (:mod:`kernelpilot.store`): ``ranges`` as ``[lo, hi]`` lists and
        ``fixed`` values as they are."""
        return {**{k: [lo, hi] for k, (lo, hi) in self.ranges.items()}, **dict(self.fixed)}


def _label(key: str, lo: Any, hi: Any) -> str:
    return f"{key}={lo}" if lo == hi else f"{key}={lo}..{hi}"


def _sort_value(v: Any) -> tuple[int, Any]:
    """Order of mixed values: numbers by value, then words (so the order never depends on insertion)."""
    return (0, float(v)) if value_kind(v) in ("int", "float", "bool") else (1, str(v))


def varying_keys(shapes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys to dispatch on by default: every key whose value differs between the shapes, in the first shape's
    key order; when none varies (one shape), its first whole-number key. Raises WorkloadError on no shape."""
    if not shapes:
        raise WorkloadError("the workload has no shape", "give at least one shape with a weight > 0")
    keys = [k for k in shapes[0] if len({str(s.get(k)) for s in shapes}) > 1]
    return keys or [next((k for k, v in shapes[0].items() if value_kind(v) == "int"), next(iter(shapes[0])))]


def bucket_workload(workload: Workload, keys: Sequence[str], rule: str = "pow2") -> list[Bucket]:
    """Group a workload's shapes into buckets (the rule is the module docstring).

    Args:
        workload: the shapes (each full: every key of the kernel's ``SHAPE``).
        keys: the keys to bucket (e.g. ``["M"]``; the others are matched exactly); may be empty (one bucket per
            distinct shape).
        rule: one of :data:`BUCKET_RULES`.

    Returns:
        The buckets, in the deterministic order of the module docstring; every shape in exactly one.

    Raises:
        WorkloadError: a key not in the workload's shapes (named, with the known ones), a key given twice, a key
            whose value in some shape is not a whole number >= 0, an unknown rule.
    """
    if rule not in BUCKET_RULES:
        raise WorkloadError(f"unknown bucket rule {rule!r}", f"use one of {', '.join(BUCKET_RULES)}")
    keys = tuple(keys)
    if len(set(keys)) != len(keys):
        raise WorkloadError(f"bucket keys {list(keys)} name a key twice", "give each key once")
    order = list(workload.entries[0].shape)
    for key in keys:
        if key not in order:
            raise WorkloadError(f"bucket key {key!r} is not a key of the workload's shapes (known keys: "
                                f"{', '.join(order)})", "bucket by the names of the kernel file's SHAPE")
    groups: dict[str, dict[str, Any]] = {}
    for e in workload.entries:
        ranges: dict[str, tuple[int, int]] = {}
        fixed: dict[str, ShapeValue] = {}
        for key in order:
            v = e.shape[key]
            if key in keys:
                ranges[key] = class_range(v, rule)
            elif value_kind(v) == "int":
                ranges[key] = (v, v)
            else:
                fixed[key] = v
        name = ",".join(_label(k, *ranges[k]) if k in ranges else _label(k, fixed[k], fixed[k]) for k in order)
        group = groups.setdefault(name, {"ranges": ranges, "fixed": fixed, "entries": []})
        group["entries"].append(e)
    buckets = []
    for name, g in groups.items():
        members = sorted(g["entries"], key=lambda e: ([e.shape[k] for k in keys], shape_id(e.shape)))
        buckets.append(Bucket(name=name, keys=keys, ranges=g["ranges"], fixed=g["fixed"], entries=members,
                              weight=math.fsum(m.weight for m in members)))

    def order_key(b: Bucket) -> tuple:
        return (tuple(b.ranges[k][0] for k in keys),
                tuple(_sort_value(b.ranges[k][0]) if k in b.ranges else _sort_value(b.fixed[k])
                      for k in order if k not in keys))
    return sorted(buckets, key=order_key)


def bucket_for(buckets: Sequence[Bucket], shape: Mapping[str, Any]) -> Optional[Bucket]:
    """The bucket that contains ``shape`` (:meth:`Bucket.contains`), or None when no bucket does. Buckets of one
    bucketing never overlap, so at most one matches. Raises nothing."""
    return next((b for b in buckets if b.contains(shape)), None)


def bucket_neighbours(buckets: Sequence[Bucket], bucket: Bucket) -> list[Bucket]:
    """The buckets to warm-start ``bucket``'s search from: along each bucketed key, the nearest bucket below and the
    nearest above that agree with ``bucket`` on every other key (same class of every other bucketed key, same
    value of every other key).

    Returns:
        At most two per bucketed key, ordered by distance (the number of power-of-two classes between the two
        ranges' lower ends, ``|log2(lo') - log2(lo)|``), then the order of ``keys``, then below before above;
        empty when no bucket agrees. Deterministic; raises nothing.
    """
    def dist(a: int, b: int) -> float:
        return abs(math.log2(a + 1) - math.log2(b + 1)) if 0 in (a, b) else abs(math.log2(a) - math.log2(b))

    found: list[tuple[float, int, int, str, Bucket]] = []
    for ki, key in enumerate(bucket.keys):
        lo = bucket.ranges[key][0]
        best: dict[int, tuple[float, Bucket]] = {}
        for other in buckets:
            if other.name == bucket.name or other.fixed != bucket.fixed:
                continue
            if any(other.ranges.get(k) != r for k, r in bucket.ranges.items() if k != key):
                continue
            olo = other.ranges[key][0]
            side = 0 if olo < lo else 1
            d = dist(olo, lo)
            if side not in best or d < best[side][0]:
                best[side] = (d, other)
        for side, (d, other) in best.items():
            found.append((d, ki, side, other.name, other))
    return [b for *_, b in sorted(found, key=lambda t: t[:4])]
