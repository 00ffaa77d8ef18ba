"""The backend seam: the registry picks Triton for .py and CUDA C++ for .cu (a .cuh header refused with a reason); an @triton.autotune kernel is
pinned to the autotuner's own Config objects (hooks kept), under the interpreter here and in static inspection."""

from __future__ import annotations

import pytest

from kernelpilot.errors import ContractError

# A config pre_hook that writes an input: without it the kernel multiplies by 0 and the check fails.
HOOKED = '''
import torch
import triton
import triton.language as tl

SHAPE = {"N": 4096}
CPU_SHAPE = {"N": 300}
POST_CALLS = []

def _set_scale(nargs):
    nargs["scale_ptr"].fill_(2.0)

def _post(nargs, exception):
    POST_CALLS.append(exception)

@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2, pre_hook=_set_scale),
                          triton.Config({"BLOCK": 128}, num_warps=4, pre_hook=_set_scale)],
                 key=["n"], post_hook=_post)
@triton.jit
def _scaled(x_ptr, scale_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) * tl.load(scale_ptr), mask=m)

def setup(N, seed=0, device="cuda"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "scale": torch.zeros(1, device=device), "out": torch.empty_like(x)}, "scratch": ["scale"],
            "outputs": ["out"]}

def run_kernel(x, scale, out):
    _scaled[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, scale, out, x.numel())

def reference(x, scale, out):
    return x * 2.0
'''


@pytest.fixture
def hooked(tmp_path):
    from kernelpilot.kernels.contract import load_kernel

    path = tmp_path / "hooked.py"
    path.write_text(HOOKED)
    return load_kernel(path, interpreted=True)


def test_registry_picks_triton_for_py_and_cuda_for_cu(tmp_path):
    from kernelpilot.backends import Backend, Support, backend_for
    from kernelpilot.kernels.contract import load_kernel

    backend = backend_for(tmp_path / "k.py")
    assert backend.name == "triton" and isinstance(backend, Backend)
    assert backend.export_config({"BLOCK": 64, "num_warps": 2}) == "triton.Config({'BLOCK': 64}, num_warps=2)"
    cuda = backend_for(tmp_path / "k.cu")
    assert cuda.name == "cuda" and isinstance(cuda, Backend)
    assert cuda.export_config({"BLOCK_SIZE": 256, "ROWS": 2}) == "-DBLOCK_SIZE=256 -DROWS=2"
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    with pytest.raises(ContractError) as err:
        load_kernel(cu)
    assert "no `solve` function found" in err.value.message
    assert err.value.hint
    with pytest.raises(ContractError, match="a .cuh header has no solve"):
        backend_for(tmp_path / "k.cuh")
    with pytest.raises(ContractError, match="no kernelpilot backend reads .txt"):
        backend_for(tmp_path / "k.txt")
    assert not Support.no("why") and Support.no("why").reason == "why" and Support.yes()


def test_pinning_keeps_the_config_pre_hook_and_the_autotuner_hooks(hooked):
    from kernelpilot.measure.correctness import check_correctness

    tuner = hooked.module._scaled
    listed = list(hooked.extras["autotune_configs"])
    pre, post = tuner.pre_hook, tuner.post_hook
    result = check_correctness(hooked, {"N": 300}, {"BLOCK": 128, "num_warps": 4, "num_stages": 3}, "cpu")
    assert result.passed, result.summary
    assert tuner.configs == [listed[1]] and tuner.configs[0] is listed[1], "pinned to the listed object itself"
    assert tuner.pre_hook is pre and tuner.post_hook is post and tuner.post_hook.__name__ == "_post"


def test_a_config_not_listed_copies_the_hook_of_the_same_meta_parameters(hooked):
    from kernelpilot.kernels.contract import make_case, run_kernel

    case = make_case(hooked, {"N": 300}, 0, "cpu")
    run_kernel(hooked, case.inputs, {"BLOCK": 64, "num_warps": 4, "num_stages": 3})  # listed: BLOCK 64 with 2 warps only
    pinned = hooked.module._scaled.configs[0]
    assert pinned not in hooked.extras["autotune_configs"] and pinned.num_warps == 4
    assert pinned.pre_hook is hooked.module._set_scale
    assert float(case.inputs["scale"]) == 2.0
    assert case.inputs["out"].allclose(case.inputs["x"] * 2.0)


def test_tune_exports_the_config_line_from_the_backend():
    from kernelpilot.backends.triton.config import to_triton_config
    from kernelpilot.search import tune

    assert tune.to_triton_config is to_triton_config
    assert to_triton_config({"BLOCK_M": 128, "num_stages": 3, "num_warps": 4}) == \
        "triton.Config({'BLOCK_M': 128}, num_warps=4, num_stages=3)"


def test_static_inspection_pins_an_autotuned_kernel(tmp_path):
    from kernelpilot.profile.static import StaticReport, inspect_configs

    path = tmp_path / "hooked.py"
    path.write_text(HOOKED)
    [report] = inspect_configs(path, [{"BLOCK": 128, "num_warps": 4, "num_stages": 3}], arch="sm_90", max_workers=1,
                               spill_bytes=False)
    assert isinstance(report, StaticReport), report
    assert report.num_warps == 4 and report.constexprs.get("BLOCK") == 128


@pytest.mark.gpu
def test_pinned_pre_hook_on_gpu(tmp_path):
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.measure.correctness import check_correctness

    path = tmp_path / "hooked.py"
    path.write_text(HOOKED)
    kf = load_kernel(path, interpreted=False)
    for config in ({"BLOCK": 64, "num_warps": 2, "num_stages": 3}, {"BLOCK": 128, "num_warps": 4, "num_stages": 3}):
        result = check_correctness(kf, {"N": 4096}, config, "cuda")
        assert result.passed, result.summary


def test_an_autotuner_under_heuristics_is_found_and_pinned(tmp_path):
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.measure.correctness import check_correctness

    # heuristics above autotune: the module attribute `_scaled` is a Heuristics whose .fn is the Autotuner
    source = HOOKED.replace("@triton.autotune(", "@triton.heuristics({'EVEN': lambda a: a['n'] % 2 == 0})\n"
                                                 "@triton.autotune(")
    source = source.replace("n, BLOCK: tl.constexpr)", "n, BLOCK: tl.constexpr, EVEN: tl.constexpr)")
    path = tmp_path / "wrapped.py"
    path.write_text(source)
    kf = load_kernel(path, interpreted=True)
    assert kf.extras["autotuner"] == "_scaled" and kf.tunables["BLOCK"] == [64, 128]
    result = check_correctness(kf, {"N": 300}, {"BLOCK": 64, "num_warps": 2, "num_stages": 3}, "cpu")
    assert result.passed, result.summary
