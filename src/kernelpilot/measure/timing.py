"""Timing a kernel launch: CUDA events, L2 flushed between calls, warm-up until stable, raw samples kept.

Rules (docs/measuring.md, "Timing"): device work is asynchronous, so every sample is bracketed by
CUDA events; before every sample a buffer at least twice the L2 size is written so the kernel starts with a cold
L2 (the write is outside the events); warm-up runs until two consecutive batch medians agree within
``stable_rel`` (or ``max_warmup_ms`` is spent); at least ``min_samples`` samples are taken; the median and the
interquartile range are reported and every raw sample is kept.

We do not call ``triton.testing.do_bench`` because its flush buffer is fixed at 256 MiB and not reported, its
warm-up is a fixed time rather than "until stable", and it returns no clocks; the event-per-sample method and
flush-outside-the-events idea are the same as do_bench's.

Every timer takes an optional ``before_each`` callable, run before every launch (warm-up ones included) and
outside the timed region: a kernel that writes its inputs in place gets them restored there
(:meth:`kernelpilot.kernels.contract.Case.restore`). On a GPU it runs before the L2 flush, so the restored data
does not start warm in L2. When it has an ``after`` method (:class:`kernelpilot.kernels.case.Refresher`), that runs
after every launch's end event, also outside the timed region: it keeps the outputs of launches chosen in secret,
compared afterwards with the reference on the values those launches saw (:mod:`kernelpilot.measure.timed_check`).

Without a GPU (the Triton interpreter) the samples are wall-clock times of interpreted Python: recorded with
``is_measurement = False`` and the timer labelled "interpreted — not a measurement".
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel

from kernelpilot.fmt import format_duration_ns
from kernelpilot.measure.gpu_state import gpu_state
from kernelpilot.measure.guard import bound
from kernelpilot.target import Target

if TYPE_CHECKING:
    import torch

INTERPRETED_LABEL = "interpreted — not a measurement"
MIN_FLUSH_BYTES = 256 * 1024 * 1024  # never smaller than do_bench's flush


class TimingResult(BaseModel):
    """Timing of one callable. All times in nanoseconds; quartiles by the 'inclusive' method."""

    timer: str
    is_measurement: bool
    samples_ns: list[float]
    n_samples: int
    median_ns: float
    q1_ns: float
    q3_ns: float
    iqr_ns: float
    min_ns: float
    mean_ns: float
    n_warmup: int
    warmup_ms: float
    warmup_stable: bool
    flush_bytes: int
    l2_bytes: int | None
    median_ci_rel: float | None = None
    gpu_state_before: dict[str, Any] = {}
    gpu_state_after: dict[str, Any] = {}
    note: str = ""

    @property
    def rel_iqr(self) -> float:
        """IQR over median (dimensionless): the run's spread."""
        return self.iqr_ns / self.median_ns if self.median_ns else float("inf")


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of samples in any unit ('inclusive' quantiles).

    Raises:
        ValueError: no samples.
    """
    if not values:
        raise ValueError("no samples")
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, statistics.median(values), q3


def summarize(samples_ns: list[float]) -> dict[str, float]:
    """Median, quartiles, IQR, min and mean of samples (ns). Raises ValueError on an empty list."""
    q1, median, q3 = quartiles(samples_ns)
    return dict(median_ns=median, q1_ns=q1, q3_ns=q3, iqr_ns=q3 - q1, min_ns=min(samples_ns),
                mean_ns=statistics.fmean(samples_ns))


def l2_bytes(device: int = 0) -> int | None:
    """The device's L2 size in bytes from torch (None when torch does not expose it)."""
    import torch

    props = torch.cuda.get_device_properties(device)
    return getattr(props, "L2_cache_size", None)


def flush_size_bytes(l2: int | None) -> int:
    """Flush buffer size: max(2 × L2, 256 MiB) (docs/measuring.md, "Timing": ≥ 2× the device's L2)."""
    return max(2 * (l2 or 0), MIN_FLUSH_BYTES)


