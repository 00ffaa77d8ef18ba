"""run.json (:class:`RunInfo`) and reading each version's outcome.json (an
:class:`~kernelpilot.records.evaluation.Evaluation`; run folders written before the one-record change are read too)."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from pydantic import BaseModel

from kernelpilot.records.evaluation import Evaluation, Move


def now_utc() -> str:
    """The current UTC time, ISO 8601, seconds (the timestamps of run.json and tune-run.json)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class RunInfo(BaseModel):
    """run.json: what was optimized, where, and how the run ended.

    ``strategy`` proposed the configs (``auto`` unless asked otherwise; ``guided`` in runs from before it), with ``seed``. ``mode`` is ``"cuda"``
    (timed with CUDA events, profiled with ncu), ``"interpreter"`` (Triton interpreter on the CPU: times are not
    measurements) or ``"replay"`` (answers from a cache measured on a GPU). ``floor_ns``/``target_ns`` come from
    roofline.md (None without a spec). ``iterations`` caps the versions after v0; ``budget_s`` caps the search's wall
    seconds. ``baselines_ns`` holds the medians of PyTorch eager and torch.compile on the same inputs, measured once
    (before the search for the guided strategy, whose target stop rule does not stop while one of them is faster than
    the incumbent; after it for ``auto``). ``final`` is the fastest correct candidate and where it came from: the
    search's best version or torch.compile's imported kernel (:class:`kernelpilot.app.candidates.FinalChoice`).

    What ``optimize --resume`` needs to continue the same run: the options given (``timeout_s``, extra
    ``constraints``, ``config_overrides``, ``gpu_requested``, ``benchmark``, ``git``, ``replay``), the search seconds
    spent so far (``search_spent_s``, updated with each version's commit), the UTC start of every later session
    (``resumed_utc``) and, when a session was stopped by a signal, what it was doing (``interrupted``).
    ``finished_utc`` is set only once the final report is written and committed.
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
    iterations: int | None = None
    profile: bool
    started_utc: str
    strategy: str = "guided"
    seed: int = 0
    budget_s: float | None = None
    finished_utc: str | None = None
    floor_ns: float | None = None
    target_ns: float | None = None
    baselines_ns: dict[str, float] = {}
    best_version: int | None = None
    final: dict[str, Any] | None = None
    stop_reason: str = ""
    wall_s: float | None = None
    timeout_s: float | None = None
    constraints: list[str] = []
    config_overrides: dict[str, Any] = {}
    gpu_requested: str | None = None
    benchmark: bool = True
    git: bool = True
    replay: str | None = None
    search_spent_s: float = 0.0
    resumed_utc: list[str] = []
    interrupted: str | None = None


class VersionConfig(BaseModel):
    """``vN/config.json``: what version N was going to run, written before it ran.

    Attributes:
        config: tunable name -> value. move: the change from ``parent`` (None for the first version).
        parent / incumbent: the version it derives from, and the incumbent when it was proposed (indices).
        strategy: what proposed it. source_sha256: the kernel source's hash. shape: the run's shape.
        search_elapsed_s: seconds of the search budget spent when it started (None in runs before resume).
    """

    config: dict[str, Any]
    move: Move | None = None
    parent: int | None = None
    incumbent: int | None = None
    strategy: str = ""
    source_sha256: str = ""
    shape: dict[str, Any] = {}
    search_elapsed_s: float | None = None


class Interruption(BaseModel):
    """``vN/interrupted.json``: version N was in flight when a signal stopped the run; ``--resume`` runs it again.

    Attributes:
        signal: the signal's name (``SIGINT``, ``SIGTERM``). at_utc: when. resume: the command that continues.
    """

    signal: str
    at_utc: str
    resume: str


#: outcome.json's ``status`` before the one-record change -> the Evaluation fields it implies.
_V1_STATUS = {"baseline": True, "accepted": True, "rejected": False, "failed": None}


def outcome_from_json(data: dict[str, Any]) -> Evaluation:
    """An outcome.json as an :class:`Evaluation`; a run folder of the older format (``VersionOutcome``: ``status``
    baseline/accepted/rejected/failed, ``median_ns``, ``reason``) is converted field by field.

    Raises:
        pydantic.ValidationError: the record matches neither format.
    """
    if data.get("status") in _V1_STATUS and "median_ns" in data:
        failure = data.get("failure") or ("ok" if data.get("median_ns") is not None else "runtime_error")
        data = {"config": data["config"], "status": failure, "duration_ns": data.get("median_ns"),
                "iqr_ns": data.get("iqr_ns"), "measured": data.get("is_measurement", True),
                "accepted": _V1_STATUS[data["status"]], "decision": data.get("reason", ""),
                "index": data.get("index"), "parent": data.get("parent"),
                "move": Move.model_validate(data["move"]) if data.get("move") else None,
                **{k: data.get(k) for k in ("pct_of_roofline", "speedup_vs_parent", "bound", "verdict_summary",
                                             "profile_error", "observed", "commit")},
                "speedup_vs_first": data.get("speedup_vs_v0")}
    return Evaluation.model_validate(data)
