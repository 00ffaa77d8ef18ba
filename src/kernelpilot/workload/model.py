"""A workload: the shapes a kernel really runs at, each with a weight (how often it runs), and the file that holds
one (docs/workloads.md).

The JSON form is a list of entries ``[{"shape": {"M": 512}, "weight": 3}, ...]``:

- ``shape``: a dict of the kernel's ``SHAPE`` keys; a key left out takes the value of the base shape (the kernel's
  ``SHAPE``), a key the base shape does not have is refused (naming it and the known ones), a value of another type
  than the base shape's is refused (a word where ``SHAPE`` holds a number, a fraction where it holds a whole number,
  anything but true/false where it holds a flag: the rule of ``--shape``).
- ``weight``: how often the shape runs, relative to the others (a call count, a share); a finite number > 0;
  1 when left out. No other field is accepted (a misspelt ``wieght`` would otherwise silently weigh 1).
- Two entries with the same full shape (after the missing keys are filled) are one shape: their weights are summed,
  and the shape keeps the place of its first entry.

Only the standard library and pydantic are imported here (no torch), so any layer can read a workload.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelpilot.errors import KernelpilotError

__all__ = ["ShapeValue", "WorkloadError", "WorkloadEntry", "Workload", "build_workload", "load_workload",
           "shape_id", "value_kind"]

#: A shape value: a dimension (int), a flag (bool), a number (float), a word (``dtype``), or None (an option unset).
ShapeValue = Union[bool, int, float, str, None]

_FORMAT_HINT = 'a workload file is a JSON list like [{"shape": {"M": 512}, "weight": 3}, {"shape": {"M": 4096}}]'


class WorkloadError(KernelpilotError):
    """A workload cannot be used: its file is missing or not JSON, an entry is malformed, a shape names a key the
    kernel's ``SHAPE`` does not have or gives a value of the wrong type, a weight is not a number > 0, a range or a
    capture mapping is malformed. The message names the file, the entry and the key; the hint says what to write."""


def value_kind(value: Any) -> str:
    """The kind of a shape value for the type rule: ``bool``, ``int``, ``float`` or ``other`` (a bool is not an
    int here, though Python says it is). Raises nothing."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "other"


def shape_id(shape: Mapping[str, Any]) -> str:
    """A shape's identity as text: canonical JSON with sorted keys (``{"M": 512, "dtype": "float16"}``). Two shapes
    with equal values give the same id whatever their key order; ``True`` and ``1`` differ. Raises nothing."""
    return json.dumps({k: shape[k] for k in sorted(shape)}, sort_keys=True, separators=(",", ":"), default=str)


class WorkloadEntry(BaseModel):
    """One shape of a workload and how often it runs.

    Attributes:
        shape: the full shape (every key of the kernel's ``SHAPE``, in its order), values int/bool/float/str.
        weight: how often it runs relative to the other entries: a finite float > 0 (a call count, a share).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: dict[str, ShapeValue]
    weight: float = Field(default=1.0, strict=True)

    @field_validator("weight")
    @classmethod
    def _positive(cls, value: float) -> float:
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"weight must be a finite number > 0, got {value!r}")
        return float(value)


class Workload(BaseModel):
    """The shapes a kernel runs at, with their weights: at least one entry, each full shape once.

    Build one with :func:`build_workload` (fills missing keys, checks them, merges duplicates), :func:`load_workload`
    (from a file), :func:`kernelpilot.workload.ranges.workload_from_ranges` or
    :func:`kernelpilot.workload.capture.capture_workload`.

    Attributes:
        entries: the shapes, in first-seen order; no two with the same full shape.
        source: where it came from (a file path, ``ranges:M=1:16384``, ``capture:aten::mm``), for records.
    """

    model_config = ConfigDict(frozen=True)

    entries: list[WorkloadEntry]
    source: Optional[str] = None

    @property
    def total_weight(self) -> float:
        """The sum of the weights (> 0)."""
        return math.fsum(e.weight for e in self.entries)

    def shapes(self) -> list[dict[str, ShapeValue]]:
        """The full shapes, in order (copies)."""
        return [dict(e.shape) for e in self.entries]

    def weight_of(self, shape: Mapping[str, Any]) -> float:
        """The weight of a full shape, 0.0 when it is not in the workload. Raises nothing."""
        want = shape_id(shape)
        return next((e.weight for e in self.entries if shape_id(e.shape) == want), 0.0)

    def to_json_list(self) -> list[dict[str, Any]]:
        """The JSON form: ``[{"shape": {...}, "weight": w}, ...]`` (full shapes; ``load_workload`` reads it back to an
        equal workload)."""
        return [{"shape": dict(e.shape), "weight": e.weight} for e in self.entries]

    def dump(self, path: str | Path) -> Path:
        """Write the JSON form to ``path`` (indented, one entry per line group). Returns the path.

        Raises:
            WorkloadError: the file cannot be written.
        """
        p = Path(path).expanduser()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(self.to_json_list(), indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise WorkloadError(f"cannot write the workload {p}: {exc.strerror or exc}",
                                "give a writable file path") from exc
        return p


def _check_value(key: str, value: Any, default: Any, where: str) -> ShapeValue:
    """``value`` if its kind fits the base shape's value at ``key`` (an int where a float is, too); else raise."""
    if value is None and default is None:
        return None
    if not isinstance(value, (bool, int, float, str)):
        raise WorkloadError(f"{where}: shape value {key}={value!r} is a {type(value).__name__}, not a number or a word",
                            f"give {key} as in SHAPE, e.g. {json.dumps({key: default})}")
    want, got = value_kind(default), value_kind(value)
    if want == got or (want == "float" and got == "int"):
        return float(value) if want == "float" else value
    if want == "other" and got == "other":
        return value
    words = {"int": "a whole number", "float": "a number", "bool": "true or false", "other": "a word"}
    raise WorkloadError(f"{where}: shape value {key}={value!r} is not {words[want]} as SHAPE's {key} "
                        f"(default {default!r}) is",
                        f"give {key} as in SHAPE, e.g. {json.dumps({key: default})}")


