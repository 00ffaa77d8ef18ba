"""Where the first device-activity profile of a process spends its time (issue 11 cost): a fresh process times
torch.profiler sessions (CUDA activity only) with and without work, and event-timed launches of a small kernel
before and after the profiler was first used (does a used profiler slow later launches?). Prints a table."""
import statistics
import sys
import time

import torch

t0 = time.perf_counter()
torch.cuda.init()
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
print(f"cuda init + first tensor: {time.perf_counter() - t0:.3f} s")


def event_median_us(n=200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(n):
        s.record(); y = x * 2.0; e.record(); e.synchronize(); out.append(s.elapsed_time(e) * 1e3)
    return statistics.median(out)


def session(work):
    from torch.profiler import ProfilerActivity, profile
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        if work:
            y = x * 2.0
            torch.cuda.synchronize()
    t_exit = time.perf_counter() - t
    n = len(list(prof.profiler.kineto_results.events())) if work else 0
    return t_exit, n

print(f"event-timed x*2 before any profiler: {event_median_us():.2f} us")
mode = sys.argv[1] if len(sys.argv) > 1 else "work"
t = time.perf_counter(); import torch.profiler; print(f"import torch.profiler: {time.perf_counter() - t:.3f} s")
for i in range(4):
    w = not (mode == "warm" and i == 0)
    dt, n = session(w)
    print(f"session {i} ({'work' if w else 'empty'}): {dt:.3f} s, {n} events")
print(f"event-timed x*2 after the profiler: {event_median_us():.2f} us")
