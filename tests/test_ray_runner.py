"""The Ray runner (:class:`kernelpilot.search.ray_pool.RayPool`, ``tune --ray``) on a real Ray cluster started by the
test: two Ray nodes of one CPU each (``ray.cluster_utils.Cluster``: two raylets and object stores on this machine),
one CPU actor per node, kernels under the Triton interpreter.

What it shows: a tune through Ray evaluates the same configs with the same verdicts as the local runner, and the
cache it writes replays to the same evaluations as the local runner's; the actors land on both nodes; a config that
crashes its worker is a ``worker_crash`` and the node's actor keeps running the next configs; an actor that dies or
stops answering is charged to the one config it ran and replaced on its node; an actor running another toolchain
is refused. Skipped when Ray is not installed (the ``test`` extra installs it, so CI runs it)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from kernelpilot.search.model import Evaluation  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VECTOR_ADD = ROOT / "src" / "kernelpilot" / "examples" / "vector_add.py"
BROKEN = Path(__file__).resolve().parent / "data" / "broken" / "modes.py"
STORE_BYTES = 80_000_000  # each node's object store: the answers are a few KB


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes with one CPU each on this machine, and this process connected to them as the driver."""
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network call from the head node
    c = Cluster(initialize_head=True, head_node_args=dict(num_cpus=1, num_gpus=0, object_store_memory=STORE_BYTES,
                                                          include_dashboard=False))
    try:
        c.add_node(num_cpus=1, num_gpus=0, object_store_memory=STORE_BYTES)
        c.wait_for_nodes(timeout=120)
        ray.init(address=c.address, log_to_driver=False)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KERNELPILOT_RAY_CPU_ACTORS", raising=False)  # default: the cluster's 2 CPUs, one per node
    return tmp_path


def _slot(ev: Evaluation) -> str:
    """``ray:1`` of a worker label ``ray:1/cpu@host#node``."""
    return ev.worker.split("/", 1)[0]


def _node(ev: Evaluation) -> str:
    """The Ray node id prefix of a worker label ``ray:1/cpu@host#5f0c2a91``."""
    return ev.worker.rsplit("#", 1)[1]


def _outcome(evs: list[Evaluation]) -> list[tuple]:
    """What must not depend on the runner: each config, its status, and the stages that judged it."""
    return [(e.config, e.status, tuple(e.stages_run)) for e in evs]


def test_ray_and_local_runners_agree_and_their_caches_replay_alike(cluster, home):
    from kernelpilot.search.tune import tune

    common = dict(strategy="exhaustive", budget_evals=6, prune=False, ab_samples=3, shape={"N": 1000}, seed=0)
    on_ray = tune(VECTOR_ADD, ray_address=cluster.address, cache_root=home / "ray-cache", **common)
    local = tune(VECTOR_ADD, cache_root=home / "local-cache", **common)
    assert on_ray.device == local.device == "cpu" and not on_ray.measured and on_ray.n_new == local.n_new == 6
    assert _outcome(on_ray.evaluations) == _outcome(local.evaluations)
    assert [e.status for e in on_ray.evaluations] == ["ok"] * 6 and on_ray.best is not None
    # the exhaustive plan is spread over both actors (map), and they sit on the two nodes
    assert {_slot(e) for e in on_ray.evaluations} == {"ray:0", "ray:1"}
    assert len({_node(e) for e in on_ray.evaluations}) == 2
    assert all(e.worker == "cpu" for e in local.evaluations) and on_ray.worker_restarts == 0
    assert on_ray.cache_file and local.cache_file and on_ray.cache_file != local.cache_file

    replayed = {name: tune(VECTOR_ADD, replay=r.cache_file, cache_root=home / "replays" / name, **common)
                for name, r in (("ray", on_ray), ("local", local))}
    # both caches answer the same configs with the same verdicts, in the same order (the rest: not in either cache)
    assert _outcome(replayed["ray"].evaluations) == _outcome(replayed["local"].evaluations)
    answered = [e for e in replayed["ray"].evaluations if e.status != "not_in_cache"]
    assert [e.config for e in answered] == [e.config for e in on_ray.evaluations]
    # a replay of the Ray cache gives back what the Ray actors measured, sample for sample
    measured = {tuple(sorted(e.config.items())): e.samples_ns for e in on_ray.evaluations}
    for e in answered:
        assert e.worker == "replay" and e.samples_ns == measured[tuple(sorted(e.config.items()))]


