"""Every GPU kernel a launch causes, on every stream, from the profiler's activity records (CUPTI via Kineto).

CUDA events measure one stream. A kernel file that puts part of its work on a stream it never joins, or does its
work with PyTorch ops while a declared Triton kernel is never launched, fools an event timer (issue 11: a 1.86×
false speedup from an unjoined side stream). :func:`device_activity` launches the callable a few times, each
time alone on the device and inside its own Kineto session (``torch.autograd.profiler.profile``, CUDA activity
only), and reads back the
device's own record of what ran: each kernel, memcpy and memset with its stream and device timestamps.

Each launch is bracketed on the timed stream by two kernels of ours: an opening spin (``torch.cuda._sleep``, about
10 ms, so the host has enqueued everything before the GPU runs any of it) and a closing marker. Work ordered after
the timed stream's start begins after the spin ends; work joined back to it (``current_stream().wait_stream(s)``)
ends before the closing marker starts. Any kernel, memcpy or memset of the launch that started during the spin,
or ended after the closing marker started, ran outside what the events measure (**unjoined**), and the launch is
refused. The device span
(first start to last end over all streams) and the timed span are recorded beside. Kernels on streams other than
the timed one are listed (joined side streams are fine). When the kernel file declares
kernels (Triton: its ``@triton.jit`` functions), at least one of them must appear among the launched kernels.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

from pydantic import BaseModel

from kernelpilot.measure.guard import bound

__all__ = ["SPIN_KERNEL", "ActivityReport", "LaunchActivity", "device_activity", "judge_activity", "kernel_base_name",
           "launch_from_events"]


class LaunchActivity(BaseModel):
    """What one launch did on the device. Times in ns; ``kernels`` as (name, stream, start_ns, end_ns) with
    starts relative to the first activity of the launch."""

    timed_ns: float
    span_ns: float
    timed_stream: int | None
    kernels: list[tuple[str, int, float, float]]
    unjoined: list[str] = []


class ActivityReport(BaseModel):
    """The verdict over a few launches (see the module docstring); ``problem`` is None when nothing is wrong."""

    available: bool
    n_launches: int = 0
    kernel_names: list[str] = []
    streams: list[int] = []
    off_stream_kernels: list[str] = []
    declared: list[str] = []
    declared_launched: bool | None = None
    span_ns_median: float | None = None
    timed_ns_median: float | None = None
    problem: str | None = None
    failure: str | None = None  # the evaluation status of ``problem``: off_timer_work or kernel_not_launched
    note: str = ""
    launches: list[LaunchActivity] = []


def _gpu_events(prof: Any) -> list[tuple[str, int, float, float]]:
    from torch.autograd import DeviceType

    out = []
    for ev in prof.kineto_results.events():
        if ev.device_type() == DeviceType.CUDA:
            out.append((ev.name(), int(ev.device_resource_id()), float(ev.start_ns()), float(ev.end_ns())))
    return out


#: GPU cycles the opening spin kernel waits (about 10 ms at 2 GHz): long enough for the host to enqueue the
#: launch's work and the closing marker while the GPU is still busy, so stream order, not host speed, decides
#: what runs when. The first profiled launch of a process can still be slower on the host than any spin (CUPTI
#: sets itself up), so callers profile two launches and judge their union.
SPIN_CYCLES = 20_000_000


def _one_launch(fn: Callable[[], Any], before_each: Callable[[], None] | None) -> LaunchActivity:
    import torch

    t = bound()
    if before_each is not None:
        before_each()
    t.synchronize()
    start, end = t.event(enable_timing=True), t.event(enable_timing=True)
    marker = torch.zeros(1, device="cuda")
    # torch.autograd.profiler.profile, not torch.profiler.profile: the latter's first start evaluates
    # hasattr(torch, "_inductor"), which imports Inductor, Dynamo, sympy and FSDP: 6.3-7.2 s in a fresh process on
    # the H100 machine, of a first session that costs 0.02 s in the profiler itself (scripts/profiler_first_session.py,
    # 2026-11-24). Same Kineto session, CUDA activity only.
    with torch.autograd.profiler.profile(use_kineto=True, use_cpu=False, use_device="cuda") as prof:
        torch.cuda._sleep(SPIN_CYCLES)  # opening: the timed stream spins while the host enqueues everything
        t.record(start)
        fn()
        marker.add_(1)  # closing marker: the timed stream reaches it only after everything joined to it
        t.record(end)
        t.synchronize()
    return launch_from_events(_gpu_events(prof), t.elapsed_time(start, end) * 1e6)


#: The opening spin's kernel: ``torch.cuda._sleep`` launches ATen's ``at::cuda::(anonymous namespace)::spin_kernel``
#: (aten/src/ATen/cuda/Sleep.cu); records name it demangled, with its parameter list.
SPIN_KERNEL = "spin_kernel"


def _is_spin(name: str) -> bool:
    """True for the record of ATen's spin kernel (:data:`SPIN_KERNEL`, bare or in ATen's ``at::`` namespace)."""
    return name == SPIN_KERNEL or (name.startswith("at::") and f"::{SPIN_KERNEL}(" in name)


def launch_from_events(events: list[tuple[str, int, float, float]], timed_ns: float) -> LaunchActivity:
    """One launch's activity from its device records (pure: no GPU needed).

    Args:
        events: every device activity record of the launch as (name, stream, start_ns, end_ns), any order, the
            opening spin (:data:`SPIN_KERNEL`) and the closing marker included.
        timed_ns: what the events on the timed stream measured, ns.

    Returns:
        The launch: the opening spin is found by its name (the first record when no record has it), so work that
        started before the spin (still running from an earlier launch, or on a stream the timed one never waited
        for) is the launch's work, not mistaken for the opening; the timed stream is the spin's; the closing marker
        is the last record on the timed stream after the spin. Work that started before the spin ended or ended
        after the closing marker started is ``unjoined``; without a closing marker on record only the first rule
        applies. Raises nothing.
    """
    events = sorted(events, key=lambda e: e[2])
    if len(events) < 2:
        return LaunchActivity(timed_ns=timed_ns, span_ns=0.0, timed_stream=None, kernels=[], unjoined=[])
    opening = next((e for e in events if _is_spin(e[0])), events[0])
    timed_stream = opening[1]
    closing = max((e for e in events if e is not opening and e[1] == timed_stream and e[2] >= opening[3]),
                  key=lambda e: e[2], default=None)
    work = [e for e in events if e is not opening and e is not closing]
    first, last = opening[3], closing[2] if closing is not None else float("inf")
    kernels = [(n, s, a - first, b - first) for n, s, a, b in work]
    # started before the opening spin ended (not ordered after the timed stream's start: also work that began
    # before the spin itself), or still running when the closing marker started (not joined back to it): either
    # way outside what the events measure
    unjoined = sorted({n for n, _, a, b in work if a < first or b > last})
    span = max((e[3] for e in work), default=first) - min((e[2] for e in work), default=first)
    return LaunchActivity(timed_ns=timed_ns, span_ns=span, timed_stream=timed_stream, kernels=kernels,
                          unjoined=unjoined)


def kernel_base_name(name: str) -> str:
    """The bare function name of a kernel as the activity records name it: Triton's ``_softmax_kernel`` stays as it
    is; a demangled CUDA C++ name loses its return type, namespaces, template arguments and parameters
    (``void ns::sgemmWarptiling<64, 128>(int, float*)`` → ``sgemmWarptiling``). Raises nothing."""
    depth, out = 0, []
    for ch in name:
        if ch == "(" and depth == 0:
            break  # the parameter list
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    bare = "".join(out).strip()
    return bare.split()[-1].split("::")[-1] if bare else name


def judge_activity(launches: list[LaunchActivity], declared: list[str]) -> ActivityReport:
    """The verdict of the module docstring over recorded launches (pure: no GPU needed)."""
    names: list[str] = []
    streams: list[int] = []
    off: list[str] = []
    unjoined: list[str] = []
    for la in launches:
        unjoined += [n for n in la.unjoined if n not in unjoined]
        for name, stream, _, _ in la.kernels:
            names += [name] if name not in names else []
            streams += [stream] if stream not in streams else []
            if la.timed_stream is not None and stream != la.timed_stream and name not in off:
                off.append(name)
    span = statistics.median(la.span_ns for la in launches) if launches else None
    timed = statistics.median(la.timed_ns for la in launches) if launches else None
    launched = any(n.startswith(d) or kernel_base_name(n) == d for n in names for d in declared) if declared else None
    problem, failure = None, "kernel_not_launched"
    if unjoined:
        failure = "off_timer_work"
        problem = (f"device work outside the timed region: {', '.join(unjoined[:5])} still ran after the timed stream "
                   f"had finished (the events saw {timed / 1e3:.1f} µs, the device was busy {span / 1e3:.1f} µs; "
                   "join side streams with torch.cuda.current_stream().wait_stream(s) before returning)")
    elif launched is False:
        problem = (f"the kernel file's kernels ({', '.join(declared[:5])}) never ran; the launch ran "
                   f"{', '.join(names[:5]) or 'nothing on the GPU'} instead")
    elif declared and not names:
        problem = "the launch ran nothing on the GPU"
    return ActivityReport(available=True, n_launches=len(launches), kernel_names=names, streams=streams,
                          off_stream_kernels=off, declared=list(declared), declared_launched=launched,
                          span_ns_median=span, timed_ns_median=timed, problem=problem,
                          failure=failure if problem else None, launches=launches)


def device_activity(fn: Callable[[], Any], *, n_launches: int = 3, declared: list[str] | None = None,
                    before_each: Callable[[], None] | None = None) -> ActivityReport:
    """Launch ``fn`` ``n_launches`` times under the profiler and judge what ran (see the module docstring).

    ``before_each`` runs before every launch, outside the profiled region. Without a working profiler (no
    Kineto/CUPTI in this torch) the report says ``available=False`` and why (callers show it, and refuse under
    ``--strict``). Raises whatever ``fn`` raises.
    """
    try:
        launches = [_one_launch(fn, before_each) for _ in range(max(1, n_launches))]
    except (RuntimeError, AttributeError, ImportError) as exc:
        if "profiler" not in str(exc).lower() and "kineto" not in str(exc).lower() and "cupti" not in str(exc).lower():
            raise
        return ActivityReport(available=False, note=f"device activity not recorded: {type(exc).__name__}: {exc}")
    return judge_activity(launches, list(declared or []))
