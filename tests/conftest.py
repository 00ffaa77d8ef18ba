"""Shared test helpers: kernel files written to a temp folder, and the GPU marker's skip."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "src" / "kernelpilot" / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


# optimize, tune and session record their outcomes in the experience log: never in the user's ~/.kernelpilot
os.environ.setdefault("KERNELPILOT_EXPERIENCE", os.path.join(__import__("tempfile").mkdtemp(prefix="kp-exp-"),
                                                             "experience.db"))
# the per-user key that signs evaluation-cache lines (search/cache_trust.py): never the user's own
os.environ.setdefault("KERNELPILOT_SECRET_DIR", __import__("tempfile").mkdtemp(prefix="kp-keys-"))

if not has_gpu():
    # no GPU: kernels run under the interpreter, which must be on before triton is first imported
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-check.sh on the device)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# A pure-torch kernel file obeying the contract: fast, and lets tests plant bugs by substituting BODY.
TORCH_KERNEL = '''
import torch
SHAPE = {"N": 1000}
CPU_SHAPE = {"N": 300}
TUNABLES = {"BLOCK": [64, 128, 256], "num_warps": [2, 4, 8]}
DEFAULT_CONFIG = {"BLOCK": 64, "num_warps": 4}

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    y = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}

def run_kernel(x, y, out, N, *, BLOCK, num_warps, **_):
    BODY

def reference(x, y, out, N, **_):
    return x + y
'''


@pytest.fixture
def write_kernel(tmp_path):
    """Write a kernel file; ``body`` replaces BODY in TORCH_KERNEL unless ``source`` is given."""

    def write(body: str = "out.copy_(x + y)", *, source: str | None = None, name: str = "k.py") -> Path:
        text = source if source is not None else TORCH_KERNEL.replace("BODY", body)
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


# The five reports the pattern and card tests share (three from /work/shared/fixtures and kernelpilot's own runs).
NCU_FIXTURE_NAMES = ("h200_add_fp32_memory_bound", "h200_matmul_bf16_4096", "h200_softmax_fp32_8192_v0",
                     "h200_matmul_bf16_64x64x32_s2", "h200_matmul_bf16_128x64x32_s2")


@pytest.fixture(scope="session")
def ncu_fixture_metrics():
    """Each shared fixture's first launch, read once per session the production way (child process)."""
    from kernelpilot.profile.metrics import read_report

    return {n: read_report(FIXTURES / "ncu" / f"{n}.ncu-rep")[0] for n in NCU_FIXTURE_NAMES}
