"""COMPUTE_UNIT is a claim to check (issue 23): refused when the input tensors' dtypes cannot feed the unit, and,
once compiled for sm_90 (on the CPU: Triton compiles for the target without a GPU), when a tensor-core unit has no
tensor-core instruction in the SASS."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelpilot.api import bundled_example
from kernelpilot.errors import DeclarationError
from kernelpilot.kernels.compute_unit import check_unit_dtypes, check_unit_sass, operand_dtypes


def test_dtype_rules_per_unit():
    fp32 = {"a": "float32", "b": "float32"}
    with pytest.raises(DeclarationError) as info:
        check_unit_dtypes("int8_tensor", fp32, "mm.py")
    assert "int8_tensor" in info.value.message and "a: float32" in info.value.message and info.value.hint
    for unit in ("bf16_tensor", "fp16_tensor", "fp8_tensor", "fp64"):
        with pytest.raises(DeclarationError, match=unit):
            check_unit_dtypes(unit, fp32, "mm.py")
    check_unit_dtypes("tf32_tensor", fp32, "mm.py")
    check_unit_dtypes("fp32", {"a": "bfloat16", "i": "int64"}, "mm.py")  # CUDA cores take anything
    check_unit_dtypes("bf16_tensor", {"a": "bfloat16", "bias": "float32"}, "mm.py")  # one operand that feeds it
    check_unit_dtypes("int8_tensor", {"a": "int8", "scale": "float32"}, "mm.py")
    check_unit_dtypes("fp8_tensor", {"a": "float8_e4m3fn"}, "mm.py")
    with pytest.raises(DeclarationError):
        check_unit_dtypes("int8_tensor", {"a": "int32"}, "mm.py")


def test_operands_are_inputs_not_outputs():
    import torch

    inputs = {"a": torch.zeros(2, dtype=torch.float16), "c": torch.zeros(2), "ws": torch.zeros(2, dtype=torch.int8),
              "n": 2}
    assert operand_dtypes(inputs, ["c"], scratch=["ws"]) == {"a": "float16"}
    assert operand_dtypes(inputs, ["c"], inplace=["c"], scratch=["ws"]) == {"a": "float16", "c": "float32"}
    assert operand_dtypes({"c": torch.zeros(2)}, ["c"]) == {"c": "float32"}  # outputs only: judge those


def _variant(tmp_path: Path, example: str, unit: str, dtype: str | None = None) -> Path:
    text = Path(bundled_example(example)).read_text()
    text = re.sub(r'COMPUTE_UNIT = "[a-z0-9_]+"', f'COMPUTE_UNIT = "{unit}"', text)
    if dtype is not None:
        text = re.sub(r'"dtype": "[a-z0-9]+"', f'"dtype": "{dtype}"', text)
    path = tmp_path / f"{example}_{unit}.py"
    path.write_text(text)
    return path


FP32_MATMUL = """
import torch
SHAPE = {"M": 256, "N": 256, "K": 256}
TUNABLES = {"B": [1]}
COMPUTE_UNIT = "@UNIT@"

def setup(M, N, K, seed=0, device="cpu", **_):
    g = torch.Generator().manual_seed(seed)
    return {"inputs": {"a": torch.randn(M, K, generator=g).to(device), "b": torch.randn(K, N, generator=g).to(device),
                       "c": torch.empty(M, N, device=device)}, "outputs": ["c"]}

def run_kernel(a, b, c, *, B, **_):
    torch.matmul(a, b, out=c)

def reference(a, b, c, **_):
    return a @ b

def flops(M, N, K, **_):
    return 2 * M * N * K
"""


def test_a_fp32_matmul_declaring_int8_tensor_is_refused_before_its_floor_is_used(tmp_path):
    from kernelpilot.app.context import roofline_at
    from kernelpilot.target import Target
    from kernelpilot.kernels.contract import load_kernel, resolve_shape

    def kernel(unit: str):
        path = tmp_path / f"mm_{unit}.py"
        path.write_text(FP32_MATMUL.replace("@UNIT@", unit))
        return load_kernel(path, interpreted=True)

    kf = kernel("int8_tensor")
    with pytest.raises(DeclarationError, match=r"int8_tensor.*a: float32, b: float32") as info:
        roofline_at(kf, resolve_shape(kf, None), Target.cpu(), "H100-SXM")
    assert "c: float32" not in info.value.message  # the output is not an operand
    for honest in ("tf32_tensor", "fp32"):
        roof, _, _ = roofline_at(kernel(honest), {"M": 256, "N": 256, "K": 256}, Target.cpu(), "H100-SXM")
        assert roof is not None and roof.compute_unit == honest


def test_sass_rule():
    check_unit_sass("bf16_tensor", {"HGMMA": 4, "LDG": 2}, "k.py")
    check_unit_sass("fp32", {"FFMA": 8}, "k.py")
    check_unit_sass("bf16_tensor", {}, "k.py")  # SASS not read: nothing judged
    check_unit_sass("bf16_tensor", {"FFMA": 8}, "k.py", launches=2)  # only the first of two launches was read
    with pytest.raises(DeclarationError, match="no tensor-core instruction"):
        check_unit_sass("bf16_tensor", {"FFMA": 8, "LDG": 2}, "k.py")


def _compile_first(kernel: Path, unit: str):
    from kernelpilot.engine.prune import CompileAhead
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.search.space import SearchSpace

    kf = load_kernel(kernel, interpreted=True)
    first = SearchSpace.from_kernel(kf).configs()[:1]
    return CompileAhead(kernel, first, dict(kf.cpu_shape or kf.shape), "sm_90", compute_unit=unit, max_workers=1,
                        timeout_s=120), first[0]


def test_a_tensor_core_unit_without_tensor_core_code_is_refused_once_compiled(tmp_path):
    # vector_add in bfloat16 declaring bf16_tensor: the dtypes could feed the unit, the SASS shows no MMA
    kernel = _variant(tmp_path, "vector_add", "bf16_tensor", "bfloat16")
    ahead, first = _compile_first(kernel, "bf16_tensor")
    with pytest.raises(DeclarationError, match="no tensor-core instruction") as info:
        ahead.reason(first)
    ahead.finish(stop=True)
    assert "bf16_tensor" in info.value.message and info.value.hint


def test_an_honest_tensor_core_matmul_passes_the_sass_check():
    ahead, first = _compile_first(Path(bundled_example("matmul")), "bf16_tensor")
    assert ahead.reason(first) is None
    report = ahead.finish()
    assert ahead.declaration is None and report.n_compiled == 1


def test_tune_stops_on_a_refused_compute_unit(tmp_path, monkeypatch):
    from kernelpilot.app.tune import tune

    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELPILOT_EXPERIENCE", "off")
    kernel = _variant(tmp_path, "vector_add", "bf16_tensor", "bfloat16")
    with pytest.raises(DeclarationError, match="no tensor-core instruction"):
        tune(kernel, strategy="exhaustive", budget_evals=2, ab_samples=3, timeout_s=60, use_cache=False)
