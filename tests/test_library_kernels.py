"""Real Triton kernels from Liger-Kernel (benchmarks/library/) through kernelpilot's correctness check.

On a CPU they run under the Triton interpreter with the exact workarounds of
kernelpilot.backends.triton.interpreter; on a GPU (tests marked ``gpu``) compiled. Skipped when liger-kernel is
not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("liger_kernel")

import torch  # noqa: E402

from kernelpilot.kernels.contract import load_kernel, make_case, resolve_shape  # noqa: E402
from kernelpilot.measure.correctness import check_correctness  # noqa: E402

LIBRARY = Path(__file__).resolve().parents[1] / "benchmarks" / "library"
RUNNABLE = ["liger_rms_norm", "liger_layer_norm", "liger_swiglu", "liger_geglu"]


def _interpreted(name: str):
    from kernelpilot.backends.triton.interpreter import install_workarounds

    install_workarounds()  # after TRITON_INTERPRET=1 (conftest) and before the kernel module is imported
    return load_kernel(LIBRARY / f"{name}.py", interpreted=True)


@pytest.mark.parametrize("name", RUNNABLE)
def test_check_passes_under_the_interpreter(name):
    from kernelpilot.backends.triton.interpreter import interpreter_limitations

    kf = _interpreted(name)
    assert interpreter_limitations(kf.module) == []
    result = check_correctness(kf, resolve_shape(kf), kf.default_config, "cpu")
    assert result.passed, result.summary


def test_without_the_libdevice_workaround_the_limitation_is_named():
    from kernelpilot.backends.triton.interpreter import interpreter_limitations

    kf = _interpreted("liger_rms_norm")
    assert interpreter_limitations(kf.module, applied=["float_scalar_args", "bf16_values"]) == [
        "the Triton interpreter cannot run libdevice.rsqrt (in _rms_norm_forward_kernel): run on a GPU"]
    kf = _interpreted("liger_geglu")
    assert any("libdevice.tanh" in m for m in interpreter_limitations(kf.module, applied=[]))


def test_rope_rotates_q_and_k_in_place():
    """The RoPE wrapper writes through the (B, H, S, D) views into the caller's q and k, and matches HF's formula
    (bf16 products of the interpreter computed on values)."""
    kf = _interpreted("liger_rope")
    case = make_case(kf, resolve_shape(kf), seed=0, device="cpu")
    q, k = case.inputs["q"], case.inputs["k"]
    ref_q, ref_k = kf.reference(**{n: (v.double() if torch.is_tensor(v) else v) for n, v in case.inputs.items()})
    q_before = q.clone()
    kf.run_kernel(**case.inputs, num_warps=4)
    assert not torch.equal(q, q_before)
    for out, ref in ((q, ref_q), (k, ref_k)):
        err = (out.double() - ref).abs().max().item()
        assert err <= 0.02 * ref.abs().max().item(), err
    assert case.outputs == ["q", "k"]


def test_rope_check_passes_with_inplace_outputs():
    kf = _interpreted("liger_rope")
    result = check_correctness(kf, resolve_shape(kf), kf.default_config, "cpu")
    assert result.passed, result.summary


@pytest.mark.gpu
@pytest.mark.parametrize("name", RUNNABLE + ["liger_rope"])
def test_check_passes_compiled_on_the_gpu(name):
    kf = load_kernel(LIBRARY / f"{name}.py")
    result = check_correctness(kf, resolve_shape(kf), kf.default_config, "cuda")
    assert result.passed, result.summary


def test_tutorial_attention_without_its_source_or_gpu_says_what_is_missing(tmp_path, monkeypatch):
    from kernelpilot.errors import ContractError

    monkeypatch.setenv("KP_TRITON_TUTORIAL_ATTENTION", str(tmp_path / "absent.py"))
    with pytest.raises(ContractError, match="absent.py is not there"):
        load_kernel(LIBRARY / "triton_tutorial_attention.py", interpreted=True)
    if not torch.cuda.is_available():
        (tmp_path / "present.py").write_text("raise RuntimeError('must not be imported without a GPU')\n")
        monkeypatch.setenv("KP_TRITON_TUTORIAL_ATTENTION", str(tmp_path / "present.py"))
        with pytest.raises(ContractError, match="queries the GPU at import .* run on a GPU"):
            load_kernel(LIBRARY / "triton_tutorial_attention.py", interpreted=True)