def _broken(mode: str) -> dict:
    return {"MODE": mode, "BLOCK": 64}


@pytest.mark.skipif(not BROKEN.is_file(), reason="tests/data/broken/modes.py (the broken-kernel fixture) is absent")
def test_failing_configs_are_typed_and_each_nodes_actor_keeps_working(cluster, home):
    """tests/data/broken/modes.py: real faults in @triton.jit code (a segfault, a hang, a compile error ...) on both
    nodes; each actor's worker is replaced inside the actor and the same actor runs the next config."""
    from kernelpilot.search.ray_pool import RayPool
    from kernelpilot.search.worker import WorkerOptions

    opts = WorkerOptions(kernel=str(BROKEN), shape={"N": 256}, interpreted=True)
    with RayPool(opts, cluster.address, timeout_s=15) as pool:  # a loaded 2-core CI box: 6 s timed out a check
        labels = pool.labels
        assert len({label.rsplit("#", 1)[1] for label in labels}) == 2  # one actor on each node
        # as many configs as actors: the first goes to ray:0, the second to ray:1
        rounds = [("illegal", "hang"), ("compile_error", "nan"), ("wrong", "ok"), ("ok", "ok")]
        got = [list(pool.map([_broken(a), _broken(b)])) for a, b in rounds]
        assert [[e.status for e in evs] for evs in got] == [["worker_crash", "timeout"], ["compile_error", "nan"],
                                                             ["wrong_result", "ok"], ["ok", "ok"]]
        assert "SIGSEGV" in got[0][0].message  # the unmasked store far past `out` segfaulted the worker
        assert all([e.worker for e in evs] == labels for evs in got)  # the same two actors on the same two nodes
        assert pool.replaced == 0 and pool.restarts == 2  # the segfaulted and the hung worker, inside their actors
        # the audit a config passes before it leads runs in an actor too (correctness at the derived shapes here)
        assert "status" not in pool.audit(_broken("ok"))  # clean: only the seconds of each audit stage
        assert pool.audit(_broken("wrong"))["status"] == "wrong_at_shape"  # the audit checks other shapes


