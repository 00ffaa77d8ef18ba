"""The Ray pool: the same isolated workers inside Ray actors (a local Ray instance on the CPU here).
Skipped when Ray is not installed (it is optional: kernelpilot[ray])."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")


def test_tune_through_a_local_ray_cluster(write_kernel, tmp_path, monkeypatch):
    from kernelpilot.search.tune import tune

    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    body = ('if (BLOCK, num_warps) == (128, 4):\n        raise RuntimeError("boom")\n    out.copy_(x + y)')
    try:
        r = tune(write_kernel(body), strategy="exhaustive", prune=False, ab_samples=3, ray_address="local",
                 use_cache=False)
    finally:
        ray.shutdown()
    status = {(e.config["BLOCK"], e.config["num_warps"]): e.status for e in r.evaluations}
    assert status[(128, 4)] == "runtime_error" and sum(s == "ok" for s in status.values()) == 8
    assert r.best is not None and all(e.worker == "cpu" for e in r.evaluations)
