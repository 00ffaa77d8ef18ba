"""The example kernel files: contract shape, correctness under the Triton interpreter, FLOP/byte formulas.

Interpreter mode is process-wide state in triton: TRITON_INTERPRET=1 must be set before
`triton.language` is first imported (its own @jit helpers such as tl.max, tl.sum and tl.cdiv are
decorated then; kernels calling them fail with "Cannot call @triton.jit'd outside of the scope of a
kernel" otherwise) and must stay set while interpreted kernels launch. Setting it in a fixture is too
late when another test imported triton first, and importing triton in interpreter mode would break
later tests that compile for a GPU target. So the kernels run in-process only when this pytest process
already has interpreter mode (TRITON_INTERPRET=1 pytest ...); otherwise one test re-runs this file in a
child process with TRITON_INTERPRET=1 and the in-process runs are skipped in the parent.
The examples are loaded by file path under unique module names.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = REPO / "src" / "kernelpilot" / "examples"
NAMES = ["vector_add", "softmax", "layer_norm", "matmul"]
CONTRACT = ["SHAPE", "CPU_SHAPE", "TUNABLES", "DEFAULT_CONFIG", "COMPUTE_UNIT",
            "setup", "run_kernel", "reference", "flops", "bytes_moved"]
# (atol, rtol) by output dtype, as in the product brief.
TOLERANCES = {torch.float32: (1e-5, 1e-3), torch.bfloat16: (1e-2, 1e-2), torch.float16: (1e-2, 1e-2)}


def _interpreter_mode() -> bool:
    """True when kernels decorated now would run correctly under the interpreter in this process."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    standard = sys.modules.get("triton.language.standard")
    if standard is None:
        return True
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(standard.max, InterpretedFunction)


IN_PROCESS = _interpreter_mode()
needs_interpreter = pytest.mark.skipif(
    not IN_PROCESS, reason="kernels run in a TRITON_INTERPRET=1 child (test_examples_in_interpreter_process)")


@pytest.fixture(scope="module")
def examples() -> dict[str, ModuleType]:
    """The example modules, imported by path (in interpreter mode when this process has it)."""
    modules = {}
    for name in NAMES:
        spec = importlib.util.spec_from_file_location(f"_kernelpilot_test_example_{name}", EXAMPLES_DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[name] = module
    if IN_PROCESS:
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        assert _interpreter_mode(), "triton.language was imported before TRITON_INTERPRET=1 was set"
        for name, module in modules.items():
            kernels = [v for v in vars(module).values() if isinstance(v, (InterpretedFunction, JITFunction))]
            assert kernels, f"{name}: no Triton kernel found"
            for kernel in kernels:
                assert isinstance(kernel, InterpretedFunction), f"{name}: kernel not decorated in interpreter mode"
    return modules


@pytest.mark.skipif(IN_PROCESS, reason="this process is in interpreter mode: the kernels ran in-process")
def test_examples_in_interpreter_process():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "pytest", str(Path(__file__).resolve()), "-q", "-p", "no:cacheprovider",
           "--durations=5", "-k", "not test_examples_in_interpreter_process"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    print(proc.stdout[-6000:])
    assert proc.returncode == 0, f"interpreted example tests failed:\n{proc.stdout[-12000:]}\n{proc.stderr[-4000:]}"
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary


def _extreme_configs(tunables: dict) -> list[dict]:
    return [{k: v[0] for k, v in tunables.items()}, {k: v[-1] for k, v in tunables.items()}]


def _check(module: ModuleType, shape: dict, config: dict, seed: int = 0) -> None:
    data = module.setup(**shape, seed=seed, device="cpu")
    inputs, outputs = data["inputs"], data["outputs"]
    for name in outputs:
        inputs[name].fill_(float("nan"))
    assert module.run_kernel(**inputs, **config) is None
    upcast = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in inputs.items()}
    refs = module.reference(**upcast)
    refs = refs if isinstance(refs, tuple) else (refs,)
    assert len(refs) == len(outputs)
    for name, ref in zip(outputs, refs):
        out = inputs[name]
        assert ref.dtype == torch.float64, "reference must compute in its inputs' dtype"
        assert not out.isnan().any(), f"{name}: {int(out.isnan().sum())} elements not written ({config})"
        atol, rtol = TOLERANCES[out.dtype]
        torch.testing.assert_close(out.double(), ref, atol=atol, rtol=rtol, msg=lambda m: f"{config}: {m}")