def _after(before_each: Any, tag: str = "") -> None:
    """The ``after_each`` of a ``before_each`` that has one (:class:`kernelpilot.kernels.case.Refresher`: keeps the
    outputs of launches chosen in secret), called after a launch's end event, outside the timed region."""
    after = getattr(before_each, "after", None)
    if after is not None:
        after(tag)


def time_events(fn: Callable[[], Any], n: int, flush: torch.Tensor | None = None,
                before_each: Callable[[], None] | None = None, tag: str = "") -> list[float]:
    """CUDA-event time of each of ``n`` calls of ``fn``, ns (:func:`time_event_sequence` of one launch ``n`` times)."""
    return time_event_sequence([(fn, tag)] * n, flush, before_each)


def time_event_sequence(launches: list[tuple[Callable[[], Any], str]], flush: torch.Tensor | None = None,
                        before_each: Callable[[], None] | None = None) -> list[float]:
    """CUDA-event time of each launch of ``launches`` (``(fn, tag)`` pairs, called in order), ns.

    Before each call, outside the events and in this order: ``before_each()`` (if given), then ``flush`` (if given)
    is zeroed; after each call's end event, ``before_each.after(tag)`` when it has one (a copy of the outputs of
    launches chosen in secret, enqueued after the end event). No synchronize between launches, and an opening spin
    (``torch.cuda._sleep``, :data:`LEAD_SLACK`) that holds the GPU while the host enqueues them: host-side work in
    ``fn`` (a TMA descriptor built per call, Triton's launcher, torch.compile's guards) is never timed as GPU time,
    however busy the host is (``triton.testing.do_bench`` counts it whenever the host falls behind the GPU). The
    GPU time of every kernel ``fn`` launches is timed in full. The event functions are the ones bound before any
    kernel file was imported (:func:`kernelpilot.measure.guard.bound`). A sequence
    longer than one spin can cover (:func:`chunk_len`) is timed in chunks, a spin and a synchronize each; a chunk
    whose enqueueing outlasted its spin is timed again with the spin sized to what was seen (:data:`COVER_TRIES`).
    """
    t = bound()  # the event functions as they were before the kernel file was imported (measure/guard.py)
    out: list[float] = []
    i, tries = 0, 0
    while i < len(launches):
        chunk = launches[i:i + chunk_len(len(launches) - i)]
        samples, covered = _chunk(t, chunk, flush, before_each)
        tries += 1
        if covered or tries >= COVER_TRIES:
            out.extend(samples)
            i, tries = i + len(chunk), 0
    return out


def chunk_len(n: int) -> int:
    """How many of ``n`` launches one opening spin can cover: the longest spin (:data:`MAX_LEAD_NS`) over the host
    time it must cover per launch (:data:`LEAD_SLACK` x the last host ns per launch), at least 1."""
    per = LEAD_SLACK * max(_HOST_NS_PER_LAUNCH[0], 1.0)
    return max(1, min(n, int((MAX_LEAD_NS - MIN_LEAD_NS) / per)))


def _chunk(t: Any, launches: list[tuple[Callable[[], Any], str]], flush: torch.Tensor | None,
           before_each: Callable[[], None] | None) -> tuple[list[float], bool]:
    """One spin, the launches, one synchronize: (ns per launch, whether the spin outlasted the host's enqueueing of
    every launch; when not, a launch may have waited on the host inside its events, unless the spin was already
    the longest)."""
    starts = [t.event(enable_timing=True) for _ in launches]
    ends = [t.event(enable_timing=True) for _ in launches]
    lead_ns = min(MAX_LEAD_NS, LEAD_SLACK * len(launches) * _HOST_NS_PER_LAUNCH[0] + MIN_LEAD_NS)
    t.spin(int(lead_ns * SPIN_CYCLES_PER_NS))  # the GPU waits while the host enqueues the sequence
    t0 = t.perf_counter_ns()
    for i, (fn, tag) in enumerate(launches):
        if before_each is not None:
            before_each()
        if flush is not None:
            flush.zero_()
        t.record(starts[i])
        fn()
        t.record(ends[i])
        _after(before_each, tag)
    host_total_ns = t.perf_counter_ns() - t0
    _HOST_NS_PER_LAUNCH[0] = max(host_total_ns / max(len(launches), 1), 0.8 * _HOST_NS_PER_LAUNCH[0])
    t.synchronize()
    covered = host_total_ns <= lead_ns or (len(launches) == 1 and lead_ns >= MAX_LEAD_NS)
    return [t.elapsed_time(s, e) * 1e6 for s, e in zip(starts, ends)], covered


