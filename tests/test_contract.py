"""The kernel-file contract: every broken piece gets an error naming it."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES, TORCH_KERNEL
from kernelpilot.errors import ContractError
from kernelpilot.kernels.contract import (load_kernel, make_case, parse_assignments, resolve_config,
                                          resolve_shape)


def test_valid_file_loads_with_defaults(write_kernel):
    kf = load_kernel(write_kernel(), interpreted=True)
    assert kf.default_config == {"BLOCK": 64, "num_warps": 4}
    assert resolve_shape(kf) == {"N": 300}  # CPU_SHAPE under the interpreter
    assert resolve_shape(kf, {"N": 17}) == {"N": 17}
    assert kf.compute_unit == "fp32" and len(kf.source_sha256) == 64


def test_gpu_mode_uses_shape(write_kernel):
    kf = load_kernel(write_kernel(), interpreted=False)
    assert resolve_shape(kf) == {"N": 1000}


@pytest.mark.parametrize("old,new,needle", [
    ("def setup(", "def setup_x(", "no `setup`"),
    ("def run_kernel(", "def run_kernelx(", "no `run_kernel`"),
    ("def reference(", "def ref(", "no `reference`"),
    ('TUNABLES = {"BLOCK": [64, 128, 256], "num_warps": [2, 4, 8]}', "", "no TUNABLES"),
    ('TUNABLES = {"BLOCK": [64, 128, 256], "num_warps": [2, 4, 8]}', 'TUNABLES = {"BLOCK": []}', "non-empty list"),
    ('TUNABLES = {"BLOCK": [64, 128, 256], "num_warps": [2, 4, 8]}', 'TUNABLES = [64]', "must be a non-empty dict"),
    ('SHAPE = {"N": 1000}', "", "no SHAPE"),
    ('DEFAULT_CONFIG = {"BLOCK": 64, "num_warps": 4}', 'DEFAULT_CONFIG = {"BLOCK": 65}', "not one of TUNABLES['BLOCK']"),
    ('DEFAULT_CONFIG = {"BLOCK": 64, "num_warps": 4}', 'DEFAULT_CONFIG = {"BLOCKS": 64}', "`BLOCKS`, which is not in"),
    ("*, BLOCK, num_warps, **_", "*, BLOCK, num_warps", None),  # fine: both tunables are parameters
    ("*, BLOCK, num_warps, **_", "*, BLOCK", "does not accept the tunable `num_warps`"),
    ("import torch", "import torch\nCOMPUTE_UNIT = 'fp128'", "COMPUTE_UNIT 'fp128'"),
    ("import torch", "import torch\n1/0", "ZeroDivisionError"),
])
def test_contract_errors_name_the_piece(write_kernel, old, new, needle):
    path = write_kernel(source=TORCH_KERNEL.replace("BODY", "out.copy_(x + y)").replace(old, new))
    if needle is None:
        load_kernel(path, interpreted=True)
        return
    with pytest.raises(ContractError) as info:
        load_kernel(path, interpreted=True)
    assert needle in info.value.message
    assert str(path) in info.value.message
    assert info.value.hint


def test_import_error_names_the_line(write_kernel):
    path = write_kernel(source=TORCH_KERNEL.replace("import torch", "import torch\nx = undefined_name"))
    with pytest.raises(ContractError) as info:
        load_kernel(path)
    assert f"{path}:3" in info.value.message and "NameError" in info.value.message


def test_missing_file_and_wrong_suffix(tmp_path):
    with pytest.raises(ContractError, match="not found"):
        load_kernel(tmp_path / "nope.py")
    cu = tmp_path / "k.cu"
    cu.write_text("extern \"C\" void solve() {}")
    with pytest.raises(ContractError, match="takes no parameters"):  # read by the CUDA backend (issue 14)
        load_kernel(cu)
    txt = tmp_path / "k.txt"
    txt.write_text("x")
    with pytest.raises(ContractError, match=r"\.py"):
        load_kernel(txt)


def test_separate_reference_file(write_kernel, tmp_path):
    kernel = write_kernel(source=TORCH_KERNEL.replace("BODY", "out.copy_(x + y)").replace("def reference(", "def _unused("))
    with pytest.raises(ContractError, match="reference"):
        load_kernel(kernel)
    ref = tmp_path / "ref.py"
    ref.write_text("def reference(x, y, **_):\n    return x + y\n")
    kf = load_kernel(kernel, ref)
    assert kf.reference_path == ref.resolve()


@pytest.mark.parametrize("ret,needle", [
    ("None", "without 'inputs' and 'outputs'"),
    ('{"inputs": [1], "outputs": ["out"]}', "not a dict"),
    ('{"inputs": {"x": 1}, "outputs": "x"}', "non-empty list of names"),
    ('{"inputs": {"x": 1}, "outputs": ["out"]}', "'out' is not among the inputs"),
    ('{"inputs": {"out": 3}, "outputs": ["out"]}', "not a tensor"),
])
def test_setup_return_is_validated(write_kernel, ret, needle):
    src = TORCH_KERNEL.replace("BODY", "pass").replace(
        'return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}', f"return {ret}")
    kf = load_kernel(write_kernel(source=src))
    with pytest.raises(ContractError, match=needle.replace("(", r"\(")):
        make_case(kf, {"N": 8}, 0, "cpu")


def test_overrides_are_checked(write_kernel):
    kf = load_kernel(write_kernel())
    with pytest.raises(ContractError, match="`M`, which SHAPE does not have"):
        resolve_shape(kf, {"M": 4})
    with pytest.raises(ContractError, match="not one of"):
        resolve_config(kf, {"BLOCK": 3})
    assert resolve_config(kf, {"BLOCK": 256}) == {"BLOCK": 256, "num_warps": 4}


def test_parse_assignments():
    assert parse_assignments(["M=8192", "dtype=bfloat16", "eps=1e-5,flag=true"]) == \
        {"M": 8192, "dtype": "bfloat16", "eps": 1e-5, "flag": True}
    with pytest.raises(ContractError, match="name=value"):
        parse_assignments(["8192"])


@pytest.mark.parametrize("name", ["vector_add", "softmax", "layer_norm", "matmul"])
def test_examples_obey_the_contract(name):
    kf = load_kernel(EXAMPLES / f"{name}.py", interpreted=True)
    assert kf.cpu_shape is not None and kf.flops_fn is not None
    case = make_case(kf, resolve_shape(kf), 0, "cpu")
    assert all(o in case.inputs for o in case.outputs)
