"""Evidence for the incumbent: a bottleneck card from Nsight Compute, else a light card — one place for the choice.

:class:`NcuEvidence` profiles an evaluation with ``ncu`` (its report kept where the recorder says) and builds the
card from the counters; when ncu is missing (:class:`~kernelpilot.errors.ToolMissingError`) or the driver refuses
counters (:class:`~kernelpilot.errors.CountersNotPermitted`) it switches itself off for the rest of the run and
falls back to :class:`LightEvidence` — chosen on the error's type, never on its text. Each ncu-profiled evaluation
carries ``floor_check``: the roofline's bytes held against the DRAM bytes ncu measured
(:func:`kernelpilot.profile.floor_check.confirm_floor_bytes`). :class:`LightEvidence` builds
the card from the measured time, the roofline and a compile of the config for the target (registers, spills, shared
memory, occupancy, SASS mix), with no counters. Cards are only made for new incumbents: the guided strategy reads
the incumbent's card, and nothing else does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpilot.errors import CountersNotPermitted, KernelpilotError, ToolMissingError
from kernelpilot.progress import Phase
from kernelpilot.records.evaluation import Evaluation

if TYPE_CHECKING:
    from kernelpilot.engine.seams import EvidenceSource
    from kernelpilot.hardware.roofline import Roofline

__all__ = ["CARD_FIELDS", "LightEvidence", "NcuEvidence", "card_in_thread", "timed_evidence"]

#: The fields of an :class:`Evaluation` that an evidence source fills (:func:`_with_card` and the fallbacks' notes).
CARD_FIELDS = ("card", "bound", "verdict_summary", "profile_error", "floor_check")


def timed_evidence(source: EvidenceSource, ev: Evaluation) -> tuple[Evaluation, float]:
    """(``source.evidence(ev)``, seconds it took): the card and the evidence phase's seconds. Raises nothing."""
    t = time.monotonic()
    return source.evidence(ev), time.monotonic() - t


def card_in_thread(source: EvidenceSource, ev: Evaluation) -> Future[tuple[Evaluation, float]] | None:
    """``source.evidence(ev)`` started in a thread, answering (``ev`` with its card, seconds the card took), when the
    card needs no GPU (``EvidenceSource.needs_gpu``): the evaluator makes it while the worker audits the same config,
    so a new incumbent waits for the longer of the two instead of their sum (a light card of the attention
    tutorial took 0.9–3.5 s on an H200, its audit 2.1–4.6 s: session 13's table). None when there is nothing to
    overlap: a card already there, not a measurement, or an ncu profile, which must not share the GPU with the
    audit's launches. Raises nothing (the future holds what ``evidence`` raises, and it raises nothing)."""
    if ev.card is not None or not ev.measured or source.needs_gpu(ev):
        return None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kp-card")
    try:
        return pool.submit(timed_evidence, source, ev)
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one task


def _with_card(ev: Evaluation, card: Any, kernel: Path | None = None, **extra: Any) -> Evaluation:
    """``ev`` with ``card`` (its suggested changes worded for the kernel's language, the name of its back end:
    CUDA C++ files get CUDA words, :func:`kernelpilot.profile.card_suggest.for_backend`)."""
    from kernelpilot.backends.registry import language_of
    from kernelpilot.profile.card_suggest import for_backend

    data = json.loads(card.model_dump_json(by_alias=True))
    if kernel is not None:
        data = for_backend(data, language_of(kernel) or "")
    return ev.model_copy(update={"card": data, "bound": card.class_, "verdict_summary": card.summary, **extra})


