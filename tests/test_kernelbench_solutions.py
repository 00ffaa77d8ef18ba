"""benchmarks/kernelbench: the size scaler of check_small.py, and the shipped solutions' pairing by KernelBench's
naming. A solution checked against the real problems needs the KernelBench checkout (third_party/, ignored): that
test is skipped without it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from kernelpilot.kernels import kernelbench

BENCH = ROOT / "benchmarks" / "kernelbench"
SOLUTIONS = BENCH / "solutions"
FETCHED = ROOT / "third_party" / "KernelBench" / "KernelBench"


def _check_small():
    spec = importlib.util.spec_from_file_location("kb_check_small", BENCH / "check_small.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n, k):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x * 2

batch_size = 4096
dim = 4095
M = 1024 * 4
input_shape = (32768, 3)
depth, width = 16, 64
reduce_dim = 1
factor = 2.5
bias_shape = (dim,)

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return [reduce_dim, factor]
'''


def test_scale_source_caps_large_integers_keeps_small_ones_and_odd_stays_odd() -> None:
    cs = _check_small()
    source, changes = cs.scale_source(PROBLEM, 4096)
    ns: dict = {}
    exec(compile(source, "<small>", "exec"), ns)  # noqa: S102 - our own test text
    # six large integers (batch_size, dim, M, 32768 in input_shape, depth, width): cap = int(4096 ** (1/6)) = 4,
    # raised to KEEP_AT_MOST + 1 = 9
    assert ns["batch_size"] == 9 and ns["M"] == 9 and ns["depth"] == 9 and ns["width"] == 9
    assert ns["dim"] == 9 and ns["dim"] % 2 == 1  # 4095 is odd: the scaled size stays odd
    assert ns["input_shape"] == (9, 3)  # an int inside a tuple is scaled, a small one kept
    assert ns["reduce_dim"] == 1 and ns["factor"] == 2.5  # small ints and floats untouched
    assert ns["bias_shape"] == (ns["dim"],)  # written from a scaled name: follows it
    assert changes["M"] == (4096, 9) and "reduce_dim" not in changes
    assert ns["get_inputs"]()[0].shape == (9, 9)


def test_scale_source_overrides_win_and_an_unchanged_file_is_returned_as_is() -> None:
    cs = _check_small()
    source, changes = cs.scale_source(PROBLEM, 4096, {"dim": 9001, "batch_size": 3})
    ns: dict = {}
    exec(compile(source, "<small>", "exec"), ns)  # noqa: S102
    assert (ns["batch_size"], ns["dim"]) == (3, 9001) and changes["dim"] == (4095, 9001)
    tiny = "batch_size = 4\ndef get_inputs():\n    return []\n"
    assert cs.scale_source(tiny, 4096) == (tiny, {})


def test_every_solution_is_named_as_kernelbench_names_generated_kernels_and_is_a_solution() -> None:
    cs = _check_small()
    files = sorted(SOLUTIONS.glob("*.py"))
    assert len(files) >= 12
    for f in files:
        assert cs.SOLUTION_NAME.match(f.name), f.name
        assert kernelbench.is_solution_file(f), f.name
    correct = [f for f in files if f.name not in cs.EXPECTED]
    levels = {cs.SOLUTION_NAME.match(f.name).group(1) for f in correct}
    assert len(correct) >= 10 and levels == {"1", "2"}
    assert sorted(cs.EXPECTED.values()) == ["incorrect", "kernel_not_launched"]
    assert all((SOLUTIONS / name).is_file() for name in cs.EXPECTED)


@pytest.mark.skipif(not FETCHED.is_dir(), reason="KernelBench's problems are not fetched into third_party/")
def test_check_small_on_the_relu_pair_passes_the_solution_and_names_the_library_one() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "check_small.py"), "--only", "problem_19_"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("level_")]
    assert {r[0]: r[2] for r in rows} == {"level_1_problem_19_sample_0_kernel.py": "passed",
                                          "level_1_problem_19_sample_2_kernel.py": "kernel_not_launched"}
