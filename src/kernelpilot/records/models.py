"""run.json (:class:`RunInfo`) and reading each version's outcome.json (an
:class:`~kernelpilot.records.evaluation.Evaluation`; run folders written before the one-record change are read too)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kernelpilot.records.evaluation import Evaluation, Move


class RunInfo(BaseModel):
    """run.json: what was optimized, where, and how the run ended.

    ``strategy`` proposed the configs (``guided`` unless asked otherwise), with ``seed``. ``mode`` is ``"cuda"``
    (timed with CUDA events, profiled with ncu), ``"interpreter"`` (Triton interpreter on the CPU: times are not
    measurements) or ``"replay"`` (answers from a cache measured on a GPU). ``floor_ns``/``target_ns`` come from
    roofline.md (None without a spec). ``iterations`` caps the versions after v0; ``budget_s`` caps the search's wall
    seconds. ``baselines_ns`` holds the medians of PyTorch eager and torch.compile on the same inputs, measured before
    the search (the target stop rule does not stop while one of them is faster than the incumbent).
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
    stop_reason: str = ""
    wall_s: float | None = None


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