class LightEvidence:
    """A light card (no counters) for an evaluation: timing + roofline + compile metadata.

    Args:
        kernel: the kernel file. shape: the problem shape. roofline: the run's roofline (None: no floor).
        device_name: the GPU's name (or the spec's in a replay). kernel_name: for the card.
        reason: why the card is light (recorded on the card).
        arch: the compile target (None: this machine's GPU, else sm_90).
    """

    def __init__(self, kernel: Path, shape: dict[str, Any], roofline: Roofline | None, device_name: str | None,
                 kernel_name: str,
                 reason: str, arch: str | None = None) -> None:
        self.kernel, self.shape, self.roofline = kernel, shape, roofline
        self.device_name, self.kernel_name, self.reason, self.arch = device_name, kernel_name, reason, arch
        self._inspected: dict[str, Future[Any]] = {}  # config key -> its compile for the card, started by warm()

    def needs_gpu(self, ev: Evaluation) -> bool:
        """False: a light card compiles on the CPU and reads the stored time (see ``EvidenceSource.needs_gpu``)."""
        return False

    def warm(self, config: dict[str, Any]) -> None:
        """Start the card's compile of ``config`` (:func:`kernelpilot.profile.light.inspect_static`) in a thread, for
        :meth:`evidence` to take: the first config's card then compiles while it is measured (session 14, H200:
        v0's light card kept vector_add's v0 waiting 4.4 s after its audit). Raises nothing."""
        from kernelpilot.profile.light import inspect_static
        from kernelpilot.records.evaluation import config_key

        key = config_key(config)
        if key in self._inspected:
            return
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kp-card-compile")
        try:
            self._inspected[key] = pool.submit(inspect_static, self.kernel, dict(config), self.shape, self.arch)
        finally:
            pool.shutdown(wait=False)

    def evidence(self, ev: Evaluation) -> Evaluation:
        """``ev`` with a light card, or unchanged (with ``profile_error`` noting why) when none can be made: not a
        measurement, or a time the card refuses (under the floor). Raises nothing."""
        if not ev.ok or not ev.measured:
            return ev
        from kernelpilot.profile.light import light_profile

        started = self._inspected.pop(ev.key, None)
        try:
            card, _ = light_profile(self.kernel, ev.config, self.shape, timing_ns=ev.duration_ns,
                                    roofline=self.roofline, device_name=self.device_name,
                                    kernel_name=self.kernel_name, reason=self.reason, arch=self.arch,
                                    inspected=started.result() if started is not None else None)
        except (ValueError, KernelpilotError) as exc:
            note = f"no light card: {getattr(exc, 'message', exc)}"
            return ev.model_copy(update={"profile_error": f"{ev.profile_error}; {note}" if ev.profile_error else note})
        return _with_card(ev, card, self.kernel)