def _actor_of_pid_in(path: Path, timeout_s: float = 120.0) -> int:
    """The parent (the Ray actor process) of the worker whose pid the kernel wrote to ``path``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        text = path.read_text().strip() if path.is_file() else ""
        if text:
            stat = Path(f"/proc/{int(text)}/stat").read_text()
            return int(stat.rsplit(")", 1)[1].split()[1])  # field 4, after the command name in parentheses
        time.sleep(0.1)
    raise AssertionError(f"no pid in {path} after {timeout_s:.0f} s")


def test_dead_and_stuck_actors_are_charged_to_one_config_and_replaced_on_their_node(cluster, home, write_kernel):
    """An actor killed while it runs a config (the OOM killer, a lost process) and one that stops answering."""
    from kernelpilot.search.ray_pool import RayPool
    from kernelpilot.search.worker import WorkerOptions

    pidfile = home / "worker.pid"
    body = ('import os, time\n'
            '    if (BLOCK, num_warps) == (128, 2):\n'
            f'        open({str(pidfile)!r}, "w").write(str(os.getpid()))\n'
            '        time.sleep(120)\n'
            '    if (BLOCK, num_warps) == (128, 8):\n'
            '        time.sleep(120)\n'
            '    out.copy_(x + y)')
    opts = WorkerOptions(kernel=str(write_kernel(body)), shape={"N": 300}, interpreted=True)
    ok = [{"BLOCK": b, "num_warps": w} for b in (64, 256) for w in (2, 4, 8)]
    with RayPool(opts, cluster.address, timeout_s=120, deadline_s=8) as pool:
        nodes = {label.split("/", 1)[0]: label.rsplit("#", 1)[1] for label in pool.labels}
        killer = threading.Thread(target=lambda: os.kill(_actor_of_pid_in(pidfile), signal.SIGKILL), daemon=True)
        killer.start()
        evs = list(pool.map([ok[0], {"BLOCK": 128, "num_warps": 2}, ok[1], ok[2]]))
        killer.join(timeout=5)
        assert [e.status for e in evs] == ["ok", "worker_crash", "ok", "ok"]  # only the running config is charged
        assert "died" in evs[1].message and pool.replaced == 1
        t0 = time.monotonic()
        stuck = pool.evaluate({"BLOCK": 128, "num_warps": 8})
        assert stuck.status == "timeout" and "no answer" in stuck.message and pool.replaced == 2
        assert time.monotonic() - t0 < 60
        after = [pool.evaluate(c) for c in ok[3:]]  # round-robin over both slots, replacements included
        assert [e.status for e in after] == ["ok"] * 3
        assert {_slot(e) for e in after} == {"ray:0", "ray:1"}
        assert all(_node(e) == nodes[_slot(e)] for e in after)  # each replacement took its slot's node


@pytest.mark.skipif(not BROKEN.is_file(), reason="tests/data/broken/modes.py (the broken-kernel fixture) is absent")
def test_a_stop_signal_ends_a_wait_on_the_actors_at_once(cluster, home):
    """Ctrl-C or SIGTERM while an actor runs a config that hangs: the run stops within a second or so, not when the
    config's limit ends (one long ray.wait held the handler back: 85 s in a CLI run before the fix), and abort()
    kills the actor at once."""
    from kernelpilot.app.interrupt import GracefulStop, RunInterrupted
    from kernelpilot.search.ray_pool import RayPool
    from kernelpilot.search.worker import WorkerOptions

    opts = WorkerOptions(kernel=str(BROKEN), shape={"N": 256}, interpreted=True)
    pool = RayPool(opts, cluster.address, n_workers=1, timeout_s=120)
    try:
        timer = threading.Timer(4.0, os.kill, (os.getpid(), signal.SIGTERM))
        with pytest.raises(RunInterrupted), GracefulStop():
            timer.start()
            t0 = time.monotonic()
            list(pool.map([_broken("hang")]))
        assert time.monotonic() - t0 < 15  # the hang's limit is 120 s
    finally:
        timer.cancel()
        t0 = time.monotonic()
        pool.abort()
    assert time.monotonic() - t0 < 10 and pool.labels == []


def test_toolchain_differences_name_each_mismatch():
    from kernelpilot.search.ray_toolchain import refused, toolchain, toolchain_differences

    here = toolchain()
    assert here["torch"] and here["triton"] and len(here["kernelpilot"]) == 64 and here["gpu"] is None
    assert toolchain_differences(here, dict(here)) == []
    other = {**here, "triton": "0.0.1", "kernelpilot": "0" * 64, "gpu": "NVIDIA A100"}
    assert toolchain_differences(here, other) == [f"triton: {here['triton']} != 0.0.1",
                                                  f"kernelpilot: sources {here['kernelpilot'][:12]} != sources "
                                                  "000000000000"]  # gpu: the driver names none (interpreted)
    assert toolchain_differences({**here, "gpu": "NVIDIA H100 80GB HBM3"}, other)[-1] == \
        "gpu: NVIDIA H100 80GB HBM3 != NVIDIA A100"
    # an actor of a kernelpilot that predates the check reports no toolchain: refused, not waved through
    assert refused("ray:0/cuda:0@n1#12345678", here, {}) == ["ray:0/cuda:0@n1#12345678: kernelpilot: another "
                                                             "version that reports no toolchain"]


def test_a_cluster_running_other_kernelpilot_sources_is_refused(cluster, home, tmp_path, write_kernel):
    """The actors import kernelpilot from wherever their node has it: a copy of the sources with one byte changed
    (put first on the actors' path through Ray's runtime_env) is another harness, and the pool refuses it."""
    import kernelpilot
    from kernelpilot.errors import SearchError
    from kernelpilot.search.ray_pool import RayPool
    from kernelpilot.search.worker import WorkerOptions

    copy = tmp_path / "other" / "kernelpilot"
    shutil.copytree(Path(kernelpilot.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "__init__.py").write_text((copy / "__init__.py").read_text() + "\n# another commit\n")
    opts = WorkerOptions(kernel=str(write_kernel()), shape={"N": 300}, interpreted=True)
    with pytest.raises(SearchError, match=r"another toolchain.*ray:0/cpu@.*kernelpilot: sources \w{12} != sources"):
        RayPool(opts, cluster.address, n_workers=1, runtime_env={"env_vars": {"PYTHONPATH": str(copy.parent)}})


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
