"""GPU: a real illegal memory access poisons the worker's CUDA context; it is recorded and the search goes on in a
fresh worker. Run by scripts/issue4-device.sh on the device; skipped on CPU machines (conftest)."""

from __future__ import annotations

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