#: The opening spin of a sequence lasts LEAD_SLACK x (launches x host ns per launch seen last) + MIN_LEAD_NS, at most
#: MAX_LEAD_NS: long enough that the host has enqueued every launch before the GPU runs the first, so no launch
#: waits on the host inside its events (round-robin samples on an H200 whose host was busy compiling for another
#: GPU: a TMA GEMM's median 249.9 us with the host behind, 180 us in the rounds where it kept ahead, 2026-11-27).
#: ``torch.cuda._sleep`` counts SM clock cycles: 2 cycles per ns spins at least as long as asked up to a 2 GHz clock
#: (H100 SXM and H200 boost at 1.98 GHz).
LEAD_SLACK, MIN_LEAD_NS, MAX_LEAD_NS, SPIN_CYCLES_PER_NS = 1.5, 200_000.0, 50e6, 2.0
#: A sequence longer than one spin covers is timed in chunks, one spin each (:func:`chunk_len`); a chunk whose host
#: time outran its spin is timed again with the spin sized to it, up to this many times in all. Session 11, H200:
#: a round-robin of 3 x 20 launches whose baselines each spent 2.3-4.1 ms on the host (a settings check) outran the
#: 50 ms cap: eager and torch.compile of a 183 µs matmul were timed at 4.1 and 4.3 ms, the Triton GEMM beside
#: them at 324 µs instead of 190 µs.
COVER_TRIES = 3
#: Host nanoseconds per launch of the last sequence (decaying by 0.8 a sequence when it falls): sizes the next spin.
_HOST_NS_PER_LAUNCH = [0.0]


#: The one timing protocol of every command (bench, check's neighbours, optimize, tune, baselines): at least 20 and
#: at most 200 samples, about 150 ms of timed launches. The worker's options default to the same numbers.
MIN_SAMPLES, MAX_SAMPLES, REP_MS = 20, 200, 150.0
#: Sampling stops early once the 95 % confidence interval of the median is this tight (half-width over median):
#: more samples would not move the median by more than run-to-run noise does (0.5 %).
TIGHT_CI_REL = 0.005


def median_ci_rel(samples: list[float], z: float = 1.96) -> float:
    """Half-width of the distribution-free 95 % confidence interval of the median, over the median (dimensionless).

    The interval runs between the order statistics of ranks ``n/2 ± z·sqrt(n)/2`` (the binomial normal
    approximation; Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2). Infinite with fewer than 6
    samples or a zero median.
    """
    n = len(samples)
    if n < 6:
        return float("inf")
    xs = sorted(samples)
    half = z * n ** 0.5 / 2
    lo, hi = max(0, int(n / 2 - half) - 1), min(n - 1, int(n / 2 + half + 0.999))
    med = statistics.median(xs)
    return (xs[hi] - xs[lo]) / 2 / med if med > 0 else float("inf")


