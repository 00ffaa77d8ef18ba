"""run.json (:class:`RunInfo`) and reading each version's outcome.json (an
:class:`~kernelpilot.records.evaluation.Evaluation`; run folders written before the one-record change are read too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from kernelpilot.facts import utc_now_iso
from kernelpilot.records.cards import read_texts, unpack_card
from kernelpilot.records.evaluation import Evaluation, Move
from kernelpilot.records.samples import unpack_samples


def now_utc() -> str:
    """The current UTC time, ISO 8601, seconds (the timestamps of run.json and tune-run.json)."""
    return utc_now_iso()


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
    ``finished_utc`` is set only once the final report is written and committed. ``options``: the run's
    :class:`kernelpilot.options.OptimizeOptions` as given, as JSON (None in runs from before it was recorded),
    validated back whole by ``--resume``; the fields above hold the values resolved from them.
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
    #: what the times are measured on (``cuda NVIDIA H200``, ``cpu``, ``replay``:
    #: :attr:`kernelpilot.app.context.RunContext.measured_on`); ``--resume`` refuses another device. None in runs
    #: from before it was recorded.
    measured_on: str | None = None
    #: valid configs of the search space (after the file's and the command's constraints, ``SearchSpace.size``):
    #: what the versions are a part of. None in runs from before it was recorded.
    space_size: int | None = None
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
    options: dict[str, Any] | None = None
    #: the rule that accepts a version over its incumbent, in words
    #: (:data:`kernelpilot.report.hypothesis.DECISION_RULE`), once per run: each hypothesis.md names its incumbent
    #: and points here. None in runs from before session 13, whose hypotheses spell it out.
    decision_rule: str | None = None
    #: where the seconds before the search went, in order (:attr:`kernelpilot.app.context.RunContext.setup_s`, then
    #: ``env``, ``records``: the set-up commit, ``compile_ahead``: the pool started, ``runner``: the workers
    #: ready); empty in runs from before session 14
    setup_s: dict[str, float] = {}


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


#: The run folder's table of configs answered without a run (one JSON line each; :class:`SkippedRow`).
SKIPPED_FILE = "skipped.jsonl"


class SkippedRow(BaseModel):
    """One line of ``RUN/skipped.jsonl``: a config the search answered without running it, so no version.

    Attributes:
        seq: its place in the evaluation order (versions' ``seq`` in their outcome.json share the numbering).
        config: tunable name -> value. status: ``invalid_config``, ``pruned``, or the compile-ahead failure
            (``compile_error``, ``timeout`` ...). reason: why (the constraint broken, the static verdict).
        search_elapsed_s: seconds of the search budget spent when it was answered.
        static: the binary's facts when static pruning compiled it (registers, spills ...), else empty.
    """

    model_config = ConfigDict(extra="forbid")

    seq: int
    config: dict[str, Any]
    status: str
    reason: str = ""
    search_elapsed_s: float | None = None
    static: dict[str, Any] = {}

    @classmethod
    def of(cls, ev: Evaluation, elapsed_s: float | None) -> SkippedRow:
        """The row of a skipped evaluation (``ev.seq`` set). Raises ValueError when ``ev`` has no ``seq``."""
        if ev.seq is None:
            raise ValueError("a skipped config's row needs its seq")
        return cls(seq=ev.seq, config=ev.config, status=ev.status, reason=ev.message,
                   search_elapsed_s=None if elapsed_s is None else round(elapsed_s, 3), static=ev.static)

    def line(self) -> str:
        """The row as one compact JSON line with its newline."""
        return self.model_dump_json(exclude_defaults=True) + "\n"

    def evaluation(self) -> Evaluation:
        """The row as the evaluator's answer (``index`` None), for ``optimize --resume``.

        Raises:
            pydantic.ValidationError: ``status`` is not a status of :data:`kernelpilot.records.evaluation.FAILURES`.
        """
        return Evaluation(config=self.config, status=self.status, message=self.reason,  # type: ignore[arg-type]
                          static=self.static, seq=self.seq)


def read_skipped(text: str) -> tuple[list[SkippedRow], list[str]]:
    """The rows of a ``skipped.jsonl`` text, and a problem per line that is not a valid row (``line 3: ...``); a
    status that is ``ok`` or no failure status is a problem (a skipped config never ran). Raises nothing."""
    from kernelpilot.records.evaluation import FAILURES

    rows: list[SkippedRow] = []
    bad: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = SkippedRow.model_validate_json(line)
        except ValueError as exc:
            bad.append(f"line {n}: not a skipped row ({str(exc).splitlines()[0][:120]})")
            continue
        if row.status not in FAILURES:
            bad.append(f"line {n}: status {row.status!r} is not a failure: a skipped config never ran")
            continue
        rows.append(row)
    return rows, bad


def restored(vdir: Path, ev: Evaluation) -> Evaluation:
    """A version's outcome ``ev`` (read from ``vdir/outcome.json``) with what that file leaves to the version's other
    files (:mod:`kernelpilot.app.recorder` keeps one copy of each): the move in ``config.json`` (when outcome.json
    has no ``move`` key), the samples in ``timing.json``, the bottleneck card in ``verdict.json`` (its pattern
    entries completed from the run's ``patterns.json``), each when the file can be read; else ``ev`` as read.
    Raises nothing."""
    update: dict[str, Any] = {}
    try:
        if "move" not in ev.model_fields_set and (vdir / "config.json").is_file():
            update["move"] = VersionConfig.model_validate_json((vdir / "config.json").read_text()).move
    except (ValueError, OSError):
        pass
    try:
        if not ev.samples_ns and ev.duration_ns is not None and (vdir / "timing.json").is_file():
            timing = unpack_samples(json.loads((vdir / "timing.json").read_text()))
            update["samples_ns"] = [float(x) for x in timing["samples_ns"]]
    except (ValueError, KeyError, TypeError, OverflowError, OSError):
        pass
    try:
        if ev.card is None and (vdir / "verdict.json").is_file():
            card = unpack_card(json.loads((vdir / "verdict.json").read_text()), read_texts(vdir.parent))
            update["card"] = card if isinstance(card, dict) else None
    except (ValueError, OSError):
        pass
    return ev.model_copy(update=update) if update else ev


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
