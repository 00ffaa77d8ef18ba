"""The one evaluation pipeline: every command that evaluates configs (``optimize``, ``tune``) goes through
:class:`Evaluator`.

A strategy (``search/strategies``) calls the evaluator like a function, with a config or a :class:`Candidate` (a
config with the :class:`~kernelpilot.records.evaluation.Move` that produced it). Per call the evaluator:

1. answers a config it has already answered from its memory (no config runs twice);
2. checks the stop rules (:class:`StopRule`: the target met, the version cap) and the :class:`Budget`, raising
   :class:`~kernelpilot.search.model.BudgetExhausted` when the search must end — before any new work;
3. answers ``invalid_config`` (outside the space) and ``pruned`` (the :class:`Pruner`'s static verdict) without a
   GPU;
4. otherwise takes the answer measured ahead (a parallel batch), else the cache's, else the runner's (an isolated
   worker, a Ray actor or a replay): a new answer is appended to the cache before anyone reads it;
5. judges it against the incumbent with the one decision rule: a correct config replaces the incumbent only when
   its median is lower **and** interleaved A/B samples of both, taken by the runner on the same inputs, are faster
   beyond noise (one-sided Mann–Whitney U and a bootstrap CI of the ratio of medians entirely below 1:
   :func:`kernelpilot.search.stats.decide`); clearly slower candidates are raced out after a few samples;
6. asks the :class:`EvidenceSource` for a bottleneck card of each new incumbent (ncu, else a light card): the guided
   strategy's evidence;
7. hands the result to the :class:`Recorder` (``optimize``'s run folder and git history), which also wrote the
   version's hypothesis before the run.

Every answer gets ``seq``, its place in the evaluation order (:attr:`Evaluator.order`). A config the runner measured
(a worker, a Ray actor, a replay, the cache, a batch measured ahead) is a *version*: ``index`` numbers the versions
0, 1, ... (:attr:`Evaluator.versions`), and the recorder writes it before it runs. A config answered without a run
(``invalid_config``, ``pruned``, a compile-ahead failure) is *skipped*: ``index`` None, one row of the recorder's
table (``Recorder.skipped``).

This is Kernel Tuner's strategy → runner layering, with one place for what sits between them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelpilot.engine.evidence import CARD_FIELDS, card_in_thread, timed_evidence
from kernelpilot.engine.seams import EvidenceSource, Pruner, PrunerBase, Recorder, RecorderBase
from kernelpilot.engine.stops import MaxVersions, StopRule, StopSearch, TargetMet
from kernelpilot.fmt import format_duration_ns
from kernelpilot.progress import ProgressLine, Step
from kernelpilot.records.evaluation import Candidate, Evaluation, Move, config_key
from kernelpilot.search.cache_trust import SHORT_TIMING, race_stored
from kernelpilot.search.model import Budget

if TYPE_CHECKING:
    from kernelpilot.engine.plan_ahead import PlanAhead
    from kernelpilot.engine.runner import Runner
    from kernelpilot.hardware.roofline import Roofline
    from kernelpilot.search.space import SearchSpace

__all__ = ["Candidate", "EvidenceSource", "Evaluator", "IncumbentChange", "Pruner", "PrunerBase", "Recorder",
           "RecorderBase", "StopRule", "StopSearch", "TargetMet", "MaxVersions"]


class IncumbentChange(BaseModel):
    """One change of the incumbent: after ``evaluations`` evaluations, ``config`` at ``duration_ns``, and why."""

    evaluations: int
    config: dict[str, Any]
    duration_ns: float
    decision: str


#: How many of the latest versions (besides the incumbent) a config with no move of its own is derived from: the
#: nearest of all would cost O(versions) per evaluation, quadratic over a search of 10,000 configs.
NEAREST_AMONG = 256

class Evaluator:
    """The evaluate function handed to a strategy (see the module docstring for what it does per call).

    Args:
        space: the search space.
        runner: the :class:`~kernelpilot.engine.runner.Runner` (isolated workers, Ray actors, or a replay).
        cache: an :class:`~kernelpilot.search.cache.EvaluationCache` (None: no cache; a replay needs none).
        budget: evaluations and/or seconds (only new evaluations count).
        pruner: static pruning (None: every valid config is measured).
        evidence: bottleneck cards for new incumbents (None: no card).
        recorder: the records: a version per measured config, a row per skipped one (None: none).
        stop: stop rules checked before every new evaluation.
        roofline: for ``pct_of_roofline`` (None: not computed).
        ab_samples: interleaved samples per side for a replacement decision (0: decide on stored samples).
        race: race clearly slower candidates out after a few samples.
        strategy: the strategy's name (in derived moves).
        tunables: the kernel's TUNABLES (for derived moves' directions).
        log: progress callback: one :class:`~kernelpilot.progress.ProgressLine` per evaluation (its ``step``: the
            evaluations made of :meth:`total_estimate`, the best time, the budget's clock).
        unmeasured_leads: False: an interpreted answer (``measured`` False) never replaces an incumbent (session).
    """

    def __init__(self, space: SearchSpace, runner: Runner, *, cache: Any = None, budget: Budget | None = None,
                 pruner: Pruner | None = None, evidence: EvidenceSource | None = None, recorder: Recorder | None = None,
                 stop: Sequence[StopRule] = (), roofline: Roofline | None = None, ab_samples: int = 30,
                 race: bool = True, strategy: str = "", log: Callable[[str], None] | None = None,
                 unmeasured_leads: bool = True) -> None:
        self.space, self.runner, self.cache = space, runner, cache
        self.budget = (budget or Budget()).start()
        self.pruner, self.evidence, self.recorder, self.stop = pruner, evidence, recorder, list(stop)
        self.roofline, self.ab_samples, self.race, self.strategy = roofline, ab_samples, race, strategy
        self.log, self.unmeasured_leads = log or (lambda _msg: None), unmeasured_leads
        self.seen: dict[str, Evaluation] = {}
        #: every answer in evaluation order (``order[i].seq == i``); :attr:`versions` the measured ones
        self.order: list[Evaluation] = []
        #: the versions: answers the runner measured (``versions[i].index == i``)
        self.versions: list[Evaluation] = []
        self.incumbent: Evaluation | None = None
        self.history: list[IncumbentChange] = []
        self.n_new = 0
        self.device_s = 0.0
        #: results measured ahead of the strategy's call (a batch over several workers, or a known plan), by key
        self.ready: dict[str, Evaluation] = {}
        #: the per-config time limit of the runner's workers (s), recorded with each new evaluation; a cached
        #: ``timeout`` measured under a smaller limit is run again (None: the runner has no limit, e.g. a replay)
        self.timeout_s: float | None = runner.timeout_s
        #: a known plan measured ahead a window at a time (:meth:`plan_ahead`)
        self._ahead: PlanAhead | None = None

    def preload(self, prior: Sequence[Evaluation]) -> None:
        """Start from the evaluations of an earlier session of the same search (``--resume``), in their order: each
        is answered from memory when the strategy asks for it again (the strategy, deterministic given its answers,
        walks the same path back to where the session stopped), the incumbent and its history are restored, and
        the new evaluations among them count against the evaluation budget. Call before the strategy starts.

        Raises:
            ValueError: evaluations were already made by this evaluator.
        """
        if self.order:
            raise ValueError("preload() must come before the first evaluation")
        for ev in prior:
            self.seen[ev.key] = ev
            self.order.append(ev)
            if ev.index is not None:
                self.versions.append(ev)
            if ev.index is not None and ev.status not in ("invalid_config", "pruned") and not ev.cached:
                self.n_new += 1
                self.device_s += ev.wall_s
                self.budget.evals += 1
            if ev.accepted and ev.ok:
                self.incumbent = ev
                self.history.append(IncumbentChange(evaluations=len(self.order), config=ev.config,
                                                    duration_ns=float(ev.duration_ns or math.nan),
                                                    decision=ev.decision))

    def plan_ahead(self, planned: Sequence[dict[str, Any]], window: int) -> None:
        """Measure a strategy's known order (``plan``) ahead over the runner's workers, ``window`` configs at a time
        (:class:`~kernelpilot.engine.plan_ahead.PlanAhead`): a planned config the strategy asks for is measured with
        the ``window - 1`` after it; with a runner that takes concurrent requests the next window is measured while
        this one is judged. Call :meth:`finish_plan` before the runner closes.

        Raises:
            ValueError: ``window`` under 1.
        """
        from kernelpilot.engine.plan_ahead import PlanAhead

        self._ahead = PlanAhead(self, planned, window)

    def finish_plan(self) -> None:
        """Wait for a window still measuring (its answers kept, counted and cached); nothing without a plan."""
        if self._ahead is not None:
            self._ahead.finish()

    @property
    def parallel(self) -> int:
        """Configs the runner evaluates at once (one per GPU or Ray actor; 1 for a replay)."""
        return max(1, self.runner.parallel)

    # -- the strategy's evaluate -----------------------------------------------------------------------------------
    def __call__(self, candidate: Candidate | dict[str, Any]) -> Evaluation:
        """Evaluate one config (see the module docstring).

        Args:
            candidate: a config dict, or a :class:`Candidate` carrying the move that produced it.

        Returns:
            The judged :class:`Evaluation` (the same object again for a config already answered).

        Raises:
            BudgetExhausted: the budget is spent or a stop rule fired (:class:`StopSearch`); nothing is lost:
                every evaluation before it is recorded and cached.
            ImpossibleTime: the answer is under the speed-of-light floor (recorded first; the campaign ends).
            BrokenFirstConfig: the first config that ran killed its worker or hung (recorded first).
        """
        cand = candidate if isinstance(candidate, Candidate) else Candidate(candidate)
        config, key = cand.config, config_key(cand.config)
        if key in self.seen:
            return self.seen[key]
        for rule in self.stop:
            why = rule.check(self)
            if why is not None:
                raise StopSearch(why)
        if self._ahead is not None:
            self._ahead.before(key)
        if key not in self.ready and self.budget.exhausted():  # before a wait for the config's compile (up to
            self.budget.check()  # 30 s on the H200 after the 10,800-config space's budget ended) that is no use now
        skip = self._skip_answer(config)
        known = skip if skip is not None else self._measured_answer(config, key)
        if known is None:
            self.budget.check()  # before anything is written for a version that would never run
            for ahead in (self.pruner, self.evidence) if self.incumbent is None else ():
                if ahead is not None:  # a first correct config leads without an A/B to hide its compiles behind
                    ahead.warm(config)
        index = None if skip is not None else len(self.versions)
        parent, move = self._derivation(cand)
        if self.recorder is not None and index is not None:
            self.recorder.before(index, config, parent, move, self.incumbent)
        ev = (self._with_static(known, config) if known is not None else self._absorb(
            self._with_static(self.runner.evaluate(config, race_against_ns=self._race_ns()), config)))
        ev = ev.model_copy(update={"index": index, "seq": len(self.order), "move": move,
                                   "parent": parent.index if parent is not None else None})
        ev, halt = self._halting(ev)
        ev = self._judge(self._measures(ev, parent))
        if self.recorder is not None:
            ev = self.recorder.after(ev, self.incumbent) if index is not None else self.recorder.skipped(ev)
        self.seen[key] = ev
        self.order.append(ev)
        if index is not None:
            self.versions.append(ev)
        self._report(ev)
        if halt is not None:  # recorded like any evaluation, then the campaign ends (engine/guards.py)
            halt.evaluation = ev
            raise halt
        return ev

    def _halting(self, ev: Evaluation) -> tuple[Evaluation, Any]:
        """``(ev, error)``: the error that ends the campaign after ``ev`` is recorded (None: go on). A time under the
        floor (:func:`kernelpilot.engine.guards.impossible`; an ``ok`` answer the runner did not judge is turned into
        ``impossible`` here), or a first evaluation that killed its worker or hung
        (:func:`kernelpilot.engine.guards.broken_first`)."""
        from kernelpilot.engine.guards import broken_first, impossible

        error: Any = impossible(ev, self.roofline)
        if error is not None and ev.status == "ok":
            assert self.roofline is not None and ev.duration_ns is not None
            ev = ev.model_copy(update={"status": "impossible", "accepted": None,
                                       "message": self.roofline.impossible_reason(ev.duration_ns) or ""})
        ran_before = any(e.status not in ("invalid_config", "pruned") for e in self.versions)
        if error is None and not ran_before:
            error = broken_first(ev)
        return ev, error

    # -- progress ----------------------------------------------------------------------------------------------------
    def total_estimate(self) -> int:
        """The most evaluations this search can still reach in all (an upper bound; it may stop earlier): the space,
        else the evaluation budget (answers that cost nothing — cached, pruned, invalid — do not count against it),
        else a stop rule's version cap (``MaxVersions``), whichever is smallest; never below those already made."""
        done = len(self.order)
        caps = [self.space.size]
        if self.budget.max_evals is not None:
            caps.append(done - self.budget.evals + self.budget.max_evals)
        caps += [int(n) for n in (rule.version_cap() for rule in self.stop) if n is not None]
        return max(done, min(caps))

    def step(self) -> Step:
        """Where the search stands (:class:`kernelpilot.progress.Step`, phase ``search``): evaluations made of
        :meth:`total_estimate`, the incumbent's median, the budget's clock and its time limit."""
        inc = self.incumbent
        return Step(phase="search", done=len(self.order), total=self.total_estimate(),
                    best_ns=inc.duration_ns if inc is not None else None, elapsed_s=self.budget.elapsed_s(),
                    budget_s=self.budget.max_s)

    def _report(self, ev: Evaluation) -> None:
        """Send ``log`` the evaluation's line, carrying the search's :class:`Step`: ``[3/12] HEAD (best 80.90 µs ·
        ETA 0:00:21) — why``, where HEAD is the recorder's words for it (``describe``: optimize's ``v3: rejected
        (ok) 81.40 µs``) or ``eval 3 {config}: ok 81.40 µs (cached)``, and why is the decision, or a failure's
        message."""
        step = self.step()
        head = self.recorder.describe(ev) if self.recorder is not None else None
        if head is None:
            head = (f"eval {len(self.order)} {ev.key}: {ev.status}"
                    + (f" {format_duration_ns(ev.duration_ns)}" if ev.duration_ns else "")
                    + (" (cached)" if ev.cached else ""))
        why = ev.decision or (ev.message if not ev.ok else "")
        self.log(ProgressLine(f"{step.counts} {head}" + (f" ({step.status})" if step.status else "")
                              + (f" — {why[:200]}" if why else ""), step))

    def many(self, candidates: Sequence[Candidate | dict[str, Any]]) -> list[Evaluation]:
        """Evaluate several configs: the new ones measured in parallel over the runner's workers (one per GPU or Ray
        actor), then answered and judged one by one in order, as :meth:`__call__` would.

        Raises:
            BudgetExhausted: the budget is spent (configs measured before are recorded and cached).
        """
        cands = [c if isinstance(c, Candidate) else Candidate(c) for c in candidates]
        if self.parallel > 1:
            self.measure_ahead([c.config for c in cands])
        return [self(c) for c in cands]

    def measure_ahead(self, configs: Sequence[dict[str, Any]]) -> None:
        """Measure ``configs`` now, in parallel over the runner's workers, so that later calls answer them without
        waiting: only those that would cost a run (:meth:`needs_run`), each once, no more than the evaluation budget
        has left, clearly slower ones raced against the incumbent; every answer is counted and cached at once. Fewer
        than two such configs: nothing to spread, the calls measure them.

        Raises:
            BudgetExhausted: the budget is already spent.
        """
        todo = self.runs_needed(configs)
        if len(todo) < 2:
            return
        self.budget.check()
        for ev in self.runner.map(todo, race_against_ns=self._race_ns()):
            self.ready[ev.key] = self._absorb(ev)

    def runs_needed(self, configs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The configs among ``configs`` that would cost a worker evaluation now (:meth:`needs_run`), each once, in
        order, no more than the evaluation budget has left: what a batch measured ahead hands the runner."""
        todo: list[dict[str, Any]] = []
        keys: set[str] = set()
        for c in configs:
            key = config_key(c)
            if key not in keys and self.needs_run(c):
                keys.add(key)
                todo.append(dict(c))
        if self.budget.max_evals is not None:
            todo = todo[: max(0, self.budget.max_evals - self.budget.evals)]
        return todo

    def needs_run(self, config: dict[str, Any]) -> bool:
        """True when ``config`` would cost a worker evaluation now (valid, not pruned, not answered before)."""
        key = config_key(config)
        return not (key in self.seen or key in self.ready or self._skip_answer(config) is not None
                    or self._cached(config) is not None)

    # -- answering ---------------------------------------------------------------------------------------------------
    def _skip_answer(self, config: dict[str, Any]) -> Evaluation | None:
        """The answer given without any run (a skipped config, no version): ``invalid_config``, ``pruned``, or the
        compile-ahead failure; None when ``config`` is measured."""
        why = self.space.why_invalid(config)
        if why is not None:
            return Evaluation(config=config, status="invalid_config", message=why)
        if not self.runner.knows(config):  # a replay answers only the configs its cache holds
            return Evaluation(config=config, status="not_in_cache",
                              message="not in the replayed cache: skipped (the measuring run never ran it)")
        why = self._prune_reason(config)
        if why is not None:  # a compile whose run_kernel hung or exited: that failure, as a measurement would give
            status = self.pruner.failure(config) if self.pruner is not None else None
            return Evaluation(config=config, status=status or "pruned", message=why)
        return None

    def _measured_answer(self, config: dict[str, Any], key: str) -> Evaluation | None:
        """A measurement already at hand: measured ahead, or cached; None when the runner must evaluate ``config``."""
        ev = self.ready.pop(key, None)
        return ev if ev is not None else self._cached(config)

    def _cached(self, config: dict[str, Any]) -> Evaluation | None:
        """The cache's answer for ``config``, unless it is a ``timeout`` recorded under a smaller time limit than
        the runner's now (or under an unknown one, from a cache written before limits were recorded): a looser
        limit deserves a new try; and unless it is a short timing (a line another run raced out) that this run
        cannot decide on (:func:`kernelpilot.search.cache_trust.race_stored`): a run that does not race, or whose
        incumbent it is not clearly slower than, measures the config again in full."""
        if self.cache is None:
            return None
        ev = self.cache.get(config)
        if (ev is not None and ev.status == "timeout" and self.timeout_s is not None
                and (ev.timeout_s is None or ev.timeout_s < self.timeout_s)):
            return None
        if ev is not None and ev.message.startswith(SHORT_TIMING):
            return race_stored(ev, self._race_ns())
        return ev

    def _with_static(self, ev: Evaluation, config: dict[str, Any]) -> Evaluation:
        """``ev`` with the binary's facts from static pruning (``registers_per_thread``, ``spills``, ...) in
        ``static`` when the pruner compiled the config and ``ev`` has none: a config whose binary spills is marked
        (``static["spills"] > 0``) and the guided strategy's next move from it reduces tile/stages/warps first."""
        if ev.static or self.pruner is None:
            return ev
        found = self.pruner.facts(config)
        return ev.model_copy(update={"static": dict(found)}) if found else ev

    def _prune_reason(self, config: dict[str, Any]) -> str | None:
        return self.pruner.reason(config) if self.pruner is not None else None

    def _race_ns(self) -> float | None:
        return self.incumbent.duration_ns if (self.race and self.incumbent is not None) else None

    def _absorb(self, ev: Evaluation) -> Evaluation:
        """Count a new evaluation against the budget, note the time limit it ran under, and append it to the cache
        (before anyone reads it)."""
        if ev.timeout_s is None and self.timeout_s is not None and not ev.cached:
            ev = ev.model_copy(update={"timeout_s": self.timeout_s})
        self.budget.charge(ev.wall_s)
        self.n_new += 1
        self.device_s += ev.wall_s
        if self.cache is not None:
            self.cache.put(ev)
        return ev

    def _derivation(self, cand: Candidate) -> tuple[Evaluation | None, Move | None]:
        """The evaluation ``cand`` derives from and the move that makes it: the strategy's move from the config it
        was made from (``move.undo``: the incumbent, or another version after the guided strategy's restart), else
        a step from the nearest evaluated config (fewest tunables changed, the incumbent first, then the fastest;
        among the incumbent and the last :data:`NEAREST_AMONG` versions) whose move is the two configs' difference
        (a strategy's reasons kept)."""
        if not self.versions:
            return None, None
        inc, before = self.incumbent, config_key(cand.move.undo(cand.config)) if cand.move is not None else None
        origin = next((e for e in ([inc] if inc is not None else []) + self.versions if e.key == before), None)
        if origin is not None:
            return origin, cand.move
        near = self.versions[-NEAREST_AMONG:] + ([inc] if inc is not None else [])  # O(1) per call, not O(versions)
        base = min(near, key=lambda e: (sum(e.config.get(k) != v for k, v in cand.config.items()), e is not inc,
                                        e.objective))
        move = Move.between(base.config, cand.config, self.space.tunables, self.strategy or "search")
        fields = ("tunable", "old", "new", "direction")  # the strategy's reasons, the configs' difference
        return base, move if cand.move is None else cand.move.model_copy(update={k: getattr(move, k) for k in fields})

    def _measures(self, ev: Evaluation, parent: Evaluation | None) -> Evaluation:
        """``pct_of_roofline`` and speedups of a timed evaluation."""
        if ev.duration_ns is None or not ev.duration_ns > 0:
            return ev
        update: dict[str, Any] = {}
        if self.roofline is not None and ev.measured:
            update["pct_of_roofline"] = self.roofline.pct_of_roofline(ev.duration_ns)
        first = next((e for e in self.versions if e.ok), None)
        if first is not None:
            update["speedup_vs_first"] = first.duration_ns / ev.duration_ns  # type: ignore[operator]
        if parent is not None and parent.ok:
            update["speedup_vs_parent"] = parent.duration_ns / ev.duration_ns  # type: ignore[operator]
        return ev.model_copy(update=update)

    def _audit(self, ev: Evaluation) -> tuple[Evaluation, bool]:
        """Before a config leads: the runner's device-activity audit (work on unjoined streams, the file's kernels
        never launched; :mod:`kernelpilot.measure.activity`). Returns the evaluation (with the audit's seconds, or
        turned into the failure it found) and whether it passed; a runner that does not audit (``audits`` False: a
        replay, whose answers were judged when measured) passes it unchanged."""
        if not self.runner.audits or not ev.measured:
            return ev, True
        t = time.monotonic()
        found = self.runner.audit(ev.config) or {}
        stages = {f"audit.{k}": v for k, v in (found.get("phases_s") or {}).items() if isinstance(v, (int, float))}
        ev = ev.model_copy(update={"phases_s": {**ev.phases_s, "audit": time.monotonic() - t, **stages}})
        if not found.get("status"):
            return ev, True
        failed = ev.model_copy(update={"status": found["status"], "message": found["message"][:2000],
                                       "accepted": None,
                                       "decision": "refused by the audit before leading (timer guard, derived "
                                                   "shapes, device activity)"})
        if self.cache is not None:
            self.cache.put(failed.model_copy(update={"cached": False}))
        return failed, False

    # -- judging -----------------------------------------------------------------------------------------------------
    def _judge(self, ev: Evaluation) -> Evaluation:
        from kernelpilot.search.stats import decide

        if not ev.ok or ev.raced_out:
            return ev.model_copy(update={"accepted": False if ev.ok else None,
                                         "decision": "raced out: clearly slower" if ev.ok else ""})
        if self.incumbent is None:
            return self._accept(ev, "first correct config", None)
        if not self.unmeasured_leads and not ev.measured:
            return ev.model_copy(update={"accepted": False, "decision": "not a measurement: incumbent kept"})
        if ev.duration_ns >= self.incumbent.duration_ns:  # type: ignore[operator]
            return ev.model_copy(update={"accepted": False, "decision": (
                f"not faster: median {format_duration_ns(ev.duration_ns)} >= incumbent's "
                f"{format_duration_ns(self.incumbent.duration_ns)}")})
        if self.pruner is not None and self.runner.audits:  # compiled at its drawn shapes during the A/B
            self.pruner.warm(ev.config)
        t = time.monotonic()
        samples = (self.runner.ab_samples(ev.config, self.incumbent.config, self.ab_samples)
                   if self.ab_samples > 0 else None)
        cand, inc = samples if samples else (ev.samples_ns, self.incumbent.samples_ns)
        if not cand or not inc:
            cand, inc = [ev.duration_ns], [self.incumbent.duration_ns]  # type: ignore[list-item]
        d = decide(cand, inc)
        ev = ev.model_copy(update={"decision_detail": d.model_dump(),
                                   "phases_s": {**ev.phases_s, "ab": time.monotonic() - t}})
        how = " (interleaved A/B)" if samples else " (stored samples)"
        if d.replace:
            return self._accept(ev, d.reason + how, d.model_dump())
        return ev.model_copy(update={"accepted": False, "decision": d.reason + how})

    def _accept(self, ev: Evaluation, why: str, detail: dict[str, Any] | None) -> Evaluation:
        card = (card_in_thread(self.evidence, ev)  # a GPU-free card is made while the worker audits
                if self.evidence is not None and self.runner.audits else None)
        ev, clean = self._audit(ev)
        if not clean:
            if card is not None:
                card.result()  # its thread ends before the next evaluation; the card of a refused config is dropped
            return ev
        ev = ev.model_copy(update={"accepted": True, "decision": why, "decision_detail": detail})
        if self.evidence is not None and ev.card is None:
            carded, spent_s = card.result() if card is not None else timed_evidence(self.evidence, ev)
            ev = ev.model_copy(update={**{k: getattr(carded, k) for k in CARD_FIELDS},
                                       "phases_s": {**ev.phases_s, "evidence": spent_s}})
            if ev.card is not None and self.cache is not None:  # keep the evidence with the record for replays
                self.cache.put(ev.model_copy(update={"cached": False}))
        self.incumbent = ev
        self.history.append(IncumbentChange(evaluations=len(self.order) + 1, config=ev.config,
                                            duration_ns=float(ev.duration_ns or math.nan), decision=why))
        return ev