def time_cuda(fn: Callable[[], Any], *, min_samples: int = MIN_SAMPLES, max_samples: int = MAX_SAMPLES,
              rep_ms: float = REP_MS,
              max_warmup_ms: float = 2000.0, stable_rel: float = 0.02, batch: int = 5,
              before_each: Callable[[], None] | None = None) -> TimingResult:
    """Time ``fn`` on the current CUDA device.

    Args:
        fn: launches the work to time (no arguments); must not synchronize itself.
        min_samples / max_samples: bounds on the number of timed samples (at least 20: docs/measuring.md, "Timing").
        rep_ms: target total timed duration; the sample count is rep_ms / estimated time, clamped. Samples are
            taken in rounds of ``min_samples``; after each, sampling stops once the median's 95 % confidence
            interval is within ±:data:`TIGHT_CI_REL` (:func:`median_ci_rel`, recorded as ``median_ci_rel``).
        max_warmup_ms: give up waiting for stability after this long (``warmup_stable=False`` records it).
        stable_rel: two consecutive warm-up batch medians within this relative difference count as stable.
        batch: warm-up batch size.
        before_each: run before every launch (the first, warm-up and timed ones), outside the events.

    Raises:
        ToolMissingError: no CUDA device.
        Exception: whatever ``fn`` raises.
    """
    import torch

    from kernelpilot.errors import ToolMissingError

    if not torch.cuda.is_available():
        raise ToolMissingError("no CUDA device for timing", "run on a GPU machine, or time interpreted with time_interpreted")
    l2 = l2_bytes()
    flush_bytes = flush_size_bytes(l2)
    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
    before = gpu_state()
    if before_each is not None:
        before_each()
    fn()  # first call: compilation, module load
    _after(before_each)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n_warmup, prev, stable = 1, None, False
    while (time.perf_counter() - t0) * 1e3 < max_warmup_ms:
        med = statistics.median(time_events(fn, batch, flush, before_each))
        n_warmup += batch
        if prev is not None and abs(med - prev) <= stable_rel * prev:
            stable = True
            break
        prev = med
    warmup_ms = (time.perf_counter() - t0) * 1e3
    estimate_ns = prev if prev else 1e6
    n = int(min(max_samples, max(min_samples, rep_ms * 1e6 / max(estimate_ns, 1.0))))
    samples: list[float] = []
    while len(samples) < n:
        samples += time_events(fn, min(max(min_samples, 1), n - len(samples)), flush, before_each)
        if median_ci_rel(samples) <= TIGHT_CI_REL:
            break
    after = gpu_state()
    del flush
    return TimingResult(timer="cuda_event", is_measurement=True, samples_ns=samples, n_samples=len(samples),
                        **summarize(samples), n_warmup=n_warmup, warmup_ms=warmup_ms, warmup_stable=stable,
                        flush_bytes=flush_bytes, l2_bytes=l2, median_ci_rel=median_ci_rel(samples),
                        gpu_state_before=before, gpu_state_after=after,
                        note="L2 flushed before every sample by writing flush_bytes; flush outside the events")


#: Wall-clock budget of interpreted sampling (a few rounds of interpreted Python are enough for an order).
INTERPRETED_REP_MS = 1000.0


def time_interpreted(fn: Callable[[], Any], *, min_samples: int = 3, max_samples: int = 20,
                     rep_ms: float = INTERPRETED_REP_MS, before_each: Callable[[], None] | None = None) -> TimingResult:
    """Wall-clock samples of ``fn`` under the Triton interpreter: recorded, labelled, never a GPU measurement.

    ``before_each`` (if given) runs before every call, the warm-up one included, outside the clock.
    """
    prepare = before_each if before_each is not None else (lambda: None)
    prepare()
    fn()  # warm-up: imports and interpreter set-up
    _after(before_each)
    samples: list[float] = []
    t_end = time.perf_counter() + rep_ms / 1e3
    while len(samples) < max_samples and (len(samples) < min_samples or time.perf_counter() < t_end):
        prepare()
        t = time.perf_counter_ns()
        fn()
        samples.append(float(time.perf_counter_ns() - t))
        _after(before_each)
    return TimingResult(timer=f"perf_counter ({INTERPRETED_LABEL})", is_measurement=False, samples_ns=samples,
                        n_samples=len(samples), **summarize(samples), n_warmup=1, warmup_ms=0.0,
                        warmup_stable=False, flush_bytes=0, l2_bytes=None,
                        note="Triton interpreter on the CPU: relative order only, no GPU timing")


