"""What a search evaluates and records: one :class:`Evaluation` per config, typed failures, and the budget.

Every layer of the search speaks these types (Kernel Tuner's layering: strategy → runner → device → back end):

* a **strategy** (``search/strategies``) proposes configs and calls an ``evaluate(config) -> Evaluation``
  function until it is done or that function raises :class:`BudgetExhausted`;
* the **tuner** (``search/tune.py``) wraps the runner's evaluate with the cache, the budget and the
  incumbent's statistics;
* the **runner** (``search/worker.py``, or ``search/cache.py``'s replay) produces the :class:`Evaluation`.

A failed config is data, never an exception: its ``status`` names the failure (:data:`FAILURES`) and its
``objective`` is infinite, so every strategy can rank it and move on.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FAILURES",
    "Budget",
    "BudgetExhausted",
    "Evaluate",
    "Evaluation",
    "Status",
    "config_key",
    "evaluate_many",
    "parallelism",
]

#: ``ok``: correct and timed. The failures, each a typed outcome recorded in the cache:
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
#: * ``worker_crash`` — the worker process died (segfault, OOM kill) without answering;
#: * ``nan`` — an output held NaN or Inf where the reference did not;
#: * ``wrong_result`` — outputs outside the tolerance (docs/PRODUCT.md "Correctness");
#: * ``impossible`` — faster than the speed-of-light floor of the measured ceilings (a timing bug or a kernel
#:   that skips work); kept with its time for the record, never ranked.
Status = Literal[
    "ok",
    "invalid_config",
    "pruned",
    "compile_error",
    "runtime_error",
    "illegal_memory_access",
    "timeout",
    "worker_crash",
    "nan",
    "wrong_result",
    "impossible",
]
FAILURES: tuple[str, ...] = (
    "invalid_config", "pruned", "compile_error", "runtime_error", "illegal_memory_access", "timeout",
    "worker_crash", "nan", "wrong_result", "impossible",
)


def config_key(config: dict[str, Any]) -> str:
    """A canonical string for a config: its JSON with sorted keys (``{"BLOCK": 64, "num_warps": 4}``).

    Two configs with the same values give the same key whatever their key order; raises nothing.
    """
    return json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))


class Evaluation(BaseModel):
    """The outcome of one config at one shape on one device.

    Attributes:
        config: tunable name -> value.
        status: ``ok`` or one of :data:`FAILURES`.
        duration_ns: median kernel time in nanoseconds (``ok`` and ``impossible`` only).
        iqr_ns: inter-quartile range of the samples, ns.
        samples_ns: the raw per-launch times, ns (kept so later decisions can test against them).
        message: why it failed (the exception's text, the tolerance broken), or a note.
        measured: False when the time came from the Triton interpreter (not a measurement).
        wall_s: wall seconds this evaluation cost (compile + check + timing), the unit budgets count.
        compile_s: seconds spent compiling, when known.
        static: compile facts when known (``registers_per_thread``, ``spills``, ``shared_bytes``, ...).
        card: the bottleneck card's compact form for this config when one was made (class, suggested
            changes); used by the guided strategy, also when replayed.
        cached: True when the answer came from the cache (then ``wall_s`` is what it cost when measured).
        worker: which worker produced it (``cpu``, ``cuda:0``, ``replay`` ...).
        accepted: set by the tuner: True when this config replaced the incumbent (faster beyond noise,
            :func:`kernelpilot.search.stats.decide`), False when it did not, None before it was judged.
        decision: the reason of that judgement (one sentence), when judged.
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
    static: dict[str, Any] = Field(default_factory=dict)
    card: dict[str, Any] | None = None
    cached: bool = False
    worker: str = ""
    accepted: bool | None = None
    decision: str = ""

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


#: A runner: config -> evaluation. Never raises for a bad config (that is a failure status); may raise
#: :class:`BudgetExhausted` when wrapped by the tuner's budget.
Evaluate = Callable[[dict[str, Any]], Evaluation]


def parallelism(evaluate: Evaluate) -> int:
    """How many configs ``evaluate`` can run at once: its ``parallel`` attribute (the tuner's: one per worker,
    i.e. per GPU or Ray actor), else 1. Strategies propose that many configs per step."""
    return max(1, int(getattr(evaluate, "parallel", 1) or 1))


def evaluate_many(evaluate: Evaluate, configs: list[dict[str, Any]]) -> list[Evaluation]:
    """Evaluate several configs, in parallel over the workers when ``evaluate`` offers ``many`` (the tuner), else
    one after the other; results in input order, each judged as if evaluated alone in that order.

    Raises:
        BudgetExhausted: from ``evaluate`` (propagated; what was measured before is recorded by the tuner).
    """
    many = getattr(evaluate, "many", None)
    return many(configs) if many is not None else [evaluate(c) for c in configs]


class BudgetExhausted(Exception):
    """Raised by the tuner's evaluate when the search's budget is spent; strategies let it propagate."""


class Budget(BaseModel):
    """How much a search may spend: evaluations and/or wall seconds (either may be None for no limit).

    Only evaluations that were not answered from the cache count against ``max_evals`` and ``max_s``
    (a cached answer costs nothing), so a rerun goes further, not shorter.

    Attributes:
        max_evals: most new evaluations, or None.
        max_s: most wall seconds from :meth:`start`, or None.
        evals: new evaluations so far.
        started_s: ``time.monotonic()`` at :meth:`start`.
    """

    max_evals: int | None = None
    max_s: float | None = None
    evals: int = 0
    started_s: float | None = None

    def start(self) -> Budget:
        """Start the clock (idempotent) and return self."""
        if self.started_s is None:
            self.started_s = time.monotonic()
        return self

    def elapsed_s(self) -> float:
        """Seconds since :meth:`start` (0 before it)."""
        return 0.0 if self.started_s is None else time.monotonic() - self.started_s

    def exhausted(self) -> bool:
        """True when the evaluation count or the time limit is reached."""
        if self.max_evals is not None and self.evals >= self.max_evals:
            return True
        return self.max_s is not None and self.elapsed_s() >= self.max_s

    def charge(self) -> None:
        """Count one new (uncached) evaluation."""
        self.evals += 1

    def check(self) -> None:
        """Raise :class:`BudgetExhausted` if the budget is spent (call before starting an evaluation)."""
        if self.exhausted():
            raise BudgetExhausted(f"budget spent: {self.evals} evaluations, {self.elapsed_s():.1f} s")
