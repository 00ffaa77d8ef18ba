"""The one record: an :class:`Evaluation` of one config at one shape on one device.

``kernelpilot tune`` keeps a list of them (the cache holds them line by line, ``tune.json`` holds them all);
``kernelpilot optimize`` writes one per version as ``vN/outcome.json``. Whatever produced it — a worker on a GPU,
the Triton interpreter, a replay of a cache — the record has the same fields, and every report renders it the same
way. A failure is data, never an exception: ``status`` names it (:data:`FAILURES`) and ``objective`` is infinite.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_validator

from kernelpilot.records.samples import unpack_samples

#: Decimal places of the host wall seconds an evaluation writes (``wall_s``, ``compile_s``, ``phases_s``): the
#: microsecond. ``time.monotonic`` differences printed whole (``0.0024977200009743683``) carried about 10 digits of
#: float noise each, some 200 bytes of each version's outcome.json (session 13, issue 25 "Records that scale"); kernel
#: times (``duration_ns``, samples) are written whole.
HOST_S_DIGITS = 6

__all__ = ["FAILURES", "HOST_S_DIGITS", "INTEGRITY_FAILURES", "Candidate", "Evaluation", "Move", "Status",
           "VersionStatus",
           "change_label", "change_sentence", "config_changes", "config_key", "version_change"]

#: ``ok``: correct and timed. The failures, each a typed outcome:
#:
#: * ``invalid_config`` — outside TUNABLES or breaking a constraint (never run);
#: * ``pruned`` — removed before any GPU time by static inspection (shared memory over the per-block limit,
#:   spills over the threshold, occupancy under the floor); ``message`` says which;
#: * ``compile_error`` — the kernel did not compile for this config (Triton ``CompilationError``,
#:   ``OutOfResources``, or a ``ValueError`` from ``run_kernel`` refusing the config);
#: * ``runtime_error`` — any other exception while running the kernel;
#: * ``illegal_memory_access`` — the CUDA context was poisoned (illegal address, misaligned address,
#:   unspecified launch failure); the worker that saw it is replaced;
#: * ``timeout`` — the worker did not answer within the per-config time limit (a hang); it is killed;
#: * ``worker_crash`` — the worker process died (segfault, ``sys.exit``, OOM kill) without answering;
#: * ``nan`` — an output held NaN or Inf where the reference did not;
#: * ``wrong_result`` — outputs outside the tolerance (docs/measuring.md, "Correctness");
#: * ``impossible`` — faster than the speed-of-light floor (a timing bug or a kernel that skips work); kept with
#:   its time for the record, never ranked.
#:
#: Integrity failures (docs/measuring.md, "The kernel is an adversary"), each named after the step that caught it:
#: * ``timer_tampered`` — the kernel file replaced a function the measurement uses (:mod:`kernelpilot.measure.guard`);
#: * ``aliased`` — an output shares memory with an input, or the reference returned a tensor of the kernel's;
#: * ``inputs_mutated`` — the kernel changed an input it does not declare in place;
#: * ``wrong_at_shape`` — correct at the declared shape, wrong (or raising) at a derived one;
#: * ``tolerance_refused`` — the file's tolerance is past the caps, or loosened under ``--strict``;
#: * ``stale_result`` — wrong on values written into the same tensors after timing (a cached or pre-computed result);
#: * ``wrong_when_timed`` — the outputs of a timed launch, kept in secret, differ from the reference on the values that
#:   launch saw (a kernel that behaves differently when timed is wrong on the launches that were timed);
#: * ``off_timer_work`` — GPU work outside the timed region (an unjoined stream);
#: * ``kernel_not_launched`` — none of the file's own kernels ran (the work was done by something else).
#: * ``not_in_cache`` — a replay's cache holds no measurement of the config: skipped, with a note (never a version).
Status = Literal["ok", "invalid_config", "pruned", "not_in_cache", "compile_error", "runtime_error", "illegal_memory_access",
                 "timeout", "worker_crash", "nan", "wrong_result", "impossible", "timer_tampered", "aliased",
                 "inputs_mutated", "wrong_at_shape", "tolerance_refused", "stale_result", "wrong_when_timed",
                 "off_timer_work", "kernel_not_launched"]
FAILURES: tuple[str, ...] = (
    "invalid_config", "pruned", "not_in_cache", "compile_error", "runtime_error", "illegal_memory_access", "timeout",
    "worker_crash", "nan", "wrong_result", "impossible", "timer_tampered", "aliased", "inputs_mutated",
    "wrong_at_shape", "tolerance_refused", "stale_result", "wrong_when_timed", "off_timer_work",
    "kernel_not_launched",
)
#: The integrity failures: a kernel file that earns one is suspect as a whole, not only the config.
INTEGRITY_FAILURES: tuple[str, ...] = FAILURES[FAILURES.index("timer_tampered"):]
#: How a version of ``kernelpilot optimize`` ended, derived from its evaluation (:attr:`Evaluation.version_status`).
VersionStatus = Literal["baseline", "accepted", "rejected", "failed"]


def config_key(config: dict[str, Any]) -> str:
    """A canonical string for a config: its JSON with sorted keys (``{"BLOCK": 64, "num_warps": 4}``).

    Two configs with the same values give the same key whatever their key order; raises nothing.
    """
    return json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))



def config_changes(base: dict[str, Any], config: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Every tunable whose value differs between ``base`` and ``config``, as ``(name, old, new)`` in ``config``'s key
    order, then names only ``base`` has (their new value ``None``). The one source of a version's change label: a
    label is computed from the two configs, never taken from what a strategy declared it changed. Raises nothing."""
    names = list(config) + [k for k in base if k not in config]
    return [(k, base.get(k), config.get(k)) for k in names
            if base.get(k) != config.get(k) or (k in base) != (k in config)]


