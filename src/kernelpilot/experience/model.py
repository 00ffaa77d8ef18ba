"""The records of the experience log: one :class:`ExperienceEntry` per change tried, one :class:`Recommendation` per
group of past changes, and where the log lives (:func:`default_db_path`).

An entry says what was changed in which kernel (its type, back end, GPU arch and the bottleneck class of the
version the change started from), what came of it (outcome, speedup, the metrics that moved), where it was
recorded and whether the time was a measurement at all (interpreter runs on a CPU are not). See
docs/experience.md for what fills the log and how it is ranked.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kernelpilot.backends.registry import backend_names
from kernelpilot.experience.tags import derive_tags, normalize_tags
from kernelpilot.facts import kernelpilot_home, utc_now_iso

__all__ = ["BACKENDS", "BOTTLENECK_CLASSES", "OUTCOMES", "FAILED_OUTCOMES", "ExperienceEntry", "Recommendation",
           "default_db_path", "normalize_bottleneck", "normalize_kernel_type", "utc_now"]

#: Back ends an entry can name: those of the registry (:data:`kernelpilot.backends.registry.BACKENDS`).
BACKENDS: tuple[str, ...] = backend_names()
#: Bottleneck classes of a card (:data:`kernelpilot.profile.card.CardClass`; a test keeps the two equal).
BOTTLENECK_CLASSES: tuple[str, ...] = ("memory", "compute", "latency", "occupancy", "balanced", "small-grid",
                                       "unknown")
#: What came of a change: faster beyond noise, slower beyond noise, neither, faster on some measures and slower on
#: others, or no valid result at all (a wrong result, a compile error, a crash).
OUTCOMES: tuple[str, ...] = ("improved", "regressed", "neutral", "mixed", "invalid")
#: Outcomes counted as a failure of the change.
FAILED_OUTCOMES: frozenset[str] = frozenset({"regressed", "invalid"})

Backend = str  # one of BACKENDS (checked by ExperienceEntry)
Bottleneck = Literal["memory", "compute", "latency", "occupancy", "balanced", "small-grid", "unknown"]
Outcome = Literal["improved", "regressed", "neutral", "mixed", "invalid"]


def default_db_path() -> Path:
    """Where the experience log lives: ``$KERNELPILOT_EXPERIENCE`` if set (``~`` expanded), else
    ``<kernelpilot home>/experience.db`` (``$KERNELPILOT_HOME`` or ``~/.kernelpilot``). Nothing is created here."""
    env = os.environ.get("KERNELPILOT_EXPERIENCE", "").strip()
    return Path(env).expanduser() if env else kernelpilot_home() / "experience.db"


def utc_now() -> str:
    """The current UTC time as ISO 8601 to the second (``2026-11-24T10:31:05+00:00``)."""
    return utc_now_iso()


def normalize_kernel_type(value: str) -> str:
    """A kernel type as stored: lowercase, runs of spaces and dashes as ``_`` (``"Layer-Norm"`` -> ``"layer_norm"``);
    empty -> ``"other"``. Raises nothing."""
    t = re.sub(r"[\s\-]+", "_", value.strip().lower())
    return t or "other"


def normalize_bottleneck(value: str) -> str:
    """A bottleneck class as stored: lowercase, ``_`` and spaces as ``-`` (``"small_grid"`` -> ``"small-grid"``).
    Raises nothing (whether the class exists is the caller's check)."""
    return re.sub(r"[\s_]+", "-", value.strip().lower())


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value


class ExperienceEntry(BaseModel):
    """One change tried on one kernel, and what came of it.

    Attributes:
        kernel: the kernel's name (its file stem, e.g. ``"softmax"``).
        kernel_type: what the kernel computes: ``softmax``, ``layer_norm``, ``matmul``, ``vector_add``,
            ``attention``, ``other``, ... (normalized by :func:`normalize_kernel_type`).
        backend: ``triton`` or ``cuda``.
        arch: the GPU architecture (``sm_90``), None on a CPU (interpreter) run.
        gpu: the GPU's name (``NVIDIA H100 80GB HBM3``), None when unknown.
        bottleneck: the bottleneck class of the version the change started from (the parent): what the change
            attacked; one of :data:`BOTTLENECK_CLASSES`, or None when no card was made.
        change: the change, in words (the hypothesis).
        tags: what kind of change it is (:mod:`kernelpilot.experience.tags`); derived from ``change`` when none
            are given.
        outcome: ``improved``, ``regressed``, ``neutral``, ``mixed`` or ``invalid`` (no valid result).
        speedup: parent time / new time (> 1 is faster), None when there is no time (an invalid version).
        metrics_moved: metric -> relative change, new / old - 1 (``{"duration_ns": -0.31}``: 31 % shorter).
        source: where it was recorded: ``session:RUN/v3``, ``tune:RUN``, ``optimize:RUN``, ``manual``, ...
        measured: True for a GPU measurement; False for an interpreter (CPU) run, whose times are not
            measurements (recommendations weigh these less and flag them).
        recorded_utc: when it was recorded (ISO 8601, UTC).
        masked: True when a user masked it (a bad run): left out of recommend, search, list and stats unless
            asked for.
        claim: None for a lesson on record: written by kernelpilot's own run (optimize, tune, session) when it
            ended, or added by hand with a source whose records validate and hold the entry's numbers
            (:func:`kernelpilot.api.experience.source_problem`); else why it is only the user's claim (a made-up
            source, records that do not validate, numbers that differ). Claims rank below lessons on record
            (:mod:`kernelpilot.experience.rank`). Not part of the key; never taken from the user's input.

    Raises (on construction):
        pydantic.ValidationError: an unknown field, an empty kernel, change or source, an unknown backend,
            bottleneck or outcome, a speedup that is not a finite number > 0, a metric that is not finite.
    """

    model_config = ConfigDict(extra="forbid")

    kernel: str = Field(min_length=1)
    kernel_type: str = "other"
    backend: Backend = "triton"
    arch: Optional[str] = None
    gpu: Optional[str] = None
    bottleneck: Optional[Bottleneck] = None
    change: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    outcome: Outcome
    speedup: Optional[float] = Field(default=None, gt=0)
    metrics_moved: dict[str, float] = Field(default_factory=dict)
    source: str = Field(min_length=1)
    measured: bool
    recorded_utc: str = Field(default_factory=utc_now)
    masked: bool = False
    claim: Optional[str] = None

    @field_validator("kernel_type", mode="before")
    @classmethod
    def _kernel_type(cls, v: Any) -> Any:
        return normalize_kernel_type(v) if isinstance(v, str) else v

    @field_validator("backend", mode="before")
    @classmethod
    def _backend(cls, v: Any) -> Any:
        v = v.strip().lower() if isinstance(v, str) else v
        if isinstance(v, str) and v not in BACKENDS:
            raise ValueError(f"backend {v!r} is not one of {', '.join(BACKENDS)}")
        return v

    @field_validator("arch", "gpu", mode="before")
    @classmethod
    def _optional_text(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip()
            return v or None
        return v

    @field_validator("bottleneck", mode="before")
    @classmethod
    def _bottleneck(cls, v: Any) -> Any:
        if isinstance(v, str):
            return normalize_bottleneck(v) or None
        return v

    @field_validator("recorded_utc")
    @classmethod
    def _recorded(cls, v: str) -> str:
        try:
            _dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"recorded_utc must be an ISO 8601 time, got {v!r}") from exc
        return v

    @field_validator("speedup")
    @classmethod
    def _speedup(cls, v: Optional[float]) -> Optional[float]:
        return None if v is None else _finite("speedup", v)

    @field_validator("metrics_moved")
    @classmethod
    def _metrics(cls, v: dict[str, float]) -> dict[str, float]:
        return {k: _finite(f"metrics_moved[{k!r}]", x) for k, x in v.items()}

    @model_validator(mode="after")
    def _tags(self) -> "ExperienceEntry":
        self.arch = self.arch.lower() if self.arch else None
        tags = normalize_tags(self.tags)
        self.tags = tags or derive_tags(self.change)
        return self

    def key(self) -> str:
        """The entry's identity: sha256 (hex) of what it says happened: source, kernel, kernel type, back end,
        arch, GPU, bottleneck, change, outcome, speedup (6 significant digits) and measured. Tags, metrics, the
        time of recording and the mask are not part of it, so the same result recorded twice, or masked later,
        is one entry. Raises nothing."""
        ident = [self.source, self.kernel, self.kernel_type, self.backend, self.arch, self.gpu, self.bottleneck,
                 self.change, self.outcome, None if self.speedup is None else f"{self.speedup:.6g}", self.measured]
        return hashlib.sha256(json.dumps(ident, ensure_ascii=False).encode("utf-8")).hexdigest()

    def as_record(self) -> dict[str, Any]:
        """The entry as a JSON-ready dict with its ``key`` (what ``--json`` and the JSON Lines export print)."""
        return {"key": self.key(), **self.model_dump(mode="json")}


class Recommendation(BaseModel):
    """A group of past changes (one tag, or one change text when it has no tag) ranked for a query.

    Attributes:
        tag: the group's tag (``num_warps-up``, ``vectorize``); None for a group of one untagged change text.
        change: the group's most frequent change text (the most recent on a tie).
        changes: up to 3 distinct change texts of the group, most frequent first.
        n_tried: entries in the group.
        n_improved: of them, ``improved``.
        n_failed: of them, ``regressed`` or ``invalid``.
        n_invalid: of them, ``invalid``.
        n_unmeasured: of them, interpreter (CPU) runs.
        n_claims: of them, the user's claims (:attr:`ExperienceEntry.claim`): not counted in the score of a group
            that has a lesson on record.
        claims_only: every entry of the group is a claim: the group ranks below every group with a lesson on
            record, whatever its score.
        median_speedup: median speedup over the entries that have one (None if none has).
        best_speedup: the largest of those speedups.
        similarity: mean similarity of the group's kernels to the query, 0 to 1 (1: same kernel type, back end,
            arch and bottleneck; see :mod:`kernelpilot.experience.rank`).
        score: the ranking score (see :mod:`kernelpilot.experience.rank`); negative when the group mostly hurt.
        warning: why to be careful (``"failed 3 of 4 times (1 invalid)"``, ``"interpreter runs only: not
            measurements"``), or None.
        examples: sources of up to 3 entries that weigh most in the score.
        guide: ids of the strategy guide's entries with this tag (for the query's bottleneck and back end).
    """

    tag: Optional[str] = None
    change: str
    changes: list[str] = Field(default_factory=list)
    n_tried: int
    n_improved: int
    n_failed: int
    n_invalid: int = 0
    n_unmeasured: int = 0
    n_claims: int = 0
    claims_only: bool = False
    median_speedup: Optional[float] = None
    best_speedup: Optional[float] = None
    similarity: float
    score: float
    warning: Optional[str] = None
    examples: list[str] = Field(default_factory=list)
    guide: list[str] = Field(default_factory=list)
