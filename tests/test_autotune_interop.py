"""A @triton.autotune kernel is tuned with its own configs as the space (under the interpreter here), and the best
comes back as a triton.Config line."""

from __future__ import annotations

import pytest

AUTOTUNED = '''
import torch
import triton
import triton.language as tl

SHAPE = {"N": 1 << 20}
CPU_SHAPE = {"N": 1000}

@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2),
                          triton.Config({"BLOCK": 128}, num_warps=4),
                          triton.Config({"BLOCK": 256}, num_warps=4, num_stages=2)], key=["n"])
@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)

def setup(N, seed=0, device="cuda"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x, y = torch.randn(N, generator=g).to(device), torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x)}, "outputs": ["out"]}

def run_kernel(x, y, out):
    _add[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel())

def reference(x, y, out):
    return x + y
'''


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "kp_home"))


def test_autotune_configs_are_the_space(tmp_path):
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.search.space import SearchSpace

    path = tmp_path / "auto.py"
    path.write_text(AUTOTUNED)
    kf = load_kernel(path, interpreted=True)
    assert kf.extras["autotuner"] == "_add"
    # numeric values in increasing order (the configs list num_stages 3 before 2): "up" is a larger value
    assert kf.tunables == {"BLOCK": [64, 128, 256], "num_warps": [2, 4], "num_stages": [2, 3]}
    space = SearchSpace.from_kernel(kf)
    assert space.total_size == 12 and space.size == 3, "exactly the listed combinations"
    assert {"BLOCK": 64, "num_warps": 4, "num_stages": 3} not in space


def test_autotuned_kernel_is_tuned_and_exported(tmp_path):
    from kernelpilot.search.tune import tune

    path = tmp_path / "auto.py"
    path.write_text(AUTOTUNED)
    r = tune(path, strategy="exhaustive", ab_samples=3)
    assert [e.status for e in r.evaluations] == ["ok", "ok", "ok"]
    assert r.best is not None and r.triton_config.startswith("triton.Config({'BLOCK': ")
    # the config list is compiled ahead like any space (sm_90 on this CPU): all three compile, none is pruned
    assert r.prune is not None and (r.prune.n_configs, r.prune.n_compiled, r.prune.n_pruned) == (3, 3, 0)


def test_a_listed_config_that_cannot_compile_is_pruned_with_its_reason(tmp_path):
    """Issue 25: a config list is searched as a set, every config tried or pruned with a reason. A listed BLOCK
    that is not a power of two fails Triton's compile (``tl.arange``): compile-ahead answers it ``pruned`` with
    the compiler's message and the other two are measured."""
    from kernelpilot.search.tune import tune

    path = tmp_path / "auto.py"
    path.write_text(AUTOTUNED.replace('triton.Config({"BLOCK": 128}, num_warps=4)',
                                      'triton.Config({"BLOCK": 96}, num_warps=4)'))
    r = tune(path, strategy="exhaustive", ab_samples=3)
    by_block = {e.config["BLOCK"]: e for e in r.evaluations}
    assert set(by_block) == {64, 96, 256}
    assert by_block[96].status == "pruned" and "arange" in by_block[96].message
    assert by_block[64].status == by_block[256].status == "ok"
    assert r.prune.by_reason == {"compile": 1} and r.best.config["BLOCK"] in (64, 256)
