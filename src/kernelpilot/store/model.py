"""The records of the config store: what a decided config is stored under (:class:`StoreKey`) and what is stored
(:class:`StoredConfig`), their canonical forms, and where the store lives (:func:`default_store_path`).

A key is what changes which config is fastest (issue 26; Triton #9822, FlyDSL #783): the kernel's source hash, the
GPU arch, the toolchain versions, the dtype, the stride pattern (:mod:`kernelpilot.workload.strides`) and the shape
range the config was decided for. Everything is normalised before it is stored or compared, so ``sm90``, ``9.0``
and ``sm_90`` are one arch and ``torch.float16`` and ``float16`` one dtype; the toolchain is compared exactly.

Standard library and pydantic only: no torch, no Triton (:mod:`kernelpilot.store.lookup` runs inside library code).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernelpilot import facts
from kernelpilot.errors import KernelpilotError

__all__ = ["FORMAT_VERSION", "ConfigStoreError", "Evidence", "StoreKey", "StoredConfig", "canonical_json",
           "default_store_path", "normalize_arch", "normalize_dtype", "normalize_range", "normalize_toolchain",
           "range_contains", "range_size", "utc_now"]

#: Version of one exported line's fields (``format`` in each JSON line).
FORMAT_VERSION = 1

RangeValue = Union[list[int], bool, int, float, str, None]


class ConfigStoreError(KernelpilotError):
    """The config store cannot be used: its file is not a SQLite database or not a config store, was written by a
    newer kernelpilot, cannot be created or written; a file to import or merge is missing or holds a line that is
    not a valid entry (the message names the file and line); a key field is malformed (an arch that is not
    ``sm_XY``, a range with ``lo > hi``)."""


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second with a ``Z`` (``2026-11-26T18:40:00Z``)."""
    return facts.utc_now().strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_json(value: Any) -> str:
    """``value`` as compact JSON with sorted keys: the text two equal values share whatever their key order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def default_store_path() -> Path:
    """Where the config store lives: ``$KERNELPILOT_CONFIG_STORE`` if set (``~`` expanded), else
    ``<kernelpilot home>/configs.db`` (``$KERNELPILOT_HOME`` or ``~/.kernelpilot``: beside the evaluation cache's
    ``cache/`` folder and the experience log). Nothing is created here."""
    env = os.environ.get("KERNELPILOT_CONFIG_STORE", "").strip()
    if env:
        return Path(env).expanduser()
    return facts.kernelpilot_home() / "configs.db"


_ARCH = re.compile(r"^(?:sm_?)?(\d{2,3})([a-z]?)$")
_CC = re.compile(r"^(\d+)\.(\d)([a-z]?)$")


def normalize_arch(arch: str) -> str:
    """An arch as stored: ``sm_90`` from ``sm_90``, ``SM90``, ``90``, ``9.0``; a suffix kept (``sm_90a``); ``cpu``
    (interpreter runs) as is.

    Raises:
        ConfigStoreError: anything else.
    """
    text = str(arch).strip().lower()
    if text == "cpu":
        return text
    m = _CC.match(text)
    if m:
        return f"sm_{m.group(1)}{m.group(2)}{m.group(3)}"
    m = _ARCH.match(text)
    if m:
        return f"sm_{m.group(1)}{m.group(2)}"
    raise ConfigStoreError(f"arch {arch!r} is not an sm_XY arch", "give it as sm_90 (or 9.0), or cpu")


def normalize_dtype(dtype: str) -> str:
    """A dtype as stored: lowercase, without a ``torch.`` prefix (``torch.bfloat16`` -> ``bfloat16``).

    Raises:
        ConfigStoreError: empty.
    """
    text = str(dtype).strip().lower().removeprefix("torch.")
    if not text:
        raise ConfigStoreError("dtype is empty", "give the dtype as SHAPE writes it, e.g. bfloat16")
    return text


def normalize_toolchain(toolchain: Mapping[str, Any]) -> dict[str, str]:
    """A toolchain as stored: name (lowercase) -> version string, names with a None version dropped (unknown is not
    a version), sorted by name. Compared exactly: ``{"triton": "3.5.0", "torch": "2.9.0", "cuda": "12.8"}`` and the
    same without ``cuda`` are different toolchains.

    Raises:
        ConfigStoreError: not a mapping of names to strings.
    """
    if not isinstance(toolchain, Mapping):
        raise ConfigStoreError(f"toolchain {toolchain!r} is not a mapping of tool -> version",
                               "e.g. {'triton': '3.5.0', 'torch': '2.9.0', 'cuda': '12.8'}; see runtime_toolchain()")
    out = {}
    for name, version in toolchain.items():
        if version is None:
            continue
        if not isinstance(name, str) or not name.strip() or not isinstance(version, str) or not version.strip():
            raise ConfigStoreError(f"toolchain entry {name!r}: {version!r} is not a tool name and a version string",
                                   "e.g. {'triton': '3.5.0'}")
        out[name.strip().lower()] = version.strip()
    return dict(sorted(out.items()))


def normalize_range(shape_range: Mapping[str, Any]) -> dict[str, RangeValue]:
    """A shape range as stored: key -> ``[lo, hi]`` (whole numbers, inclusive, ``lo <= hi``) for a range, or the
    exact value (a word, a flag, a number, None) for a fixed key; a bare whole number ``v`` becomes ``[v, v]``; sorted by
    key. A ``(lo, hi)`` tuple (:attr:`kernelpilot.workload.buckets.Bucket.ranges`) is a range too.

    Raises:
        ConfigStoreError: empty; a range that is not two whole numbers with ``lo <= hi``; a value of another type.
    """
    if not isinstance(shape_range, Mapping) or not shape_range:
        raise ConfigStoreError(f"shape range {shape_range!r} is empty or not a mapping",
                               "give key -> [lo, hi] (inclusive) or an exact value, e.g. {'M': [512, 1023], 'N': 4096}")
    out: dict[str, RangeValue] = {}
    for key, value in shape_range.items():
        if isinstance(value, (list, tuple)):
            ok = (len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                  and value[0] <= value[1])
            if not ok:
                raise ConfigStoreError(f"shape range {key}: {list(value)!r} is not [lo, hi] with lo <= hi",
                                       "give whole numbers, both inclusive, e.g. [512, 1023]")
            out[str(key)] = [int(value[0]), int(value[1])]
        elif isinstance(value, int) and not isinstance(value, bool):
            out[str(key)] = [value, value]
        elif value is None or isinstance(value, (bool, float, str)):
            out[str(key)] = value
        else:
            raise ConfigStoreError(f"shape range {key}: {value!r} is neither [lo, hi] nor a value",
                                   "give [lo, hi] for a dimension, the value for a word or flag")
    return dict(sorted(out.items()))


def range_contains(shape_range: Mapping[str, RangeValue], shape: Mapping[str, Any]) -> bool:
    """True when ``shape`` has exactly the range's keys (``dtype`` aside: it is a key field of its own) and every
    value is inside: a whole number within ``[lo, hi]``, any other value equal (of the same type: ``True`` is not
    ``1``). Raises nothing."""
    keys = {k for k in shape if k != "dtype"}
    if keys != set(shape_range):
        return False
    for key, want in shape_range.items():
        v = shape[key]
        if isinstance(want, list):
            if not (isinstance(v, int) and not isinstance(v, bool) and want[0] <= v <= want[1]):
                return False
        elif type(v) is not type(want) or v != want:
            return False
    return True


def range_size(shape_range: Mapping[str, RangeValue]) -> int:
    """How many shapes a range spans (the product of ``hi - lo + 1``; fixed keys count 1): smaller is more
    specific. Raises nothing."""
    return math.prod(v[1] - v[0] + 1 for v in shape_range.values() if isinstance(v, list))


class Evidence(BaseModel):
    """Where a decided config's measurement is on record.

    Attributes:
        run_dir: the run folder that decided it (``runs/rmsnorm-tune``), or None.
        record_ids: the ids of the records of the measurement (evaluation ids, record file names).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_dir: Optional[str] = None
    record_ids: list[str] = Field(default_factory=list)


