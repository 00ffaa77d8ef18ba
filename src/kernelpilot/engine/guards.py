"""Results that end a campaign instead of steering it (issue 23): a time under the speed-of-light floor, and a first
evaluation whose worker exited, crashed or hung.

* **Impossible stops, never steers.** A median under the floor (:func:`kernelpilot.hardware.roofline.impossible_reason`)
  says the declarations (``bytes_moved()``, ``flops()``, ``COMPUTE_UNIT``), the ceiling or the timing are wrong until
  shown otherwise. Treating it as one more failed config lets the search walk on to a slower config and call it the
  best (Liger cross-entropy: its own 412 µs config refused, a 735 µs config kept as "target met"). The evaluator
  raises :class:`ImpossibleTime` instead, naming the floor's inputs and the measured time.
* **A broken v0 stops like one that raises.** When the first config that runs kills its worker (``sys.exit``,
  ``os._exit``, a segfault) or hangs past ``--timeout-s``, every other config will almost surely do the same: the
  search would burn its budget on identical failures and fill the experience log with them. The evaluator raises
  :class:`BrokenFirstConfig` naming what v0 did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelpilot.errors import DeclarationError, KernelFailed
from kernelpilot.fmt import format_duration_ns

if TYPE_CHECKING:
    from kernelpilot.hardware.roofline import Roofline
    from kernelpilot.records.evaluation import Evaluation

__all__ = ["BROKEN_FIRST_STATUSES", "BrokenFirstConfig", "ImpossibleTime", "broken_first", "impossible"]

#: Statuses of a first evaluation that end the campaign: the worker process died (``sys.exit``, ``os._exit``, a
#: segfault, the OS killing it) or gave no answer within ``--timeout-s``. A first config that raises, or computes a
#: wrong result, stops ``optimize`` through its stop rule (:class:`kernelpilot.app.session.FirstIncorrect`).
BROKEN_FIRST_STATUSES: tuple[str, ...] = ("worker_crash", "timeout")

_WHAT = {"worker_crash": "killed its worker process (sys.exit, os._exit, a segfault or the OS killing it)",
         "timeout": "gave no answer within --timeout-s (a hang, or far too slow): its worker was killed"}


class ImpossibleTime(DeclarationError):
    """A measured median under the speed-of-light floor: the campaign stops (a declaration problem until shown
    otherwise). The message names the config, the measured time and the floor's inputs (bytes, FLOPs, compute unit,
    peak, bandwidth, floor; :meth:`kernelpilot.hardware.roofline.Roofline.floor_inputs`).

    Attributes:
        evaluation: the refused :class:`~kernelpilot.records.evaluation.Evaluation` (status ``impossible``).
    """

    def __init__(self, message: str, hint: str = "", evaluation: Any = None) -> None:
        super().__init__(message, hint)
        self.evaluation = evaluation


class BrokenFirstConfig(KernelFailed):
    """The first config that ran killed its worker or hung (:data:`BROKEN_FIRST_STATUSES`): the campaign stops
    before spending its budget on configs that fail the same way. ``failure`` is that status.

    Attributes:
        evaluation: the first evaluation (its ``status`` and ``message`` say what happened).
    """

    def __init__(self, message: str, hint: str = "", failure: str = "worker_crash", evaluation: Any = None) -> None:
        super().__init__(message, hint, failure)
        self.evaluation = evaluation


def _where(ev: Evaluation) -> str:
    return (f"v{ev.index} " if ev.index is not None else "") + ev.key


def impossible(ev: Evaluation, roofline: Roofline | None) -> ImpossibleTime | None:
    """The error that stops the campaign when ``ev`` is under the floor, else None.

    ``ev`` is impossible when the runner said so (status ``impossible``: the worker applied the floor) or when it is
    a measured ``ok`` time (not the interpreter's) that ``roofline`` refuses (a replayed or remote answer judged
    under a floor it was not measured against). Raises nothing.
    """
    if ev.status != "impossible":
        if (roofline is None or ev.status != "ok" or not ev.measured or ev.duration_ns is None
                or not ev.duration_ns > 0 or roofline.impossible_reason(ev.duration_ns) is None):
            return None
    median = f"median {format_duration_ns(ev.duration_ns)}" if ev.duration_ns else "its median"
    inputs = roofline.floor_inputs() if roofline is not None else (ev.message or "under the worker's floor")
    message = (f"{_where(ev)}: {median} is under the speed-of-light floor: {inputs}. A time under the floor is a "
               f"declaration problem until shown otherwise (bytes_moved(), flops(), COMPUTE_UNIT or the ceiling), "
               f"so the search stops here instead of moving on to slower configs")
    hint = ("compare bytes_moved(), flops() and COMPUTE_UNIT with what the kernel reads, writes and computes "
            "(`kernelpilot roofline KERNEL --gpu NAME` prints each input with its source); if the declarations are "
            "right, the ceiling or the timing is wrong: `kernelpilot verify KERNEL --config ...` runs this config "
            "through every defence")
    return ImpossibleTime(message, hint, ev)


def broken_first(ev: Evaluation) -> BrokenFirstConfig | None:
    """The error that stops the campaign when ``ev``, the first evaluation that ran, killed its worker or hung, else
    None. Raises nothing."""
    if ev.status not in BROKEN_FIRST_STATUSES:
        return None
    first = (ev.message or "").strip().splitlines()[0][:300] if (ev.message or "").strip() else ev.status
    message = (f"the first config {_where(ev)} {_WHAT[ev.status]}: {first}; every config runs the same file, so "
               f"the search stopped instead of trying the others")
    hint = ("run `kernelpilot check KERNEL` to see the failure on its own; remove sys.exit/os._exit from the kernel "
            "file, fix the crash or the endless loop" + (", or raise --timeout-s if v0 is only slow"
                                                            if ev.status == "timeout" else ""))
    return BrokenFirstConfig(message, hint, ev.status, ev)
