"""The static screen (kernelpilot.measure.screen): each rule fires on a minimal snippet at the right line, and no
honest kernel file of the project is refused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelpilot.measure.screen import RULES, screen_file, screen_source

ROOT = Path(__file__).resolve().parents[1]

# (rule, source): the line ending in "# <-" is where the finding must be reported.
CASES = [
    ("patches_timer", "import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.0  # <-"),
    ("patches_timer", "import time\n\ndef f():\n    time.perf_counter = lambda: 0.0  # <-"),
    ("patches_timer", "import time as t\nt.perf_counter_ns = int  # <-"),
    ("patches_timer", "import triton.testing\ntriton.testing.do_bench = lambda *a, **k: 1e-3  # <-"),
    ("patches_timer", "import torch\nsetattr(torch.cuda, 'synchronize', lambda: None)  # <-"),
    ("patches_timer", "from torch.cuda import Event\nEvent.elapsed_time = None  # <-"),
    ("patches_timer", "import torch\nEv = torch.cuda.Event\nEv.record = None  # <-"),
    ("patches_timer", "import torch\ndel torch.cuda.Event.elapsed_time  # <-"),
    ("patches_timer", "import torch\nsetattr(getattr(torch.cuda, 'Event'), 'elapsed_time', None)  # <-"),
    ("patches_timer", "import importlib\nsetattr(importlib.import_module('time'), 'monotonic', None)  # <-"),
    ("patches_timer", "import statistics\nstatistics.median = min  # <-"),
    ("patches_timer", "import kernelpilot.measure.timing as kt\nkt.summarize = dict  # <-"),
    ("patches_timer", "import torch\ntype.__setattr__(torch.cuda.Event, 'elapsed_time', None)  # <-"),
    ("patches_module", "import torch\ntorch.allclose = lambda *a, **k: True  # <-"),
    ("patches_module", "import torch\nsetattr(torch, 'allclose', lambda *a, **k: True)  # <-"),
    ("patches_module", "import torch\ntorch.Tensor.__eq__ = lambda a, b: True  # <-"),
    ("patches_module", "import torch\nvars(torch)['allclose'] = None  # <-"),
    ("patches_module", "import torch.nn.functional as F\nF.softmax = None  # <-"),
    ("patches_sys_modules", "import sys\nsys.modules['torch'].allclose = None  # <-"),
    ("patches_sys_modules", "import sys\nsys.modules['triton'] = object()  # <-"),
    ("patches_sys_modules", "import sys\nm = sys.modules.get('torch')\nm.allclose = None  # <-"),
    ("patches_sys_modules", "import sys\nsetattr(sys.modules[name], 'x', 1)  # <-"),
    ("writes_builtins", "import builtins\nbuiltins.sorted = list  # <-"),
    ("writes_builtins", "import builtins\nsetattr(builtins, 'len', None)  # <-"),
    ("writes_builtins", "__builtins__['print'] = None  # <-"),
    ("exec_eval", "exec('x = 1')  # <-"),
    ("exec_eval", "y = eval('1 + 1')  # <-"),
    ("exec_eval", "code = compile('1', 'f', 'eval')  # <-"),
    ("exec_eval", "import builtins\ngetattr(builtins, 'exec')('x = 1')  # <-"),
    ("uses_ctypes", "import ctypes  # <-"),
    ("uses_ctypes", "from cffi import FFI  # <-"),
    ("uses_ctypes", "import importlib\nimportlib.import_module('ctypes')  # <-"),
    ("uses_gc", "import gc\nobjs = gc.get_objects()  # <-"),
    ("uses_gc", "from gc import get_referrers  # <-"),
    ("inspects_frames", "import sys\nf = sys._getframe(1)  # <-"),
    ("inspects_frames", "import inspect\nstack = inspect.stack()  # <-"),
    ("inspects_frames", "import inspect\nf = inspect.currentframe()  # <-"),
    ("inspects_frames", "def f(frame):\n    return frame.f_back  # <-"),
    ("inspects_frames", "import sys\nsys.settrace(None)  # <-"),
    ("reads_proc", "data = open('/proc/self/maps').read()  # <-"),
    ("reads_proc", "import os\npath = f'/proc/{os.getpid()}/mem'  # <-"),
    ("reads_caller", "import __main__  # <-"),
    ("reads_caller", "import os\nparent = os.getppid()  # <-"),
    ("reads_caller", "import sys\nmain = sys.modules['__main__']  # <-"),
    ("unparsable", "def f(:  # <-\n    pass"),
    ("sets_backend_flags", "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True  # <-"),
    ("sets_backend_flags", "import torch\ntorch.set_float32_matmul_precision('medium')  # <-"),
    ("uses_streams", "import torch\ns = torch.cuda.Stream()  # <-"),
    ("uses_streams", "import torch\n\ndef f(s):\n    with torch.cuda.stream(s):  # <-\n        pass"),
    ("uses_streams", "from torch.cuda import current_stream  # <-"),
    ("uses_threads", "import threading  # <-"),
    ("uses_threads", "from concurrent.futures import ThreadPoolExecutor  # <-"),
    ("uses_processes", "import subprocess  # <-"),
    ("uses_processes", "import os\npid = os.fork()  # <-"),
    ("events_or_sync", "import torch\ntorch.cuda.synchronize()  # <-"),
    ("events_or_sync", "import torch\ne = torch.cuda.Event(enable_timing=True)  # <-"),
    ("events_or_sync", "def f(a, b):\n    return a.elapsed_time(b)  # <-"),
    ("touches_timing", "import time\nt0 = time.perf_counter()  # <-"),
    ("touches_timing", "from triton.testing import do_bench  # <-"),
    ("imports_gc", "import gc  # <-\ngc.collect()"),
    ("reads_sys_modules", "import sys\nmods = list(sys.modules.values())  # <-"),
    ("dynamic_import", "import importlib\nm = importlib.import_module('ti' + 'me')  # <-"),
    ("dynamic_import", "m = __import__('torch')  # <-"),
    ("dynamic_getattr", "def f(o, a, b):\n    return getattr(o, a + b)  # <-"),
    ("dynamic_setattr", "def f(o):\n    setattr(o, 'x', 1)  # <-"),
    ("loosens_tolerance", "atol, rtol = 1.0, 1.0  # <-"),
    ("loosens_tolerance", "rtol: float = 0.5  # <-"),
]

RUN_KERNEL_CASES = [
    ("torch_compute_in_run_kernel", "    y.copy_(torch.matmul(x, x))  # <-"),
    ("torch_compute_in_run_kernel", "    y.copy_(F.softmax(x, dim=-1))  # <-"),
    ("torch_compute_in_run_kernel", "    y.copy_(x @ x)  # <-"),
    ("torch_compute_in_run_kernel", "    s = x.sum()  # <-"),
    ("torch_compute_in_run_kernel", "    y.copy_(reference(x, y))  # <-"),
    ("torch_compute_in_run_kernel", "    _helper(x, y)\n\n\ndef _helper(x, y):\n    y.copy_(torch.exp(x))  # <-"),
    ("no_launch", "    y.fill_(0.0)"),
    ("keys_on_pointers", "    key = x.data_ptr()  # <-"),
    ("keys_on_pointers", "    key = id(x)  # <-"),
    ("module_state", "    _CACHE[1] = y  # <-"),
    ("module_state", "    global _COUNT  # <-\n    _COUNT = 1"),
    ("module_state", "    _CACHE.setdefault(1, y)  # <-"),
]

HEADER = '''import torch
import torch.nn.functional as F
import triton
import triton.language as tl

_CACHE = {}
_COUNT = 0


@triton.jit
def _k(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < N).sum(), mask=offs < N)


def reference(x, y, **_):
    return torch.softmax(x @ x.T, dim=-1).sum(dim=0)


def run_kernel(x, y, *, BLOCK, **_):
'''

SETUP_CASES = [
    "    out = reference(x, x)  # <-",
    "    out = run_kernel(x, x, BLOCK=1)  # <-",
    "    _k[(1,)](x, x, 1, BLOCK=1)  # <-",
    "    _CACHE[x.data_ptr()] = torch.matmul(x, x)  # <-",
    "    ref = x @ x  # <-",
]


def _expected_line(source: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if line.rstrip().endswith("# <-"))


@pytest.mark.parametrize("rule,source", CASES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(CASES)])
def test_rule_fires_at_its_line(rule, source):
    report = screen_source(source)
    hits = [f for f in report.findings if f.rule == rule]
    assert hits, f"{rule} did not fire on:\n{source}\n{report.lines()}"
    assert _expected_line(source) in {f.line for f in hits}, report.lines()
    assert all(f.severity == RULES[rule][0] and f.hint == RULES[rule][1] for f in hits)
    assert report.refused == any(f.severity == "refuse" for f in report.findings)


@pytest.mark.parametrize("rule,body", RUN_KERNEL_CASES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(RUN_KERNEL_CASES)])
def test_run_kernel_rules(rule, body):
    launch = "" if rule == "no_launch" else "    _k[(1,)](x, y, 1, BLOCK=BLOCK)\n"
    source = HEADER + launch + body + "\n"
    report = screen_source(source)
    hits = [f for f in report.findings if f.rule == rule]
    assert hits, report.lines()
    if "# <-" in source:
        assert _expected_line(source) in {f.line for f in hits}, report.lines()
    assert not report.refused


@pytest.mark.parametrize("body", SETUP_CASES)
def test_setup_doing_the_work_is_flagged(body):
    source = HEADER + "    _k[(1,)](x, y, 1, BLOCK=BLOCK)\n\n\ndef setup(N, seed=0, device='cpu', **_):\n" \
        "    x = torch.randn(N)\n" + body + "\n    return {'inputs': {'x': x}, 'outputs': ['x']}\n"
    report = screen_source(source)
    hits = [f for f in report.findings if f.rule == "setup_does_work"]
    assert hits and _expected_line(source) in {f.line for f in hits}, report.lines()


def test_glue_and_reference_are_not_flagged():
    source = HEADER + textwrap.indent(textwrap.dedent('''\
        out = torch.empty_like(x).view(-1).contiguous()
        n = x.numel() * x.stride(0) + x.shape[0]
        tmp = torch.empty((n,), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(n, BLOCK),)
        _k[grid](x.reshape(-1), out, n, BLOCK=BLOCK)
    '''), "    ")
    report = screen_source(source)
    assert report.findings == [], report.lines()  # reference() computing with torch is normal


def test_things_a_kernel_file_may_do():
    source = textwrap.dedent('''\
        import os
        import sys
        import importlib.util
        import kernelpilot
        from kernelpilot.kernels import contract
        from pathlib import Path

        _PATH = Path(os.environ.get("KP_X", Path(__file__).parent / "x.py"))
        name = "helper_module"
        spec = importlib.util.spec_from_file_location(name, _PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        os.environ["TRITON_PRINT_AUTOTUNING"] = "1"

        class Box:
            def __init__(self):
                self.value = 1

        def f(box, x):
            box.value = x.max()
            return max(1, 2), min(3, 4)
    ''')
    report = screen_source(source)
    assert report.findings == [], report.lines()


def test_screen_file_reads_the_file(tmp_path):
    path = tmp_path / "k.py"
    path.write_text("import torch\ntorch.cuda.Event.elapsed_time = None\n")
    report = screen_file(path)
    assert report.refused and report.path == str(path)
    assert report.lines()[0].startswith(f"{path}:2: refuse patches_timer")
    with pytest.raises(FileNotFoundError):
        screen_file(tmp_path / "missing.py")


HONEST = sorted([*(ROOT / "src" / "kernelpilot" / "examples").glob("*.py"),
                 *(ROOT / "benchmarks" / "library").glob("*.py"), *(ROOT / "tests" / "fixtures").glob("**/*.py"),
                 *(ROOT / "tests" / "adversarial" / "honest").glob("*.py"), *(ROOT / "tests" / "data").glob("**/*.py")])


@pytest.mark.parametrize("path", HONEST, ids=[str(p.relative_to(ROOT)) for p in HONEST])
def test_honest_files_are_not_refused(path):
    report = screen_file(path)
    assert not report.refused, report.lines()
    if "adversarial" not in path.parts:  # the project's own kernels: not even a flag
        assert report.findings == [], report.lines()
