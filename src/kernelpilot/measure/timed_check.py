"""Check what you time: the outputs of timed launches chosen in secret, compared with the reference on the values
those launches saw (docs/measuring.md, "Check what you time").

Every timed launch gets new values (:func:`kernelpilot.kernels.case.draw_values`, through the timers'
``before_each``), and a :class:`~kernelpilot.kernels.case.Refresher` keeps a copy of the outputs of a few launches
drawn by reservoir sampling over the whole run, warm-up launches included, with a generator the kernel file cannot
read. After the run, :func:`check_timed` rebuilds each kept launch's inputs (the same arithmetic, bit for bit), runs
the reference on them (:func:`kernelpilot.measure.correctness.reference_outputs`: float64 copies, in the reference
process when one serves this worker) and compares per element and per row as the check does. A kernel that tells
timed launches from checked ones — by the gap since its last call, a launch counter, a value pattern, a pointer
seen before — and does less work when "timed" is wrong on launches that were timed; with ``keep`` launches kept
out of ``n``, a kernel wrong on a fraction ``f`` of its launches escapes with probability about ``(1 − f)^keep``
(issue 24: skipping 3 rows in 4 on timed launches gave a 3.4× false speedup while every check passed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelpilot.target import Target

if TYPE_CHECKING:
    from kernelpilot.kernels.case import Refresher
    from kernelpilot.kernels.contract import KernelFile

__all__ = ["KEEP", "KEEP_BUDGET_S", "KEEP_MAX", "TimedCheck", "check_timed", "interleaved_checked", "keep_for"]

#: Launches of each timed run whose outputs are kept and compared (one float64 reference each), at least.
KEEP = 2
#: At most, when the reference is cheap (:func:`keep_for`).
KEEP_MAX = 8
#: Seconds of check time a timed run may spend on its kept launches (:func:`keep_for`): a fully timed config on
#: an H200 took 0.20 s (median wall, docs/device-runs/2026-11-27-s8), so the kept launches stay near that.
KEEP_BUDGET_S = 0.3


def keep_for(check_s_per_seed: float | None) -> int:
    """How many launches of a timed run to keep and compare, given what one seed of the correctness check cost
    (seconds: the kernel, the float64 reference and the comparison; None: not known).

    A kernel wrong on a fraction ``f`` of its timed launches escapes ``k`` kept launches with probability about
    ``(1 - f)^k``; to move the median it must be wrong on more than half of them, so 2 kept launches let it through
    a quarter of the time and 8 one time in 256. Where the reference is cheap the check keeps up to
    :data:`KEEP_MAX` launches within :data:`KEEP_BUDGET_S`, never fewer than :data:`KEEP` (the extra seconds per
    fully timed config were not measured on a GPU yet). A clean-clone CI run on a loaded CPU accepted the
    timed-host-gap cheat with 2 kept launches while it cut some timed launches short.
    """
    if not check_s_per_seed or check_s_per_seed <= 0:
        return KEEP
    return max(KEEP, min(KEEP_MAX, int(KEEP_BUDGET_S / check_s_per_seed)))


class TimedCheck(BaseModel):
    """The verdict on the kept launches of one timed run.

    Attributes:
        passed: every kept launch matched the reference. launches: how many launches the run made.
        checked: per kept launch: ``launch`` (its number, 1-based), ``tag`` (``"a"``/``"b"`` in an A/B), ``values``
            (where its inputs came from), ``passed``, ``worst_rel_l2_error``.
        error: why the first failing one failed (None when passed).
    """

    passed: bool
    launches: int
    checked: list[dict[str, Any]] = []
    error: str | None = None


def check_timed(kf: KernelFile, refresher: Refresher, *, tags: dict[str, str] | None = None) -> TimedCheck:
    """Compare the outputs the refresher kept (:meth:`~kernelpilot.kernels.case.Refresher.after`) with the reference.

    Args:
        kf: the kernel file (its reference and tolerances).
        refresher: the ``before_each`` of the run, made with ``keep`` > 0.
        tags: for an A/B, tag -> what the side is (``{"a": "config {...}", "b": "v3"}``) for the message.

    Returns:
        A :class:`TimedCheck`; the reference raising is a failure of the launch (recorded, not raised).
    """
    from kernelpilot.measure.compare import compare, tolerance_for
    from kernelpilot.measure.correctness import reference_outputs

    case = refresher.case
    rows: list[dict[str, Any]] = []
    error = None
    for launch, tag, draw, got in sorted(refresher.kept, key=lambda k: k[0]):
        where = f"timed launch {launch}" + (f" of {tags.get(tag, tag)}" if tags and tag else "")
        try:
            refs, _ = reference_outputs(kf, draw.values(case), list(got),
                                        [n for n in case.outputs if n not in case.inplace])
        except Exception as exc:  # noqa: BLE001 - recorded
            error = f"{where}: the reference raised {type(exc).__name__}: {exc} on {draw.text}"
            rows.append({"launch": launch, "tag": tag, "values": draw.text, "passed": False})
            break
        checks = [compare(n, got[n], refs[n], *_tol(tolerance_for(case.inputs[n].dtype, kf)),
                          device=case.inputs[n].device) for n in got]
        ok = all(c.passed for c in checks)
        rows.append({"launch": launch, "tag": tag, "values": draw.text, "passed": ok,
                     "worst_rel_l2_error": max((c.rel_l2_error or 0.0) for c in checks) if checks else 0.0})
        if not ok:
            bad = next(c for c in checks if not c.passed)
            error = (f"{where} (of {refresher.launches}, kept in secret) on {draw.text}: {bad.name}: {bad.reason} "
                     "(a kernel that does less when it is timed is wrong on the launches that were timed)")
            break
        refs = None  # released before the next call: large results are views of one buffer (measure/refproc.py)
    return TimedCheck(passed=error is None, launches=refresher.launches, checked=rows, error=error)


def _tol(tol: Any) -> tuple[float, float]:
    return tol.atol, tol.rtol


def interleaved_checked(kf: KernelFile, case: Any, fn_a: Any, fn_b: Any, n: int, target: Target,
                        tags: dict[str, str]) -> tuple[list[float], list[float]]:
    """:func:`kernelpilot.measure.timing.time_interleaved` of two launches on ``case`` (new values before every
    launch), then :func:`check_timed` on the launches kept in secret from both sides: an A/B is timed launches too.

    Returns:
        (samples of ``fn_a``, samples of ``fn_b``), ns.

    Raises:
        KernelFailed: (status ``wrong_when_timed``) a kept launch of either side differs from the reference; the
            message names the side (``tags``).
        Exception: whatever the launches raise.
    """
    from kernelpilot.errors import KernelFailed
    from kernelpilot.measure.memory import keep_copy
    from kernelpilot.measure.timing import time_interleaved

    refresher = case.refresher(keep=KEEP, copy=keep_copy)
    a, b = time_interleaved(fn_a, fn_b, n, target, before_each=refresher)
    timed = check_timed(kf, refresher, tags=tags)
    if not timed.passed:
        raise KernelFailed(f"{kf.path}: {timed.error}", "refused at the timing stage: this result cannot be "
                           "trusted; see docs/measuring.md, \"Check what you time\"", "wrong_when_timed")
    return a, b