# name -> (extra configs beyond DEFAULT_CONFIG and the all-smallest / all-largest ones, ragged shape, other dtype)
CASES = {
    "vector_add": (
        [{"BLOCK_SIZE": 1024, "num_warps": 8}],
        {"N": 4099},
        "bfloat16",
    ),
    "softmax": (
        [{"BLOCK_N": 128, "ROWS_PER_PROGRAM": 4, "num_warps": 4, "num_stages": 2},   # looped, row tail
         {"BLOCK_N": 256, "ROWS_PER_PROGRAM": 2, "num_warps": 8, "num_stages": 1}],  # single tile, exact fit
        {"M": 7, "N": 300},
        "bfloat16",
    ),
    "layer_norm": (
        [{"BLOCK_N": 256, "num_warps": 8}, {"BLOCK_N": 1024, "num_warps": 2}],
        {"M": 5, "N": 300},
        "float32",
    ),
    "matmul": (
        [{"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 3},
         {"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}],
        {"M": 72, "N": 100, "K": 88},
        "float16",
    ),
}


@pytest.mark.parametrize("name", NAMES)
def test_contract(examples, name):
    module = examples[name]
    missing = [attr for attr in CONTRACT if not hasattr(module, attr)]
    assert not missing, f"{name}: missing {missing}"
    assert module.__doc__ and module.__doc__.strip()
    kwonly = {p.name for p in inspect.signature(module.run_kernel).parameters.values()
              if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(module.TUNABLES) == kwonly, f"{name}: TUNABLES {set(module.TUNABLES)} != keyword-only {kwonly}"
    for key, values in module.TUNABLES.items():
        assert list(values) == sorted(set(values)), f"{name}: {key} candidates not increasing"
    assert set(module.DEFAULT_CONFIG) == set(module.TUNABLES)
    for key, value in module.DEFAULT_CONFIG.items():
        assert value in module.TUNABLES[key], f"{name}: DEFAULT_CONFIG[{key!r}]={value} not a candidate"
    assert module.DEFAULT_CONFIG not in _extreme_configs(module.TUNABLES)
    assert set(module.CPU_SHAPE) == set(module.SHAPE)
    data = module.setup(**module.CPU_SHAPE, seed=0, device="cpu")
    assert set(data["outputs"]) <= set(data["inputs"])
    for key, value in data["inputs"].items():
        if torch.is_tensor(value) and key not in data["outputs"]:
            assert value.abs().sum() > 0, f"{name}: input {key} is all zeros"
    again = module.setup(**module.CPU_SHAPE, seed=0, device="cpu")["inputs"]
    other = module.setup(**module.CPU_SHAPE, seed=1, device="cpu")["inputs"]
    first_input = next(k for k, v in data["inputs"].items() if torch.is_tensor(v))
    assert torch.equal(data["inputs"][first_input], again[first_input])
    assert not torch.equal(data["inputs"][first_input], other[first_input])


@needs_interpreter
@pytest.mark.parametrize("name", NAMES)
def test_cpu_shape_configs(examples, name):
    module = examples[name]
    extra, _, _ = CASES[name]
    for config in [module.DEFAULT_CONFIG, *_extreme_configs(module.TUNABLES), *extra]:
        _check(module, module.CPU_SHAPE, config)


@needs_interpreter
@pytest.mark.parametrize("name", NAMES)
def test_ragged_shape(examples, name):
    module = examples[name]
    extra, ragged, _ = CASES[name]
    shape = {**module.CPU_SHAPE, **ragged}
    smallest_block = min(v[0] for k, v in module.TUNABLES.items() if k.startswith("BLOCK"))
    for key in ("N", "M", "K"):
        if key in ragged:
            assert ragged[key] % 16, f"{name}: ragged {key} should not be a multiple of any block"
    assert ragged["N"] % smallest_block
    for config in [module.DEFAULT_CONFIG, *_extreme_configs(module.TUNABLES), *extra]:
        _check(module, shape, config, seed=3)


@needs_interpreter
@pytest.mark.parametrize("name", NAMES)
def test_other_dtype(examples, name):
    module = examples[name]
    _, ragged, dtype = CASES[name]
    assert dtype != module.CPU_SHAPE["dtype"]
    _check(module, {**module.CPU_SHAPE, "dtype": dtype}, module.DEFAULT_CONFIG, seed=5)
    _check(module, {**module.CPU_SHAPE, **ragged, "dtype": dtype}, _extreme_configs(module.TUNABLES)[1], seed=6)


def test_reference_native_dtype(examples):
    for module in examples.values():
        data = module.setup(**module.CPU_SHAPE, seed=0, device="cpu")
        ref = module.reference(**data["inputs"])
        out = data["inputs"][data["outputs"][0]]
        assert ref.dtype == out.dtype and ref.shape == out.shape and torch.isfinite(ref).all()


def test_bad_dtype_is_a_clear_error(examples):
    with pytest.raises(ValueError, match="dtype"):
        examples["matmul"].setup(M=16, N=16, K=16, dtype="float32", device="cpu")


def test_matmul_rejects_configs_that_can_only_spill(examples):
    module = examples["matmul"]
    inputs = module.setup(**module.CPU_SHAPE, device="cpu")["inputs"]
    rejected = []
    for bm in module.TUNABLES["BLOCK_M"]:
        for bn in module.TUNABLES["BLOCK_N"]:
            for warps in module.TUNABLES["num_warps"]:
                if bm * bn // (32 * warps) > module.MAX_ACC_REGS_PER_THREAD:
                    config = {**module.DEFAULT_CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps}
                    with pytest.raises(ValueError, match="accumulator registers"):
                        module.run_kernel(**inputs, **config)
                    rejected.append((bm, bn, warps))
    assert sorted(rejected) == [(128, 256, 2), (256, 128, 2), (256, 256, 2), (256, 256, 4)]


def test_matmul_tma_part_of_the_space_is_small_and_leaves_the_tiled_configs_alone(examples):
    from kernelpilot.search.space import SearchSpace

    module = examples["matmul"]
    configs = list(SearchSpace(module.TUNABLES, module.CONSTRAINTS).configs())
    tma = [c for c in configs if c["TMA"] == 1]
    tiled = [{k: v for k, v in c.items() if k != "TMA"} for c in configs if c["TMA"] == 0]
    assert len(tiled) == math.prod(len(v) for k, v in module.TUNABLES.items() if k != "TMA") == 1152
    assert len(tma) == 10
    best_h100 = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3, "TMA": 1}
    assert best_h100 in tma
    for c in tma:  # large tiles, enough stages, no accumulator past 128 registers, shared memory within 227 KiB
        assert min(c["BLOCK_M"], c["BLOCK_N"]) >= 128 and c["BLOCK_K"] >= 64 and c["num_stages"] >= 3
        assert c["BLOCK_M"] * c["BLOCK_N"] // (32 * c["num_warps"]) <= 128
        assert c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 + c["BLOCK_M"] * c["BLOCK_N"] * 2 \
            <= 232448
    assert module.DEFAULT_CONFIG["TMA"] == 0


def test_matmul_tma_needs_16_byte_strides_and_base(examples):
    module = examples["matmul"]
    aligned = torch.empty(8, 24, dtype=torch.bfloat16)
    assert module._tma_usable(aligned, aligned)
    assert not module._tma_usable(aligned, torch.empty(8, 20, dtype=torch.bfloat16))  # 40-byte rows
    assert not module._tma_usable(torch.empty(8, 32, dtype=torch.bfloat16)[:, 1:25])  # base 2 bytes off
    assert not module._tma_usable(torch.empty(24, 8, dtype=torch.bfloat16).t())  # last axis not contiguous


@needs_interpreter
@pytest.mark.parametrize("shape, tma_grids", [
    ({"M": 300, "N": 264, "K": 88, "dtype": "float16"}, [(2,)]),  # 3 x 3 tiles over 2 programs, every edge partial
    ({"M": 101, "N": 72, "K": 40, "dtype": "bfloat16"}, [(1,)]),  # one tile: one program
    ({"M": 70, "N": 65, "K": 33, "dtype": "bfloat16"}, []),  # 66- and 130-byte rows: the tiled fallback
])
def test_matmul_tma_variant_is_correct_at_odd_shapes(examples, monkeypatch, shape, tma_grids):
    module = examples["matmul"]
    launched = []
    real = module._matmul_tma_persistent_kernel

    class Spy:  # the real kernel, launched; only the grids are noted
        def __getitem__(self, grid):
            launched.append(grid)
            return real[grid]

    monkeypatch.setattr(module, "_matmul_tma_persistent_kernel", Spy())
    inputs = module.setup(**shape, seed=3, device="cpu")["inputs"]
    config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 3, "TMA": 1}
    module.run_kernel(**inputs, **config)
    assert launched == tma_grids
    expected = inputs["a"].double() @ inputs["b"].double()
    atol, rtol = TOLERANCES[inputs["c"].dtype]
    torch.testing.assert_close(inputs["c"].double(), expected, atol=atol * 10, rtol=rtol)


def test_flops_and_bytes(examples):
    ex = examples
    assert ex["vector_add"].flops(N=1000) == 1000
    assert ex["vector_add"].bytes_moved(N=1000, dtype="float32") == 12_000
    assert ex["vector_add"].bytes_moved(N=1000, dtype="bfloat16") == 6_000
    assert ex["softmax"].flops(M=10, N=100) == 5_000
    assert ex["softmax"].bytes_moved(M=10, N=100, dtype="float32") == 8_000
    assert ex["softmax"].bytes_moved(M=10, N=100, dtype="bfloat16") == 4_000
    assert ex["layer_norm"].flops(M=10, N=100) == 7_000
    assert ex["layer_norm"].bytes_moved(M=10, N=100, dtype="bfloat16") == 2 * (2 * 1000 + 2 * 100)
    assert ex["layer_norm"].bytes_moved(M=10, N=100, dtype="float32") == 4 * (2 * 1000 + 2 * 100)
    assert ex["matmul"].flops(M=4096, N=4096, K=4096) == 2 * 4096**3
    assert ex["matmul"].bytes_moved(M=10, N=20, K=30, dtype="bfloat16") == 2 * (300 + 600 + 200)
    # SHAPE values the roofline will use.
    assert ex["matmul"].flops(**ex["matmul"].SHAPE) == 137_438_953_472
    assert ex["vector_add"].bytes_moved(**ex["vector_add"].SHAPE) == 3 * 4 * 2**26
    assert math.isclose(ex["softmax"].bytes_moved(**ex["softmax"].SHAPE) / 2**20, 512.0)


@needs_interpreter
def test_layer_norm_merges_tiles_with_different_means(examples):
    """Column tiles with very different means: the looped path must merge (count, mean, M2) exactly."""
    module = examples["layer_norm"]
    data = module.setup(M=4, N=300, dtype="float32", seed=7, device="cpu")
    inputs = data["inputs"]
    inputs["x"] += torch.linspace(-20.0, 20.0, 300)
    for config in ({"BLOCK_N": 128, "num_warps": 4}, {"BLOCK_N": 512, "num_warps": 4}):
        inputs["y"].fill_(float("nan"))
        module.run_kernel(**inputs, **config)
        upcast = {k: (v.double() if torch.is_tensor(v) else v) for k, v in inputs.items()}
        torch.testing.assert_close(inputs["y"].double(), module.reference(**upcast), atol=1e-5, rtol=1e-3)
