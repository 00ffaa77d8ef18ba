"""The Ray pool on a real local Ray runtime (CPU actors, Triton interpreter): a tune through ``ray_address``,
typed failures from the actors' workers, and actors that die or stop answering.

Skipped when Ray is not installed (it is optional: kernelpilot[ray]; CI does not install it)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from kernelpilot.search.model import Evaluation  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VECTOR_ADD = ROOT / "examples" / "vector_add.py"
BROKEN = Path(__file__).resolve().parent / "data" / "broken" / "modes.py"


@pytest.fixture(scope="module")
def ray_runtime():
    """A fresh local Ray instance with 2 CPUs for this module (``address="local"``: never an existing cluster)."""
    ray.init(address="local", num_cpus=2, num_gpus=0, object_store_memory=100_000_000, include_dashboard=False,
             log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELPILOT_RAY_CPU_ACTORS", "2")
    return tmp_path


def _slot(ev: Evaluation) -> str:
    """``ray:1`` of a worker label ``ray:1/cpu@host``."""
    return ev.worker.split("/", 1)[0]


def test_tune_vector_add_through_ray_uses_several_actors(ray_runtime, home):
    from kernelpilot.search.tune import tune

    r = tune(VECTOR_ADD, strategy="exhaustive", budget_evals=6, prune=False, ab_samples=3, ray_address="local",
             cache_root=home / "cache")
    assert r.device == "cpu" and not r.measured and r.n_new == 6 and r.best is not None
    assert len(r.evaluations) == 6 and all(isinstance(e, Evaluation) for e in r.evaluations)
    assert [e.status for e in r.evaluations] == ["ok"] * 6
    assert all(e.worker.startswith("ray:") and "/cpu@" in e.worker for e in r.evaluations)
    # exhaustive has a plan: the tuner spreads it over both actors (map) before the strategy reads it back
    assert {_slot(e) for e in r.evaluations} == {"ray:0", "ray:1"}
    assert r.worker_restarts == 0


@pytest.mark.skipif(not BROKEN.is_file(), reason="tests/data/broken/modes.py (the broken-kernel fixture) is absent")
def test_broken_kernel_failures_are_typed_through_ray(ray_runtime, home):
    from kernelpilot.search.tune import tune

    r = tune(BROKEN, strategy="exhaustive", prune=False, ab_samples=3, ray_address="local", timeout_s=6,
             cache_root=home / "cache")
    status = {e.config["MODE"]: e.status for e in r.evaluations}
    assert status["hang"] == "timeout"  # the worker inside the actor was killed at timeout_s
    assert status["illegal"] == "worker_crash"  # segfault of the worker inside the actor
    assert status["ok"] == "ok" and r.best is not None and r.best.config["MODE"] == "ok"
    assert all(s != "ok" for m, s in status.items() if m != "ok")
    assert all(e.worker.startswith("ray:") for e in r.evaluations)
    assert r.worker_restarts >= 2  # both workers replaced inside their actors


# Configs of the torch test kernel that take the actor down: its worker process kills its parent (the actor
# process) or stops it, so the driver sees a dead actor / an actor that never answers.
ACTOR_FAULTS = ('import os, signal\n'
                '    if (BLOCK, num_warps) == (128, 2):\n'
                '        os.kill(os.getppid(), signal.SIGKILL)\n'
                '    if (BLOCK, num_warps) == (128, 8):\n'
                '        os.kill(os.getppid(), signal.SIGSTOP)\n'
                '    out.copy_(x + y)')


def test_dead_and_stuck_actors_become_typed_failures_and_are_replaced(ray_runtime, home, write_kernel):
    from kernelpilot.search.ray_pool import RayPool
    from kernelpilot.search.worker import WorkerOptions

    opts = WorkerOptions(kernel=str(write_kernel(ACTOR_FAULTS)), shape={"N": 300}, interpreted=True)
    ok = [{"BLOCK": b, "num_warps": w} for b in (64, 256) for w in (2, 4, 8)]
    with RayPool(opts, "local", timeout_s=20, deadline_s=15) as pool:
        assert pool.devices == ["ray:0", "ray:1"]
        evs = list(pool.map([ok[0], {"BLOCK": 128, "num_warps": 2}, ok[1], ok[2]]))
        assert [e.status for e in evs] == ["ok", "worker_crash", "ok", "ok"]  # only the running config is charged
        assert "died" in evs[1].message and pool.replaced == 1
        t0 = time.monotonic()
        stuck = pool.evaluate({"BLOCK": 128, "num_warps": 8})
        assert stuck.status == "timeout" and "no answer" in stuck.message and pool.replaced == 2
        assert time.monotonic() - t0 < 40
        after = [pool.evaluate(c) for c in ok[3:]]  # round-robin over both slots, replacements included
        assert [e.status for e in after] == ["ok"] * 3
        assert {_slot(e) for e in after} == {"ray:0", "ray:1"}


def test_kernel_file_travels_to_hosts_without_it(tmp_path):
    from kernelpilot.search.ray_pool import _materialize

    here = tmp_path / "k.py"
    here.write_bytes(b"A = 1\n")
    folder: list[str] = []
    assert _materialize(str(here), b"A = 1\n", folder) == str(here) and folder == []  # same bytes: used in place
    elsewhere = _materialize(str(tmp_path / "gone" / "k.py"), b"A = 2\n", folder)  # path absent on this host
    assert Path(elsewhere).name == "k.py" and Path(elsewhere).read_bytes() == b"A = 2\n"
    assert _materialize(str(here), b"A = 3\n", folder) == elsewhere  # other bytes at the path: private copy
    assert here.read_bytes() == b"A = 1\n" and Path(elsewhere).read_bytes() == b"A = 3\n"
    shutil.rmtree(folder[0])
