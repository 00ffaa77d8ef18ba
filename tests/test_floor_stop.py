"""Issue 23: "impossible" stops, never steers; compile-ahead honours --timeout-s.

A median under the speed-of-light floor ends the campaign with :class:`~kernelpilot.engine.guards.ImpossibleTime`
(a DeclarationError naming bytes, FLOPs, compute unit, peak, floor and the measured time) instead of the search moving
on to a slower config (Liger cross-entropy: its own 412 µs config refused, a 735 µs one kept as "target met"). The
runners are the engine tests' ScriptedRunner and a replay of a cache, so no GPU is needed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kernelpilot.engine.evaluator import Evaluator
from kernelpilot.engine.guards import ImpossibleTime
from kernelpilot.engine.runner import RunnerBase
from kernelpilot.errors import DeclarationError
from kernelpilot.fmt import format_duration_ns
from kernelpilot.hardware.roofline import compute_roofline
from kernelpilot.hardware.specs import find_spec
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.search.space import SearchSpace

ROOT = Path(__file__).resolve().parents[1]
SPACE = SearchSpace({"B": [1, 2, 3, 4]})


class FloorRunner(RunnerBase):
    """A Runner with fixed medians (ns) per config; ``judged`` configs come back ``impossible`` as a worker that
    applied the floor says it (else ``ok``: a replayed or remote answer the evaluator must judge itself)."""

    parallel = 1

    def __init__(self, times_ns: dict[int, float], judged: set[int] = frozenset()) -> None:
        self.times, self.judged, self.asked = times_ns, judged, []

    def evaluate(self, config, race_against_ns=None):
        self.asked.append(config["B"])
        t = self.times[config["B"]]
        s = list(t * (1 + 0.001 * np.random.default_rng(config["B"]).standard_normal(20)))
        status = "impossible" if config["B"] in self.judged else "ok"
        return Evaluation(config=config, status=status, duration_ns=float(np.median(s)), samples_ns=s, wall_s=1.0,
                          message="median under the floor" if status == "impossible" else "")

    def map(self, configs, race_against_ns=None):
        return iter([self.evaluate(c) for c in configs])

    def ab_samples(self, a, b, n):
        return None

    def close(self):
        pass


def _roofline():
    # a memory-bound floor of ~ 600 µs on the H100's datasheet bandwidth (3.35 TB/s), as Liger cross-entropy's
    return compute_roofline(1e9, 3.35e12 * 600e-6, "fp32", find_spec("H100-SXM"))


@pytest.mark.parametrize("judged", [False, True], ids=["judged-here", "worker-said-impossible"])
def test_a_time_under_the_floor_stops_the_search_and_names_the_floor_inputs(judged):
    roof = _roofline()
    # config 1 honest (735 µs), config 2 under the floor (412 µs), config 3 slower again
    from kernelpilot.search.strategies import get_strategy

    runner = FloorRunner({1: 735e3, 2: 412e3, 3: 900e3, 4: 1e6}, judged={2} if judged else set())
    ev = Evaluator(SPACE, runner, roofline=roof, ab_samples=0, race=False)
    with pytest.raises(ImpossibleTime) as info:
        get_strategy("exhaustive").search(SPACE, ev, seed=0, start={"B": 1})
    err = info.value
    assert isinstance(err, DeclarationError)
    assert err.evaluation.status == "impossible" and err.evaluation.accepted is None
    # the floor's inputs: bytes, FLOPs, compute unit, peak, bandwidth, the floor, and the measured time
    for part in (f"bytes {roof.bytes_moved:.6g}", f"FLOPs {roof.flops:.6g}", "on fp32", roof.peak.metric,
                 roof.bandwidth.metric, f"floor {format_duration_ns(roof.floor_ns)}", "median 41"):
        assert part in err.message, (part, err.message)
    assert err.hint
    assert ev.order[-1].status == "impossible"  # recorded before the stop
    assert ev.incumbent.config == {"B": 1}
    assert runner.asked == [1, 2], "the search never walks on to the slower configs 3 and 4"


def test_the_interpreter_time_is_never_judged_against_the_floor():
    roof = _roofline()

    class Interp(FloorRunner):
        def evaluate(self, config, race_against_ns=None):
            return super().evaluate(config).model_copy(update={"measured": False})

    ev = Evaluator(SPACE, Interp({1: 735e3, 2: 1.0, 3: 900e3, 4: 1e6}), roofline=roof, ab_samples=0, race=False)
    assert ev({"B": 2}).status == "ok"


def test_optimize_replay_stops_on_an_impossible_time(tmp_path, monkeypatch):
    """Liger cross-entropy's story on a replayed cache: the fastest config is under the floor; optimize must stop
    with ImpossibleTime, not report a slower config as the best."""
    from kernelpilot.app.optimize import optimize
    from kernelpilot.api import bundled_example
    from kernelpilot.search.cache import CacheContext, EvaluationCache
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.search.space import SearchSpace as Space

    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELPILOT_EXPERIENCE", "off")
    kernel = bundled_example("vector_add")
    kf = load_kernel(kernel, interpreted=True)
    shape = dict(kf.shape)
    roof = compute_roofline(shape["N"], 3 * 4 * shape["N"], "fp32", find_spec("H100-SXM"))
    from kernelpilot.measure.env import collect_env

    ctx = CacheContext.for_kernel(kf, shape, collect_env(probe_ncu=False)).model_copy(update={"gpu": "NVIDIA H100 80GB HBM3"})
    cache = EvaluationCache(ctx, root=tmp_path / "cache")
    for i, cfg in enumerate(Space.from_kernel(kf).configs()):
        t = roof.floor_ns * (0.5 if cfg == kf.default_config else 1.5 + 0.01 * i)
        cache.put(Evaluation(config=cfg, status="ok", duration_ns=t, samples_ns=[t] * 10, wall_s=0.5))
    with pytest.raises(ImpossibleTime, match="under the speed-of-light floor"):
        optimize(kernel, out=tmp_path / "run", replay=cache.path, gpu="H100-SXM", benchmark=False, profile=False)
    assert not (tmp_path / "run" / "v1").exists(), "no slower config was tried after the impossible v0"


# -- compile-ahead honours --timeout-s ---------------------------------------------------------------------------

def _hanging_vector_add(tmp_path: Path) -> Path:
    """The bundled vector_add with three block sizes; run_kernel loops forever at BLOCK_SIZE 256 (not the first)."""
    from kernelpilot.api import bundled_example

    text = Path(bundled_example("vector_add")).read_text()
    text = re.sub(r'"BLOCK_SIZE": \[[^\]]*\]', '"BLOCK_SIZE": [128, 256, 512]', text)
    text = re.sub(r'"num_warps": \[[^\]]*\]', '"num_warps": [4]', text)
    text = text.replace("    grid = (triton.cdiv(N, BLOCK_SIZE),)",
                        "    if BLOCK_SIZE == 256:\n        while True:\n            pass\n"
                        "    grid = (triton.cdiv(N, BLOCK_SIZE),)")
    path = tmp_path / "hang_add.py"
    path.write_text(text)
    return path


def test_tune_with_a_hanging_config_exits_within_its_timeout(tmp_path):
    kernel = _hanging_vector_add(tmp_path)
    env = {**os.environ, "KERNELPILOT_HOME": str(tmp_path / "home"), "KERNELPILOT_EXPERIENCE": "off",
           "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    timeout_s = 10
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "tune", str(kernel), "--strategy", "exhaustive",
                           "--timeout-s", str(timeout_s), "--json", "--all"], env=env, capture_output=True, text=True,
                          timeout=240)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    result = json.loads(proc.stdout)
    by = {e["config"]["BLOCK_SIZE"]: e for e in result["evaluations"]}
    assert by[256]["status"] == "timeout" and "no answer within 10 s" in by[256]["message"]
    assert by[128]["status"] == by[512]["status"] == "ok"
    # the hung config costs one timeout (compile-ahead and the measurement overlap), plus boot and interpreted runs
    assert wall < timeout_s * 2 + 60, wall
