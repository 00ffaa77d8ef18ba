"""Shape -> bucket lookup: the one place that decides which bucket of a dispatch table serves a shape.

A bucket holds ``ranges``: for every shape key the table dispatches on, an inclusive integer range ``[lo, hi]``. A
shape falls in a bucket when each of its key values ``v`` satisfies ``lo <= v <= hi``; keys the table does not
dispatch on are ignored. Buckets never overlap (:mod:`kernelpilot.dispatch.model` refuses overlapping ranges when a
table is built, written or read), so at most one bucket matches and the list order cannot change the answer.

This module imports nothing, on purpose: :mod:`kernelpilot.dispatch.generate` copies the source of its functions
verbatim into the generated ``triton.autotune`` pruning module and the plain Python dispatcher, so kernelpilot,
the generated autotune list and the generated dispatcher run the very same code (no second copy of the rule). Keep
it free of imports, of ``from __future__`` lines and of module-level names other than these functions.
"""


def shape_int(value):
    """A shape value as a Python ``int``, or ``None`` when it is not an integer.

    Args:
        value: a shape value (``int``, or any object with ``__index__`` such as a NumPy integer).

    Returns:
        The integer; ``None`` for a ``bool`` (``True`` is not a size), a float, a string or anything else.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    index = getattr(type(value), "__index__", None)
    if index is None:
        return None
    try:
        return int(index(value))
    except Exception:
        return None


def find_bucket(shape, keys, buckets):
    """The index of the bucket whose inclusive ranges hold ``shape``, or ``-1``.

    Args:
        shape: mapping of shape key -> integer value (``{"M": 512, "N": 4096}``); extra keys are ignored.
        keys: the keys the table dispatches on (``["M", "N"]``).
        buckets: list of mappings, each with ``"ranges"``: ``{key: [lo, hi]}`` (integers, inclusive) for every key.

    Returns:
        The first (and, in a valid table, only) matching index; ``-1`` when a key is missing, a value is not an
        integer, or no bucket holds the shape. :func:`miss_message` says which. Raises nothing.
    """
    values = []
    for key in keys:
        if key not in shape:
            return -1
        value = shape_int(shape[key])
        if value is None:
            return -1
        values.append(value)
    for index, bucket in enumerate(buckets):
        ranges = bucket["ranges"]
        if all(ranges[key][0] <= value <= ranges[key][1] for key, value in zip(keys, values)):
            return index
    return -1


def miss_message(shape, keys, buckets):
    """Why :func:`find_bucket` found no bucket: names the shape, the offending key and every bucket's ranges.

    Args / returns: as :func:`find_bucket`; returns one or two sentences. Raises nothing.
    """
    shown = {key: shape[key] for key in keys if key in shape}
    for key in keys:
        if key not in shape:
            return f"shape {shape!r} lacks the dispatch key {key!r} (the table dispatches on {list(keys)!r})"
        if shape_int(shape[key]) is None:
            return f"shape {shape!r}: {key}={shape[key]!r} is not an integer"
    listed = "; ".join(
        bucket.get("name", str(index)) + " " + ", ".join(
            f"{key} in [{bucket['ranges'][key][0]}, {bucket['ranges'][key][1]}]" for key in keys)
        for index, bucket in enumerate(buckets))
    return f"shape {shown!r} is outside every range of the dispatch table: {listed}"


def ranges_overlap(first, second, keys):
    """Do two buckets' ranges share a shape? True when, for every key, their inclusive ranges intersect.

    Args:
        first / second: ``{key: [lo, hi]}`` mappings with every key in ``keys``.
        keys: the dispatch keys.
    """
    return all(first[key][0] <= second[key][1] and second[key][0] <= first[key][1] for key in keys)