def time_callable(fn: Callable[[], Any], target: Target, *, before_each: Callable[[], None] | None = None,
                  **kwargs: Any) -> TimingResult:
    """Time ``fn`` with CUDA events on a GPU ``target``, or as interpreted wall-clock on the CPU; ``before_each``
    runs before every launch, outside the timed region (see :func:`time_cuda`)."""
    if target.is_gpu:
        return time_cuda(fn, before_each=before_each, **kwargs)
    return time_interpreted(fn, before_each=before_each, **kwargs)


def time_interleaved(fn_a: Callable[[], Any], fn_b: Callable[[], Any], n: int, target: Target, *,
                     before_each: Callable[[], None] | None = None) -> tuple[list[float], list[float]]:
    """``n`` interleaved samples of two launches (A, B, A, B, ...), ns: the fair way to compare two configs.

    Drift (clocks, temperature, other tenants) hits both sides alike, so a rank test on the two lists compares the
    kernels, not the moments they were timed. On a GPU ``target`` each sample is one CUDA event pair with L2 flushed
    before it (as :func:`time_cuda`), after the warm-up of :func:`_warm_up`, in rounds of :data:`MIN_SAMPLES` pairs
    with one synchronize a round (:func:`_gpu_rounds`): a synchronize per sample once timed a TMA kernel's
    descriptor set-up as GPU time (1.18x slower interleaved than alone, H200, 2026-11-27). On the CPU (the
    interpreter) wall-clock samples, labelled elsewhere as not a measurement. ``before_each`` (if given) runs before
    every launch, warm-up ones included, outside the timed region; its ``after(tag)`` (if it has one) after every
    launch, ``tag`` ``"a"`` or ``"b"``.

    Raises:
        ValueError: ``n`` < 1.
        Exception: whatever the launches raise.
    """
    import torch

    if n < 1:
        raise ValueError(f"time_interleaved needs n >= 1, got {n}")
    seq = [(fn_a, "a"), (fn_b, "b")]
    if not target.is_gpu:
        a, b = _cpu_rounds(seq, before_each, n, n)
        return a, b
    flush = torch.empty(flush_size_bytes(l2_bytes()) // 4, dtype=torch.int32, device="cuda")
    _warm_up(seq, before_each, flush)
    a, b = [], []
    while len(a) < n:
        got_a, got_b = _gpu_rounds(seq, min(MIN_SAMPLES, n - len(a)), flush, before_each)
        a.extend(got_a)
        b.extend(got_b)
    del flush
    return a, b


def time_round_robin(fns: list[Callable[[], Any]], target: Target, *,
                     before_each: Callable[[], None] | None = None, min_samples: int = MIN_SAMPLES,
                     max_samples: int = MAX_SAMPLES, rep_ms: float = REP_MS) -> list[TimingResult]:
    """Time several contenders round-robin (1, 2, ..., k, 1, 2, ...): one :class:`TimingResult` each, in order.

    The fair way to put numbers side by side (a kernel beside PyTorch eager and torch.compile): clocks and heat drift
    over seconds (a GEMM timed 0.938x cuBLAS one after the other and 1.013x interleaved on one H100, 2026-11-26,
    docs/device-runs/2026-11-26-h100-gemm), and round-robin samples see the same drift. On a GPU ``target`` each
    sample is a CUDA event pair with L2 flushed before it, after the warm-up of :func:`_warm_up`, in rounds of
    ``min_samples`` per contender with one synchronize (:func:`_gpu_rounds`); sampling stops when every contender's
    median CI is within :data:`TIGHT_CI_REL`, or at ``rep_ms`` of the slowest contender's launches (``min_samples``
    to ``max_samples`` samples each, the same count for all). On the CPU (the interpreter) wall-clock samples,
    labelled not a measurement: 3 to ``min(min_samples, 20)`` rounds within about :data:`INTERPRETED_REP_MS`.
    ``before_each``: as :func:`time_cuda` (``after`` tags are the contenders' indices as strings).

    Raises:
        ValueError: no contender.
        Exception: whatever a launch raises (the caller drops a contender that cannot run before timing).
    """
    if not fns:
        raise ValueError("time_round_robin needs at least one contender")
    seq = [(fn, str(i)) for i, fn in enumerate(fns)]
    if not target.is_gpu:
        cols = _cpu_rounds(seq, before_each, 3, min(min_samples, 20), time.perf_counter() + INTERPRETED_REP_MS / 1e3)
        return [TimingResult(timer=f"perf_counter ({INTERPRETED_LABEL})", is_measurement=False, samples_ns=c,
                             n_samples=len(c), **summarize(c), n_warmup=1, warmup_ms=0.0, warmup_stable=False,
                             flush_bytes=0, l2_bytes=None, note=f"round-robin with {len(fns)} contenders; "
                             "Triton interpreter on the CPU: relative order only") for c in cols]
    import torch

    l2 = l2_bytes()
    flush = torch.empty(flush_size_bytes(l2) // 4, dtype=torch.int32, device="cuda")
    before = gpu_state()
    t0 = time.perf_counter()
    _warm_up(seq, before_each, flush)
    warmup_ms = (time.perf_counter() - t0) * 1e3
    cols = _gpu_rounds(seq, 1, flush, before_each)
    n = int(min(max_samples, max(min_samples, rep_ms * 1e6 / max(max(c[0] for c in cols), 1.0))))
    while len(cols[0]) < n and not all(median_ci_rel(c) <= TIGHT_CI_REL for c in cols):
        for col, got in zip(cols, _gpu_rounds(seq, min(max(min_samples, 1), n - len(cols[0])), flush, before_each)):
            col.extend(got)
    after = gpu_state()
    del flush
    return [TimingResult(timer="cuda_event", is_measurement=True, samples_ns=c, n_samples=len(c), **summarize(c),
                         n_warmup=3, warmup_ms=warmup_ms, warmup_stable=False, flush_bytes=flush_size_bytes(l2),
                         l2_bytes=l2, median_ci_rel=median_ci_rel(c), gpu_state_before=before, gpu_state_after=after,
                         note=f"round-robin with {len(fns)} contenders after a fixed warm-up (3 launches each); L2 "
                              "flushed before every sample by writing flush_bytes; flush outside the events")
            for c in cols]


def _warm_up(seq: list[tuple[Callable[[], Any], str]], before_each: Callable[[], None] | None,
             flush: torch.Tensor) -> None:
    """One launch of each contender outside any timing (compiles, module loads), a synchronize, then two rounds timed
    and dropped: they size the opening spin (:data:`LEAD_SLACK`) to these launches' host time."""
    import torch

    for fn, tag in seq:
        if before_each is not None:
            before_each()
        fn()
        _after(before_each, tag)
    torch.cuda.synchronize()
    time_event_sequence(seq * 2, flush, before_each)


def _gpu_rounds(seq: list[tuple[Callable[[], Any], str]], rounds: int, flush: torch.Tensor,
                before_each: Callable[[], None] | None) -> list[list[float]]:
    """``rounds`` rounds of one sample of each contender (:func:`time_event_sequence`, one synchronize): the samples
    of each contender (ns), in ``seq``'s order."""
    got = time_event_sequence(seq * rounds, flush, before_each)
    return [got[i::len(seq)] for i in range(len(seq))]


def _cpu_rounds(seq: list[tuple[Callable[[], Any], str]], before_each: Callable[[], None] | None, min_rounds: int,
                max_rounds: int, t_end: float = float("inf")) -> list[list[float]]:
    """Wall-clock rounds under the interpreter (one sample of each contender a round, ns): at least ``min_rounds``,
    then more until ``max_rounds`` or ``t_end`` (``time.perf_counter``) passes."""
    cols: list[list[float]] = [[] for _ in seq]
    while len(cols[0]) < max_rounds and (len(cols[0]) < min_rounds or time.perf_counter() < t_end):
        for col, (fn, tag) in zip(cols, seq):
            if before_each is not None:
                before_each()
            t = time.perf_counter_ns()
            fn()
            col.append(float(time.perf_counter_ns() - t))
            _after(before_each, tag)
    return cols


#: A duration for people in the unit that fits it (:func:`kernelpilot.fmt.format_duration_ns`).
format_ns = format_duration_ns
