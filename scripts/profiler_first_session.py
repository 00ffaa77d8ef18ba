"""Issue 11: where the first torch.profiler session of a process spends its 4.7-6.2 s. A fresh process inits CUDA,
then runs two empty CUDA-activity sessions, timing enter, exit and reading the raw Kineto events separately, with
cProfile around the first one (top functions by total and own time). Prints lines and the two profiles.
    python3 scripts/profiler_first_session.py [torch.profiler|autograd]"""
import cProfile
import io
import pstats
import sys
import time

import torch

torch.cuda.init()
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
t = time.perf_counter()
from torch.profiler import ProfilerActivity, profile  # noqa: E402

print(f"import torch.profiler: {time.perf_counter() - t:.3f} s")


API = sys.argv[1] if len(sys.argv) > 1 else "torch.profiler"


def session() -> dict[str, float]:
    if API == "autograd":  # what kernelpilot.measure.activity uses
        p = torch.autograd.profiler.profile(use_kineto=True, use_cpu=False, use_device="cuda")
    else:
        p = profile(activities=[ProfilerActivity.CUDA])
    t0 = time.perf_counter()
    p.__enter__()
    t1 = time.perf_counter()
    y = x * 2.0
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    p.__exit__(None, None, None)
    t3 = time.perf_counter()
    n = len((p if API == "autograd" else p.profiler).kineto_results.events())
    t4 = time.perf_counter()
    return {"enter_s": t1 - t0, "work_s": t2 - t1, "exit_s": t3 - t2, "events_s": t4 - t3, "events": n}


prof = cProfile.Profile()
prof.enable()
first = session()
prof.disable()
print(API, "session 1:", {k: round(v, 4) for k, v in first.items()}, "inductor imported:",
      "torch._inductor" in sys.modules)
for i in (2, 3):
    print(f"session {i}:", {k: round(v, 4) for k, v in session().items()})
for key in ("cumulative", "tottime"):
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats(key).print_stats(18)
    print(s.getvalue()[-4000:])