def build_workload(entries: Iterable[Mapping[str, Any] | WorkloadEntry], base_shape: Mapping[str, Any], *,
                   source: Optional[str] = None, where: str = "workload") -> Workload:
    """A checked workload from raw entries: missing keys filled from ``base_shape``, duplicates merged.

    Args:
        entries: dicts ``{"shape": {KEY: value}, "weight": w}`` (``weight`` optional, 1) or :class:`WorkloadEntry`.
        base_shape: the kernel's ``SHAPE`` (its keys are the known ones and give the order of the full shapes).
        source: recorded as :attr:`Workload.source`. where: names the input in messages (a file path).

    Returns:
        The workload; entries in first-seen order, each full shape once with the sum of its weights.

    Raises:
        WorkloadError: no entry; an entry that is not a dict, has a field other than ``shape``/``weight``, or a
            weight that is not a finite number > 0; a shape key not in ``base_shape`` (the message names the key and
            lists the known ones); a value of another kind than the base shape's (see :func:`value_kind`).
    """
    base = dict(base_shape)
    odd = [k for k, v in base.items() if v is not None and not isinstance(v, (bool, int, float, str))]
    if odd:
        raise WorkloadError(f"{where}: SHAPE's {odd[0]} is {base[odd[0]]!r}, not a number, a word, a flag or None",
                            "a workload holds scalar shape values; give that key a scalar in SHAPE")
    merged: dict[str, tuple[dict[str, ShapeValue], float]] = {}
    count = 0
    for n, raw in enumerate(entries, start=1):
        count += 1
        at = f"{where}: entry {n}"
        if isinstance(raw, WorkloadEntry):
            raw = raw.model_dump()
        if not isinstance(raw, Mapping):
            raise WorkloadError(f"{at} is a {type(raw).__name__}, not an object", _FORMAT_HINT)
        try:
            entry = WorkloadEntry.model_validate(dict(raw))
        except (ValidationError, TypeError, ValueError) as exc:
            raise WorkloadError(f"{at} is not a valid entry: {_short(exc)}", _FORMAT_HINT) from exc
        unknown = [k for k in entry.shape if k not in base]
        if unknown:
            raise WorkloadError(f"{at}: shape key {unknown[0]!r} is not in the kernel's SHAPE "
                                f"(known keys: {', '.join(base) or 'none'})",
                                "use the names of the kernel file's SHAPE; a key left out takes SHAPE's value")
        full = {k: _check_value(k, entry.shape[k], v, at) if k in entry.shape else v for k, v in base.items()}
        sid = shape_id(full)
        if sid in merged:
            merged[sid] = (merged[sid][0], merged[sid][1] + entry.weight)
        else:
            merged[sid] = (full, entry.weight)
    if not count:
        raise WorkloadError(f"{where} has no entry", _FORMAT_HINT)
    return Workload(entries=[WorkloadEntry(shape=s, weight=w) for s, w in merged.values()], source=source)


def load_workload(path: str | Path, base_shape: Mapping[str, Any]) -> Workload:
    """Read a workload file (the JSON form in this module's docstring) against the kernel's ``SHAPE``.

    Args:
        path: the JSON file. base_shape: the kernel's ``SHAPE`` (fills missing keys; its keys are the known ones).

    Returns:
        The workload, :attr:`Workload.source` = the path as given.

    Raises:
        WorkloadError: the file is missing, unreadable or not JSON (line and column given), its top level is not a
            list, or an entry is refused by :func:`build_workload` (the message names the file and the entry).
    """
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(f"cannot read the workload file {p}: {exc.strerror or exc}",
                            "give the path of a JSON workload file") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{p}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})", _FORMAT_HINT) from exc
    if not isinstance(data, list):
        raise WorkloadError(f"{p}: the top level is a {type(data).__name__}, not a list of entries", _FORMAT_HINT)
    return build_workload(data, base_shape, source=str(path), where=str(p))


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'entry'}: {err['msg']}" for err in exc.errors())
    return str(exc)