class StoreKey(BaseModel):
    """What a decided config is stored under (every field normalised: module docstring).

    Attributes:
        kernel_hash: the kernel file's source hash (``KernelFile.source_sha256``: kernel + reference source), hex.
        arch: ``sm_90`` (or ``cpu``). toolchain: tool -> version (:func:`normalize_toolchain`).
        dtype: ``bfloat16``. strides: the stride pattern (``contiguous``, :mod:`kernelpilot.workload.strides`).
        shape_range: key -> ``[lo, hi]`` or value (:func:`normalize_range`): the shapes the config was decided for.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kernel_hash: str
    arch: str
    toolchain: dict[str, str]
    dtype: str
    strides: str = "contiguous"
    shape_range: dict[str, RangeValue]

    @field_validator("kernel_hash")
    @classmethod
    def _hex(cls, value: str) -> str:
        v = value.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{8,64}", v):
            raise ValueError(f"kernel_hash {value!r} is not 8 to 64 hex digits")
        return v

    @field_validator("arch", mode="before")
    @classmethod
    def _arch(cls, value: Any) -> str:
        return normalize_arch(value)

    @field_validator("toolchain", mode="before")
    @classmethod
    def _toolchain(cls, value: Any) -> dict[str, str]:
        return normalize_toolchain(value)

    @field_validator("dtype", mode="before")
    @classmethod
    def _dtype(cls, value: Any) -> str:
        return normalize_dtype(value)

    @field_validator("strides")
    @classmethod
    def _strides(cls, value: str) -> str:
        v = value.strip()
        if not v or any(c.isspace() for c in v):
            raise ValueError(f"stride pattern {value!r} is empty or has spaces")
        return v

    @field_validator("shape_range", mode="before")
    @classmethod
    def _range(cls, value: Any) -> dict[str, RangeValue]:
        return normalize_range(value)

    def key_id(self) -> str:
        """The sha256 hex digest of the key's canonical JSON: equal keys, equal ids."""
        return hashlib.sha256(canonical_json(self.model_dump(mode="json")).encode()).hexdigest()


