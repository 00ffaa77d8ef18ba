"""The records a run keeps besides the measurement models: run.json and each version's outcome.json."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from kernelpilot.search.guided import Move

Status = Literal["baseline", "accepted", "rejected", "failed"]


class RunInfo(BaseModel):
    """run.json: what was optimized, where, and how the run ended.

    ``strategy`` proposed the configs (``guided`` unless asked otherwise), with ``seed``.
    ``mode`` is ``"cuda"`` (timed with CUDA events, profiled with ncu) or ``"interpreter"`` (Triton interpreter on
    the CPU: times are not measurements). ``floor_ns``/``target_ns`` come from roofline.md (None without a spec).
    """

    kernel: str
    kernel_name: str
    reference: str
    source_sha256: str
    shape: dict[str, Any]
    tunables: dict[str, list[Any]]
    compute_unit: str
    mode: str
    device_name: str
    gpu_spec: str | None
    iterations: int
    profile: bool
    started_utc: str
    strategy: str = "guided"
    seed: int = 0
    finished_utc: str | None = None
    floor_ns: float | None = None
    target_ns: float | None = None
    best_version: int | None = None
    stop_reason: str = ""


class VersionOutcome(BaseModel):
    """outcome.json: how one version ended and why.

    ``status``: baseline (v0, correct), accepted (correct and faster than the incumbent beyond noise: interleaved A/B samples, Mann–Whitney + bootstrap CI),
    rejected (correct but not faster, or impossibly fast), failed (incorrect, raised, or crashed). Times in ns.
    ``failure`` is the typed failure of a failed or impossible version, as the search records it
    (:data:`kernelpilot.search.model.FAILURES`: ``compile_error``, ``runtime_error``, ``illegal_memory_access``,
    ``timeout``, ``worker_crash``, ``nan``, ``wrong_result``, ``impossible``), None otherwise.
    """

    index: int
    config: dict[str, Any]
    parent: int | None
    move: Move | None
    status: Status
    reason: str
    correct: bool
    median_ns: float | None = None
    iqr_ns: float | None = None
    is_measurement: bool = False
    speedup_vs_parent: float | None = None
    speedup_vs_v0: float | None = None
    pct_of_roofline: float | None = None
    bound: str | None = None
    verdict_summary: str | None = None
    profile_error: str | None = None
    failure: str | None = None
    observed: str | None = None
    commit: str | None = None
