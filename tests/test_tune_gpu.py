"""GPU: a real illegal memory access poisons the worker's CUDA context; it is recorded and the search goes on in a
fresh worker. The broken kernel file tests/data/broken/modes.py, compiled, shows every other failure type survived
too (compile error, NaN, wrong result, a kernel spinning on the GPU). Run by scripts/issue4-device.sh on the device;
skipped on CPU machines (conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

OOB_KERNEL = '''
import torch
import triton
import triton.language as tl

SHAPE = {"N": 1 << 20}
TUNABLES = {"BLOCK": [256, 1024], "OFFSET_ELEMS": [0, 1 << 38]}
DEFAULT_CONFIG = {"BLOCK": 256, "OFFSET_ELEMS": 0}

@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, offset, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    v = tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m)
    tl.store(out_ptr + i + offset, v, mask=m)  # offset 2^38 elements: far outside any allocation

def setup(N, seed=0, device="cuda"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x, y = torch.randn(N, generator=g).to(device), torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x)}, "outputs": ["out"]}

def run_kernel(x, y, out, *, BLOCK, OFFSET_ELEMS):
    _add[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), OFFSET_ELEMS, BLOCK=BLOCK)

def reference(x, y, out):
    return x + y
'''


def test_illegal_memory_access_is_survived(tmp_path, monkeypatch):
    from kernelpilot.search.tune import tune

    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    kernel = tmp_path / "oob.py"
    kernel.write_text(OOB_KERNEL)
    r = tune(kernel, strategy="exhaustive", prune=False, ab_samples=10, timeout_s=120)
    status = {(e.config["BLOCK"], e.config["OFFSET_ELEMS"]): e.status for e in r.evaluations}
    assert status[(256, 1 << 38)] == "illegal_memory_access"
    assert status[(1024, 1 << 38)] == "illegal_memory_access"
    assert status[(256, 0)] == "ok" and status[(1024, 0)] == "ok", "configs after a poisoned context still run"
    assert r.worker_restarts >= 2 and r.best is not None and r.best.config["OFFSET_ELEMS"] == 0


BROKEN = Path(__file__).parent / "data" / "broken" / "modes.py"
# MODE -> the status a search must record with the kernel compiled for the GPU (tests/data/broken/modes.py).
BROKEN_ON_GPU = {"compile_error": "compile_error", "nan": "nan", "wrong": "wrong_result", "hang": "timeout",
                 "illegal": "illegal_memory_access", "ok": "ok"}


def test_real_broken_kernels_are_survived_on_the_gpu(tmp_path, monkeypatch):
    """Every failure of a real broken @triton.jit kernel, compiled: a compile error, NaN, a wrong result, a kernel
    spinning on the GPU (killed by the timeout: killing the worker process ends its context and frees the GPU) and
    an illegal memory access (poisoned context, worker replaced); the ok config after them runs in a fresh worker."""
    import json

    from kernelpilot.search.tune import tune
    from kernelpilot.search.worker import default_devices

    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELPILOT_CACHE", str(tmp_path / "cache"))
    one_gpu = default_devices(False)[:1]  # one worker, so the ok config runs after the failures, in a fresh one
    r = tune(BROKEN, strategy="exhaustive", prune=False, timeout_s=15, ab_samples=5, devices=one_gpu)
    assert [e.config["MODE"] for e in r.evaluations] == list(BROKEN_ON_GPU)
    got = {e.config["MODE"]: e.status for e in r.evaluations}
    assert got == BROKEN_ON_GPU, {e.config["MODE"]: e.message[:300] for e in r.evaluations}
    by = {e.config["MODE"]: e for e in r.evaluations}
    assert "power of 2" in by["compile_error"].message
    assert "no answer within 15 s" in by["hang"].message
    assert "illegal memory access" in by["illegal"].message.lower()
    assert r.measured and by["ok"].duration_ns and by["ok"].samples_ns
    assert r.best is not None and r.best.config["MODE"] == "ok"
    # one worker killed after the hang, one replaced after the poisoned context; the ok config ran in the third
    assert r.worker_restarts == 2 and r.stopped == "strategy finished"
    [cache] = list((tmp_path / "cache").glob("*.jsonl"))
    lines = [json.loads(line) for line in cache.read_text().splitlines()[1:] if line.strip()]
    assert {rec["evaluation"]["config"]["MODE"]: rec["evaluation"]["status"] for rec in lines} == BROKEN_ON_GPU