class StoredConfig(BaseModel):
    """One decided config and its measurement.

    Attributes:
        key: what it is stored under. config: the tunables' values (``{"BLOCK_N": 1024, "num_warps": 4}``).
        duration_ns: its measured time at the range's measured shapes (weighted mean or the representative's), ns,
            finite and > 0. evidence: where the measurement is on record.
        decided_at: when it was decided, UTC ISO 8601 (``2026-11-26T18:40:00Z``).
        origin: ``put`` (recorded on this machine), ``import:FILE`` or ``merge:FILE`` (from another store: a claim
            until measured here). gpu: the GPU's name it was measured on, or None.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: StoreKey
    config: dict[str, Any]
    duration_ns: float
    evidence: Evidence = Field(default_factory=Evidence)
    decided_at: str = Field(default_factory=utc_now)
    origin: str = "put"
    gpu: Optional[str] = None

    @field_validator("duration_ns")
    @classmethod
    def _positive(cls, value: float) -> float:
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"duration_ns must be a finite number > 0, got {value!r}")
        return float(value)

    @field_validator("config")
    @classmethod
    def _config(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("config is empty")
        canonical_json(value)  # must be JSON
        return dict(sorted(value.items()))

    def config_id(self) -> str:
        """The sha256 hex digest of the config's canonical JSON."""
        return hashlib.sha256(canonical_json(self.config).encode()).hexdigest()

    def as_record(self) -> dict[str, Any]:
        """The exported JSON object: the key's fields flattened, ``config``, ``duration_ns``, ``evidence``,
        ``decided_at``, ``origin``, ``gpu`` and ``format`` (:data:`FORMAT_VERSION`)."""
        return {**self.key.model_dump(mode="json"), "config": self.config, "duration_ns": self.duration_ns,
                "evidence": self.evidence.model_dump(mode="json"), "decided_at": self.decided_at,
                "origin": self.origin, "gpu": self.gpu, "format": FORMAT_VERSION}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> "StoredConfig":
        """The entry of an exported JSON object (the inverse of :meth:`as_record`). Raises pydantic's
        ValidationError or ValueError (a newer ``format``) for a malformed object."""
        d = dict(data)
        fmt = d.pop("format", FORMAT_VERSION)
        if not isinstance(fmt, int) or fmt > FORMAT_VERSION:
            raise ValueError(f"format {fmt!r} is newer than this kernelpilot reads ({FORMAT_VERSION})")
        key = {k: d.pop(k) for k in list(d) if k in StoreKey.model_fields}
        return cls.model_validate({**d, "key": key})
