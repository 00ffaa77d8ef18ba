"""Native code bundles without a GPU (issue 15): export for sm_90 (Triton compiles for a target on the CPU), verify,
tampered files, wrong arch, too old a driver, shapes outside the declared ones, no Triton in the loading process.
The driver launch itself (``kernelpilot.bundle.load._launch``) needs a GPU: scripts/device-bundle.sh runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import EXAMPLES, ROOT
from kernelpilot import api
from kernelpilot.bundle import BundleError, export_bundle, load, verify_bundle
from kernelpilot.bundle.reader import BundleCoverageError, BundleTampered, check_coverage, manifest_id
from kernelpilot.bundle.export import min_driver_cuda, ptx_isa_cuda, resolve_source
from kernelpilot.errors import ContractError, ToolMissingError

SM90 = {"device_arch": "sm_90", "driver_cuda": "13.4"}


@pytest.fixture(scope="module")
def vadd(tmp_path_factory) -> Path:
    """vector_add's DEFAULT_CONFIG for sm_90 at two declared shapes."""
    out = tmp_path_factory.mktemp("b") / "vadd"
    export_bundle(EXAMPLES / "vector_add.py", out, arch="sm_90", shapes=[{"N": 4096}, {"N": 1 << 16}])
    return out


@pytest.fixture(scope="module")
def softmax(tmp_path_factory) -> Path:
    """softmax with one config per shape bucket (a single-tile BLOCK_N for each N)."""
    out = tmp_path_factory.mktemp("b") / "softmax"
    pairs = [({"BLOCK_N": 256, "ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 2}, {"M": 8, "N": 256}),
             ({"BLOCK_N": 1024, "ROWS_PER_PROGRAM": 2, "num_warps": 8, "num_stages": 2}, {"M": 8, "N": 1024})]
    export_bundle(EXAMPLES / "softmax.py", out, arch="sm_90", pairs=pairs)
    return out


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def _edit(bundle: Path, change, reseal: bool = True) -> dict:
    """Apply ``change(manifest dict)`` to ``bundle``'s manifest.json; ``reseal``: give it the id of its new content
    (a consistent forgery, or a faulty exporter), so the defence behind the identity is what the test meets."""
    m = json.loads((bundle / "manifest.json").read_text())
    change(m)
    if reseal:
        m["bundle_id"] = manifest_id(m)
    (bundle / "manifest.json").write_text(json.dumps(m, indent=2))
    return m


def test_export_writes_cubins_and_a_manifest_with_every_field(vadd: Path) -> None:
    m = json.loads((vadd / "manifest.json").read_text())
    assert m["arch"] == "sm_90" and m["compute_capability"] == [9, 0] and m["kernel"] == "vector_add.py"
    assert m["kernel_function"] == "_add_kernel" and m["run_kernel_params"] == ["x", "y", "out", "N"]
    assert m["triton_version"] and m["ptxas_version"] and m["min_driver_cuda"]
    assert [e["shape"]["N"] for e in m["entries"]] == [4096, 1 << 16]
    e = m["entries"][1]
    assert e["grid"] == [(1 << 16) // 128, 1, 1] and e["num_warps"] == 4 and e["constexprs"] == {"BLOCK_SIZE": 128}
    assert [(a["param"], a["kind"], a.get("input")) for a in e["args"]] == [
        ("x_ptr", "tensor", "x"), ("y_ptr", "tensor", "y"), ("out_ptr", "tensor", "out"), ("N", "scalar", None)]
    assert e["args"][0]["divisibility"] == 16 and e["args"][3]["value"] == 1 << 16
    assert e["n_regs"] > 0 and e["n_spills"] == 0 and e["spills"] is False and e["ptx_target"].startswith("sm_90")
    for f in m["files"]:
        assert (vadd / f["path"]).read_bytes()[:4] == b"\x7fELF" and len(f["sha256"]) == 64


def test_manifest_matches_its_exported_json_schema(vadd: Path) -> None:
    import jsonschema

    schema = json.loads((ROOT / "src" / "kernelpilot" / "records" / "schema" / "bundle.manifest.schema.json").read_text())
    jsonschema.validate(json.loads((vadd / "manifest.json").read_text()), schema)


def test_verify_passes_for_both_examples(vadd: Path, softmax: Path) -> None:
    for b, n in ((vadd, 2), (softmax, 2)):
        v = api.bundle_verify(b)
        assert v.ok and v.arch == "sm_90" and v.n_entries == n and v.n_files == n


def test_one_flipped_byte_fails_verify_and_load_naming_the_file(vadd: Path, tmp_path: Path) -> None:
    b = _copy(vadd, tmp_path / "b")
    name = json.loads((b / "manifest.json").read_text())["files"][1]["path"]
    data = bytearray((b / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (b / name).write_bytes(bytes(data))
    for call in (lambda: verify_bundle(b), lambda: load(b, **SM90)):
        with pytest.raises(BundleError, match="tampered or corrupt") as info:
            call()
        assert name in info.value.message


def test_a_bundle_for_another_arch_is_refused_naming_both(vadd: Path, tmp_path: Path) -> None:
    b = _copy(vadd, tmp_path / "b")
    _edit(b, lambda m: m.update(arch="sm_80", compute_capability=[8, 0]))
    with pytest.raises(BundleError) as info:
        load(b, device_arch="sm_90", driver_cuda="13.4")
    assert "sm_80" in info.value.message and "sm_90" in info.value.message
    with pytest.raises(BundleError, match="sm_80"):
        verify_bundle(b)  # its cubins say sm_90a
    with pytest.raises(BundleError, match="sm_100"):
        load(vadd, device_arch="sm_100", driver_cuda="13.4")


def test_a_driver_older_than_the_ptx_isa_is_refused_naming_both(vadd: Path) -> None:
    need = json.loads((vadd / "manifest.json").read_text())["min_driver_cuda"]
    old = f"{int(need.split('.')[0]) - 1}.9"
    with pytest.raises(BundleError) as info:
        load(vadd, device_arch="sm_90", driver_cuda=old)
    assert need in info.value.message and old in info.value.message
    assert ptx_isa_cuda("8.5") == "12.5" and ptx_isa_cuda("8.7") == "12.8" and ptx_isa_cuda("9.4") == "13.4"
    assert min_driver_cuda(["8.7", "8.4"]) == "12.0" and min_driver_cuda(["9.4"]) == "13.0"


def test_a_missing_kernel_or_file_is_refused(vadd: Path, tmp_path: Path) -> None:
    b = _copy(vadd, tmp_path / "b")
    m = _edit(b, lambda m: m["entries"][0].update(kernel_name="_no_such_kernel"))
    with pytest.raises(BundleError, match="has no kernel _no_such_kernel"):
        load(b, **SM90)
    c = _copy(vadd, tmp_path / "c")
    (c / m["files"][0]["path"]).unlink()
    with pytest.raises(BundleError, match="missing"):
        verify_bundle(c)
    with pytest.raises(BundleError, match="not a bundle folder"):
        verify_bundle(tmp_path / "nothing")


def test_the_call_picks_the_entry_of_its_shape_and_refuses_other_shapes(vadd: Path, softmax: Path) -> None:
    k = load(vadd, **SM90)
    x, y, o = torch.randn(4096), torch.randn(4096), torch.empty(4096)
    e = k.select(k.bind((x, y, o, 4096), {}))
    assert e.shape["N"] == 4096
    assert k.pack(e, k.bind((), {"x": x, "y": y, "out": o, "N": 4096})) == [
        ("*fp32", x.data_ptr()), ("*fp32", y.data_ptr()), ("*fp32", o.data_ptr()), ("i32", 4096)]
    with pytest.raises(BundleError, match="outside the bundle's declared shapes") as info:
        k(torch.randn(100), torch.randn(100), torch.empty(100), 100)
    assert "N=100" in info.value.message and "'N': 4096" in info.value.message
    with pytest.raises(BundleError, match="outside"):
        k(x.double(), y.double(), o.double(), 4096)  # dtype
    with pytest.raises(BundleError, match="CUDA tensors"):
        k(x, y, o, 4096)  # matched, but the driver launches GPU memory only
    s = load(softmax, **SM90)
    for n, block in ((256, 256), (1024, 1024)):
        xs, ys = torch.randn(8, n), torch.empty(8, n)
        e = s.select(s.bind((xs, ys, 8, n), {}))
        assert e.config["BLOCK_N"] == block and e.constexprs["SINGLE_TILE"] is True
        assert [a.value for a in e.args if a.param == "stride_xm"] == [n]
    assert len(load(softmax, config={"BLOCK_N": 1024}, **SM90).entries) == 1
    with pytest.raises(BundleError, match="no entry has config"):
        load(softmax, config={"BLOCK_N": 512}, **SM90)


def test_a_misaligned_pointer_is_refused(vadd: Path) -> None:
    k = load(vadd, **SM90)
    base = torch.randn(4097)
    x = base[1:]  # 4 bytes past a 16-byte boundary
    e = k.select(k.bind((x, torch.randn(4096), torch.empty(4096), 4096), {}))
    with pytest.raises(BundleError, match="16-byte aligned"):
        k.pack(e, k.bind((x, torch.randn(4096), torch.empty(4096), 4096), {}))


def test_load_imports_no_triton_torch_pydantic_or_cuda_python_and_compiles_nothing(vadd: Path) -> None:
    code = ("import sys, kernelpilot.bundle as b\n"
            f"k = b.load({str(vadd)!r}, device_arch='sm_90', driver_cuda='13.4')\n"
            "assert len(k.entries) == 2\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('triton', 'torch', 'pydantic', 'cuda')]\n"
            "print('IMPORTED', bad)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})
    assert res.returncode == 0, res.stderr
    assert "IMPORTED []" in res.stdout


def test_export_refuses_without_a_target_and_into_a_full_folder(tmp_path: Path, vadd: Path) -> None:
    if not torch.cuda.is_available():
        with pytest.raises(ToolMissingError, match="--arch"):
            export_bundle(EXAMPLES / "vector_add.py", tmp_path / "b", arch="auto")
    with pytest.raises(BundleError, match="not an empty folder"):
        export_bundle(EXAMPLES / "vector_add.py", vadd, arch="sm_90")


def test_a_tune_folder_exports_its_best_config(tmp_path: Path) -> None:
    (tmp_path / "tune.json").write_text(json.dumps({"kernel": str(EXAMPLES / "vector_add.py"), "shape": {"N": 4096},
                                                    "best": {"config": {"BLOCK_SIZE": 512, "num_warps": 2}}}))
    kernel, config, shape = resolve_source(tmp_path)
    assert kernel.name == "vector_add.py" and config == {"BLOCK_SIZE": 512, "num_warps": 2} and shape == {"N": 4096}
    (tmp_path / "tune.json").write_text(json.dumps({"kernel": "k.py", "best": None}))
    with pytest.raises(ContractError, match="accepted no config"):
        resolve_source(tmp_path)



def test_an_optimize_run_exports_its_best_version(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"kernel": str(EXAMPLES / "softmax.py"), "shape": {"M": 8, "N": 256},
                                                   "best_version": 2}))
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "config.json").write_text(json.dumps({"config": {"BLOCK_N": 512}}))
    assert resolve_source(tmp_path)[1:] == ({"BLOCK_N": 512}, {"M": 8, "N": 256})
    (tmp_path / "run.json").write_text(json.dumps({"kernel": "k.py", "best_version": None}))
    with pytest.raises(ContractError, match="no best version"):
        resolve_source(tmp_path)


class _FakeDriver:
    """Stands in for :class:`kernelpilot.bundle.driver.CudaDriver` and records the GPU path's calls (module load,
    function, launch) with the parameter values the launch would read, without a GPU."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def ensure_context(self) -> None:
        self.calls.append(("context",))

    def load_function(self, image: bytes, name: str, what: str, shared_mem_bytes: int = 0) -> tuple[int, int]:
        self.calls.append(("load", bytes(image[:4]), name, shared_mem_bytes))
        return 1, 2

    def launch(self, function, grid, threads, shared, stream, params, cluster_x=None) -> None:
        import ctypes

        ptrs = (ctypes.c_void_p * 6).from_address(params)
        self.calls.append(("launch", function, tuple(grid), threads, shared, stream, cluster_x,
                           [ctypes.c_uint64.from_address(ptrs[i]).value for i in range(3)],
                           ctypes.c_int32.from_address(ptrs[3]).value,
                           [ctypes.c_uint64.from_address(ptrs[i]).value for i in (4, 5)]))


def test_the_driver_path_loads_the_cubin_once_and_launches_as_triton_does(vadd: Path, monkeypatch) -> None:
    import copy
    import importlib

    load_mod = importlib.import_module("kernelpilot.bundle.load")  # the module (the package's `load` is the function)
    fake = _FakeDriver()
    monkeypatch.setattr(load_mod, "_driver", lambda: fake)
    k = load(vadd, **SM90)
    x, y, o = torch.randn(1 << 16), torch.randn(1 << 16), torch.empty(1 << 16)
    inputs = k.bind((x, y, o, 1 << 16), {})
    e = k.select(inputs)
    for _ in range(2):
        load_mod._launch(k.function(e), e, k.pack(e, inputs), stream=7)
    assert [c[0] for c in fake.calls] == ["context", "load", "launch", "launch"]
    assert fake.calls[1][1:3] == (b"\x7fELF", "_add_kernel")
    _, fn, grid, threads, shared, stream, cluster, ptrs, n, scratch = fake.calls[2]
    assert fn == 2 and grid == (512, 1, 1) and threads == 128 and shared == e.shared_mem_bytes and stream == 7
    assert ptrs == [x.data_ptr(), y.data_ptr(), o.data_ptr()] and n == 1 << 16 and scratch == [0, 0]
    assert cluster == 1
    big = copy.copy(e)
    big.shared_mem_bytes = 100_000
    k._functions.clear()
    k.function(big)
    assert fake.calls[-1][3] == 100_000


def test_the_launch_structs_match_cuda_h(tmp_path: Path) -> None:
    """CUlaunchConfig and CUlaunchAttribute as ctypes lays them out equal what a C compiler makes of cuda.h."""
    import ctypes
    import shutil

    from kernelpilot.bundle.driver import LaunchAttribute, LaunchConfig

    header = Path("/usr/local/cuda/include/cuda.h")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not header.is_file() or cc is None:
        pytest.skip("needs cuda.h and a C compiler")
    fields = [f for f, _ in LaunchConfig._fields_]
    src = tmp_path / "s.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <cuda.h>\nint main(void){\n"
                   'printf("%zu %zu %zu\\n", sizeof(CUlaunchConfig), sizeof(CUlaunchAttribute), '
                   "offsetof(CUlaunchAttribute, value));\n"
                   + "".join(f'printf("%zu\\n", offsetof(CUlaunchConfig, {f}));\n' for f in fields) + "return 0;}\n")
    subprocess.run([cc, "-I", str(header.parent), str(src), "-o", str(tmp_path / "s")], check=True)
    out = subprocess.run([str(tmp_path / "s")], capture_output=True, text=True, check=True).stdout.split()
    assert [int(v) for v in out[:3]] == [ctypes.sizeof(LaunchConfig), ctypes.sizeof(LaunchAttribute),
                                         LaunchAttribute.value.offset]
    assert [int(v) for v in out[3:]] == [getattr(LaunchConfig, f).offset for f in fields]


def test_no_driver_library_is_a_missing_tool() -> None:
    from kernelpilot.bundle.driver import CudaDriver

    with pytest.raises(ToolMissingError, match="no CUDA driver"):
        CudaDriver("libcuda-that-does-not-exist.so.1")


def test_the_launch_view_agrees_with_the_schema_and_refuses_a_broken_manifest(softmax: Path, tmp_path: Path) -> None:
    from kernelpilot.bundle.manifest import read_manifest

    m, k = read_manifest(softmax), load(softmax, **SM90)
    for full, light in zip(m.entries, k.entries, strict=True):
        for f in ("kernel_name", "cubin", "config", "shape", "grid", "num_warps", "num_ctas", "shared_mem_bytes",
                  "ptx_version", "constexprs"):
            want = getattr(full, f)
            assert (list(getattr(light, f)) if f == "grid" else getattr(light, f)) == want, f
        assert [a.as_dict() for a in light.args] == [a.model_dump() for a in full.args]
        assert light.inputs == {n: (v.model_dump() if hasattr(v, "model_dump") else v) for n, v in full.inputs.items()}
    assert k.manifest == m and k.kernel == m.kernel and k.run_kernel_params == m.run_kernel_params
    b = _copy(softmax, tmp_path / "b")
    _edit(b, lambda m: m["entries"][1].pop("grid"))
    with pytest.raises(BundleError, match="entry 1: breaks the manifest schema"):
        load(b, **SM90)


# -- identity and coverage (issue 24: a bundle's manifest is covered by a hash; load refuses a grid that does not
#    cover the declared output) ------------------------------------------------------------------------------------

def _halve_grid(m: dict) -> None:
    for e in m["entries"]:
        e["grid"][0] //= 2


def test_an_edited_manifest_is_refused_by_name_by_verify_and_load(vadd: Path, tmp_path: Path) -> None:
    honest = json.loads((vadd / "manifest.json").read_text())
    assert honest["bundle_id"] == manifest_id(honest) == verify_bundle(vadd).bundle_id
    edits = {"grid": _halve_grid,  # the reported cheat: half the output unwritten
             "scalar": lambda m: m["entries"][1]["args"][3].update(value=1 << 15),  # N halved: the same, by a scalar
             "file hash": lambda m: m["files"][0].update(sha256="0" * 64),
             "created": lambda m: m.update(created="2020-01-01T00:00:00+00:00")}  # any field, even a harmless one
    for what, change in edits.items():
        b = _copy(vadd, tmp_path / what.replace(" ", "_"))
        _edit(b, change, reseal=False)
        for call in (lambda: verify_bundle(b), lambda: load(b, **SM90)):
            with pytest.raises(BundleTampered, match="edited after export") as info:
                call()
            assert "manifest.json" in info.value.message and honest["bundle_id"] in info.value.message, what
    b = _copy(vadd, tmp_path / "no_id")
    _edit(b, lambda m: m.pop("bundle_id"), reseal=False)
    with pytest.raises(BundleError, match="no bundle_id"):
        load(b, **SM90)


def test_a_resealed_manifest_is_refused_when_its_id_is_pinned(vadd: Path, tmp_path: Path) -> None:
    exported = json.loads((vadd / "manifest.json").read_text())["bundle_id"]
    assert load(vadd, expect_id=exported, **SM90).kernel == "vector_add.py"
    assert verify_bundle(vadd, expect_id=exported).ok
    b = _copy(vadd, tmp_path / "b")
    _edit(b, lambda m: m.update(created="2020-01-01T00:00:00+00:00"))  # consistent: hashes to its new id
    assert load(b, **SM90)  # self-consistent, so only a pinned id can tell
    for call in (lambda: verify_bundle(b, expect_id=exported), lambda: load(b, expect_id=exported, **SM90)):
        with pytest.raises(BundleTampered, match="is not the expected") as info:
            call()
        assert exported in info.value.message
    # the CLI: `bundle verify --expect-id` refuses it by name, with a JSON error and a non-zero exit
    cli = [sys.executable, "-m", "kernelpilot.cli", "bundle", "verify", str(b), "--expect-id", exported, "--json"]
    res = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and exported in json.loads(res.stdout)["message"]
    ok = subprocess.run(cli[:5] + [str(vadd)] + cli[6:], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout)["bundle_id"] == exported


def test_a_halved_grid_is_refused_by_load_even_when_resealed(vadd: Path, softmax: Path, tmp_path: Path) -> None:
    for src, output, tile in ((vadd, "out", [128]), (softmax, "y", [2, 1024])):
        b = _copy(src, tmp_path / src.name)
        _edit(b, _halve_grid)
        for call in (lambda: verify_bundle(b), lambda: load(b, **SM90)):
            with pytest.raises(BundleCoverageError, match="never be written") as info:
                call()
            assert f"`{output}`" in info.value.message and "entry 0" in info.value.message
        last = json.loads((src / "manifest.json").read_text())["entries"][-1]
        assert {"input": output, "tile": tile} in last["coverage"]["outputs"]
    b = _copy(vadd, tmp_path / "nocov")  # the rule itself removed: refused, not skipped
    _edit(b, lambda m: m["entries"][0].pop("coverage"))
    for call in (lambda: verify_bundle(b), lambda: load(b, **SM90)):
        with pytest.raises(BundleError, match="no coverage record"):
            call()
    b = _copy(vadd, tmp_path / "y")  # a grid moved to another axis keeps its program count: it still covers
    _edit(b, lambda m: [e.update(grid=[1, e["grid"][0], 1]) for e in m["entries"]])
    assert load(b, **SM90)


def test_honest_bundles_record_the_tile_each_program_writes_and_load(vadd: Path, softmax: Path) -> None:
    for b in (vadd, softmax):
        m = json.loads((b / "manifest.json").read_text())
        for e in m["entries"]:
            cov = e["coverage"]
            assert cov["observed"] and not cov["unchecked"] and cov["why"] == ""
            last = [g - 1 for g in e["grid"]]
            assert cov["programs"] == [[0, 0, 0], last]  # the first and the last program ran, interpreted
        assert verify_bundle(b).ok and load(b, **SM90).entries
    # vector_add writes only `out` (x and y are read): the inputs are restored, the tile is BLOCK_SIZE
    assert [c["outputs"] for c in (e["coverage"] for e in json.loads((vadd / "manifest.json").read_text())["entries"])] \
        == [[{"input": "out", "tile": [128]}]] * 2
    # softmax's first bucket: one row of 256 per program
    first = json.loads((softmax / "manifest.json").read_text())["entries"][0]
    assert first["coverage"]["outputs"] == [{"input": "y", "tile": [1, 256]}] and first["grid"] == [8, 1, 1]


def test_the_coverage_rule_checks_what_it_established_and_nothing_else() -> None:
    spec = {"out": {"shape": [1000], "stride": [1], "dtype": "float32"}}
    ok = {"observed": True, "programs": [[0, 0, 0]], "outputs": [{"input": "out", "tile": [128]}], "unchecked": {}}
    check_coverage("e", [8, 1, 1], 1, spec, ok)  # ceil(1000 / 128) = 8 programs
    with pytest.raises(BundleCoverageError, match="covering it takes 8"):
        check_coverage("e", [7, 1, 1], 1, spec, ok)
    check_coverage("e", [4, 1, 1], 2, spec, ok)  # 4 clusters of 2 CTAs
    check_coverage("e", [1, 1, 1], 1, spec, {**ok, "observed": False, "outputs": []})  # nothing established
    with pytest.raises(BundleError, match="no coverage record"):
        check_coverage("e", [8, 1, 1], 1, spec, None)
    with pytest.raises(BundleError, match="does not fit"):
        check_coverage("e", [8, 1, 1], 1, spec, {**ok, "outputs": [{"input": "out", "tile": [0]}]})


@pytest.mark.gpu
@pytest.mark.parametrize("example", ["vector_add", "softmax", "layer_norm", "matmul"])
def test_gpu_bundle_outputs_equal_the_jit_kernel(example: str, tmp_path: Path) -> None:
    """On a GPU: export for this device (--arch auto), load, launch through the driver; outputs bit-identical to
    the JIT kernel's at the same config (kernelpilot.bundle.bench does the comparison)."""
    export_bundle(EXAMPLES / f"{example}.py", tmp_path / "b", arch="auto")
    result = api.bundle_bench(tmp_path / "b", EXAMPLES / f"{example}.py")
    assert result.ok, result.entries
    assert all(0.5 < e.ratio < 2.0 for e in result.entries), result.entries
