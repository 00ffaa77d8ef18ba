"""The adversarial suite's own files (tests/adversarial): the manifest is complete, every file loads and runs under
the Triton interpreter, each cheat is a *working* cheat (right where it means to be right, wrong where it means to
be caught), and the static screen refuses exactly the cheats whose stage is ``screen``.

These tests check the suite, not kernelpilot's verdicts on it: the harness's own stages are tested against the
manifest by the hardening work (CPU stages in CI, GPU-only ones on the device). CUDA cases (``.cu`` with a sidecar
``.py``) cannot run here: they are loaded, built with nvcc for sm_90 when nvcc is present, and the one whose trick
needs no GPU (reaching torch from native code) is shown to work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.measure.screen import screen_file

SUITE = Path(__file__).resolve().parent / "adversarial"
CASES = json.loads((SUITE / "cases.json").read_text())
STAGES = {"screen", "timer_guard", "check", "shapes", "timing", "recheck", "device_activity", "declaration", "floor",
          "none"}
FIELDS = {"file", "kind", "what", "source", "expected", "stage", "needs_gpu", "correct_at_cpu_shape"}
#: What a cheat fools (manifest ``fools``, a name or a list), each checked on its CPU row below.
FOOLS = {"reference_after_kernel", "allclose", "paced_check", "timed_outputs", "halved_shape", "check_shapes",
         "smaller_shapes", "setup_values", "setup_objects"}
IDS = [c["file"] for c in CASES]
PY_CASES = [c for c in CASES if c["file"].endswith(".py")]
CU_CASES = [c for c in CASES if c["file"].endswith(".cu")]
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


def _fools(case: dict) -> set[str]:
    value = case.get("fools") or []
    return {value} if isinstance(value, str) else set(value)


def _sidecar(case: dict) -> Path:
    """The file the static screen reads for a case: the .py itself, or a .cu file's sidecar .py."""
    return (SUITE / case["file"]).with_suffix(".py")


def test_manifest_is_complete_and_consistent():
    cu = {f"{d}/{p.name}" for d in ("cheats", "honest") for p in (SUITE / d).glob("*.cu")}
    py = {f"{d}/{p.name}" for d in ("cheats", "honest") for p in (SUITE / d).glob("*.py")
          if not p.with_suffix(".cu").exists()}  # a .py beside a .cu of the same stem is its sidecar
    assert {c["file"] for c in CASES} == cu | py
    assert len(IDS) == len(set(IDS))
    for case in CASES:
        assert FIELDS <= set(case), case
        assert case["kind"] in ("cheat", "honest", "defused") and case["stage"] in STAGES
        assert case.get("stage_gpu", "none") in STAGES
        # a sampled catch's fallback is another refusing stage of a cheat's, never a way to accept it
        assert case.get("stage_sampled") is None or (case["kind"] == "cheat" and case["stage_sampled"] in STAGES
                                                     and case["stage_sampled"] not in ("none", case["stage"]))
        assert case["expected"] == ("accepted" if case["kind"] in ("honest", "defused") else "rejected")
        assert (case["stage"] == "none") == (case["kind"] in ("honest", "defused"))
        assert isinstance(case["needs_gpu"], bool) and case["what"].strip() and case["source"].strip()
        assert case["file"].startswith(f"{'honest' if case['kind'] == 'honest' else 'cheats'}/")
        assert _fools(case) <= FOOLS, case
        assert case.get("tampers") in (None, "import", "call", "dispatcher")
        # a traced cheat notes the launches it cut short, so a suite run on a loaded host can tell an honest acceptance
        if case.get("traced"):
            assert case["kind"] == "cheat" and "KERNELPILOT_CHEAT_TRACE_DIR" in (SUITE / case["file"]).read_text()
        if case["file"].endswith(".cu"):
            assert case["needs_gpu"] and _sidecar(case).is_file(), case
        if case["stage"] == "floor":  # right on every launch: only a measured time can show it
            assert case["needs_gpu"] and _fools(case) & {"timed_outputs", "setup_values"}, case
    cheats = [c for c in CASES if c["kind"] == "cheat"]
    assert len(cheats) >= 20 and len(CASES) - len(cheats) >= 4
    honest_text = " ".join((SUITE / c["file"]).read_text() for c in CASES if c["kind"] == "honest")
    assert '"inplace": ["x"]' in honest_text and "wait_stream" in honest_text