class NcuEvidence:
    """An Nsight Compute card for an evaluation, falling back to ``fallback`` (a :class:`LightEvidence`).

    Args:
        kernel / ref: the kernel file and the reference file (None: the kernel's own).
        shape: the problem shape.
        report_path: evaluation -> where its ``.ncu-rep`` goes (e.g. ``vN/profile.ncu-rep``).
        fallback: used when ncu cannot give counters (missing, refused) or fails for this config.
        on_metrics: called with (evaluation, metrics, all kernel names) after a successful profile (the recorder
            writes ``metrics.json`` and ``verdict.json`` with it).
        max_profiles: most ncu profiles :meth:`evidence` takes (None: no limit); later incumbents get light cards and
            the caller profiles the final best with :meth:`profile` — one ncu run costs 15–17 s on an H100 (process
            start, replay passes, report reading), several times a whole evaluation.
        log: progress callback.
    """

    def __init__(self, kernel: Path, ref: Path | None, shape: dict[str, Any], report_path: Callable[[Evaluation], Path],
                 fallback: LightEvidence, *, on_metrics: Callable[[Evaluation, Any, list[str]], None] | None = None,
                 max_profiles: int | None = None, log: Callable[[str], None] = lambda _m: None) -> None:
        self.kernel, self.ref, self.shape, self.report_path = kernel, ref, shape, report_path
        self.fallback, self.on_metrics, self.log = fallback, on_metrics, log
        self.max_profiles = max_profiles
        self.n_profiles = 0
        self.disabled: str | None = None
        #: why the driver refused the counters (ERR_NVGPUCTRPERM), when a profile found that it does
        self.refused: str | None = None
        #: evaluation key -> its profiled metrics (for "observed" in the next version's outcome)
        self.metrics: dict[str, Any] = {}

    def disable(self, why: str) -> None:
        """Profile no more (the reason goes into every later card's ``light_reason`` and ``profile_error``)."""
        self.disabled = why
        self.fallback.reason = why

    def warm(self, config: dict[str, Any]) -> None:
        """The fallback's :meth:`LightEvidence.warm` when the next card would be light (profiling off, or no
        profile left); nothing before an ncu profile. Raises nothing."""
        if self.disabled is not None or (self.max_profiles is not None and self.n_profiles >= self.max_profiles):
            self.fallback.warm(config)

    def needs_gpu(self, ev: Evaluation) -> bool:
        """Whether :meth:`evidence` would profile ``ev`` with ncu now (not disabled, profiles left, a measured
        success); False when it would hand ``ev`` to the light fallback."""
        return (ev.ok and ev.measured and self.disabled is None
                and (self.max_profiles is None or self.n_profiles < self.max_profiles))

    def evidence(self, ev: Evaluation) -> Evaluation:
        """``ev`` with an ncu card, else the fallback's card with ``profile_error`` saying why. Raises nothing."""
        if not ev.ok or not ev.measured:
            return ev
        if self.disabled is not None:
            return self.fallback.evidence(ev.model_copy(update={"profile_error": self.disabled}))
        if self.max_profiles is not None and self.n_profiles >= self.max_profiles:
            return self.fallback.evidence(ev)
        return self.profile(ev)

    def profile(self, ev: Evaluation) -> Evaluation:
        """``ev`` with an ncu card now (whatever ``max_profiles`` says), else the fallback's card with
        ``profile_error`` saying why. Raises nothing."""
        if self.disabled is not None:
            return self.fallback.evidence(ev.model_copy(update={"profile_error": self.disabled}))
        self.n_profiles += 1
        from kernelpilot.profile.card import card_from_metrics
        from kernelpilot.profile.floor_check import confirm_floor_bytes
        from kernelpilot.profile.metrics import main_kernel, read_report, require_verdict_metrics
        from kernelpilot.profile.ncu_run import profile_kernel
        from kernelpilot.profile.verdict import judge

        what = f"v{ev.index}" if ev.index is not None else ev.key
        try:
            with Phase(self.log, "ncu", f"profiling {what} (one ncu run: 15–17 s on an H100)"):
                report = profile_kernel(self.kernel, self.shape, ev.config, self.report_path(ev), ref=self.ref)
            kernels = read_report(report)
            metrics = require_verdict_metrics(main_kernel(kernels), report)
            verdict = judge(metrics)
        except (ToolMissingError, CountersNotPermitted) as exc:
            if isinstance(exc, CountersNotPermitted):
                self.refused = exc.message
            self.disable(f"profiling disabled: {exc.message}")
            self.log(f"  {self.disabled}; light cards from now on")
            return self.fallback.evidence(ev.model_copy(update={"profile_error": self.disabled}))
        except KernelpilotError as exc:
            self.log(f"  ncu failed for this config: {exc.message.splitlines()[0][:200]}")
            return self.fallback.evidence(ev.model_copy(update={"profile_error": f"ncu failed: {exc.message}"}))
        self.metrics[ev.key] = metrics
        if self.on_metrics is not None:
            self.on_metrics(ev, metrics, [k.kernel_name for k in kernels])
        roofline = self.fallback.roofline
        check = confirm_floor_bytes(roofline.bytes_moved if roofline is not None else None, kernels)
        if check.verdict == "over_counted":
            self.log(f"  {what}: {check.message}")
        return _with_card(ev, card_from_metrics(metrics, verdict), self.kernel, floor_check=check.model_dump())
