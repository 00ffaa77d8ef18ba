"""Workload bundles (issue 26): ``export`` of a dispatch table writes one binary per (bucket config, specialization)
and a manifest mapping the buckets' ranges to them; ``load`` serves every shape inside a range (the grid and scalars
from the call's shape, the binary from its specialization), refuses a shape outside every range by name, refuses a
tampered cubin or ``.so``; ``.cu`` kernels bundle their shared libraries; single-config bundles still load. No GPU:
Triton and nvcc compile for sm_90 here; the launches are in ``scripts/device-bundle26.sh`` and the gpu test."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import EXAMPLES, ROOT
from kernelpilot.bundle import BundleError, BundleShapeOutOfRange, BundleTampered, export_bundle, load, verify_bundle
from kernelpilot.bundle.load import BundleKernel
from kernelpilot.bundle.reader import FORMAT, FORMAT_V2, manifest_id
from kernelpilot.bundle.rules import evaluate, fit
from kernelpilot.dispatch import Measurement, make_bucket, make_dispatch, make_total, write_dispatch
from kernelpilot.dispatch.model import KernelRef

SM90 = {"device_arch": "sm_90", "driver_cuda": "13.4"}
SMALL, LARGE = {"BLOCK_SIZE": 128, "num_warps": 4}, {"BLOCK_SIZE": 1024, "num_warps": 4}


def _row(shape: dict, ns: float) -> Measurement:
    return Measurement(shape=shape, weight=1.0, duration_ns=ns, samples_n=5, record_id=json.dumps(shape, sort_keys=True))


def _table(folder: Path, kernel: Path, keys: list[str], buckets: list[tuple], extra: tuple = ()) -> Path:
    """A hand-written dispatch.json for ``kernel`` (copied into ``folder``, as a run's --out holds it)."""
    folder.mkdir(parents=True, exist_ok=True)
    k = folder / kernel.name
    for f in (kernel, *extra):
        shutil.copy(f, folder / f.name)
    made = [make_bucket(name, ranges, cfg, [_row(s, 1000.0 + i) for i, s in enumerate(shapes)])
            for name, ranges, cfg, shapes in buckets]
    shapes = [s for *_, ss in buckets for s in ss]
    d = make_dispatch(kernel=KernelRef(file_name=k.name, sha256=hashlib.sha256(k.read_bytes()).hexdigest()),
                      arch="sm_90", gpu_name="NVIDIA H100", toolchain={"triton": "3.9.0"}, keys=keys, buckets=made,
                      single_config=make_total(buckets[-1][2], [_row(s, 5000.0) for s in shapes]))
    write_dispatch(d, folder / "dispatch.json")
    return folder


def _vadd_run(folder: Path) -> Path:
    s = lambda n: {"N": n, "dtype": "float32"}  # noqa: E731
    return _table(folder, EXAMPLES / "vector_add.py", ["N"],
                  [("small", {"N": (1, 4096)}, SMALL, [s(1024), s(4096)]),
                   ("large", {"N": (4097, 65536)}, LARGE, [s(16384), s(65536)])])


@pytest.fixture(scope="module")
def vadd(tmp_path_factory) -> Path:
    run = _vadd_run(tmp_path_factory.mktemp("run") / "vadd")
    out = tmp_path_factory.mktemp("b") / "vadd"
    export_bundle(run, out, arch="sm_90")
    return out


@pytest.fixture(scope="module")
def cuda(tmp_path_factory) -> Path:
    cu = EXAMPLES / "cuda" / "vector_add.cu"
    run = _table(tmp_path_factory.mktemp("run") / "cu", cu, ["N"],
                 [("small", {"N": (1, 4096)}, {"BLOCK_SIZE": 128}, [{"N": 1024}]),
                  ("mid", {"N": (4097, 65536)}, {"BLOCK_SIZE": 512}, [{"N": 65536}]),
                  ("large", {"N": (65537, 1 << 24)}, {"BLOCK_SIZE": 128}, [{"N": 1 << 24}])],
                 extra=(cu.with_suffix(".py"),))
    out = tmp_path_factory.mktemp("b") / "cu"
    export_bundle(run / "vector_add.cu", out, arch="sm_90", dispatch=run / "dispatch.json")
    return out


def _call(k, n: int, given: int | None = None):
    x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
    return k.select(k.bind((x, y, o, n if given is None else given), {}))


def test_export_writes_a_binary_per_bucket_and_specialization_and_the_ranges(vadd: Path) -> None:
    m = json.loads((vadd / "manifest.json").read_text())
    assert m["format"] == FORMAT_V2 and m["kind"] == "triton" and m["dispatch"]["keys"] == ["N"]
    assert [(b["name"], b["ranges"], b["config"]) for b in m["buckets"]] == [
        ("small", {"N": [1, 4096]}, SMALL), ("large", {"N": [4097, 65536]}, LARGE)]
    small, large = m["buckets"]
    assert small["grid"][0] == {"cdiv": [{"var": "N"}, 128]} and large["grid"][0] == {"cdiv": [{"var": "N"}, 1024]}
    assert small["params"]["N"] == {"var": "N"} and small["coverage"]["outputs"] == [{"input": "out", "cap": [128]}]
    specs = {json.dumps([e["constexprs"], [(a["param"], a["divisibility"]) for a in e["args"]]], sort_keys=True)
             for e in m["entries"] if e["bucket"] == "small"}
    assert len(specs) == 3  # N == 1 compiled in, N divisible by 16, N not
    assert all(e["config"] == SMALL for e in m["entries"] if e["bucket"] == "small")
    assert {f["path"] for f in m["files"]} == {e["cubin"] for e in m["entries"]}
    assert verify_bundle(vadd).kind == "triton"


def test_a_shape_picks_its_bucket_grid_and_specialization_and_never_measured_shapes_are_served(vadd: Path) -> None:
    k = load(vadd, **SM90)
    for n, bucket, grid, n_spec in ((1, "small", 1, ("constexpr", 1)), (3000, "small", 24, 1), (4096, "small", 32, 16),
                                    (4097, "large", 5, 1), (50000, "large", 49, 16), (65536, "large", 64, 16)):
        b, e, env = _call(k, n)
        assert (b["name"], k.grid(b, env)) == (bucket, (grid, 1, 1)), n
        if n_spec == ("constexpr", 1):
            assert e["constexprs"]["N"] == 1 and "N" not in [a["param"] for a in e["args"]]
        else:
            assert [a["divisibility"] for a in e["args"] if a["param"] == "N"] == [n_spec]
            x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
            assert k.pack(e, b, k.bind((x, y, o, n), {}), env)[-1] == ("i32", n)


def test_a_shape_outside_every_range_is_refused_naming_it_and_the_ranges(vadd: Path) -> None:
    k = load(vadd, **SM90)
    for n in (0, 65537):
        with pytest.raises(BundleShapeOutOfRange) as info:
            _call(k, n)
        assert f"'N': {n}" in info.value.message
        assert "small N in [1, 4096]" in info.value.message and "large N in [4097, 65536]" in info.value.message
    with pytest.raises(BundleError, match="input `x` must be float32\\[101\\]"):
        _call(k, 100, given=101)  # a scalar that disagrees with the tensors it describes
    with pytest.raises(BundleError, match="must be float32"):
        k.select(k.bind((torch.randn(64).double(), torch.randn(64).double(), torch.empty(64).double(), 64), {}))
    with pytest.raises(BundleError, match="CUDA tensors"):
        k(torch.randn(64), torch.randn(64), torch.empty(64), 64)


def test_a_misaligned_pointer_gets_no_binary(vadd: Path) -> None:
    k = load(vadd, **SM90)
    x = torch.randn(65)[1:]
    with pytest.raises(BundleError, match="not 16-byte aligned"):
        k.select(k.bind((x, torch.randn(64), torch.empty(64), 64), {}))


def test_a_tampered_cubin_or_an_edited_range_is_refused_by_name(vadd: Path, tmp_path: Path) -> None:
    b = shutil.copytree(vadd, tmp_path / "b")
    m = json.loads((b / "manifest.json").read_text())
    cubin = b / m["entries"][0]["cubin"]
    data = bytearray(cubin.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cubin.write_bytes(bytes(data))
    for check in (lambda: load(b, **SM90), lambda: verify_bundle(b)):
        with pytest.raises(BundleTampered, match=cubin.name):
            check()
    c = shutil.copytree(vadd, tmp_path / "c")
    m["buckets"][1]["ranges"]["N"][1] = 1 << 30
    (c / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleTampered, match="edited after export"):
        load(c, **SM90)


def test_a_grid_rule_that_cannot_cover_the_outputs_is_refused_even_resealed(vadd: Path, tmp_path: Path) -> None:
    b = shutil.copytree(vadd, tmp_path / "b")
    m = json.loads((b / "manifest.json").read_text())
    m["buckets"][1]["grid"][0] = {"cdiv": [{"var": "N"}, 2048]}  # half the programs
    m["bundle_id"] = manifest_id(m)
    (b / "manifest.json").write_text(json.dumps(m))
    for check in (lambda: load(b, **SM90), lambda: verify_bundle(b)):
        with pytest.raises(BundleError, match="part of the output would never be written"):
            check()


def test_a_table_for_another_source_is_refused(tmp_path: Path) -> None:
    run = _vadd_run(tmp_path / "run")
    (run / "vector_add.py").write_text((run / "vector_add.py").read_text() + "\n# edited\n")
    with pytest.raises(BundleError, match="is not the source vector_add.py"):
        export_bundle(run, tmp_path / "b", arch="sm_90")


def test_a_shape_dependent_constexpr_is_fitted_at_its_threshold(tmp_path: Path) -> None:
    cfg = {"BLOCK_N": 256, "ROWS_PER_PROGRAM": 2, "num_warps": 4, "num_stages": 1}
    run = _table(tmp_path / "run", EXAMPLES / "softmax.py", ["M", "N"],
                 [("one", {"M": (1, 9), "N": (64, 512)}, cfg, [{"M": 4, "N": 256, "dtype": "float32"}])])
    export_bundle(run, tmp_path / "b", arch="sm_90")
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    (b,) = m["buckets"]
    assert b["params"]["SINGLE_TILE"] == {"le": ["N", 256]}
    assert b["grid"][0] == {"cdiv": [{"var": "M"}, 2]} and b["params"]["stride_xm"] == {"var": "N"}
    assert {256, 257} <= {s["N"] for s in b["samples"]}  # the threshold was sampled on both sides
    k = load(tmp_path / "b", **SM90)
    for n, single in ((256, True), (257, False), (100, True), (500, False)):
        x, y = torch.randn(3, n), torch.empty(3, n)
        _, e, env = k.select(k.bind((x, y, 3, n), {}))
        assert e["constexprs"]["SINGLE_TILE"] is single and env == {"M": 3, "N": n}
    for m in (1, 2, 5, 9):  # every combination of M's and N's specializations has a binary, measured or not
        for n in (64, 65, 100, 255, 256, 257, 300, 511, 512):
            x, y = torch.randn(m, n), torch.empty(m, n)
            _, e, env = k.select(k.bind((x, y, m, n), {}))
            assert (e["constexprs"].get("M") == 1) == (m == 1) and e["constexprs"]["SINGLE_TILE"] is (n <= 256)
            strides = {a["param"]: a["divisibility"] for a in e["args"] if a["param"] == "stride_xm"}
            assert strides == {"stride_xm": 16 if n % 16 == 0 else 1}, (m, n)


def test_rules_fit_only_what_every_sample_shows() -> None:
    envs = [{"N": n} for n in (1, 100, 128, 129, 4096)]
    assert fit(envs, [-(-n // 128) for n in (1, 100, 128, 129, 4096)], ["N"], [128]) == {"cdiv": [{"var": "N"}, 128]}
    assert fit(envs, [n <= 128 for n in (1, 100, 128, 129, 4096)], ["N"], [128]) == {"le": ["N", 128]}
    assert fit(envs, [7, 7, 7, 7, 7], ["N"]) == {"const": 7}
    assert fit(envs, [3, 1, 4, 1, 5], ["N"]) is None
    assert evaluate({"pow2": "N"}, {"N": 129}) == 256
    mm = [{"M": m, "N": n} for m, n in ((16, 16), (17, 100), (128, 33), (64, 128), (100, 17))]
    assert fit(mm, [-(-e["M"] // 32) * -(-e["N"] // 64) for e in mm], ["M", "N"], [32, 64, 8]) == {
        "tiles": [["M", 32], ["N", 64]]}  # a matmul's cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)
    ms = [{"M": m} for m in (1, 64, 65, 256)]  # the same with N fixed at 1024: the N tiles are a constant factor
    assert fit(ms, [-(-e["M"] // 64) * 16 for e in ms], ["M"], [64]) == {"scale": [{"cdiv": [{"var": "M"}, 64]}, 16]}
    assert fit(ms, [-(-e["M"] // 64) * 16 + 1 for e in ms], ["M"], [64]) is None


def test_a_cu_bundle_holds_one_library_per_config_and_picks_it_by_shape(cuda: Path) -> None:
    m = json.loads((cuda / "manifest.json").read_text())
    assert m["kind"] == "cuda-so" and [lib["config"] for lib in m["libraries"]] == [{"BLOCK_SIZE": 128},
                                                                                     {"BLOCK_SIZE": 512}]
    assert [b["library"] for b in m["buckets"]] == [0, 1, 0]  # a config shared by two buckets is built once
    assert [p["name"] for p in m["solve"]] == ["a", "b", "c", "N"]
    assert verify_bundle(cuda).n_entries == 2
    k = load(cuda, device_arch="sm_90", driver_cuda="13.0")
    for n, name in ((1, "small"), (4096, "small"), (4097, "mid"), (30000, "mid"), (1 << 20, "large")):
        assert k.select(k.bind((None, None, None, n), {}))["name"] == name
    with pytest.raises(BundleShapeOutOfRange, match="'N': 0.*small N in \\[1, 4096\\]"):
        k.select({"N": 0})
    with pytest.raises(BundleError, match="CUDA tensor"):
        k(torch.randn(8), torch.randn(8), torch.empty(8), 8)


def test_a_tampered_so_is_refused_by_name(cuda: Path, tmp_path: Path) -> None:
    b = shutil.copytree(cuda, tmp_path / "b")
    so = b / json.loads((b / "manifest.json").read_text())["libraries"][1]["file"]
    so.write_bytes(so.read_bytes() + b"\0")
    for check in (lambda: load(b, device_arch="sm_90", driver_cuda="13.0"), lambda: verify_bundle(b)):
        with pytest.raises(BundleTampered, match=so.name):
            check()
    with pytest.raises(BundleError, match="the bundle is for sm_90, this device is sm_80"):
        load(cuda, device_arch="sm_80", driver_cuda="13.0")


def test_a_single_config_bundle_still_loads(tmp_path: Path) -> None:
    out = tmp_path / "v1"
    export_bundle(EXAMPLES / "vector_add.py", out, arch="sm_90", shapes=[{"N": 4096}])
    assert json.loads((out / "manifest.json").read_text())["format"] == FORMAT
    k = load(out, **SM90)
    assert isinstance(k, BundleKernel) and k.select(k.bind((torch.randn(4096),) * 2 + (torch.empty(4096), 4096),
                                                           {})).shape["N"] == 4096


def test_loading_a_workload_bundle_imports_no_triton_torch_or_pydantic(vadd: Path, cuda: Path) -> None:
    code = ("import sys, kernelpilot.bundle as b\n"
            f"k = b.load({str(vadd)!r}, device_arch='sm_90', driver_cuda='13.4')\n"
            f"c = b.load({str(cuda)!r}, device_arch='sm_90', driver_cuda='13.0')\n"
            "assert k.bucket({'N': 5000}) == 1 and c.select({'N': 5})['name'] == 'small'\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('triton', 'torch', 'pydantic', 'cuda')]\n"
            "print('IMPORTED', bad)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})
    assert res.returncode == 0, res.stderr
    assert "IMPORTED []" in res.stdout


@pytest.mark.gpu
def test_gpu_workload_bundle_serves_never_measured_shapes(vadd: Path) -> None:
    k = load(vadd)
    for n in (1, 17, 3000, 4097, 50001):
        x, y, o = torch.randn(n, device="cuda"), torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
        k(x, y, o, n)
        torch.cuda.synchronize()
        assert torch.equal(o, x + y), n


def test_the_cli_exports_a_run_folder_and_verifies_it(tmp_path: Path) -> None:
    run = _vadd_run(tmp_path / "run")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")}
    kp = [sys.executable, "-m", "kernelpilot.cli"]
    res = subprocess.run([*kp, "export", str(run), "--out", str(tmp_path / "b"), "--arch", "sm_90", "--json"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr
    printed = json.loads(res.stdout)
    assert printed["kind"] == "triton" and [b["name"] for b in printed["buckets"]] == ["small", "large"]
    other = tmp_path / "other" / "vector_add.py"
    other.parent.mkdir()
    other.write_text((EXAMPLES / "vector_add.py").read_text().replace("BLOCK_SIZE", "BLOCK_SIZE "))
    res = subprocess.run([*kp, "export", str(other), "--dispatch", str(run / "dispatch.json"),
                          "--out", str(tmp_path / "c"), "--arch", "sm_90"], capture_output=True, text=True,
                         timeout=600, env=env)
    assert res.returncode == 1 and "is not the source vector_add.py" in res.stdout + res.stderr  # edited source
    res = subprocess.run([*kp, "bundle", "verify", str(tmp_path / "b"), "--json"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert res.returncode == 0 and json.loads(res.stdout)["kind"] == "triton"


def test_bundle_bench_names_a_workload_bundle_instead_of_a_schema_error(vadd: Path) -> None:
    from kernelpilot import api

    with pytest.raises(BundleError, match="a workload bundle"):
        api.bundle_bench(vadd, EXAMPLES / "vector_add.py")


def test_a_resealed_manifest_with_a_rule_no_evaluator_knows_is_refused_at_load(vadd: Path, tmp_path: Path) -> None:
    b = shutil.copytree(vadd, tmp_path / "b")
    m = json.loads((b / "manifest.json").read_text())
    m["buckets"][0]["params"]["N"] = {"eval": "__import__('os').system('true')"}
    m["bundle_id"] = manifest_id(m)
    (b / "manifest.json").write_text(json.dumps(m))
    for check in (lambda: load(b, **SM90), lambda: verify_bundle(b)):
        with pytest.raises(BundleError, match="breaks the manifest schema.*unknown shape rule form 'eval'"):
            check()