def test_every_class_of_issue_24_has_a_cheat_and_an_honest_twin_in_triton_and_cuda():
    """Issue 24, "Grow the adversarial suite by class": timed-vs-checked, shapes the author picks, the reference's
    reach each have a Triton and a CUDA cheat; caches that stay right (meant for the floor) are defused in both
    languages (their key never repeats: accepted with an honest time); honest twins exist in both languages."""
    for stage in ("timing", "shapes"):
        langs = {Path(c["file"]).suffix for c in CASES if c["kind"] == "cheat" and c["stage"] == stage}
        assert {".py", ".cu"} <= langs, stage
    reach = {Path(c["file"]).suffix for c in CASES if c["kind"] == "cheat" and c["file"].startswith("cheats/")
             and ("reach" in c["file"])}
    assert {".py", ".cu"} <= reach
    assert {Path(c["file"]).suffix for c in CASES if c["kind"] == "defused"} == {".py", ".cu"}
    assert {Path(c["file"]).suffix for c in CASES if c["kind"] == "honest"} == {".py", ".cu"}


@pytest.fixture(scope="module")
def cpu_rows() -> dict[str, dict]:
    """Every Triton manifest file run once by tests/adversarial/run_cpu.py (one process, a forked child per file)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, str(SUITE / "run_cpu.py")], capture_output=True, text=True, env=env,
                          timeout=900, cwd=SUITE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {row["file"]: row for row in json.loads(proc.stdout)}


@pytest.mark.parametrize("case", PY_CASES, ids=[c["file"] for c in PY_CASES])
def test_file_loads_and_runs_under_the_interpreter(case, cpu_rows):
    row = cpu_rows[case["file"]]
    assert row["loaded"] and row["error"] is None, row


@pytest.mark.parametrize("case", PY_CASES, ids=[c["file"] for c in PY_CASES])
def test_cheats_work_and_honest_files_are_right(case, cpu_rows):
    """A cheat meant to be right at CPU_SHAPE is right on its first call (under the comparison used before
    hardening); one that is wrong on purpose is wrong, and fools the comparison its manifest names; each cheat is
    wrong where its stage looks and right where the defence it evades looks; honest files are right everywhere."""
    row = cpu_rows[case["file"]]
    fools = _fools(case)
    assert row["matches"] == case["correct_at_cpu_shape"], row
    if "reference_after_kernel" in fools:  # a reference called in the kernel's process, after it, agrees
        assert row["reference_after_kernel"], row
    if "allclose" in fools:
        assert row["allclose_after_load"], row
    if "setup_objects" in fools:  # right when the harness hands out and reads the tensor objects setup returned
        assert row["objects_matches"], row
    if case["kind"] == "honest":  # and right through them too
        assert row["objects_matches"], row
    if case["kind"] == "honest":
        assert row["matches_halved"] and row["recheck_stale_matches"] and row["recheck_poisoned_matches"], row
        assert row["matches_odd"] and row["matches_odd_larger"] and row["matches_check_shapes"] in (None, True), row
        assert row["timed_matches"] and row["paced_matches"], row
        assert row["tampered_at_import"] == [] and row["tampered_after_call"] == [], row
    if case["stage"] == "shapes":  # wrong at a shape kernelpilot picks; right at the ones the author's numbers give
        if "smaller_shapes" in fools:  # right at every derived shape below the declared one, wrong above it
            assert row["matches_odd"] and not row["matches_odd_larger"], row
        else:
            assert not row["matches_odd"], row
        assert row["matches_halved"] == ("halved_shape" in fools), row
        if "check_shapes" in fools:
            assert row["matches_check_shapes"] is True, row
    if case["stage"] == "timing" and case.get("timed_values") == "scaled":
        # a setup that ignores its seed gives the pool the check's own set again and again, so a replay is right on
        # unscaled pool sets (this simulation); kernelpilot scales each timed launch's values by a factor new at
        # every launch, and the replay is stale there, as on the re-check's fresh values
        assert row["timed_matches"] and not row["recheck_stale_matches"], row
    elif case["stage"] == "timing":  # wrong on launches timed back to back on pool sets
        assert not row["timed_matches"], row
    if "paced_check" in fools:  # ... and right on every launch spaced like a check's
        assert row["paced_matches"] and row["recheck_poisoned_matches"], row
    if "timed_outputs" in fools:  # right on every timed launch and at the re-check, while its cache hits
        assert row["timed_matches"] and row["paced_matches"] and row["recheck_stale_matches"], row
        assert row["cache_hits"] and row["cache_hits"] > 0, row
    if "setup_values" in fools:  # right on every set setup makes, stale on values the harness changes itself
        assert row["timed_matches"] and row["paced_matches"] and row["cache_hits"] and row["cache_hits"] > 0, row
        assert not row["recheck_stale_matches"], row
    if case["stage"] == "recheck":  # fresh values in the same tensors after 20 calls: the stale result shows
        assert not row["recheck_stale_matches"], row
    if case.get("tampers") == "call":  # torch untouched by the import, rebound by the first call
        assert row["tampered_at_import"] == [] and row["tampered_after_call"], row
    if case.get("tampers") == "import":
        assert row["tampered_at_import"], row
    if case.get("tampers") == "dispatcher":  # below Python: no attribute of torch changes, the reference still agrees
        assert row["tampered_at_import"] == [] and row["tampered_after_call"] == [], row


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_screen_refuses_exactly_the_screen_stage(case):
    """The screen reads Python: a .cu case is screened through its sidecar (its C++ is invisible to it)."""
    report = screen_file(_sidecar(case))
    assert report.refused == (case["stage"] == "screen"), report.lines()


# -- CUDA cases ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CU_CASES, ids=[c["file"] for c in CU_CASES])
def test_cuda_case_loads_and_its_sidecar_builds_every_solve_argument(case):
    """The .cu file loads through kernelpilot's CUDA backend (signature, sidecar, reference) and the sidecar's setup
    at CPU_SHAPE gives every solve parameter; the reference runs on those inputs."""
    import torch

    from kernelpilot.kernels.contract import load_kernel, make_case

    kf = load_kernel(SUITE / case["file"])
    assert kf.backend.kernel_names(kf), case
    built = make_case(kf, dict(kf.cpu_shape or kf.shape), 0, "cpu")
    names = [p.name for p in kf.extras["signature"].params]
    assert names and set(names) <= set(built.inputs), (names, list(built.inputs))
    out = kf.reference(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in built.inputs.items()})
    assert isinstance(out, torch.Tensor) and out.shape == built.inputs[built.outputs[0]].shape


@needs_nvcc
@pytest.mark.parametrize("case", CU_CASES, ids=[c["file"] for c in CU_CASES])
def test_cuda_case_compiles_for_sm90(case, tmp_path):
    proc = subprocess.run([NVCC, "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-o", str(tmp_path / "k.so"),
                           str(SUITE / case["file"])], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_cuda_shapes_cheats_declare_only_multiples_of_every_block():
    """A CUDA shapes cheat passes any check whose shapes all come from the author: its SHAPE and every CHECK_SHAPES
    entry are multiples of every BLOCK_SIZE it can be built with, so the tail it never writes never exists there."""
    from kernelpilot.kernels.contract import load_kernel

    for case in (c for c in CU_CASES if c["stage"] == "shapes"):
        kf = load_kernel(SUITE / case["file"])
        assert "check_shapes" in _fools(case) and kf.check_shapes
        for shape in [kf.shape, *({**kf.shape, **c} for c in kf.check_shapes)]:
            assert all(shape["N"] % b == 0 for b in kf.tunables["BLOCK_SIZE"]), shape
        assert "N / BLOCK_SIZE" in (SUITE / case["file"]).read_text()  # the grid drops the tail


REACH_PROBE = r"""
import ctypes, sys
import torch
x = torch.randn(4, 8, dtype=torch.float64)
before = torch.softmax(x, dim=-1)
lib = ctypes.CDLL(sys.argv[1])
# M = 0 rows: no kernel to run (and no GPU here); solve's host code runs all the same
lib.solve(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(x.data_ptr()), ctypes.c_int(0), ctypes.c_int(8))
after = torch.softmax(x, dim=-1)
unnormalized = (x - x.amax(dim=-1, keepdim=True)).exp()
print(bool(torch.allclose(before, after)), bool(torch.allclose(after, unnormalized)))
"""


@needs_nvcc
def test_cuda_reach_cheat_rebinds_torch_softmax_from_native_code(tmp_path):
    """cu_reach_pyapi.cu's solve() (built here, called with no GPU) rebinds torch.softmax in the process that
    loaded it: a reference called there afterwards gives the kernel's unnormalized exp."""
    case = next(c for c in CU_CASES if c["file"] == "cheats/cu_reach_pyapi.cu")
    so = tmp_path / "reach.so"
    subprocess.run([NVCC, "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-o", str(so), str(SUITE / case["file"])],
                   check=True, capture_output=True, timeout=300)
    proc = subprocess.run([sys.executable, "-c", REACH_PROBE, str(so)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "True"], proc.stdout
