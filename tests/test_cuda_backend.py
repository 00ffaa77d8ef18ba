"""The CUDA C++ backend (issue 14): ``solve`` signature parsing, synthesized inputs, the nvcc build and its cache,
compile errors, static inspection and the pipelining check of compiled .cu files for sm_90 without a GPU (real nvcc
builds), the refusal to run without a GPU; GPU-marked: check, timing with cudaDeviceSynchronize in solve, an
illegal address as a typed failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.errors import CompileError, ContractError
from kernelpilot.target import Target

ROOT = Path(__file__).resolve().parents[1]
CUDA = ROOT / "src" / "kernelpilot" / "examples" / "cuda"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                                reason="needs nvcc")

ADD = r'''
#include <cuda_runtime.h>
#ifndef BLOCK
#define BLOCK 128
#endif
__global__ void add_one(const float* x, float* y, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
extern "C" void solve(const float* x, float* y, int n) { add_one<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, n); }
'''
REF = "def reference(x, y, n, **_):\n    return x + 1\n"


@pytest.fixture(scope="module", autouse=True)
def build_cache(tmp_path_factory):
    """One nvcc build cache for this module (builds are shared between its tests, never with the user's)."""
    folder = tmp_path_factory.mktemp("kp-cuda-cache")
    old = os.environ.get("KERNELPILOT_CACHE_DIR")
    os.environ["KERNELPILOT_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("KERNELPILOT_CACHE_DIR", None)
    else:
        os.environ["KERNELPILOT_CACHE_DIR"] = old


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src")] + ([os.environ["PYTHONPATH"]]
                                                                             if os.environ.get("PYTHONPATH") else []))}
    return subprocess.run([sys.executable, "-m", "kernelpilot.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


# -- signature ---------------------------------------------------------------------------------------------------

def test_every_supported_type_comments_line_breaks_and_const():
    from kernelpilot.backends.cuda.signature import BUFFER_TYPES, INT_TYPES, parse_solve

    params = [f"const {t}* in{i}" for i, t in enumerate(BUFFER_TYPES)]
    params += [f"{t} * __restrict__ out{i}" for i, t in enumerate(BUFFER_TYPES)]
    params += [f"{t} d{i}" for i, t in enumerate(INT_TYPES)]
    src = ('// solve(int bogus) in a comment\n/* extern "C" void solve(char c) */\n'
           'extern "C" void\nsolve(' + ",\n   // a comment between parameters\n   ".join(params) + ") {\n}\n")
    sig = parse_solve(src)
    assert sig.line == 4  # the line `solve(` is on
    assert [p.dtype for p in sig.buffers[:len(BUFFER_TYPES)]] == list(BUFFER_TYPES.values())
    assert all(p.const for p in sig.buffers[:len(BUFFER_TYPES)])
    assert sig.outputs == [f"out{i}" for i in range(len(BUFFER_TYPES))]
    assert sig.dims == [f"d{i}" for i in range(len(INT_TYPES))]
    assert [p.ctypes_name for p in sig.params if p.kind == "int"] == list(INT_TYPES.values())
    sig = parse_solve('extern "C" { void solve(float const* a, float* const b, const double* __restrict__ c, '
                      'double scale, unsigned long long n); }')
    assert [(p.name, p.const) for p in sig.buffers] == [("a", True), ("b", False), ("c", True)]
    assert sig.params[3].kind == "float" and sig.params[4].ctypes_name == "c_ulonglong"


@pytest.mark.parametrize("src, words", [
    ('extern "C" void solve(const float* x, float* y, int N = 1024) {}', "default argument"),
    ("__global__ void k(float* y) {}", "no `solve` function found"),
    ('void solve(const float* x, float* y, int n) {}', 'not declared extern "C"'),
    ('extern "C" void solve(const float* x, const float* y, int n) {}', "no output buffer"),
    ('extern "C" void solve(float** x, int n) {}', "pointers to pointers"),
    ('extern "C" void solve(const float x[], float* y) {}', "arrays"),
    ('extern "C" void solve(float4* y, int n) {}', "buffers of `float4`"),
    ('extern "C" void solve(float* y, dim3 n) {}', "scalar type `dim3`"),
    ('extern "C" void solve(void) {}', "takes no parameters"),
    ('extern "C" void solve(float* y) {}\nextern "C" void solve(float* z) {}', "defined 2 times"),
])
def test_bad_signatures_are_refused_with_what_to_write(src, words):
    from kernelpilot.backends.cuda.signature import parse_solve

    with pytest.raises(ContractError) as info:
        parse_solve(src, "k.cu")
    assert words in info.value.message and info.value.hint


def test_kernel_names_directives_and_local_includes(tmp_path):
    from kernelpilot.backends.cuda.signature import directives, global_kernels, local_includes

    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "a.cuh").write_text('#include "b.cuh"\ntemplate <int B>\n__global__ void __launch_bounds__'
                                           '((B * 2) / 2, 1)\n  tiled(float* y) {}\n')
    (tmp_path / "inc" / "b.cuh").write_text("__global__ void other(float* y) {}\n")
    main = tmp_path / "k.cu"
    main.write_text('#include "inc/a.cuh"\n#include <cuda_runtime.h>\n// kernelpilot: TUNABLES = {"B": [1, 2]}\n')
    assert global_kernels((tmp_path / "inc" / "a.cuh").read_text()) == ["tiled"]
    assert [p.name for p in local_includes(main)] == ["a.cuh", "b.cuh"]
    assert directives(main.read_text()) == {"TUNABLES": {"B": [1, 2]}}
    with pytest.raises(ContractError, match="not a Python literal"):
        directives("// kernelpilot: SHAPE = {N: 1}")


# -- inputs --------------------------------------------------------------------------------------------------------

def test_synthesized_sizes_follow_the_seed_rule():
    from kernelpilot.backends.cuda.inputs import MAX_ELEMENTS, element_count

    assert element_count({}) == 1 << 20
    assert element_count({"N": 5000}) == 5000
    assert element_count({"M": 64, "N": 512, "K": 32}) == 64 * 512
    assert element_count({"M": 64, "N": 512}, ptr_size=77) == 77
    assert element_count({"M": 1 << 20, "N": 1 << 20}) == MAX_ELEMENTS
    with pytest.raises(ContractError):
        element_count({"N": 0})


def test_seed_form_loads_with_ref_py_and_synthesized_inputs():
    import torch

    from kernelpilot.kernels.contract import load_kernel, make_case

    kf = load_kernel(CUDA / "softmax.cu", interpreted=True)
    assert kf.backend.name == "cuda" and kf.reference_path.name == "ref.py" and (kf.atol, kf.rtol) == (1e-5, 1e-4)
    assert kf.shape == {"rows": 4096, "cols": 1024, "ptr_size": 0} and kf.tunables == {}
    assert kf.backend.kernel_names(kf) == ["softmax_rows"]
    case = make_case(kf, {"rows": 8, "cols": 16, "ptr_size": 0}, 0, "cpu")
    assert case.outputs == ["output"] and case.inputs["input"].shape == (128,) and case.inputs["rows"] == 8
    again = make_case(kf, {"rows": 8, "cols": 16, "ptr_size": 0}, 0, "cpu")
    assert torch.equal(case.inputs["input"], again.inputs["input"])  # seed 42 + 0, reproducible
    assert torch.equal(case.inputs["input"], torch.randn(128, generator=torch.Generator().manual_seed(42)))
    kv = load_kernel(CUDA / "vector_add.cu", interpreted=True)
    assert kv.tunables == {"BLOCK_SIZE": [128, 256, 512, 1024]} and kv.reference_path.name == "vector_add.py"
    assert kv.backend.export_config({"BLOCK_SIZE": 256}) == "-DBLOCK_SIZE=256"


def test_a_cu_file_without_reference_is_refused(tmp_path):
    from kernelpilot.kernels.contract import load_kernel

    (tmp_path / "k.cu").write_text(ADD)
    with pytest.raises(ContractError, match="no reference"):
        load_kernel(tmp_path / "k.cu", interpreted=True)


# -- build ---------------------------------------------------------------------------------------------------------

@needs_nvcc
def test_build_cache_hits_misses_and_never_uses_a_stale_so_beside(tmp_path, build_cache):
    from kernelpilot.backends.cuda.build import build_shared

    src = tmp_path / "k.cu"
    src.write_text(ADD)
    (tmp_path / "k.so").write_bytes(b"stale: not a library")  # a .so beside the file is never loaded
    first = build_shared(src, {"BLOCK": 128}, "sm_90")
    assert not first.hit and first.path.parent == build_cache / "cuda" and first.path != tmp_path / "k.so"
    assert first.arch == "sm_90a" and "Used" in first.log
    assert build_shared(src, {"BLOCK": 128}, "sm_90").hit
    other = build_shared(src, {"BLOCK": 256}, "sm_90")
    assert not other.hit and other.key != first.key
    src.write_text(ADD.replace("+ 1.0f", "+ 2.0f"))
    changed = build_shared(src, {"BLOCK": 128}, "sm_90")
    assert not changed.hit and changed.key != first.key


@needs_nvcc
def test_a_compile_error_gives_nvcc_lines_not_a_traceback(tmp_path):
    from kernelpilot.backends.cuda.build import build_shared

    src = tmp_path / "bad.cu"
    src.write_text(ADD.replace("y[i] = x[i] + 1.0f;", "y[i] = x[i] + undefined_name;"))
    (tmp_path / "ref.py").write_text(REF)
    with pytest.raises(CompileError) as info:
        build_shared(src, {}, "sm_90")
    assert "undefined_name" in info.value.message and "error" in info.value.message
    assert "bad.cu(" in info.value.message and "Traceback" not in info.value.message
    proc = _cli("inspect", str(src), "--arch", "sm_90", "--json")
    assert proc.returncode != 0
    out = json.loads(proc.stdout)
    assert "undefined_name" in out["message"] and "Traceback" not in proc.stdout + proc.stderr


# -- static inspection and pipelining on sm_90 without a GPU -----------------------------------------------------

@pytest.fixture(scope="module")
def sgemm_reports():
    from kernelpilot.profile.static import inspect_configs

    return inspect_configs(CUDA / "sgemm_db.cu", [{}, {"DOUBLE_BUFFER": 0}], arch="sm_90", in_process=True,
                           keep_sass=True)


@needs_nvcc
def test_inspect_sgemm_on_sm90(sgemm_reports):
    db, single = sgemm_reports
    assert db.status == "ok" and single.status == "ok", (db, single)
    assert db.kernel_name.startswith("_Z11sgemm_tiled") and db.arch == "sm_90"
    assert db.registers_per_thread > 0 and db.n_spills == 0 and db.spill_stores_bytes == 0
    assert db.shared_mem_bytes == 2 * (64 * 16 + 16 * 64) * 4 and single.shared_mem_bytes == (64 * 16 + 16 * 64) * 4
    assert db.threads_per_block == 256 and db.num_stages == 2 and single.num_stages == 1
    assert db.occupancy is not None and db.occupancy.blocks_per_sm > 0 and db.occupancy.limiter
    assert db.instruction_mix["FFMA"] > 0 and db.instruction_mix["LDGSTS"] > 0 and not db.uses_tensor_cores


@needs_nvcc
def test_pipeline_verdict_double_buffered_vs_single(sgemm_reports):
    from kernelpilot.profile.pipeline import pipeline_from_static

    tile = ({"M": "BM", "N": "BN", "K": "BK"}, (64, 64, 16))
    db, single = (pipeline_from_static(r, None, tile=tile) for r in sgemm_reports)
    assert db.compute_load_ratio == pytest.approx(2 * 64 * 64 * 16 / ((64 * 16 + 16 * 64) * 4))
    assert db.main_loop.meets_product_rule and "pipelined" in db.main_loop.verdict
    assert not single.main_loop.meets_product_rule and not single.main_loop.overlapped
    assert "barrier separates" in single.main_loop.verdict
    assert db.main_loop.mma == single.main_loop.mma == {"FFMA": 64 * 64 * 16 // 256}  # unchanged by pipelining


@needs_nvcc
def test_pipeline_and_inspect_commands_on_a_cu_file(sgemm_reports):
    proc = _cli("pipeline", str(CUDA / "sgemm_db.cu"), "--arch", "sm_90", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    reports = json.loads(proc.stdout)["reports"]
    assert [r["config"]["DOUBLE_BUFFER"] for r in reports] == [1, 0]
    notes = "\n".join(reports[0]["notes"])
    assert "zero spills" in notes and "unchanged by pipelining" in notes and "double buffer: 16384 B" in notes
    assert "TMA" in notes  # ratio 16 on sm_90
    bad = _cli("pipeline", str(CUDA / "softmax.cu"), "--arch", "sm_90", "--json")
    assert bad.returncode != 0 and "--tile" in json.loads(bad.stdout)["hint"]


# -- running needs a GPU ------------------------------------------------------------------------------------------

def test_check_without_a_gpu_is_refused_with_a_hint():
    from tests.conftest import has_gpu

    if has_gpu():
        pytest.skip("a GPU is present: check runs")
    proc = _cli("check", str(CUDA / "vector_add.cu"), "--json")
    assert proc.returncode != 0
    out = json.loads(proc.stdout)
    assert out["error"] == "ToolMissingError" and "GPU" in out["message"] and "inspect" in out["hint"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["vector_add", "softmax", "sgemm_db"])
def test_examples_pass_check_on_a_gpu(name):
    from kernelpilot import api

    result = api.check(CUDA / f"{name}.cu", shape={"M": 512, "N": 512, "K": 512} if name == "sgemm_db" else None)
    assert result.passed, result.summary


@pytest.mark.gpu
def test_sync_in_solve_is_skipped_and_timing_sees_the_kernel():
    import torch

    from kernelpilot.kernels.contract import load_kernel, make_case, run_kernel
    from kernelpilot.measure.timing import time_callable

    kf = load_kernel(CUDA / "vector_add.cu", interpreted=False)
    case = make_case(kf, {"N": 1 << 24}, 0, "cuda")
    fn = lambda: run_kernel(kf, case.inputs, {"BLOCK_SIZE": 256})  # noqa: E731
    fn()
    torch.cuda.synchronize()
    lib = next(iter(kf.extras["libs"].values()))
    assert lib.kp_sync_calls() >= 1  # solve called cudaDeviceSynchronize; the shim counted it
    timing = time_callable(fn, Target.gpu())
    floor_ns = 3 * 4 * (1 << 24) / 3.35e12 * 1e9  # H100 SXM HBM3 3.35 TB/s: no honest time below it
    assert timing.median_ns > 0.9 * floor_ns


@pytest.mark.gpu
def test_illegal_address_is_a_typed_failure(tmp_path):
    from kernelpilot.errors import KernelFailed
    from kernelpilot import api

    (tmp_path / "oob.cu").write_text(ADD.replace("if (i < n) y[i]", "y[i + (1 << 30)]"))
    (tmp_path / "ref.py").write_text(REF)
    with pytest.raises(KernelFailed) as info:
        api.bench(tmp_path / "oob.cu")
    assert info.value.failure == "illegal_memory_access"
