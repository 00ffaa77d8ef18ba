"""The wrappers of torchao's int8 matmul and of Triton's matmul and attention tutorials (benchmarks/library/).

On a CPU: torchao's kernel through kernelpilot's check under the Triton interpreter (skipped without torchao, or
when the installed Triton's interpreter has no block pointers), its search space is torchao's own config list,
and the tutorial wrappers refuse to load with a message that names what is missing. GPU-marked: every wrapper's
check compiled, and the attention wrapper refuses a config the tutorial's pruner drops.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelpilot.errors import ContractError
from kernelpilot.kernels.contract import load_kernel, make_case, resolve_shape
from kernelpilot.measure.correctness import check_correctness

LIBRARY = Path(__file__).resolve().parents[1] / "benchmarks" / "library"
TUTORIALS = Path(__file__).resolve().parents[1] / "third_party" / "triton_tutorials"


def _interpreted(name: str):
    from kernelpilot.backends.triton.interpreter import install_workarounds

    install_workarounds()  # after TRITON_INTERPRET=1 (conftest) and before the kernel module is imported
    return load_kernel(LIBRARY / f"{name}.py", interpreted=True)


def _interpreter_has_block_pointers() -> bool:
    """Whether this Triton's interpreter runs tl.make_block_ptr (Triton 3.6 does; later ones removed it)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _copy(src, dst, N: tl.constexpr):
        ptr = tl.make_block_ptr(src, shape=(N,), strides=(1,), offsets=(0,), block_shape=(N,), order=(0,))
        tl.store(dst + tl.arange(0, N), tl.load(ptr))

    src, dst = torch.arange(16, dtype=torch.float32), torch.zeros(16)
    try:
        _copy[(1,)](src, dst, N=16)
    except Exception:  # noqa: BLE001 - any failure of the probe means: not runnable here
        return False
    return torch.equal(src, dst)


def test_torchao_space_is_torchaos_own_config_list():
    """The search space is torchao's int8_mm_kernel_configs, the very objects, in order; v0 is its first entry."""
    pytest.importorskip("torchao")
    from torchao.kernel.intmm_triton import int8_mm_kernel_configs

    kf = _interpreted("torchao_int8_mm")
    listed = kf.extras["autotune_configs"]
    assert len(listed) == len(int8_mm_kernel_configs) > 1
    assert all(a is b for a, b in zip(listed, int8_mm_kernel_configs))
    first = int8_mm_kernel_configs[0]
    assert kf.default_config == {**first.kwargs, "num_warps": first.num_warps, "num_stages": first.num_stages}


@pytest.mark.parametrize("config", [None, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8,
                                           "num_warps": 4, "num_stages": 2}])
def test_torchao_int8_mm_is_exact_under_the_interpreter(config):
    """int8 x int8 -> int32 equals the exact product at CPU_SHAPE (64 x 96 x 80: every block size overhangs, the
    boundary checks run) for the first config and for a 128-cube one."""
    pytest.importorskip("torchao")
    if not _interpreter_has_block_pointers():
        pytest.skip("this Triton's interpreter has no block pointers (removed after 3.6); torchao's kernel uses them")
    kf = _interpreted("torchao_int8_mm")
    result = check_correctness(kf, resolve_shape(kf), config or kf.default_config, "cpu")
    assert result.passed, result.summary


def test_matmul_tutorial_without_its_files_or_gpu_says_what_is_missing(tmp_path, monkeypatch):
    """Missing tutorial -> named; a defs file that is not the tutorial's prefix up to "# Unit Test" -> refused;
    a right pair without a GPU -> "run on a GPU", and the defs file is never imported."""
    monkeypatch.setenv("KP_TRITON_TUTORIAL_MATMUL", str(tmp_path / "absent.py"))
    with pytest.raises(ContractError, match="absent.py is not there"):
        load_kernel(LIBRARY / "triton_tutorial_matmul.py", interpreted=True)
    head = "raise RuntimeError('the definitions must not be imported here')\n"
    (tmp_path / "t.py").write_text(head + "# Unit Test\nprint('test')\n")
    monkeypatch.setenv("KP_TRITON_TUTORIAL_MATMUL", str(tmp_path / "t.py"))
    (tmp_path / "t.defs.py").write_text(head + "x = 1\n")  # one line more than the tutorial's prefix
    with pytest.raises(ContractError, match="t.defs.py is not .*t.py up to its '# Unit Test"):
        load_kernel(LIBRARY / "triton_tutorial_matmul.py", interpreted=True)
    if not torch.cuda.is_available():
        (tmp_path / "t.defs.py").write_text(head)
        with pytest.raises(ContractError, match="queries the GPU driver at import .* run on a GPU"):
            load_kernel(LIBRARY / "triton_tutorial_matmul.py", interpreted=True)


def _needs_tutorial(name: str) -> None:
    env = {"triton_tutorial_matmul": "KP_TRITON_TUTORIAL_MATMUL",
           "triton_tutorial_attention": "KP_TRITON_TUTORIAL_ATTENTION"}[name]
    default = {"triton_tutorial_matmul": "03-matrix-multiplication.py",
               "triton_tutorial_attention": "06-fused-attention.py"}[name]
    if not Path(os.environ.get(env, TUTORIALS / default)).is_file():
        pytest.skip(f"{default} is not placed (benchmarks/library/README.md)")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["triton_tutorial_matmul", "triton_tutorial_attention", "torchao_int8_mm"])
def test_wrapper_check_passes_compiled_on_the_gpu(name):
    if name == "torchao_int8_mm":
        pytest.importorskip("torchao")
    else:
        _needs_tutorial(name)
    kf = load_kernel(LIBRARY / f"{name}.py")
    result = check_correctness(kf, resolve_shape(kf), kf.default_config, "cuda")
    assert result.passed, result.summary


@pytest.mark.gpu
def test_attention_refuses_a_config_the_tutorials_pruner_drops():
    """Causal with BLOCK_M < BLOCK_N is pruned by the tutorial (its results are wrong): pinned, it is refused."""
    _needs_tutorial("triton_tutorial_attention")
    kf = load_kernel(LIBRARY / "triton_tutorial_attention.py")
    if getattr(kf.module.attn_fwd, "early_config_prune", None) is None:
        pytest.skip("the placed tutorial has no early_config_prune (older than commit 5c846f015)")
    case = make_case(kf, {"Z": 1, "H": 2, "S": 256, "D": 128, "causal": 1}, seed=0, device="cuda")
    config = {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 2}
    with pytest.raises(ValueError, match="early_config_prune drops"):
        kf.backend.launch(kf, case.inputs, config)
