"""KernelBench in: a solution (``ModelNew``) with its problem (``Model``, ``get_inputs``, ``get_init_inputs``) is
detected and checked like a kernel file, under the Triton interpreter (docs/kernelbench.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT
from kernelpilot import api
from kernelpilot.errors import ContractError
from kernelpilot.kernels import kernelbench
from kernelpilot.kernels.contract import load_kernel, make_case
from kernelpilot.search.failures import classify_exception

DATA = Path(__file__).parent / "data" / "kernelbench"
RELU, GEMM = DATA / "1_ReLU_small.py", DATA / "76_Gemm_Add_ReLU_small.py"
FETCHED = ROOT / "third_party" / "KernelBench" / "KernelBench"


def test_the_form_is_detected_and_a_kernel_file_is_not_mistaken_for_it(tmp_path: Path) -> None:
    for sol in ("1_ReLU_small_triton.py", "1_ReLU_small_wrong.py", "1_ReLU_small_library.py",
                "76_Gemm_Add_ReLU_small_triton.py"):
        assert kernelbench.is_solution_file(DATA / sol) and not kernelbench.is_problem_file(DATA / sol)
    assert kernelbench.is_problem_file(RELU) and kernelbench.is_problem_file(GEMM)
    assert not kernelbench.is_solution_file(RELU)
    for example in ("vector_add.py", "softmax.py", "matmul.py"):
        assert not kernelbench.is_solution_file(EXAMPLES / example)
        assert not kernelbench.is_problem_file(EXAMPLES / example)
    # a kernel file of the contract that also happens to define a ModelNew stays a kernel file
    both = tmp_path / "both.py"
    both.write_text((EXAMPLES / "vector_add.py").read_text() + "\n\nclass ModelNew:\n    pass\n")
    assert not kernelbench.is_solution_file(both)
    assert load_kernel(both, interpreted=True).tunables  # loaded by the contract, with its TUNABLES


@pytest.mark.skipif(not FETCHED.is_dir(), reason="KernelBench's problems are not fetched into third_party/")
def test_kernelbench_own_problem_files_are_detected() -> None:
    files = sorted(FETCHED.glob("level1/*.py")) + sorted(FETCHED.glob("level2/*.py"))
    assert len(files) >= 200
    assert [f.name for f in files if not kernelbench.is_problem_file(f)] == []
    assert not any(kernelbench.is_solution_file(f) for f in files)


def test_correct_triton_solution_passes_check_against_a_float64_reference() -> None:
    res = api.check(DATA / "1_ReLU_small_triton.py", ref=RELU)
    assert res.passed, res.summary
    assert res.reference_dtype == "float64" and len(res.seeds) == 3


def test_model_and_model_new_get_the_same_parameters(tmp_path: Path) -> None:
    res = api.check(DATA / "76_Gemm_Add_ReLU_small_triton.py", ref=GEMM)
    assert res.passed, res.summary
    # the same solution creating its parameters in another order draws other values: wrong, as in KernelBench
    src = (DATA / "76_Gemm_Add_ReLU_small_triton.py").read_text()
    swapped = src.replace(
        "        self.gemm = nn.Linear(in_features, out_features, bias=False)\n"
        "        self.bias = nn.Parameter(torch.randn(bias_shape))\n",
        "        self.bias = nn.Parameter(torch.randn(bias_shape))\n"
        "        self.gemm = nn.Linear(in_features, out_features, bias=False)\n")
    assert swapped != src
    other = tmp_path / "76_swapped.py"
    other.write_text(swapped)
    assert not api.check(other, ref=GEMM).passed


def test_wrong_solution_fails_correctness() -> None:
    res = api.check(DATA / "1_ReLU_small_wrong.py", ref=RELU)
    assert not res.passed
    assert res.seeds[0].outputs and not res.seeds[0].outputs[0].passed


def test_solution_calling_the_library_op_is_refused_by_name() -> None:
    res = api.check(DATA / "1_ReLU_small_library.py", ref=RELU)
    assert not res.passed and "KernelNotLaunched" in res.summary and "relu_kernel" in res.summary
    kf = load_kernel(DATA / "1_ReLU_small_library.py", RELU, interpreted=True)
    case = make_case(kf, {}, 0, "cpu")
    with pytest.raises(kernelbench.KernelNotLaunched) as info:
        kf.run_kernel(**case.inputs)
    assert classify_exception(info.value) == "kernel_not_launched"


def test_solution_without_a_kernel_of_its_own_is_refused_at_load(tmp_path: Path) -> None:
    sol = tmp_path / "plain.py"
    sol.write_text("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                   "    def forward(self, x):\n        return torch.relu(x)\n")
    with pytest.raises(ContractError, match="defines no kernel of its own .no @triton.jit function"):
        load_kernel(sol, RELU, interpreted=True)


def test_a_solution_needs_its_problem_as_ref() -> None:
    with pytest.raises(ContractError, match="--ref PROBLEM.py"):
        load_kernel(DATA / "1_ReLU_small_triton.py", interpreted=True)
    with pytest.raises(ContractError, match="not a KernelBench problem .no Model, get_inputs, get_init_inputs"):
        load_kernel(DATA / "1_ReLU_small_triton.py", EXAMPLES / "vector_add.py", interpreted=True)


def test_a_result_of_another_shape_is_an_error_not_a_broadcast(tmp_path: Path) -> None:
    src = (DATA / "1_ReLU_small_triton.py").read_text().replace("        return out\n", "        return out[:1]\n")
    sol = tmp_path / "short.py"
    sol.write_text(src)
    kf = load_kernel(sol, RELU, interpreted=True)
    case = make_case(kf, {}, 0, "cpu")
    with pytest.raises(RuntimeError, match=r"\(1, 300\), the reference's is \(16, 300\)"):
        kf.run_kernel(**case.inputs)


def test_setup_is_seeded_and_casts_like_kernelbench() -> None:
    import torch

    kf = load_kernel(DATA / "1_ReLU_small_triton.py", RELU, interpreted=True)
    a, b, c = (kf.setup(seed=s, device="cpu") for s in (5, 5, 6))
    assert a["outputs"] == ["out"] and a["inputs"]["in0"].dtype == torch.float32
    assert torch.equal(a["inputs"]["in0"], b["inputs"]["in0"]) and not torch.equal(a["inputs"]["in0"], c["inputs"]["in0"])
    torch.manual_seed(5)
    assert torch.equal(a["inputs"]["in0"], torch.randn(16, 300))  # get_inputs() right after torch.manual_seed(seed)


def test_cli_check_takes_solution_and_problem() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src")] + ([os.environ["PYTHONPATH"]]
                                                                             if os.environ.get("PYTHONPATH") else []))}
    ok = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "check", str(DATA / "1_ReLU_small_triton.py"),
                         "--ref", str(RELU), "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["passed"] is True
    bad = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "check", str(DATA / "1_ReLU_small_library.py"),
                          "--ref", str(RELU), "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert bad.returncode == 1 and "KernelNotLaunched" in json.loads(bad.stdout)["summary"]


def test_verify_accepts_the_solution_and_refuses_the_library_one_at_device_activity() -> None:
    from kernelpilot.api.verification import verify

    good = verify(DATA / "1_ReLU_small_triton.py", ref=RELU)
    assert good.accepted, good.message
    bad = verify(DATA / "1_ReLU_small_library.py", ref=RELU)
    assert not bad.accepted and (bad.stage, bad.status) == ("device_activity", "kernel_not_launched")
    assert "relu_kernel" in bad.message


def test_a_session_runs_on_a_solution_and_refuses_the_library_version(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src")] + ([os.environ["PYTHONPATH"]]
                                                                             if os.environ.get("PYTHONPATH") else []))}

    def cli(*args: str, rc: int = 0) -> dict:
        proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "session", *args, "--json"],
                              capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == rc, proc.stderr
        return json.loads(proc.stdout)

    run = tmp_path / "sess"
    start = cli("start", str(DATA / "1_ReLU_small_triton.py"), "--ref", str(RELU), "--out", str(run),
                "--no-experience", "--no-git", "--no-profile")
    assert start["incumbent"] == 0 and (run / "check" / "reference.py").read_bytes() == RELU.read_bytes()
    tried = cli("try", str(run), str(DATA / "1_ReLU_small_library.py"), "--hypothesis", "torch.relu is faster",
                rc=3)  # an invalid version
    assert (tried["memory"]["status"], tried["memory"]["outcome"], tried["incumbent"]) == (
        "kernel_not_launched", "invalid", 0)


def test_an_autotuned_solution_has_its_configs_as_the_space() -> None:
    kf = load_kernel(DATA / "1_ReLU_small_autotuned.py", RELU, interpreted=True)
    assert kf.tunables["BLOCK_SIZE"] == [256, 1024] and kf.default_config["BLOCK_SIZE"] == 256
    assert kf.backend.export_config(kf.default_config).startswith("triton.Config({'BLOCK_SIZE': 256}")
    for block in (256, 1024):
        cfg = dict(kf.default_config, BLOCK_SIZE=block, num_warps=2 if block == 256 else 4)
        res = api.check(DATA / "1_ReLU_small_autotuned.py", ref=RELU, config=cfg)
        assert res.passed and res.config["BLOCK_SIZE"] == block, res.summary
    # a solution without @triton.autotune has no space: nothing for a search to try
    assert load_kernel(DATA / "1_ReLU_small_triton.py", RELU, interpreted=True).tunables == {}


def test_a_load_inline_cuda_solution_names_its_kernels_and_needs_a_gpu() -> None:
    from kernelpilot.errors import ToolMissingError

    sol = DATA / "1_ReLU_small_cuda.py"
    assert kernelbench.is_solution_file(sol) and kernelbench.load_inline_kernels(sol) == ["relu_kernel"]
    assert kernelbench.load_inline_kernels(DATA / "1_ReLU_small_triton.py") is None
    with pytest.raises(ToolMissingError, match="load_inline runs only on a GPU"):  # before the import tries nvcc
        load_kernel(sol, RELU, interpreted=True)


@pytest.mark.gpu
def test_a_load_inline_cuda_solution_passes_verify_on_a_gpu() -> None:
    from kernelpilot.api.verification import verify

    res = verify(DATA / "1_ReLU_small_cuda.py", ref=RELU)
    assert res.accepted, res.message
