"""The best a live search reports is a measurement of this run, never a line it read (observed, not declared).

A cache line signed with this user's key is trusted to answer a config during a search (it is a measurement made
earlier, on this machine; :mod:`kernelpilot.search.cache_trust`), but the key lives in a file any process of the
user can read, kernel code in a worker included: a kernel file that read it could sign a line of its own with a
time it never ran at. The A/B decisions of a search re-time both sides live, so such a line cannot win one; it can
still be the first correct answer, or an incumbent whose stored median then turns later configs away, and a
search answered from a warm cache would print it as its best. So when a live search (not a replay) ends with an
incumbent answered from the cache, :func:`remeasure_cached_best` measures that config again in full, records the
new evaluation as the search's last, makes it the incumbent, and says whether the stored time was reproduced
(:func:`kernelpilot.search.stats.decide`: the stored samples faster beyond noise than the live ones means not).
Cost: one fully timed evaluation per search, only when its best came from the cache. Times that are not
measurements (the Triton interpreter) are not re-measured: they print as such.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelpilot.fmt import format_duration_ns
from kernelpilot.records.evaluation import Evaluation

__all__ = ["remeasure_cached_best"]


def _reproduced(stored: Evaluation, live: Evaluation) -> bool:
    """False when the stored samples are faster than the live ones beyond noise (a rank test and a bootstrap CI,
    :func:`kernelpilot.search.stats.decide`)."""
    from kernelpilot.search.stats import decide

    if len(stored.samples_ns) < 3 or len(live.samples_ns) < 3:
        return stored.duration_ns is None or live.duration_ns is None or live.duration_ns <= stored.duration_ns
    return not decide(stored.samples_ns, live.samples_ns).replace


def remeasure_cached_best(ev: Any, log: Callable[[str], None] = lambda _m: None) -> str | None:
    """Measure again the incumbent of the :class:`~kernelpilot.engine.evaluator.Evaluator` ``ev`` when it was
    answered from the cache in a live, measured search (see the module docstring).

    The new evaluation is counted and cached (:meth:`Evaluator._absorb`), numbered, recorded (``ev.recorder``)
    and appended like any other, with its
    ``parent`` the cached one. When it is correct it becomes the incumbent (an :class:`IncumbentChange` saying
    so); when it fails, the search has no best (the stored answer is contradicted) and the failure is kept.

    Returns:
        A sentence for the log and the records (``"re-measured live: 43.46 µs stored, 43.52 µs now"``), or None
        when nothing was re-measured (no incumbent, measured in this run, a replay, not a measurement).

    Raises:
        Nothing of its own; a runner's error for the config is a failure status (:meth:`Runner.evaluate`).
    """
    from kernelpilot.engine.evaluator import IncumbentChange

    stored = ev.incumbent
    if stored is None or not stored.cached or not stored.measured or not ev.runner.measures:
        return None  # a replay can only read the cache again
    live = ev._absorb(ev.runner.evaluate(stored.config, race_against_ns=None))  # counted and cached as any other
    index = len(ev.versions)
    if ev.recorder is not None:
        ev.recorder.before(index, stored.config, stored, None, stored)
    if live.ok and live.measured:
        same = _reproduced(stored, live)
        note = (f"re-measured live: {format_duration_ns(stored.duration_ns)} stored, "
                f"{format_duration_ns(live.duration_ns)} now"
                + ("" if same else " (the stored time was not reproduced: it is faster beyond noise)"))
        live = live.model_copy(update={"accepted": True, "decision": f"the best, answered from the cache, {note}"})
    else:
        note = (f"re-measured live: the best answered from the cache ({format_duration_ns(stored.duration_ns)}) "
                f"failed now ({live.status}: {live.message[:200]}); the search has no best")
        live = live.model_copy(update={"accepted": False if live.ok else None, "decision": note})
    live = live.model_copy(update={"index": index, "seq": len(ev.order), "parent": stored.index, "move": None,
                                   "cached": False})
    ev.incumbent = live if live.accepted else None
    if ev.recorder is not None:
        live = ev.recorder.after(live, ev.incumbent)
        if ev.incumbent is not None:
            ev.incumbent = live
    if live.accepted:
        ev.history.append(IncumbentChange(evaluations=len(ev.order) + 1, config=live.config,
                                          duration_ns=float(live.duration_ns), decision=note))
    ev.seen[live.key] = live
    ev.order.append(live)
    ev.versions.append(live)
    log(note)
    return note
