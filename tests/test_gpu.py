"""GPU tests: run by scripts/gpu-check.sh on the device; skipped on CPU machines (conftest)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT

pytestmark = pytest.mark.gpu


def test_cuda_timing_flushes_l2_and_keeps_samples():
    import torch

    from kernelpilot.measure.timing import time_cuda

    x = torch.randn(1 << 24, device="cuda")
    t = time_cuda(lambda: x.mul_(1.0))
    assert t.is_measurement and t.timer == "cuda_event"
    assert t.n_samples >= 20 and len(t.samples_ns) == t.n_samples
    assert t.flush_bytes >= 2 * (t.l2_bytes or 0) and t.flush_bytes >= 256 * 2**20
    assert t.q1_ns <= t.median_ns <= t.q3_ns and t.min_ns > 0
    assert "sm_clock_mhz" in t.gpu_state_after


def test_profile_vector_add_with_ncu_gives_a_memory_verdict(tmp_path):
    from kernelpilot import api

    r = api.profile(EXAMPLES / "vector_add.py", out=tmp_path / "va.ncu-rep", config={"BLOCK_SIZE": 1024})
    assert (tmp_path / "va.ncu-rep").is_file()
    assert len(r.kernels) == 1 and "add" in r.main.kernel_name
    assert r.main.duration_ns and r.main.duration_ns > 0
    assert r.verdict.bound == "memory"


def test_optimize_end_to_end_on_gpu(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "optimize", str(EXAMPLES / "vector_add.py"),
                           "--iterations", "2", "--out", str(out), "--shape", "N=16777216", "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the GPU serves the search first: ncu profiles the final best, not v0 (the auto strategy, docs/search.md)
    best = json.loads((out / "run.json").read_text())["best_version"]
    for f in ("env.json", "roofline.md", "final_report.md", "benchmark.md", f"v{best}/profile.ncu-rep",
              f"v{best}/metrics.json", f"v{best}/verdict.json", "v0/timing.json"):
        assert (out / f).is_file(), f
    assert "% of roofline" in (out / "final_report.md").read_text()
    assert "torch.compile" in (out / "benchmark.md").read_text()
    # the final and torch.compile from one round-robin timing: the ratio the user decides on is drift-free
    run = json.loads((out / "run.json").read_text())
    assert run["final"]["vs_torch_compile"] and run["final"]["vs_torch_compile"] > 0
    rows = json.loads((out / "benchmark.json").read_text())["rows"]
    assert all("round-robin" in r["note"] for r in rows if r["timing"]), rows
    assert rows[0]["timing"]["n_samples"] == rows[2]["timing"]["n_samples"]
