"""Timing samples stored compactly and exactly: the event timer's whole nanoseconds.

A sample timed with CUDA events is ``cudaEventElapsedTime``'s float32 millisecond value times 1e6
(:func:`kernelpilot.measure.timing.time_events`: ``t.elapsed_time(s, e) * 1e6``), and the GPU's timer counts whole
nanoseconds: ``977216.0053253174`` ns is the float32 nearest to 0.977216 ms, times 1e6. Written as a float64 it takes
17 significant digits; the whole nanoseconds it came from take 6 or 7. A version's records (``outcome.json``,
``timing.json`` of ``optimize``) keep such samples as ``samples_event_ns``: integers ``n`` with
``float32(n / 1e6) * 1e6`` (:func:`sample_ns_of`) equal to the recorded sample bit for bit. The encoder checks every
sample; when one does not come back exactly (a wall-clock sample of the interpreter, a sample computed otherwise),
the record keeps ``samples_ns`` as it was. Two thirds of a replayed version's sample bytes, in its files and its git
objects (issue 25, "Records that scale": a run of 1,000 configs under 10 MB; ``benchmarks/records_size.py``).

Readers call :func:`unpack_samples` on the record's JSON (``Evaluation`` does it itself when validated); records
written before this format hold ``samples_ns`` and read as before.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

__all__ = ["SAMPLES_EVENT_NS", "f32", "pack_samples", "sample_ns_of", "unpack_samples"]

#: the compact key: whole nanoseconds, each standing for ``float32(n / 1e6) * 1e6``
SAMPLES_EVENT_NS = "samples_event_ns"


def f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (round half to even, as the timer's float32 was), as a Python float.

    Raises:
        OverflowError: ``x`` is beyond float32's range.
    """
    return struct.unpack("<f", struct.pack("<f", x))[0]


def sample_ns_of(event_ns: int) -> float:
    """The sample (ns, float64) a stored whole-nanosecond value stands for: ``float32(event_ns / 1e6) * 1e6``, the
    float32 milliseconds the event timer reported, times 1e6 as :func:`kernelpilot.measure.timing.time_events` does.

    Raises:
        OverflowError: beyond float32's range.
    """
    return f32(event_ns / 1e6) * 1e6


def _event_ns(sample_ns: float) -> int | None:
    """The whole nanoseconds whose :func:`sample_ns_of` is exactly ``sample_ns``; None when there are none."""
    try:
        n = round(sample_ns)
        return n if sample_ns_of(n) == sample_ns else None
    except (OverflowError, TypeError, ValueError):
        return None


def pack_samples(samples_ns: Sequence[float]) -> dict[str, list[Any]]:
    """The samples as a record stores them: ``{"samples_event_ns": [...]}`` when every sample comes back exactly
    through :func:`sample_ns_of`, else ``{"samples_ns": [...]}`` unchanged; ``{}`` for no samples. Raises nothing."""
    if not samples_ns:
        return {}
    packed = [_event_ns(s) for s in samples_ns]
    if any(n is None for n in packed):
        return {"samples_ns": list(samples_ns)}
    return {SAMPLES_EVENT_NS: packed}


def unpack_samples(data: Any) -> Any:
    """A record's JSON (a dict) with ``samples_event_ns`` turned back into ``samples_ns`` (:func:`sample_ns_of`);
    anything else unchanged. A record holding both keys is left as it is: every reader then reads ``samples_ns``
    (the models ignore the other key), never one of two lists at random.

    Raises:
        TypeError: ``samples_event_ns`` is not a list of integers (the reader reports the record as corrupt).
        OverflowError: a value beyond float32's range.
    """
    if not isinstance(data, dict) or SAMPLES_EVENT_NS not in data or "samples_ns" in data:
        return data
    values = data[SAMPLES_EVENT_NS]
    if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise TypeError(f"{SAMPLES_EVENT_NS} is not a list of whole nanoseconds")
    out = {k: v for k, v in data.items() if k != SAMPLES_EVENT_NS}
    out["samples_ns"] = [sample_ns_of(v) for v in values]
    return out
