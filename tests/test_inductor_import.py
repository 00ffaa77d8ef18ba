"""The Inductor import (kernelpilot.inductor, kernelpilot.api.inductor, `kernelpilot inductor`): torch.compile's output code,
captured on an H100 (torch 2.11, Triton 3.6; tests/data/inductor/*.json, written by scripts/device-inductor.sh),
converted into kernel files that the contract loads, with Inductor's launch parameters as TUNABLES."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import ROOT

from kernelpilot.errors import ContractError
from kernelpilot.inductor import CapturedCode
from kernelpilot.inductor.convert import convert_capture
from kernelpilot.inductor.errors import InductorConvertError, NoTritonKernel
from kernelpilot.inductor.parse import parse_output

DATA = Path(__file__).resolve().parent / "data" / "inductor"


def _capture(name: str, tmp_path: Path | None = None) -> CapturedCode:
    """A fixture, its original kernel file re-pointed to this checkout's (the capture ran on the device's checkout
    of the same file; a copy in ``tmp_path`` when given, so a test may change it)."""
    cap = CapturedCode.model_validate_json((DATA / f"{name}.json").read_text())
    original = ROOT / cap.kernel_path.split("/work/main/", 1)[1]
    if tmp_path is not None:
        original = Path(shutil.copy(original, tmp_path / original.name))
    cap.kernel_path, cap.kernel_sha256 = str(original), hashlib.sha256(original.read_bytes()).hexdigest()
    return cap


def _write(cap: CapturedCode, path: Path, **kw):
    conv = convert_capture(cap, path, **kw)
    path.write_text(conv.text)
    return conv


def _load(path: Path):
    from kernelpilot.kernels.contract import load_kernel

    return load_kernel(path, interpreted=True)


def test_softmax_capture_converts_to_a_kernel_file_the_contract_loads(tmp_path):
    cap = _capture("softmax-default")
    _write(cap, tmp_path / "softmax_inductor.py")
    kf = _load(tmp_path / "softmax_inductor.py")
    # Inductor's autotuner launched XBLOCK=1, R0_BLOCK=8192, 16 warps, 1 stage: the default; powers of two around it
    assert kf.default_config == {"XBLOCK_0": 1, "R0_BLOCK_0": 8192, "num_warps_0": 16, "num_stages_0": 1}
    assert kf.tunables == {"XBLOCK_0": [1, 2], "R0_BLOCK_0": [4096, 8192], "num_warps_0": [8, 16, 32],
                           "num_stages_0": [1, 2]}
    assert kf.constraints == ["XBLOCK_0 * R0_BLOCK_0 <= 32768"]
    assert kf.shape == {"M": 8192, "N": 8192, "dtype": "float32"}
    assert kf.shape_rules == {"M": "fixed", "N": "fixed", "dtype": "fixed"}
    # setup and reference are the original file's
    assert kf.setup.__code__.co_filename == cap.kernel_path
    assert kf.reference.__code__.co_filename == cap.kernel_path
    assert kf.module.SOURCE["torch"].startswith("2.11") and kf.module.SOURCE["mode"] == "default"


def test_the_kernels_are_module_level_triton_jit_functions_without_inductor_launchers(tmp_path):
    cap = _capture("liger_rope-default")
    conv = _write(cap, tmp_path / "rope.py")
    tree = ast.parse(conv.text)
    jitted = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
              and [ast.unparse(d) for d in n.decorator_list] == ["triton.jit"]]
    assert jitted == conv.kernel_names == ["triton_poi_fused_add_cat_mul_neg_slice_unsqueeze_0",
                                           "triton_poi_fused_add_cat_mul_neg_slice_unsqueeze_1"]
    assert "triton_heuristics.pointwise" not in conv.text and "async_compile" not in conv.text
    assert "set_driver_to_gpu" not in conv.text
    kf = _load(tmp_path / "rope.py")
    for name in jitted:  # the module's own kernels (InterpretedFunction is what triton.jit gives under the interpreter)
        assert type(getattr(kf.module, name)).__name__ in ("JITFunction", "InterpretedFunction")
        assert getattr(kf.module, name).fn.__module__ == kf.module.__name__
    # two kernels: tunables suffixed by index; each default is what its autotuner launched
    assert kf.default_config == {"XBLOCK_0": 512, "num_warps_0": 8, "num_stages_0": 1,
                                 "XBLOCK_1": 1024, "num_warps_1": 4, "num_stages_1": 1}
    # q and k are read by the compiled call: never handed over as its output buffers (the kernel reads other halves)
    assert conv.handed_over == {"q": False, "k": False}
    assert "_h.out(" not in conv.text


def test_the_returned_buffer_is_the_declared_output_where_it_can_be(tmp_path):
    conv = _write(_capture("layer_norm-default"), tmp_path / "ln.py")
    assert conv.handed_over == {"y": True}
    assert "buf3 = _h.out(0, (8192, 4096), (4096, 1), torch.bfloat16)" in conv.text
    # the launch as Inductor wrote it, routed to this file's launcher
    assert "_h.triton_red_fused_native_layer_norm_0.run(arg0_1, arg1_1, arg2_1, buf3, 8192, 4096, stream=stream0)" \
        in conv.text


def test_cuda_graph_partitions_keep_their_host_code(tmp_path):
    conv = _write(_capture("softmax-max-autotune"), tmp_path / "sm_ma.py")
    assert "def partition_0(args, _h):" in conv.text
    assert "self.partitions[0](partition0_args, _h)" in conv.text
    kf = _load(tmp_path / "sm_ma.py")
    assert kf.module.SOURCE["mode"] == "max-autotune"
    assert kf.module.runner.partitions == [kf.module.partition_0]


def test_cublas_only_output_is_a_distinct_error():
    cap = _capture("matmul-default")
    with pytest.raises(NoTritonKernel) as info:
        convert_capture(cap, "/tmp/never.py")
    assert info.value.extern_calls == ["mm"]
    assert "cuBLAS" in info.value.message and info.value.hint
    assert info.value.to_dict()["extern_calls"] == ["mm"]


@pytest.mark.parametrize("old,new,what", [("'grid_type': 'Grid1D'", "'grid_type': 'SplitScanGrid'", "SplitScanGrid"),
                                          ("@triton_heuristics.reduction(", "@triton_heuristics.split_scan(",
                                           "split_scan")])
def test_an_unsupported_grid_or_kind_is_refused_by_name(old, new, what):
    cap = _capture("softmax-default")
    assert old in cap.codes[0]
    with pytest.raises(InductorConvertError, match=what):
        parse_output(cap.codes[0].replace(old, new))


def test_a_launch_with_other_arguments_than_the_kernel_takes_is_refused():
    code = _capture("softmax-default").codes[0]
    bad = code.replace(".run(arg0_1, buf2, 8192, 8192, stream=stream0)", ".run(arg0_1, buf2, 8192, stream=stream0)")
    with pytest.raises(InductorConvertError, match="takes"):
        parse_output(bad)


def test_graph_breaks_and_a_host_name_it_does_not_define_are_refused():
    cap = _capture("softmax-default")
    with pytest.raises(InductorConvertError, match="2 output modules"):
        convert_capture(cap.model_copy(update={"codes": cap.codes * 2}), "/tmp/never.py")
    odd = cap.codes[0].replace("args.clear()", "args.clear()\n        mystery_helper(args)", 1)
    with pytest.raises(InductorConvertError, match="mystery_helper"):
        convert_capture(cap.model_copy(update={"codes": [odd]}), "/tmp/never.py")


def test_an_original_file_changed_since_capture_is_refused(tmp_path):
    cap = _capture("softmax-default", tmp_path)
    _write(cap, tmp_path / "imported.py")
    _load(tmp_path / "imported.py")  # as captured: loads
    original = Path(cap.kernel_path)
    original.write_text(original.read_text().replace("4.0 * torch.randn", "40.0 * torch.randn"))
    with pytest.raises(ContractError, match="changed since"):
        _load(tmp_path / "imported.py")


def test_spread_zero_keeps_inductors_config_only(tmp_path):
    conv = _write(_capture("liger_geglu-default"), tmp_path / "geglu.py", spread=0)
    assert conv.tunables == {"XBLOCK_0": [1024], "num_warps_0": [4], "num_stages_0": [1, 2]}
    assert conv.constraints == []


def test_api_and_cli_from_a_saved_capture(tmp_path):
    from typer.testing import CliRunner

    from kernelpilot.api.inductor import import_inductor
    from kernelpilot.cli import app

    cap = _capture("layer_norm-default")
    saved = tmp_path / "cap.json"
    saved.write_text(cap.model_dump_json())
    res = import_inductor(cap.kernel_path, out=tmp_path / "ln.py", from_capture=saved, validate=False)
    assert res.kernels == ["triton_red_fused_native_layer_norm_0"] and res.n_configs == 2 * 3 * 3 * 2
    assert res.out_sha256 == hashlib.sha256((tmp_path / "ln.py").read_bytes()).hexdigest()
    mm = tmp_path / "mm.json"
    mm.write_text(_capture("matmul-default").model_dump_json())
    got = CliRunner().invoke(app, ["inductor", str(ROOT / "src/kernelpilot/examples/matmul.py"), "--out",
                                   str(tmp_path / "mm.py"), "--from-capture", str(mm), "--json"])
    assert got.exit_code == 1
    assert json.loads(got.stdout)["error"] == "NoTritonKernel" and not (tmp_path / "mm.py").exists()


def test_capture_observes_which_tensor_is_which_graph_input():
    """Dynamo hands a graph only the tensors it uses, in the order it first meets them: the capture matches them by
    identity (on the CPU Inductor writes C++, but the order is Dynamo's, the same for CUDA)."""
    import torch

    from kernelpilot.inductor.capture import capture_reference

    def reference(a, b, c, scale, **_):
        return torch.nn.functional.gelu(b, approximate="tanh") * a * scale

    inputs = {"a": torch.randn(4, 8), "b": torch.randn(4, 8), "c": torch.empty(4, 8), "scale": 2.0}
    codes, order, result = capture_reference(reference, inputs, "default")
    assert order == ["b", "a"]  # c (unused) dropped, b met first
    assert len(codes) == 1 and "def call" in codes[0]
    assert torch.allclose(result, reference(**inputs), atol=1e-5)


def _small_softmax(tmp_path: Path, n: int = 64) -> Path:
    """The softmax capture with its sizes rewritten from 8192 to ``n`` (M = N = 8192 is the only number 8192 in it:
    xnumel, r0_numel, the row stride, the asserted size and stride, the buffer, the launch's numels), so the
    interpreter runs Inductor's body in seconds: 8192 rows take it about 20 minutes."""
    _write(_small_capture(n), tmp_path / "softmax_small.py")
    return tmp_path / "softmax_small.py"


def _small_capture(n: int = 64):
    """The softmax capture with its sizes rewritten from 8192 to ``n`` (see :func:`_small_softmax`)."""
    cap = _capture("softmax-default")
    chosen = {k: {**v, "kwargs": {"XBLOCK": 1, "R0_BLOCK": n}} for k, v in cap.chosen.items()}
    return cap.model_copy(update={"codes": [cap.codes[0].replace("8192", str(n))], "chosen": chosen,
                                  "shape": {"M": n, "N": n, "dtype": "float32"}, "constants": {"M": n, "N": n}})


@pytest.mark.parametrize("blocks", [{"XBLOCK_0": 1, "R0_BLOCK_0": 64}, {"XBLOCK_0": 2, "R0_BLOCK_0": 32}])
def test_the_interpreter_runs_inductors_softmax_body_at_a_config(tmp_path, blocks):
    """Under TRITON_INTERPRET=1 (tests/conftest.py) Inductor's body runs on CPU tensors (triton_helpers'
    online softmax, libdevice.exp): one tile per row, and two rows per program over two column tiles."""
    import torch

    from kernelpilot.kernels.case import make_case

    kf = _load(_small_softmax(tmp_path))
    case = make_case(kf, kf.shape, 0, "cpu")
    y = case.inputs["y"]
    y.fill_(float("nan"))
    kf.run_kernel(**case.inputs, **{**kf.default_config, **blocks})
    assert torch.allclose(y, torch.softmax(case.inputs["x"], -1), atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="compiled for"):  # the specialization is checked, not assumed
        kf.run_kernel(**{**case.inputs, "N": 32}, **kf.default_config)


@pytest.mark.gpu
def test_on_a_gpu_the_converted_softmax_matches_the_reference_at_its_shape(tmp_path):
    import torch

    from kernelpilot.kernels.case import make_case
    from kernelpilot.kernels.contract import load_kernel

    _write(_capture("softmax-default"), tmp_path / "sm.py")
    kf = load_kernel(tmp_path / "sm.py")
    case = make_case(kf, kf.shape, 0, "cuda")
    y = case.inputs["y"]
    y.fill_(float("nan"))
    for cfg in ({}, {"XBLOCK_0": 2, "R0_BLOCK_0": 4096, "num_warps_0": 8}):
        kf.run_kernel(**case.inputs, **{**kf.default_config, **cfg})
        assert torch.allclose(y, torch.softmax(case.inputs["x"], -1), atol=1e-6, rtol=1e-5)


@pytest.mark.gpu
def test_on_a_gpu_the_capture_records_the_graph_inputs_and_the_autotuners_choice():
    from kernelpilot.inductor import capture_kernel

    cap = capture_kernel(ROOT / "src/kernelpilot/examples/layer_norm.py", shape={"M": 64, "N": 256})
    assert cap.arg_names == ["x", "w", "b"] and cap.outputs == ["y"] and cap.return_names == ["y"]
    assert cap.chosen and all(c is not None for c in cap.chosen.values())
    assert len(cap.codes) == 1 and "async_compile.triton(" in cap.codes[0]


def test_kernelpilot_check_passes_the_converted_kernel(tmp_path):
    """The whole check (isolated worker, poisoned outputs, three seeds, roles observed) on the converted file."""
    from kernelpilot import api

    result = api.check(_small_softmax(tmp_path))
    assert result.passed, result.summary
    assert len(result.seeds) == 3


def test_optimizes_candidate_path_imports_searches_and_decides(tmp_path):
    """The path optimize takes when torch.compile beat its best (app/candidates.py), from a saved capture under the
    interpreter: the import writes RUN/inductor/kernel.py and import.json, tune's auto strategy searches its space
    in RUN/inductor/tune, and the decision keeps the faster side (here against a made-up slower and faster best)."""
    from kernelpilot.app.candidates import decide_final, inductor_candidate
    from kernelpilot.records.evaluation import Evaluation

    cap = tmp_path / "capture.json"
    cap.write_text(_small_capture(16).model_dump_json())
    folder = tmp_path / "run" / "inductor"
    cand = inductor_candidate(ROOT / "src/kernelpilot/examples/softmax.py", None, {"M": 16, "N": 16, "dtype": "float32"},
                              folder, 1000.0, timeout_s=300, budget_s=30, capture=cap)
    assert cand.status == "imported", cand.message
    assert (folder / "kernel.py").is_file() and (folder / "import.json").is_file() and (folder / "tune").is_dir()
    assert cand.duration_ns and cand.config and cand.samples_ns
    tuned = json.loads((folder / "tune" / "tune.json").read_text())  # the record says how far the search got
    assert (cand.space_size, cand.evaluations, cand.stopped) == (tuned["space_size"], tuned["evaluations_total"],
                                                                 tuned["stopped"])
    assert cand.space_size and 0 < cand.evaluations and cand.stopped
    slower = Evaluation(config={"B": 1}, status="ok", index=3, duration_ns=cand.duration_ns * 10,
                        samples_ns=[cand.duration_ns * 10] * 20)
    final = decide_final(slower, "kernel.py", cand)
    assert final.source == "inductor" and final.kernel == "inductor/kernel.py" and final.config == cand.config
    faster = slower.model_copy(update={"duration_ns": cand.duration_ns / 10, "samples_ns": [cand.duration_ns / 10] * 20})
    kept = decide_final(faster, "kernel.py", cand)
    assert kept.source == "search" and kept.version == 3 and "not faster" in kept.decision


def test_the_triton_gemm_mode_is_max_autotune_with_cublas_left_out():
    """The candidate for a GEMM that the default compile sends to cuBLAS is captured with Inductor's Triton
    templates only: max-autotune's own patches plus ``max_autotune_gemm_backends="TRITON"``; Inductor's modes are
    passed through unchanged."""
    from torch._inductor import list_mode_options

    from kernelpilot.api.inductor import MODES
    from kernelpilot.inductor.capture import TRITON_GEMM_MODE, mode_options

    import torch._inductor.config as inductor_config

    got = mode_options(TRITON_GEMM_MODE)
    assert got["max_autotune_gemm_backends"] == "TRITON" and TRITON_GEMM_MODE in MODES
    # the persistent TMA template is among the choices, under the name this torch's Inductor reads
    assert got["triton.enable_persistent_tma_matmul"] is True
    assert isinstance(inductor_config.triton.enable_persistent_tma_matmul, bool)
    ours = ("max_autotune_gemm_backends", "triton.enable_persistent_tma_matmul")
    assert {k: v for k, v in got.items() if k not in ours} == list_mode_options("max-autotune", False)
    assert mode_options("default") == list_mode_options("default", False)


def test_the_triton_gemm_capture_asks_for_the_persistent_template_first_and_knows_when_it_got_it():
    """max-autotune-triton first limits Inductor's choices by name to its persistent TMA template (the option exists
    in this torch and compile_fx accepts it as a patch); whether the code it wrote launches a persistent template is
    read from the code: the H200 capture does, the plain template's and cuBLAS's captures do not (the capture is
    then made again with every choice)."""
    import torch
    import torch._inductor.config as inductor_config

    from kernelpilot.inductor.capture import PERSISTENT_TMA_CHOICES, _persistent_template, capture_reference

    assert hasattr(inductor_config.test_configs, "autotune_choice_name_regex")
    inputs = {"a": torch.randn(4, 8)}
    codes, _order, result = capture_reference(lambda a: a * 2, inputs, "default", PERSISTENT_TMA_CHOICES)
    assert codes and torch.equal(result, inputs["a"] * 2)
    assert _persistent_template(_capture("triton_tutorial_matmul-persistent-tma-h200").codes)
    assert not _persistent_template(_capture("triton_tutorial_matmul-max-autotune-triton").codes)
    assert not _persistent_template(_capture("matmul-default").codes)


#: A template kernel in the form Inductor's max-autotune writes (``@triton_heuristics.template`` with a FixedGrid, its
#: tile sizes fixed in the body, the grid passed by the host code after the arguments); the body is ours.
_TEMPLATE = """
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics

@triton_heuristics.template(
num_stages=3,
num_warps=4,
triton_meta={'signature': {'arg_A': '*bf16', 'arg_B': '*bf16', 'out_ptr0': '*bf16'}, 'constants': {}},
inductor_meta={'kernel_name': 'triton_tem_fused_mm_0', 'grid_type': 'FixedGrid',
               'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'],
               'config_args': {'BLOCK_M': 32, 'BLOCK_N': 32, 'BLOCK_K': 16}},
)
@triton.jit
def triton_tem_fused_mm_0(arg_A, arg_B, out_ptr0):
    BLOCK_M : tl.constexpr = 32
    BLOCK_N : tl.constexpr = 32
    BLOCK_K : tl.constexpr = 16
    M = 64
    N = 64
    K = 64
    pid = tl.program_id(0)
    pid_m = pid // (N // BLOCK_N)
    pid_n = pid % (N // BLOCK_N)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(arg_A + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(arg_B + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(out_ptr0 + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))
"""


def _template_capture() -> CapturedCode:
    """The matmul example's default capture (a cuBLAS call) turned into a max-autotune-triton one at 64³: the host
    launches the template above with the grid (4, 1, 1) instead of calling ``extern_kernels.mm``."""
    cap = _capture("matmul-default")
    code = cap.codes[0].replace("4096", "64")
    kernel = (f"triton_tem_fused_mm_0 = async_compile.triton('triton_tem_fused_mm_0', '''{_TEMPLATE}''', "
              "device_str='cuda')\n\n\nasync_compile.wait(globals())")
    code = code.replace("async_compile.wait(globals())", kernel, 1)
    code = code.replace("extern_kernels.mm(arg0_1, arg1_1, out=buf0)",
                        "stream0 = get_raw_stream(0)\n            "
                        "triton_tem_fused_mm_0.run(arg0_1, arg1_1, buf0, 4, 1, 1, stream=stream0)")
    return cap.model_copy(update={"codes": [code], "mode": "max-autotune-triton", "chosen": {},
                                  "shape": {"M": 64, "N": 64, "K": 64, "dtype": "bfloat16"},
                                  "constants": {"M": 64, "N": 64, "K": 64}})


def test_a_cuda_kernels_candidate_takes_setup_from_the_cu_files_sidecar(tmp_path):
    """Session 14, H100: optimize of sgemm_db.cu captured Inductor's Triton GEMM template, and the written file
    failed to import (``spec_from_file_location`` of a ``.cu`` is None). It loads the ``.cu`` as kernelpilot does."""
    cu = ROOT / "src" / "kernelpilot" / "examples" / "cuda" / "sgemm_db.cu"
    side = cu.with_suffix(".py")
    sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    cap = _template_capture().model_copy(update={
        "kernel_path": str(cu), "kernel_sha256": sha(cu), "ref_path": str(side), "ref_sha256": sha(side)})
    _write(cap, tmp_path / "sgemm_inductor.py")
    kf = _load(tmp_path / "sgemm_inductor.py")
    assert kf.setup.__code__.co_filename == str(side) and kf.reference.__code__.co_filename == str(side)
    assert kf.module.atol == 1e-3 and kf.module.COMPUTE_UNIT == getattr(kf.module._ORIGINAL, "COMPUTE_UNIT", "fp32")


def test_a_template_with_a_fixed_grid_converts_and_its_warps_and_stages_are_the_space(tmp_path):
    """Inductor's GEMM template (what max-autotune-triton captures where the default compile calls cuBLAS): the
    launch passes the host's grid after the arguments; the tiles stay as Inductor fixed them; the space is the
    decorator's warps and stages and their neighbours; the whole check passes under the interpreter."""
    from kernelpilot import api

    parsed = parse_output(_template_capture().codes[0])
    (k,) = parsed.kernels
    assert (k.kind, k.grid_type, k.grid_args, k.params) == ("template", "FixedGrid", 3, ["arg_A", "arg_B", "out_ptr0"])
    conv = _write(_template_capture(), tmp_path / "mm.py")
    assert conv.tunables == {"num_warps_0": [2, 4, 8], "num_stages_0": [2, 3, 4]}
    assert conv.default_config == {"num_warps_0": 4, "num_stages_0": 3}
    assert conv.default_sources == {"triton_tem_fused_mm_0": "max-autotune's template choice"}
    result = api.check(tmp_path / "mm.py")
    assert result.passed, result.summary
    # a launch that passes no grid, or a template with a Grid1D, is refused by name
    with pytest.raises(InductorConvertError, match="grid values"):
        parse_output(_template_capture().codes[0].replace("buf0, 4, 1, 1, stream", "buf0, stream"))
    with pytest.raises(InductorConvertError, match="template kernel with grid type 'Grid1D'"):
        parse_output(_template_capture().codes[0].replace("'grid_type': 'FixedGrid'", "'grid_type': 'Grid1D'"))


#: The persistent TMA template's form (torch 2.11's ``triton_persistent_tma_mm.py.jinja`` with Triton's device-side
#: tensor descriptors): NUM_SMS programs stride over the tiles, the host passing ``min(NUM_SMS, tiles)`` as the grid;
#: the body is ours, at 64³ with 32×32×16 tiles, its tile order grouped and its epilogue's tile rematerialized as the
#: template's are.
_TMA_TEMPLATE = _TEMPLATE.split("def triton_tem_fused_mm_0")[0] + """def triton_tem_fused_mm_0(arg_A, arg_B, out_ptr0):
    BLOCK_M : tl.constexpr = 32
    BLOCK_N : tl.constexpr = 32
    BLOCK_K : tl.constexpr = 16
    GROUP_M : tl.constexpr = 2
    NUM_SMS : tl.constexpr = 8
    M = 64
    N = 64
    K = 64
    a_desc = tl.make_tensor_descriptor(base=arg_A, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(base=arg_B, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(base=out_ptr0, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    start_pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    for tile_id in tl.range(start_pid, grid_m * grid_n, NUM_SMS):
        # re-order program ID for better L2 performance
        group_id = tile_id // width
        group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
        pid_m = group_id * GROUP_M + (tile_id % group_size)
        pid_n = (tile_id % width) // (group_size)
        rm = pid_m * BLOCK_M
        rn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            acc += tl.dot(tl.load_tensor_descriptor(a_desc, [rm, k]), tl.load_tensor_descriptor(b_desc, [k, rn]))
        # rematerialize rm and rn to save registers
        rm = pid_m * BLOCK_M
        rn = pid_n * BLOCK_N
        tl.store_tensor_descriptor(c_desc, [rm, rn], acc.to(tl.bfloat16))
"""


def test_a_persistent_tma_template_converts_checks_and_gets_triton_scratch(tmp_path):
    """Inductor's persistent TMA template (on in max-autotune-triton) builds tensor descriptors on the device, which
    on a GPU needs Triton's scratch allocator: the converted file's launcher sets its own before each launch (as
    Inductor's does), the persistent grid the host passes is kept, and the check passes under the interpreter."""
    import importlib.util

    from triton.runtime import _allocation

    from kernelpilot import api

    cap = _template_capture()
    cap = cap.model_copy(update={"codes": [cap.codes[0].replace(_TEMPLATE, _TMA_TEMPLATE)]})
    # the host's grid is Inductor's: min(NUM_SMS, tiles) = 4 programs for its four 32 x 32 tiles
    assert "make_tensor_descriptor" in cap.codes[0] and ", 4, 1, 1, stream" in cap.codes[0]
    conv = _write(cap, tmp_path / "mm.py")
    # persistent (NUM_SMS in its body): its tiles are tunables too, the launch is NUM_SMS programs; its one loop
    # over the tiles may be flattened into the K loop (FLATTEN_0 1), the epilogue's tile then also from a counter of
    # its own (2); Inductor's nested loops by default
    assert conv.tunables == {"BLOCK_M_0": [16, 32, 64], "BLOCK_N_0": [16, 32, 64], "BLOCK_K_0": [16, 32],
                             "FLATTEN_0": [0, 1, 2], "num_warps_0": [2, 4, 8], "num_stages_0": [2, 3, 4]}
    assert conv.default_config["FLATTEN_0"] == 0 and "NUM_SMS, flatten=FLATTEN):" in conv.text
    assert "tile_id_c = start_pid - NUM_SMS" in conv.text and "if FLATTEN == 2:" in conv.text
    assert conv.constraints == [] and "programs=8" in conv.text
    result = api.check(tmp_path / "mm.py")
    assert result.passed, result.summary
    for flatten in (1, 2):
        result = api.check(tmp_path / "mm.py", config={**conv.default_config, "FLATTEN_0": flatten})
        assert result.passed, result.summary
    # tiles other than Inductor's: 8 tiles of 16 x 32, which the host's 4 programs striding by 8 would half miss;
    # with its own counter the epilogue of a program that has two tiles (16 of 16 x 16) stores each where it belongs
    other = {**conv.default_config, "BLOCK_M_0": 16, "BLOCK_N_0": 32, "BLOCK_K_0": 32}
    result = api.check(tmp_path / "mm.py", config=other)
    assert result.passed, result.summary
    other = {**conv.default_config, "BLOCK_M_0": 16, "BLOCK_N_0": 16, "FLATTEN_0": 2}
    result = api.check(tmp_path / "mm.py", config=other)
    assert result.passed, result.summary
    spec = importlib.util.spec_from_file_location("_kp_tma_mm", tmp_path / "mm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import torch
    a, b = (torch.randn(64, 64).to(torch.bfloat16) for _ in range(2))
    c = torch.empty(64, 64, dtype=torch.bfloat16)
    _allocation._allocator.set(_allocation._NULL_ALLOCATOR)
    mod.run_kernel(a=a, b=b, c=c, M=64, N=64, K=64, **mod.DEFAULT_CONFIG)  # (its numbers: the check above)
    assert _allocation._allocator.get() is mod._scratch
    buf = mod._scratch(128, 64, None)
    assert (buf.dtype, buf.numel()) == (torch.int8, 128)


def test_the_persistent_tma_template_max_autotune_triton_chose_on_an_h200_is_read():
    """The capture of Triton's matmul tutorial's reference on an H200 (torch 2.11, max-autotune-triton with the
    persistent TMA template on): max-autotune chose the persistent template (128 x 256 x 64 tiles, 8 warps, 3
    stages, NUM_SMS 132); its tiles move into the signature and the space is around that choice."""
    cap = CapturedCode.model_validate_json((DATA / "triton_tutorial_matmul-persistent-tma-h200.json").read_text())
    (k,) = parse_output(cap.codes[0]).kernels
    assert (k.kind, k.persistent_sms, k.blocks) == ("template", 132, ["BLOCK_M", "BLOCK_N", "BLOCK_K", "FLATTEN"])
    assert "BLOCK_M : tl.constexpr" not in k.source and "FLATTEN: tl.constexpr):" in k.source
    assert "make_tensor_descriptor" in k.source
    # the loop over the tiles, and only it, takes the flatten flag; the K loop inside it is Inductor's; under
    # FLATTEN == 2 the epilogue recomputes its tile from tile_id_c with the template's own grouping statements
    assert k.flatten_values == [0, 1, 2] and k.source.count("flatten=") == 1
    assert "pid_m = group_id_c * GROUP_M + (tile_id_c % group_size_c)" in k.source
    assert "for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=FLATTEN):" in k.source
    assert "for rk in tl.range(0, K, BLOCK_K):" in k.source
    conv = convert_capture(cap, "/nonexistent/kernel.py")
    assert conv.default_config == {"BLOCK_M_0": 128, "BLOCK_N_0": 256, "BLOCK_K_0": 64, "FLATTEN_0": 0,
                                   "num_warps_0": 8, "num_stages_0": 3}
    assert conv.tunables["BLOCK_N_0"] == [128, 256] and conv.tunables["BLOCK_K_0"] == [32, 64, 128]


def test_a_kernelbench_solution_gets_no_half_made_inductor_candidate(tmp_path):
    """On an H200 the candidate for a KernelBench solution failed at import (the converted file takes ``setup`` from
    the original, which a solution does not define): it is now said to be not supported, before any capture."""
    from kernelpilot.app.candidates import inductor_candidate

    data = ROOT / "tests" / "data" / "kernelbench"
    got = inductor_candidate(data / "1_ReLU_small_triton.py", data / "1_ReLU_small.py", {}, tmp_path / "inductor",
                             1000.0, timeout_s=60)
    assert got.status == "not_supported" and "KernelBench" in got.message and got.torch_compile_ns == 1000.0
    assert not (tmp_path / "inductor" / "kernel.py").exists()


def test_the_template_max_autotune_triton_wrote_on_an_h100_is_read():
    """The capture of Triton's matmul tutorial's reference on an H100 (torch 2.11, mode max-autotune-triton): one
    GEMM template with a FixedGrid, launched from a CUDA-graph partition with its three grid values; the space is
    max-autotune's choice (8 warps, 5 stages) and its neighbours."""
    from kernelpilot.inductor.space import kernel_space

    cap = CapturedCode.model_validate_json((DATA / "triton_tutorial_matmul-max-autotune-triton.json").read_text())
    (k,) = parse_output(cap.codes[0]).kernels
    assert (k.kind, k.grid_type, k.grid_args, k.launch) == (
        "template", "FixedGrid", 3, {"kwargs": {}, "num_warps": 8, "num_stages": 5})
    space = kernel_space(k, 0, cap.chosen.get(k.name), cap.configs.get(k.name, []))
    assert space.tunables == {"num_warps_0": [4, 8, 16], "num_stages_0": [4, 5, 6]} and space.source == "autotuner"


def test_the_final_is_decided_on_ratios_to_torch_compile_when_both_were_timed_round_robin():
    """Two kernels timed at different moments compare through torch.compile, timed round-robin with each: the GPU
    slowed by 10 % between the search's timing and the candidate's, so the candidate's raw samples look slower
    although, round by round, it beats torch.compile where the search's best does not. The raw samples keep the
    search's best; the ratios pick the candidate and record its ratio to torch.compile."""
    import random

    from kernelpilot.app.candidates import CandidateOutcome, decide_final
    from kernelpilot.records.evaluation import Evaluation

    rng = random.Random(0)
    best = Evaluation(config={"B": 1}, status="ok", index=4, duration_ns=100.0,
                      samples_ns=[100.0 + rng.random() for _ in range(30)])
    cand = CandidateOutcome(status="imported", kernel="kernel.py", config={"num_warps": 8}, duration_ns=104.0,
                            samples_ns=[104.0 + rng.random() for _ in range(30)], torch_compile_ns=98.0)
    best_ratios = [1.02 + rng.random() * 0.005 for _ in range(30)]  # the search's best over torch.compile
    cand_ratios = [0.95 + rng.random() * 0.005 for _ in range(30)]  # the candidate over torch.compile
    raw = decide_final(best, "kernel.py", cand)
    assert raw.source == "search" and raw.vs_torch_compile is None
    paired = decide_final(best, "kernel.py", cand, best_ratios=best_ratios, cand_ratios=cand_ratios)
    assert paired.source == "inductor" and "round-robin" in paired.decision
    assert paired.vs_torch_compile == pytest.approx(1 / 0.9525, rel=0.01)
    kept = decide_final(best, "kernel.py", cand, best_ratios=cand_ratios, cand_ratios=best_ratios)
    assert kept.source == "search" and kept.vs_torch_compile == pytest.approx(1 / 0.9525, rel=0.01)


def test_paired_ratios_divide_the_kernels_samples_by_torch_compiles_round_by_round():
    from kernelpilot.app.candidates import paired_ratios
    from kernelpilot.measure.timing import summarize
    from kernelpilot.report.benchmark import BenchmarkResult, BenchmarkRow
    from kernelpilot.measure.timing import TimingResult

    def timing(xs):
        return TimingResult(timer="cuda_event", is_measurement=True, samples_ns=xs, n_samples=len(xs), **summarize(xs),
                            n_warmup=3, warmup_ms=1.0, warmup_stable=False, flush_bytes=0, l2_bytes=None)

    rows = [BenchmarkRow(name="k (Triton, best config)", timing=timing([10.0, 22.0, 30.0])),
            BenchmarkRow(name="PyTorch eager (reference)", timing=timing([50.0, 50.0, 50.0])),
            BenchmarkRow(name="torch.compile (reference, default mode)", timing=timing([20.0, 20.0, 40.0]))]
    bench = BenchmarkResult(shape={}, config={}, device="cuda", rows=rows, round_robin=True)
    assert paired_ratios(bench) == [0.5, 1.1, 0.75]
    no_compile = bench.model_copy(update={"rows": rows[:2]})
    assert paired_ratios(no_compile) == [] and paired_ratios(None) == []
    # rows timed one after the other (bench --baselines, a run recorded before round-robin baselines) do not pair
    assert paired_ratios(bench.model_copy(update={"round_robin": False})) == []
