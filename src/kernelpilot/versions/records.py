"""The records of a session of hand-written versions: ``session.json`` (the run's frozen check and state) and each
version's ``vN/memory.json`` (the iteration record of the seed workflows: version, parent, hypothesis, change,
metrics before/after, outcome, pitfalls, masked). Both are pydantic models; their JSON Schemas ship in
``kernelpilot/records/schema`` (``session.schema.json``, ``version.memory.schema.json``, written by
``python -m kernelpilot.app.schemas``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from kernelpilot.options import SessionOptions, stored_options
from kernelpilot.records.workspace import read_json, read_record, write_json
from kernelpilot.target import Target

__all__ = ["Expectation", "MemoryRecord", "Outcome", "SESSION_FILE", "SessionState", "load_memories",
           "load_state", "memory_path", "save_state"]

SESSION_FILE = "session.json"
Outcome = Literal["baseline", "improved", "regressed", "neutral", "mixed", "invalid", "unmeasured"]


class Expectation(BaseModel):
    """One ``--expect metric:up|down`` of a version, and what the evidence said.

    Attributes:
        metric: a timing field (``duration``), a card/profile metric (``dram_throughput_pct``,
            ``achieved_occupancy_pct`` ...) or ``pct_of_roofline``.
        direction: ``up`` or ``down``.
        before / after: the metric on the parent and on this version (None: not measured on one side).
        change_rel: (after - before) / |before| (None when a side is missing or before is 0).
        verdict: ``met`` (moved the predicted way beyond the threshold), ``contradicted`` (moved the other way beyond
            it), ``unchanged`` (within it) or ``not measured``.
    """

    metric: str
    direction: Literal["up", "down"]
    before: float | None = None
    after: float | None = None
    change_rel: float | None = None
    verdict: Literal["met", "contradicted", "unchanged", "not measured"] = "not measured"


class MemoryRecord(BaseModel):
    """``vN/memory.json``: one iteration of the loop, written after the version ran (its hypothesis was committed
    before). Times in ns.

    Attributes:
        version / parent: ``N`` and the parent's index (None for v0).
        hypothesis: the author's one hypothesis. change: the diff's summary (``+12 -5 lines``).
        expectations: each ``--expect`` with its verdict.
        status: the evaluation status (``ok``, ``wrong_result``, ``nan``, ``compile_error``, ``check_changed`` ...).
        outcome: baseline (v0) / improved / regressed / neutral / mixed / invalid; ``unmeasured`` for a correct
            version under the Triton interpreter (its times are not measurements, so no speed is claimed).
        duration_ns / iqr_ns: the version's median and spread (None when it did not run correctly).
        vs_parent / vs_incumbent: the A/B decisions (:class:`kernelpilot.search.stats.Decision` as dicts).
        metrics_before / metrics_after: the parent's and this version's metrics (timing, roofline, card).
        bottleneck_before / bottleneck_after: the card class of the parent and of this version.
        incumbent_after: the incumbent's index once this version was judged.
        pitfalls: what went wrong or needs care (a failure message, a contradicted expectation, a spill).
        masked / mask_reason: masked versions are skipped by status, recommend, the incumbent and the report.
        recorded_utc: when written.
    """

    version: int
    parent: int | None = None
    hypothesis: str = ""
    change: str = ""
    expectations: list[Expectation] = []
    status: str = "ok"
    message: str = ""
    outcome: Outcome
    duration_ns: float | None = None
    iqr_ns: float | None = None
    pct_of_roofline: float | None = None
    vs_parent: dict[str, Any] | None = None
    vs_incumbent: dict[str, Any] | None = None
    metrics_before: dict[str, float] = {}
    metrics_after: dict[str, float] = {}
    bottleneck_before: str | None = None
    bottleneck_after: str | None = None
    incumbent_after: int | None = None
    pitfalls: list[str] = []
    masked: bool = False
    mask_reason: str = ""
    measured: bool = True
    recorded_utc: str = ""


class SessionState(BaseModel):
    """``session.json``: what every version of the session shares, fixed at ``start``, and its state.

    Attributes:
        kernel_name: v0's file stem. kernel_type: for the experience log (``softmax``, ``matmul`` ...).
        backend: ``triton`` (``cuda`` with the next back end). device: ``cuda`` or ``cpu`` (the interpreter).
        device_name / arch: the GPU (None on the CPU).
        reference: the frozen reference file every version is checked against (``check/reference.py``).
        shape / config: the problem shape and v0's config (every version runs at its own file's default config).
        floor_ns / target_ns: the roofline floor and the stop condition (floor / 0.9); None without a roofline.
        incumbent: the fastest unmasked valid version. versions: indices recorded so far.
        restarts: ``[{"from": N, "masked": [...], "at_utc": ...}]``.
        experience_db: the experience log the session writes to (None: none).
        finished_utc: set by ``finish``.
        options: the :class:`~kernelpilot.options.SessionOptions` ``start`` was given (None in sessions from before
            they were recorded); :func:`load_state` reads them back whole.
    """

    kernel_name: str
    kernel_type: str = "other"
    backend: str = "triton"
    device: str
    device_name: str | None = None
    arch: str | None = None
    reference: str = "check/reference.py"
    shape: dict[str, Any]
    floor_ns: float | None = None
    target_ns: float | None = None
    incumbent: int | None = None
    versions: list[int] = []
    restarts: list[dict[str, Any]] = []
    experience_db: str | None = None
    started_utc: str = ""
    finished_utc: str | None = None
    git: bool = True
    extra: dict[str, Any] = Field(default_factory=dict)
    options: SessionOptions | None = None

    @property
    def target(self) -> Target:
        """The session's device as a :class:`~kernelpilot.target.Target` read back from :attr:`device` (the record
        keeps the string), with :attr:`device_name` and :attr:`arch`.

        Raises:
            OptionError: ``device`` names no device kernelpilot runs on (a hand-edited session.json).
        """
        return Target.from_record(self.device).with_spec(self.device_name, self.arch, None)


def memory_path(root: Path, index: int) -> Path:
    """``ROOT/vN/memory.json``."""
    return Path(root) / f"v{index}" / "memory.json"


def load_state(root: Path) -> SessionState:
    """Read ``ROOT/session.json``.

    Raises:
        RunFolderError: no session.json there (not a session folder), or it is corrupt (the message names it).
    """
    from kernelpilot.errors import RunFolderError

    path = Path(root) / SESSION_FILE
    if not path.is_file():
        raise RunFolderError(f"{root} is not a kernelpilot session folder (no {SESSION_FILE})",
                             "start one with `kernelpilot session start KERNEL --out RUN`")
    return read_record(path, lambda text: _state_from_json(text, path))


def _state_from_json(text: str, path: Path) -> SessionState:
    """``session.json``'s text as a :class:`SessionState`, its ``options`` validated back into
    :class:`~kernelpilot.options.SessionOptions` whole first (:func:`kernelpilot.options.stored_options`).

    Raises:
        RunFolderError: the stored options hold a field SessionOptions does not know, a value of the wrong type or
            out of range (the message names the file and the field). ValueError / ValidationError: not JSON, or the
            rest does not match (:func:`~kernelpilot.records.workspace.read_record` names the file).
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("session.json is not a JSON object")
    if data.get("options") is not None:
        data["options"] = stored_options(SessionOptions, data["options"], path)
    return SessionState.model_validate(data)


def save_state(root: Path, state: SessionState) -> Path:
    """Write ``ROOT/session.json`` atomically; returns its path."""
    return write_json(Path(root) / SESSION_FILE, state)


def load_memories(root: Path, state: SessionState) -> list[MemoryRecord]:
    """Every version's memory.json in index order (masked ones included; a version whose record is missing, e.g.
    one killed while it ran, is skipped).

    Raises:
        RunFolderError: a memory.json is corrupt (the message names the file).
    """
    out = []
    for index in state.versions:
        path = memory_path(root, index)
        if path.is_file():
            out.append(read_json(path, MemoryRecord))
    return out