def change_label(base: dict[str, Any] | None, config: dict[str, Any]) -> str:
    """The short change label of a version (tables, commit subjects): ``BLOCK 64→128``; several tunables listed
    with commas (``BLOCK 64→128, num_warps 4→8``); ``baseline`` without a base; ``no tunable changed`` when the
    configs are equal. Computed from the configs (:func:`config_changes`); raises nothing."""
    if base is None:
        return "baseline"
    changes = config_changes(base, config)
    return ", ".join(f"{k} {old}→{new}" for k, old, new in changes) or "no tunable changed"


def change_sentence(base: dict[str, Any] | None, config: dict[str, Any]) -> str:
    """The counted change of a version (hypothesis.md, report page, experience log): ``One variable: BLOCK 64→128``,
    ``2 variables: BLOCK 64→128, num_warps 4→8`` (a step that changes several tunables says so), ``No variable
    changed`` for equal configs, ``Baseline`` without a base. Computed from the configs; raises nothing."""
    if base is None:
        return "Baseline"
    n = len(config_changes(base, config))
    if n == 0:
        return "No variable changed: the config equals its parent's"
    head = "One variable" if n == 1 else f"{n} variables"
    return f"{head}: {change_label(base, config)}"

class Move(BaseModel):
    """One proposed change from a base config: ``tunable`` from ``old`` to ``new``, the rule that chose it and what
    should move (the hypothesis). A strategy's jump over several tunables joins their names with ``+`` and holds
    tuples in ``old``/``new`` (``direction="jump"``)."""

    tunable: str
    old: Any
    new: Any
    direction: str
    rule: str
    why: str
    expected_metric: str
    expected: str

    def apply(self, config: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``config`` with this move applied (a jump's ``+``-joined tunables get their ``new`` tuple).
        Raises nothing."""
        if self.direction == "jump" and isinstance(self.new, (tuple, list)):
            return {**config, **dict(zip(self.tunable.split("+"), self.new))}
        return {**config, self.tunable: self.new}

    def undo(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with this move undone: the config it was made from (a jump's ``+``-joined tunables get their
        ``old`` tuple back). Raises nothing."""
        if self.direction == "jump" and isinstance(self.old, (tuple, list)):
            return {**config, **dict(zip(self.tunable.split("+"), self.old))}
        return {**config, self.tunable: self.old}

    @property
    def label(self) -> str:
        """``BLOCK_N 256→512``; for a jump over several tunables ``BLOCK_M+num_warps (64, 4)→(128, 8)``: what the
        strategy declared. Records show :func:`change_label` of the version's and its parent's configs instead."""
        return f"{self.tunable} {self.old}→{self.new}"

    @classmethod
    def between(cls, base: dict[str, Any], config: dict[str, Any], tunables: dict[str, list[Any]],
                strategy: str) -> Move:
        """The change from ``base`` to ``config`` when a strategy (not the bottleneck card) proposed it.

        One changed tunable gives a one-variable move (``up``/``down`` by the tunable's value order); several give a
        ``jump``. Its hypothesis is exploration: the effect is unknown until measured. Raises nothing.
        """
        changed = [k for k in config if base.get(k) != config[k]]
        unknown = "unknown: exploration, measured to find out"
        if len(changed) == 1:
            name = changed[0]
            values = tunables.get(name, [])
            up = (values.index(config[name]) > values.index(base[name])
                  if base.get(name) in values and config[name] in values else True)
            return cls(tunable=name, old=base.get(name), new=config[name], direction="up" if up else "down",
                       rule=f"strategy:{strategy}", why=f"the {strategy} strategy proposed this step (not a card move)",
                       expected_metric="duration", expected=unknown)
        return cls(tunable="+".join(changed), old=tuple(base.get(k) for k in changed),
                   new=tuple(config[k] for k in changed), direction="jump", rule=f"strategy:{strategy}",
                   why=f"the {strategy} strategy proposed a config {len(changed)} tunables away",
                   expected_metric="duration", expected=unknown)


class Evaluation(BaseModel):
    """The outcome of one config at one shape on one device (times in ns, durations of work in s).

    Attributes:
        config: tunable name -> value.
        status: ``ok`` or one of :data:`FAILURES`.
        duration_ns: median kernel time (``ok`` and ``impossible`` only): the median the decision used.
        iqr_ns: inter-quartile range of the samples.
        samples_ns: the raw per-launch times (kept so later decisions can test against them); a version's
            outcome.json may store them as ``samples_event_ns`` (:mod:`kernelpilot.records.samples`), read back
            exactly.
        message: why it failed (the exception's text, the tolerance broken), or a note (``raced out ...``).
        measured: False when the time came from the Triton interpreter (not a measurement).
        wall_s: wall seconds this evaluation cost in the worker (compile + check + timing): what budgets count.
        compile_s: seconds of the first launch (compile or cache hit + module load), when known.
        phases_s: where the seconds went: one entry per stage the worker ran, keyed by the stage's name
            (``first_launch``, ``check``, ``timing``, ``recheck`` ...: :data:`kernelpilot.search.stages.STAGES`),
            then ``audit``, ``ab`` (the A/B decision), ``evidence`` (ncu or light card), ``record`` (files and git).
        static: compile facts when known (``registers_per_thread``, ``spills``, ``shared_bytes``, ...).
        card: the bottleneck card's JSON when one was made for this config (the guided strategy's evidence, also
            when replayed).
        cached: True when the answer came from the cache (then ``wall_s`` is what it cost when measured).
        timeout_s: the per-config time limit (s) the evaluation ran under, None when unknown (a replay, a cache
            written before limits were recorded): a cached ``timeout`` is run again under a larger limit.
        worker: which worker produced it (``cpu``, ``cuda:0``, ``replay`` ...).
        accepted: True when this config became the incumbent (the first correct config, or faster than the
            incumbent beyond noise), False when it did not, None before it was judged or when it failed.
        decision: the reason of that judgement (one sentence); ``decision_detail`` the numbers behind it
            (:class:`kernelpilot.search.stats.Decision` as JSON: ratio, CI, p-value, sample counts).
        index / parent / move: ``optimize``'s version number (None in ``tune``, and for a config answered without a
            run — ``invalid_config``, ``pruned``, a compile-ahead failure —, which is a row of the run's
            ``skipped.jsonl``, not a version), the version it derives from and the change.
        seq: the place of this answer in the search's evaluation order (0, 1, ...; versions and skipped configs
            together), None when not recorded (a cache line; a run before ``seq`` existed).
        pct_of_roofline: speed-of-light floor / duration × 100 (None without a roofline or a measurement).
        speedup_vs_parent / speedup_vs_first: the parent's (first version's) median / this median.
        bound / verdict_summary: the card's bottleneck class and summary, when a card was made.
        profile_error: why there is no ncu profile (tool missing, counters refused, profiling off ...).
        observed: how the metric the hypothesis named moved between the parent's and this profile.
        floor_check: the floor's bytes held against the DRAM bytes ncu measured for this config, as JSON
            (:class:`kernelpilot.profile.floor_check.FloorBytesCheck`: ``floor_bytes``, ``dram_bytes``, ``ratio``,
            ``verdict`` confirmed / over_counted / unknown, ``message``); None without an ncu profile.
        commit: the git commit that recorded this version (accepted versions).
        stages_run / stages_skipped: the stages of the stage table (:data:`kernelpilot.search.stages.STAGES`) that
            checked this config, and those that did not with why (``device_activity``: needs a GPU; ``floor``:
            interpreted, not a measurement; the stages after a race was lost); empty when not recorded (a cache line
            written before they were, a replay).
        records: the worker's full ``correctness`` and ``timing`` records (JSON dicts) for the version folder;
            never serialized (the cache and ``tune.json`` keep the summary above).
    """

    model_config = ConfigDict(extra="ignore")

    config: dict[str, Any]
    status: Status
    duration_ns: float | None = None
    iqr_ns: float | None = None
    samples_ns: list[float] = Field(default_factory=list)
    message: str = ""
    measured: bool = True
    wall_s: float = 0.0
    compile_s: float | None = None
    phases_s: dict[str, float] = Field(default_factory=dict)
    static: dict[str, Any] = Field(default_factory=dict)
    card: dict[str, Any] | None = None
    cached: bool = False
    timeout_s: float | None = None
    worker: str = ""
    accepted: bool | None = None
    decision: str = ""
    decision_detail: dict[str, Any] | None = None
    index: int | None = None
    seq: int | None = None
    parent: int | None = None
    move: Move | None = None
    pct_of_roofline: float | None = None
    speedup_vs_parent: float | None = None
    speedup_vs_first: float | None = None
    bound: str | None = None
    verdict_summary: str | None = None
    profile_error: str | None = None
    observed: str | None = None
    floor_check: dict[str, Any] | None = None
    commit: str | None = None
    stages_run: list[str] = Field(default_factory=list)
    stages_skipped: dict[str, str] = Field(default_factory=dict)
    records: dict[str, Any] | None = Field(default=None, exclude=True)

    def as_written(self) -> Evaluation:
        """This evaluation as its records hold it: host seconds (``wall_s``, ``compile_s``, ``phases_s``) to the
        microsecond (:data:`HOST_S_DIGITS`), everything else unchanged (``records`` included). What an API result
        carries, so that it equals the evaluation read back from its folder."""
        return self.model_copy(update={"wall_s": self._host_seconds(self.wall_s),
                                       "compile_s": self._host_seconds(self.compile_s),
                                       "phases_s": self._phase_seconds(self.phases_s)})

    @field_serializer("wall_s", "compile_s")
    def _host_seconds(self, value: float | None) -> float | None:
        """Host wall seconds are written to the microsecond (:data:`HOST_S_DIGITS`)."""
        return None if value is None else round(value, HOST_S_DIGITS)

    @field_serializer("phases_s")
    def _phase_seconds(self, value: dict[str, float]) -> dict[str, float]:
        return {k: round(v, HOST_S_DIGITS) for k, v in value.items()}

    @model_validator(mode="before")
    @classmethod
    def _unpack(cls, data: Any) -> Any:
        """A version's outcome.json may hold its samples as ``samples_event_ns``
        (:mod:`kernelpilot.records.samples`): read back as the exact ``samples_ns``."""
        return unpack_samples(data)

    @property
    def ok(self) -> bool:
        """True when the config ran correctly and was timed (``status == "ok"``)."""
        return self.status == "ok" and self.duration_ns is not None

    @property
    def objective(self) -> float:
        """What strategies minimise: ``duration_ns`` for ``ok`` evaluations, ``inf`` for every failure."""
        return float(self.duration_ns) if self.ok else math.inf  # type: ignore[arg-type]

    @property
    def key(self) -> str:
        """:func:`config_key` of this evaluation's config."""
        return config_key(self.config)

    @property
    def raced_out(self) -> bool:
        """True when timing stopped early because the config was clearly slower than the incumbent."""
        return self.ok and self.message.startswith("raced out")

    @property
    def version_status(self) -> VersionStatus:
        """How the version ended: ``failed`` (any failure status), ``baseline`` (accepted first version),
        ``accepted`` (replaced the incumbent), else ``rejected`` (correct, not faster beyond noise)."""
        if not self.ok:
            return "failed"
        if self.accepted:
            return "baseline" if self.move is None and self.index in (0, None) else "accepted"
        return "rejected"



def version_change(ev: Evaluation, versions: dict[int, Evaluation], *, counted: bool = False) -> str:
    """The change of version ``ev`` from its recorded parent, computed from the two configs (:func:`change_label`,
    or :func:`change_sentence` when ``counted``), never from ``ev.move``'s declared tunable.

    Args:
        ev: the version. versions: evaluations by their ``index`` (the run's versions).
        counted: the counted sentence (``One variable: ...``) instead of the short label.

    Returns:
        ``baseline`` (``Baseline`` counted) for a version without a parent; ``change from vN (vN is not on
        record)`` when the parent is missing from ``versions``. Raises nothing.
    """
    if ev.parent is None:
        return "Baseline" if counted else "baseline"
    parent = versions.get(ev.parent)
    if parent is None:
        return f"change from v{ev.parent} (v{ev.parent} is not on record)"
    return (change_sentence if counted else change_label)(parent.config, ev.config)

class Candidate(dict):  # type: ignore[type-arg]
    """A config (a plain dict of tunable -> value, so any evaluate function accepts it) with the move that produced
    it: the guided strategy passes the card's move, so the engine never re-derives it; without one the evaluator
    derives a move from the nearest evaluated config."""

    def __init__(self, config: dict[str, Any], move: Move | None = None) -> None:
        super().__init__(config)
        self.move = move

    @property
    def config(self) -> dict[str, Any]:
        """The config as a plain dict."""
        return dict(self)
