"""``kernelpilot session``'s policy on the one Evaluator, with a scripted runner in place of the version workers
(as tests/test_engine.py does for optimize and tune): which version leads, which is rejected, that a masked version
never leads, that the target is the Evaluator's TargetMet, and that the floor and a broken v0 stop the session.

Each test builds a session folder by hand (session.json, v0's file; no git, no experience log) and drives
``try_version`` through the real session code — recorder, memory.json, session.json — with only the measurement
scripted. The card is stubbed (a light card compiles the file for a GPU this machine lacks).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kernelpilot.engine.runner import RunnerBase
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.records.workspace import write_json
from kernelpilot.versions import manage, session
from kernelpilot.versions.records import SessionState, load_state, save_state

SERIES = Path(__file__).resolve().parents[1] / "src" / "kernelpilot" / "examples" / "series" / "softmax"


class ScriptedVersions(RunnerBase):
    """A Runner over ``{"version": N}`` configs: version N has a true time ``times[N]`` (ns, Gaussian noise of
    ``noise`` relative sigma), or a failure status when ``times[N]`` is a string. Measured (a GPU's times) unless
    ``measured`` is False. Records every A/B pair it is asked for."""

    parallel = 1

    def __init__(self, times: dict[int, float | str], noise: float = 0.01, measured: bool = True) -> None:
        self.times, self.noise, self.measured = times, noise, measured
        self.rng = np.random.default_rng(0)
        self.ab_calls: list[tuple[int, int]] = []

    def _samples(self, v: int, n: int) -> list[float]:
        return list(float(self.times[v]) * (1 + self.noise * self.rng.standard_normal(n)))

    def evaluate(self, config, race_against_ns=None):
        v = config["version"]
        if isinstance(self.times[v], str):
            return Evaluation(config=config, status=self.times[v], message=f"scripted {self.times[v]}",
                              measured=self.measured)
        s = self._samples(v, 30)
        return Evaluation(config=config, status="ok", duration_ns=float(np.median(s)), samples_ns=s, wall_s=0.1,
                          measured=self.measured, records={"kernel_config": {"BLOCK_N": 256}})

    def map(self, configs, race_against_ns=None):
        return iter([self.evaluate(c) for c in configs])

    def ab_samples(self, a, b, n):
        self.ab_calls.append((a["version"], b["version"]))
        return self._samples(a["version"], n), self._samples(b["version"], n)

    def close(self):
        pass


@pytest.fixture(autouse=True)
def no_card(monkeypatch):
    """No card: the light card compiles the version file for a GPU (slow, and beside the point here)."""
    monkeypatch.setattr("kernelpilot.versions.recorder._evidence", lambda run, index, ev, config: (ev, None))


def _roofline(floor_bytes: float):
    from kernelpilot.hardware.roofline import compute_roofline
    from kernelpilot.hardware.specs import find_spec

    return compute_roofline(0, floor_bytes, "fp32", find_spec("H100-SXM"))


def _session(tmp_path: Path, runner: ScriptedVersions, roofline=None) -> Path:
    """A session folder with v0 evaluated by ``runner`` (device ``cuda``: the times are measurements)."""
    root = tmp_path / "run"
    (root / "v0").mkdir(parents=True)
    shutil.copy2(SERIES / "v0.py", root / "v0" / "kernel.py")
    state = SessionState(kernel_name="softmax", device="cuda", device_name="scripted", git=False,
                         shape={"M": 8, "N": 256, "dtype": "float32"},
                         floor_ns=roofline.floor_ns if roofline else None,
                         target_ns=roofline.target_ns if roofline else None)
    if roofline is not None:
        write_json(root / "roofline.json", roofline)
    save_state(root, state)
    session._evaluate(root, state, 0, parent=None, hypothesis="the starting kernel", expects=[], change="",
                      profile=False, timeout_s=60, log=lambda _m: None, runner=runner)
    return root


def _try(root: Path, n: int, runner: ScriptedVersions, **kw):
    return session.try_version(root, SERIES / f"v{n}.py", hypothesis=f"file v{n}", profile=False, runner=runner, **kw)


def test_a_faster_version_leads_a_slower_one_is_rejected_and_noise_decides_nothing(tmp_path):
    runner = ScriptedVersions({0: 100_000.0, 1: 80_000.0, 2: 120_000.0, 3: 80_100.0})
    root = _session(tmp_path, runner)
    assert load_state(root).incumbent == 0
    v1 = _try(root, 1, runner)
    assert v1.memory.outcome == "improved" and v1.incumbent == 1 and v1.memory.incumbent_after == 1
    assert v1.memory.vs_parent["replace"] is True and v1.memory.vs_parent["ratio"] < 0.85
    # the parent is the incumbent: the Evaluator's A/B is the one the outcome is classified on (timed once)
    assert runner.ab_calls == [(1, 0)]
    v2 = _try(root, 2, runner)
    assert v2.memory.outcome == "regressed" and v2.incumbent == 1
    assert v2.memory.vs_parent["reverse_replace"] is True and v2.memory.vs_parent["replace"] is False
    v3 = _try(root, 3, runner)  # 0.1 % slower than v1 with 1 % noise: neither side beyond noise
    assert v3.memory.outcome == "neutral" and v3.incumbent == 1
    assert load_state(root).incumbent == 1
    assert json.loads((root / "v3" / "memory.json").read_text())["incumbent_after"] == 1


def test_a_masked_version_never_leads(tmp_path):
    runner = ScriptedVersions({0: 100_000.0, 1: 60_000.0, 2: 90_000.0, 3: 70_000.0})
    root = _session(tmp_path, runner)
    assert _try(root, 1, runner).incumbent == 1
    assert manage.mask(root, "v1", why="measured on a throttled GPU").incumbent == 0
    v2 = _try(root, 2, runner)  # judged against v0, the incumbent once v1 is masked: faster, so it leads
    assert v2.memory.parent == 0 and v2.memory.outcome == "improved" and v2.incumbent == 2
    assert (2, 1) not in runner.ab_calls and (1, 2) not in runner.ab_calls  # never compared with the masked one
    v3 = _try(root, 3, runner, parent="v0")  # faster than v2, slower than the masked v1: leads
    assert v3.incumbent == 3
    assert 1 not in {m.incumbent_after for m in [v2.memory, v3.memory]}
    assert manage.status(root, recommend=False).incumbent == 3


def test_an_interpreted_time_never_changes_the_incumbent(tmp_path):
    runner = ScriptedVersions({0: 100_000.0, 1: 10_000.0}, measured=False)
    root = _session(tmp_path, runner)
    v1 = _try(root, 1, runner)
    assert v1.memory.outcome == "unmeasured" and v1.incumbent == 0
    assert v1.memory.vs_parent["measured"] is False and v1.memory.vs_parent["replace"] is False


def test_the_target_is_the_evaluators_target_met(tmp_path):
    roof = _roofline(3.35e6 * 100)  # floor ~ 100 us on the H100's datasheet bandwidth
    runner = ScriptedVersions({0: roof.floor_ns * 2.0, 1: roof.floor_ns * 1.5, 2: roof.floor_ns * 1.05})
    root = _session(tmp_path, runner, roof)
    v1 = _try(root, 1, runner)
    assert v1.incumbent == 1 and not v1.target_met  # 67 % of the roofline: under the 90 % target
    v2 = _try(root, 2, runner)
    assert v2.incumbent == 2 and v2.target_met and v2.memory.pct_of_roofline > 90
    assert manage.status(root, recommend=False).target_met
    # a measured baseline more than 3 % faster than the incumbent: the target is not enough (TargetMet's rule)
    from kernelpilot.versions.run_version import target_met
    from kernelpilot.versions.records import load_memories

    state = load_state(root)
    assert not target_met(state, load_memories(root, state), {"torch.compile": roof.floor_ns * 0.95})


def test_a_time_under_the_floor_stops_the_session_after_it_is_recorded(tmp_path):
    from kernelpilot.engine.guards import ImpossibleTime

    roof = _roofline(3.35e6 * 100)
    runner = ScriptedVersions({0: roof.floor_ns * 2.0, 1: roof.floor_ns * 0.5})
    root = _session(tmp_path, runner, roof)
    with pytest.raises(ImpossibleTime, match="under the speed-of-light floor"):
        _try(root, 1, runner)
    mem = json.loads((root / "v1" / "memory.json").read_text())
    assert mem["outcome"] == "invalid" and mem["status"] == "impossible"
    state = load_state(root)
    assert 1 in state.versions and state.incumbent == 0


def test_a_v0_that_kills_its_worker_stops_the_session(tmp_path):
    from kernelpilot.engine.guards import BrokenFirstConfig

    with pytest.raises(BrokenFirstConfig, match="killed its worker"):
        _session(tmp_path, ScriptedVersions({0: "worker_crash"}))
    mem = json.loads((tmp_path / "run" / "v0" / "memory.json").read_text())
    assert mem["outcome"] == "invalid" and mem["status"] == "worker_crash"
    assert load_state(tmp_path / "run").incumbent is None


def test_the_evaluator_keeps_an_unmeasured_time_from_leading_only_when_asked():
    from kernelpilot.engine.evaluator import Evaluator
    from kernelpilot.versions.candidates import version_config, version_space

    for leads in (True, False):
        runner = ScriptedVersions({0: 100_000.0, 1: 50_000.0}, measured=False)
        ev = Evaluator(version_space([0, 1]), runner, ab_samples=20, race=False, unmeasured_leads=leads)
        assert ev(version_config(0)).accepted  # the first correct answer leads either way
        second = ev(version_config(1))
        assert second.accepted is leads
        assert (runner.ab_calls == [(1, 0)]) is leads  # kept out before any A/B is taken


def test_compare_ab_applies_the_one_rule_both_ways():
    from kernelpilot.engine.runner import compare_ab
    from kernelpilot.versions.candidates import SampledOnce, version_config

    runner = ScriptedVersions({0: 100_000.0, 1: 80_000.0, 2: 100_050.0})
    once = SampledOnce(runner)
    fast = compare_ab(once, version_config(1), version_config(0), 30)
    assert fast.faster.replace and not fast.slower.replace and fast.faster.ratio < 0.85
    slow = compare_ab(once, version_config(0), version_config(1), 30)  # the same samples, sides swapped
    assert runner.ab_calls == [(1, 0)]
    assert slow.slower.replace and not slow.faster.replace and slow.a_ns == fast.b_ns
    same = compare_ab(once, version_config(2), version_config(0), 30)
    assert not same.faster.replace and not same.slower.replace
    assert compare_ab(runner, version_config(2), version_config(0), 0) is None  # no samples asked for: no decision


def test_the_version_runner_measures_a_version_file_in_its_own_worker(tmp_path):
    """Real parts: two files of the softmax series under the interpreter; v1 in its worker, A/B in both orders."""
    from kernelpilot.versions.candidates import VersionRunner, version_config

    root = tmp_path / "run"
    for i in (0, 1):
        (root / f"v{i}").mkdir(parents=True)
        shutil.copy2(SERIES / f"v{i}.py", root / f"v{i}" / "kernel.py")
    (root / "check").mkdir()
    shutil.copy2(SERIES / "v0.py", root / "check" / "reference.py")  # the series' reference lives in v0's file
    state = SessionState(kernel_name="softmax", device="cpu", shape={"M": 8, "N": 256, "dtype": "float32"})
    steps: list[str] = []
    runner = VersionRunner.for_session(root, state, None, timeout_s=300, step=steps.append)
    try:
        ev = runner.evaluate(version_config(1))
        assert ev.ok and ev.config == {"version": 1} and not ev.measured
        assert ev.records["kernel_config"] and ev.records["correctness"] is not None
        mine, theirs = runner.ab_samples(version_config(1), version_config(0), 3)
        v0_first, v1_second = runner.ab_samples(version_config(0), version_config(1), 3)  # v1's worker, swapped
        assert len(mine) == len(theirs) == len(v0_first) == len(v1_second) == 3
        assert steps[0].startswith("checking and timing")
        assert steps[1:] == ["A/B against v0 (3 interleaved samples per side)"] * 2
        missing = runner.evaluate(version_config(2))  # no file: a failure as data, the session's status kept
        assert not missing.ok and missing.records["session_status"]
    finally:
        runner.close()
    assert runner.workers == {}


def test_after_a_mask_the_latest_version_that_led_leads_not_the_lowest_median(tmp_path):
    runner = ScriptedVersions({0: 100_000.0, 1: 80_000.0, 2: 79_000.0, 3: 60_000.0}, noise=0.05)
    root = _session(tmp_path, runner)
    assert _try(root, 1, runner).incumbent == 1
    v2 = _try(root, 2, runner)  # 1 % faster under 5 % noise: not beyond noise, though its median is lower
    assert v2.incumbent == 1 and v2.memory.duration_ns < _try_memory(root, 1)["duration_ns"]
    assert _try(root, 3, runner, parent="v1").incumbent == 3
    assert manage.mask(root, "v3", why="throttled").incumbent == 1  # v1 led; v2 never did
    assert manage.mask(root, "v1", why="throttled").incumbent == 0
    assert manage.unmask(root, "v3").incumbent == 3
    restarted = manage.restart(root, from_version="v2")  # a restart's version leads by the author's choice
    assert restarted.incumbent == 2
    assert manage.unmask(root, "v1").incumbent == 2  # v1 led before the restart's v2


def _try_memory(root: Path, n: int) -> dict:
    return json.loads((root / f"v{n}" / "memory.json").read_text())
