"""The nvcc build cache serves only what its build record vouches for (issue 24, "records that cannot be forged"):
real nvcc builds for sm_90 without a GPU. A swapped binary under a cache key is never loaded (quarantined, named,
rebuilt; swapped during a run: refused by name), a header behind ``-I`` found as ``#include <...>`` is part of what
the cache checks (an edit rebuilds: no stale binary), and an honest cached build is reused without a rebuild."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

from kernelpilot.errors import BuildIntegrityError

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                                reason="needs nvcc")

KERNEL = r'''
#include <cuda_runtime.h>
#include <scale.cuh>
extern "C" void solve(const float* x, float* y, int n) { scale<<<(n + 127) / 128, 128>>>(x, y, n); }
'''
HEADER = r'''
__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * 128 + threadIdx.x;
    if (i < n) y[i] = x[i] * 2.0f;
}
'''


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    """A private build cache for each test (never the user's)."""
    monkeypatch.setenv("KERNELPILOT_CACHE_DIR", str(tmp_path / "kp-cache"))
    return tmp_path / "kp-cache" / "cuda"


@pytest.fixture()
def kernel(tmp_path) -> tuple[Path, Path]:
    """(kernel.cu, its include folder): the kernel's __global__ lives in a header reached as <scale.cuh> via -I."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "scale.cuh").write_text(HEADER)
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    return src, inc


def _build(src: Path, inc: Path):
    from kernelpilot.backends.cuda.build import build_shared

    return build_shared(src, {}, "sm_90", include_dirs=[inc])


def _record(result) -> dict:
    return json.loads(next(result.path.parent.glob(f"{result.path.name.rsplit('-', 1)[0]}.build.json")).read_text())


@needs_nvcc
def test_an_honest_cached_build_is_reused_without_a_rebuild(cache, kernel):
    src, inc = kernel
    first = _build(src, inc)
    assert not first.hit and first.reason == "not built yet" and first.seconds > 0
    record = _record(first)
    deps = {Path(p) for p, _ in record["deps"]}
    assert src.resolve() in deps and (inc / "scale.cuh").resolve() in deps  # nvcc's own list, not our reading
    assert any(p.name == "cuda_runtime.h" for p in deps)  # toolkit headers are in it too
    assert record["binary_sha256"] == first.sha256 and first.sha256[:16] in first.path.name
    mtime = first.path.stat().st_mtime_ns
    again = _build(src, inc)
    assert again.hit and again.seconds == 0 and again.path == first.path and again.sha256 == first.sha256
    assert again.path.stat().st_mtime_ns == mtime and "Used" in again.log  # no new file, ptxas log kept


@needs_nvcc
def test_an_edited_header_behind_include_path_rebuilds_never_a_stale_binary(cache, kernel):
    src, inc = kernel
    first = _build(src, inc)
    (inc / "scale.cuh").write_text(HEADER.replace("* 2.0f", "* 3.0f"))
    changed = _build(src, inc)
    assert not changed.hit and changed.sha256 != first.sha256 and changed.path != first.path
    assert "scale.cuh" in changed.reason or changed.key != first.key
    assert _build(src, inc).hit
    # The cache's own check, apart from the key: a header the key cannot see (a <...> include reached through a
    # folder passed only as a raw -I flag) is still in nvcc's dependency list, and an edit of it rebuilds.
    from kernelpilot.backends.cuda.build import build_shared

    raw = build_shared(src, {}, "sm_90", extra_flags=[f"-I{inc}"])
    assert build_shared(src, {}, "sm_90", extra_flags=[f"-I{inc}"]).hit
    (inc / "scale.cuh").write_text(HEADER.replace("* 2.0f", "* 5.0f"))
    stale = build_shared(src, {}, "sm_90", extra_flags=[f"-I{inc}"])
    assert not stale.hit and stale.key == raw.key and stale.sha256 != raw.sha256
    assert "scale.cuh" in stale.reason and "changed" in stale.reason
    os.remove(inc / "scale.cuh")
    from kernelpilot.errors import CompileError

    with pytest.raises(CompileError, match="scale.cuh"):  # a missing header is rebuilt (and fails), never served
        build_shared(src, {}, "sm_90", extra_flags=[f"-I{inc}"])


@needs_nvcc
def test_a_swapped_binary_is_never_loaded_it_is_named_quarantined_and_rebuilt(cache, kernel, tmp_path):
    from kernelpilot.backends.cuda.buildrecord import BuildCacheTampered

    src, inc = kernel
    honest = _build(src, inc)
    fast = tmp_path / "fast.cu"  # "a fast build swapped in": another kernel's library under this key
    fast.write_text('extern "C" void solve(const float* x, float* y, int n) {}\n')
    from kernelpilot.backends.cuda.build import build_shared

    forged = build_shared(fast, {}, "sm_90").path.read_bytes()
    honest.path.write_bytes(forged)
    with pytest.warns(BuildCacheTampered) as caught:
        again = _build(src, inc)
    message = str(caught[0].message)
    assert honest.path.name in message and honest.sha256 in message and "not loaded" in message
    assert not again.hit and again.tampered.startswith("tampered: ") and again.path.read_bytes() != forged
    from kernelpilot.backends.cuda.buildrecord import sha256_bytes

    assert sha256_bytes(again.path.read_bytes()) == again.sha256 == _record(again)["binary_sha256"]
    kept = [p for p in (cache / "quarantine").iterdir() if p.suffix != ".jsonl"]
    assert [p.read_bytes() for p in kept] == [forged]  # the evidence is kept, outside the cache's reach
    finding = json.loads((cache / "quarantine" / "findings.jsonl").read_text())
    assert finding["recorded_sha256"] == honest.sha256 and finding["kept"] == str(kept[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _build(src, inc).hit  # the rebuilt entry is honest again


@needs_nvcc
def test_a_binary_swapped_after_its_check_is_refused_at_load_by_name(cache, kernel, tmp_path):
    src, inc = kernel
    built = _build(src, inc)
    lib = built.load()  # the honest bytes load on a machine without a GPU (libcuda is opened lazily)
    assert hasattr(lib, "solve") and lib.kp_sync_calls() == 0
    data = bytearray(built.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    built.path.write_bytes(bytes(data))
    with pytest.raises(BuildIntegrityError) as info:
        built.load()
    assert built.path.name in info.value.message and built.sha256 in info.value.message
    assert "nothing was loaded" in info.value.message and info.value.hint


@needs_nvcc
def test_each_verified_load_is_its_own_library(cache, tmp_path):
    """Two builds loaded one after the other are two libraries (the loader must not answer the second with the
    first: it knows objects by path, and in-memory files have reusable paths)."""
    from kernelpilot.backends.cuda.build import build_shared

    src = tmp_path / "w.cu"
    src.write_text('extern "C" int which(void) { return WHICH; }\nextern "C" void solve(float* y) {}\n')
    libs = [build_shared(src, {"WHICH": n}, "sm_90").load() for n in (1, 2, 3)]
    assert [lib.which() for lib in libs] == [1, 2, 3]


def test_nvcc_dependency_files_are_read_with_make_escapes(tmp_path):
    from kernelpilot.backends.cuda.buildrecord import parse_depfile

    text = ("k.o : k.cu \\\n  /usr/include/a.h \\\n  inc/my\\ dir/b.cuh \\\n  ../up.h /usr/include/a.h\n"
            "other.o: c$$d.h\n")
    got = parse_depfile(text, tmp_path / "w")
    assert got == [tmp_path / "w" / "k.cu", Path("/usr/include/a.h"), tmp_path / "w" / "inc" / "my dir" / "b.cuh",
                   tmp_path / "up.h", tmp_path / "w" / "c$d.h"]


def test_a_record_that_lies_about_a_dependency_or_is_not_a_record_means_rebuild(tmp_path):
    from kernelpilot.backends.cuda.buildrecord import check_cached, hash_files, sha256_bytes, write_record

    dep, binary = tmp_path / "h.cuh", tmp_path / "x.so"
    dep.write_text("int a;")
    binary.write_bytes(b"\x7fELF honest")
    rec = tmp_path / "x.build.json"
    write_record(rec, {"binary": "x.so", "binary_sha256": sha256_bytes(binary.read_bytes()), "deps": hash_files([dep])})
    assert check_cached(rec)[0] == binary
    dep.write_text("int b;")
    found, _, why = check_cached(rec)
    assert found is None and str(dep) in why and "changed" in why
    dep.write_text("int a;")
    write_record(rec, {"binary": "../x.so", "binary_sha256": "0" * 64, "deps": []})  # outside the cache folder
    assert check_cached(rec)[0] is None
    rec.write_text("{not json")
    assert check_cached(rec) == (None, {}, "no build record")


@pytest.mark.gpu
@needs_nvcc
def test_gpu_the_verified_in_memory_library_runs_the_kernel_behind_the_include_path(cache, kernel):
    """On a GPU: the library loaded from its verified bytes (memfd) launches, and an edit of the header behind -I
    changes what runs (the stale binary is not served)."""
    import ctypes

    import torch

    src, inc = kernel
    x = torch.randn(1000, device="cuda")
    for factor in (2.0, 3.0):
        (inc / "scale.cuh").write_text(HEADER.replace("* 2.0f", f"* {factor}f"))
        lib = _build(src, inc).load()
        y = torch.zeros_like(x)
        lib.solve(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_int(1000))
        torch.cuda.synchronize()
        assert torch.equal(y, x * factor)
