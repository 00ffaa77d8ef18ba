"""The dispatch table of a workload run (``dispatch.json``): per bucket of shapes, the config that serves it, what it
measured at every workload shape in the bucket, and the evidence; plus the workload's weighted time for the table,
for the best single config and for the library default. The format and its rules: docs/dispatch.md.

Every number that can be derived is checked against what it derives from when a table is built or read: a bucket's
weight is the sum of its shapes' weights, a weighted time is ``sum(weight * duration_ns)`` over its rows, the loss of
one config for all is computed from the two totals, every measured shape lies in its own bucket (found by the one
lookup, :func:`kernelpilot.dispatch.lookup.find_bucket`), no two buckets share a shape, and the single config and the
library default are measured at exactly the table's shapes with the same weights. A table that contradicts itself is
refused, whoever wrote it.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, model_validator

from kernelpilot.dispatch.lookup import find_bucket, miss_message, ranges_overlap
from kernelpilot.errors import DispatchError

__all__ = ["FILE_KIND", "SCHEMA_VERSION", "Bucket", "ConfigTotal", "Dispatch", "KernelRef", "Measurement",
           "make_bucket", "make_dispatch", "make_total", "shape_id", "weighted_time_ns"]

#: The ``kind`` field every dispatch.json carries (a file of another kind is refused on read).
FILE_KIND = "kernelpilot-dispatch"
#: The format's version; a reader refuses any other (it would not know the fields).
SCHEMA_VERSION = 1
#: Relative tolerance when a stored total is compared with the total recomputed from its rows (float sums written
#: by another summation order may differ in the last bits; anything larger is a contradiction).
TOTAL_REL_TOL = 1e-9

#: A config or shape value: a JSON scalar (config values are Triton meta-parameters, launch options or ``-D``
#: defines; shape values are sizes and the ``dtype`` string).
Scalar = Union[StrictBool, StrictInt, StrictFloat, StrictStr, None]

_STRICT = ConfigDict(extra="forbid", frozen=True)


def shape_id(shape: dict[str, Any]) -> str:
    """A shape's canonical text, its identity in checks and messages: ``M=512,N=4096`` (keys sorted). Raises
    nothing."""
    return ",".join(f"{key}={shape[key]}" for key in sorted(shape))


def _finite_positive(value: float, what: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return value


def _scalars_ok(values: dict[str, Any], what: str) -> None:
    for key, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{what} {key}={value!r} is not a finite number")


class KernelRef(BaseModel):
    """The kernel file the table was tuned for.

    Attributes:
        file_name: its file name (``rms_norm.py``, ``softmax.cu``), no folder.
        sha256: hex sha256 of the file's bytes when tuned (64 lowercase hex digits): a table found beside another
            source is for another kernel.
    """

    model_config = _STRICT
    file_name: StrictStr = Field(min_length=1)
    sha256: StrictStr = Field(pattern=r"^[0-9a-f]{64}$")


class Measurement(BaseModel):
    """One config measured at one workload shape.

    Attributes:
        shape: the full shape (dispatch keys and the others, e.g. ``dtype``).
        weight: how often the shape runs in the workload (> 0, unitless; counts or a share).
        duration_ns: the median kernel time, ns (> 0, finite).
        samples_n: how many timing samples the median is of (>= 1).
        record_id: the id of the record (evaluation) it comes from, in the run folder.
    """

    model_config = _STRICT
    shape: dict[str, Scalar]
    weight: Union[StrictInt, StrictFloat]
    duration_ns: Union[StrictInt, StrictFloat]
    samples_n: StrictInt = Field(ge=1)
    record_id: StrictStr = Field(min_length=1)

    @model_validator(mode="after")
    def _numbers(self) -> "Measurement":
        _finite_positive(self.weight, f"weight of shape {shape_id(self.shape)}")
        _finite_positive(self.duration_ns, f"duration_ns of shape {shape_id(self.shape)}")
        _scalars_ok(self.shape, "shape value")
        return self


def weighted_time_ns(measured: list[Measurement]) -> float:
    """``sum(weight * duration_ns)`` over the rows, in their order (ns x weight units; with counts as weights the
    time one pass of the workload spends in the kernel). Raises nothing; 0.0 for no rows."""
    return math.fsum(row.weight * row.duration_ns for row in measured)


def _check_total(stored: float, rows: list[Measurement], what: str) -> None:
    derived = weighted_time_ns(rows)
    if not math.isclose(stored, derived, rel_tol=TOTAL_REL_TOL):
        raise ValueError(f"{what} says weighted_time_ns={stored!r} but its rows give {derived!r}")


def _unique_shapes(rows: list[Measurement], what: str) -> None:
    seen: set[str] = set()
    for row in rows:
        ident = shape_id(row.shape)
        if ident in seen:
            raise ValueError(f"{what} measures shape {ident} twice")
        seen.add(ident)


class Bucket(BaseModel):
    """One bucket: shapes one config serves.

    Attributes:
        name: unique in the table (``M<=64``, ``b3``).
        ranges: for every dispatch key, the inclusive integer range ``[lo, hi]`` the bucket serves.
        config: the chosen config, one flat dict (Triton meta-parameters and ``num_warps``/``num_stages``, or the
            ``-D`` defines of a ``.cu`` kernel).
        weight: the sum of its measured shapes' weights.
        weighted_time_ns: ``sum(weight * duration_ns)`` of the config over its measured shapes.
        measured: the config at every workload shape in the bucket (at least one; each inside ``ranges``).
        evidence: run-folder-relative paths backing the choice (``tune.json``, ``buckets/b3/tune.json``).
    """

    model_config = _STRICT
    name: StrictStr = Field(min_length=1)
    ranges: dict[str, tuple[StrictInt, StrictInt]]
    config: dict[str, Scalar]
    weight: Union[StrictInt, StrictFloat]
    weighted_time_ns: Union[StrictInt, StrictFloat]
    measured: list[Measurement] = Field(min_length=1)
    evidence: list[StrictStr] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> "Bucket":
        for key, (lo, hi) in self.ranges.items():
            if lo > hi:
                raise ValueError(f"bucket {self.name!r}: range of {key} is [{lo}, {hi}], lo > hi")
        _scalars_ok(self.config, f"bucket {self.name!r}: config value")
        _unique_shapes(self.measured, f"bucket {self.name!r}")
        derived = math.fsum(row.weight for row in self.measured)
        if not math.isclose(self.weight, derived, rel_tol=TOTAL_REL_TOL):
            raise ValueError(f"bucket {self.name!r} says weight={self.weight!r} but its shapes weigh {derived!r}")
        _check_total(self.weighted_time_ns, self.measured, f"bucket {self.name!r}")
        for path in self.evidence:
            parts = path.replace("\\", "/").split("/")
            if not path or path.startswith(("/", "\\")) or ":" in parts[0] or ".." in parts:
                raise ValueError(f"bucket {self.name!r}: evidence {path!r} is not a path inside the run folder")
        return self


class ConfigTotal(BaseModel):
    """A comparison row for the whole workload: one config (or the library's own choice) at every table shape.

    Attributes:
        config: the config; ``None`` for a library default that picks its own config per shape (a heuristic).
        measured: it at every shape the table measured, with the same weights.
        weighted_time_ns: ``sum(weight * duration_ns)`` over ``measured``.
    """

    model_config = _STRICT
    config: Optional[dict[str, Scalar]]
    measured: list[Measurement] = Field(min_length=1)
    weighted_time_ns: Union[StrictInt, StrictFloat]

    @model_validator(mode="after")
    def _consistent(self) -> "ConfigTotal":
        _unique_shapes(self.measured, "a comparison row")
        _check_total(self.weighted_time_ns, self.measured, "a comparison row")
        return self


def _loss_pct(other_ns: float, table_ns: float) -> float:
    return (other_ns - table_ns) / table_ns * 100.0


class Dispatch(BaseModel):
    """A dispatch table: the body of ``dispatch.json`` (the file adds ``sha256``; :mod:`kernelpilot.dispatch.io`).

    Attributes:
        kind / schema_version: :data:`FILE_KIND` and :data:`SCHEMA_VERSION`.
        kernel: the kernel file and its source sha256.
        arch: the GPU architecture (``sm_90``); gpu_name: the GPU's name (``NVIDIA H100 80GB HBM3``).
        toolchain: tool -> version (``{"triton": "3.3.1", "torch": "2.7.0", "cuda": "12.8"}``).
        keys: the shape keys dispatched on (every bucket has a range for each, and no other).
        buckets: non-overlapping buckets, at least one.
        table_weighted_time_ns: the sum of the buckets' weighted times: the workload under the table.
        single_config: the best single config for all shapes, measured at every table shape.
        library_default: the library's default at every table shape, where known.
        single_config_loss_pct: how much slower one config for all is than the table, in percent
            (``(single - table) / table * 100``; negative would mean the table lost).
        library_default_loss_pct: the same for the library default (None without one).

    Raises (on construction, as pydantic's ValidationError): any contradiction listed in the module docstring.
    """

    model_config = _STRICT
    kind: Literal["kernelpilot-dispatch"] = FILE_KIND
    schema_version: Literal[1] = SCHEMA_VERSION
    kernel: KernelRef
    arch: StrictStr = Field(min_length=1)
    gpu_name: StrictStr
    toolchain: dict[str, StrictStr]
    keys: list[StrictStr] = Field(min_length=1)
    buckets: list[Bucket] = Field(min_length=1)
    table_weighted_time_ns: Union[StrictInt, StrictFloat]
    single_config: ConfigTotal
    library_default: Optional[ConfigTotal] = None
    single_config_loss_pct: Union[StrictInt, StrictFloat]
    library_default_loss_pct: Optional[Union[StrictInt, StrictFloat]] = None

    @model_validator(mode="after")
    def _consistent(self) -> "Dispatch":
        keys = self.keys
        if len(set(keys)) != len(keys):
            raise ValueError(f"keys {keys!r} name a key twice")
        names = [bucket.name for bucket in self.buckets]
        if len(set(names)) != len(names):
            raise ValueError(f"bucket names repeat: {names!r}")
        for bucket in self.buckets:
            if set(bucket.ranges) != set(keys):
                raise ValueError(f"bucket {bucket.name!r} has ranges for {sorted(bucket.ranges)}, "
                                 f"the table dispatches on {sorted(keys)}: one range per key, no other")
        table = self.lookup_table()
        for i, first in enumerate(self.buckets):
            for second in self.buckets[i + 1:]:
                if ranges_overlap(first.ranges, second.ranges, keys):
                    raise ValueError(f"buckets {first.name!r} {_ranges_text(first, keys)} and {second.name!r} "
                                     f"{_ranges_text(second, keys)} overlap: a shape in both has two configs")
        for index, bucket in enumerate(self.buckets):
            for row in bucket.measured:
                found = find_bucket(row.shape, keys, table)
                if found != index:
                    where = miss_message(row.shape, keys, table) if found < 0 else f"bucket {table[found]['name']!r}"
                    raise ValueError(f"bucket {bucket.name!r} lists shape {shape_id(row.shape)}, which falls in "
                                     f"{where}: a bucket's measurements are of its own shapes")
        workload = {shape_id(row.shape): row.weight for bucket in self.buckets for row in bucket.measured}
        table_ns = math.fsum(bucket.weighted_time_ns for bucket in self.buckets)
        if not math.isclose(self.table_weighted_time_ns, table_ns, rel_tol=TOTAL_REL_TOL):
            raise ValueError(f"table_weighted_time_ns={self.table_weighted_time_ns!r} but the buckets sum to "
                             f"{table_ns!r}")
        for label, total, loss in (("single_config", self.single_config, self.single_config_loss_pct),
                                   ("library_default", self.library_default, self.library_default_loss_pct)):
            if total is None:
                if loss is not None:
                    raise ValueError(f"{label}_loss_pct is given without a {label} row")
                continue
            shapes = {shape_id(row.shape): row.weight for row in total.measured}
            if shapes != workload:
                missing = sorted(set(workload) - set(shapes))
                extra = sorted(set(shapes) - set(workload))
                raise ValueError(f"{label} is not measured at the table's shapes with their weights (missing "
                                 f"{missing}, extra {extra}, or another weight): the totals would not compare")
            want = _loss_pct(total.weighted_time_ns, self.table_weighted_time_ns)
            if loss is None or not math.isclose(loss, want, rel_tol=1e-6, abs_tol=1e-9):
                raise ValueError(f"{label}_loss_pct={loss!r} but the totals give {want!r}")
        return self

    def lookup_table(self) -> list[dict[str, Any]]:
        """The buckets as plain dicts for :mod:`kernelpilot.dispatch.lookup`: ``{"name", "ranges", "config"}``,
        ranges as ``[lo, hi]`` lists, in table order (what the generated modules embed). Raises nothing."""
        return [{"name": b.name, "ranges": {k: [b.ranges[k][0], b.ranges[k][1]] for k in self.keys},
                 "config": dict(b.config)} for b in self.buckets]


def _ranges_text(bucket: Bucket, keys: list[str]) -> str:
    return "(" + ", ".join(f"{key} in [{bucket.ranges[key][0]}, {bucket.ranges[key][1]}]" for key in keys) + ")"


def make_bucket(name: str, ranges: dict[str, tuple[int, int]], config: dict[str, Any],
                measured: list[Measurement], evidence: list[str] | None = None) -> Bucket:
    """A :class:`Bucket` with its weight and weighted time computed from ``measured``.

    Raises:
        DispatchError: a contradiction (lo > hi, a shape measured twice, an evidence path outside the run).
    """
    rows = list(measured)
    return _build(Bucket, f"bucket {name!r}", name=name, ranges=ranges, config=config,
                  weight=math.fsum(row.weight for row in rows), weighted_time_ns=weighted_time_ns(rows),
                  measured=rows, evidence=list(evidence or []))


def make_total(config: dict[str, Any] | None, measured: list[Measurement]) -> ConfigTotal:
    """A :class:`ConfigTotal` with its weighted time computed from ``measured``. Raises DispatchError as
    :func:`make_bucket`."""
    rows = list(measured)
    return _build(ConfigTotal, "a comparison row", config=config, measured=rows,
                  weighted_time_ns=weighted_time_ns(rows))


def make_dispatch(*, kernel: KernelRef, arch: str, gpu_name: str, toolchain: dict[str, str], keys: list[str],
                  buckets: list[Bucket], single_config: ConfigTotal,
                  library_default: ConfigTotal | None = None) -> Dispatch:
    """A :class:`Dispatch` with the table's weighted time and both losses computed from the rows.

    Args:
        kernel / arch / gpu_name / toolchain / keys / buckets / single_config / library_default: as the fields of
            :class:`Dispatch` (see there).

    Raises:
        DispatchError: overlapping buckets, a shape outside its bucket, comparison rows not at the table's shapes,
            anything else :class:`Dispatch` refuses; the message says which.
    """
    table_ns = math.fsum(bucket.weighted_time_ns for bucket in buckets)
    return _build(Dispatch, f"the dispatch table of {kernel.file_name}", kernel=kernel, arch=arch,
                  gpu_name=gpu_name, toolchain=dict(toolchain), keys=list(keys), buckets=list(buckets),
                  table_weighted_time_ns=table_ns, single_config=single_config, library_default=library_default,
                  single_config_loss_pct=_loss_pct(single_config.weighted_time_ns, table_ns) if table_ns else 0.0,
                  library_default_loss_pct=(None if library_default is None or not table_ns
                                            else _loss_pct(library_default.weighted_time_ns, table_ns)))


def _build(model: type[BaseModel], what: str, **fields: Any) -> Any:
    from pydantic import ValidationError

    try:
        return model(**fields)
    except ValidationError as exc:
        raise DispatchError(f"{what} is refused: {validation_summary(exc)}",
                            "fix the rows or ranges named; a dispatch table may not contradict itself") from None


def validation_summary(exc: Any) -> str:
    """The first three problems of a pydantic ValidationError in one line (``loc: message``). Raises nothing."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
