"""A search-first ``optimize`` (``auto``) learns ncu's counter permission from its final profile, not from a probe
(an ncu run of a Python process: 12-15 s after every search on the device in session 15, or seconds before v0).
env.json/env.md record what the profile found. The ncu is a real process: a stand-in ``ncu`` script on PATH that
answers as the driver does when it refuses counters, or fails otherwise."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelpilot.measure.env import EnvInfo, GpuInfo, NcuInfo
from kernelpilot.records.evaluation import Evaluation


def _fake_ncu(tmp_path: Path, answer: str, rc: int = 0) -> str:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    path = folder / "ncu"
    path.write_text(f"#!/bin/sh\necho '{answer}'\nexit {rc}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _env(ncu: str | None, gpu: bool = True, readable: bool | None = None) -> EnvInfo:
    return EnvInfo(date_utc="2026-11-27T00:00:00Z", hostname="h", python="3.11", platform="linux", kernelpilot="0",
                   torch="2", torch_cuda="13.0", triton="3.6.0", driver="580", mode="cuda" if gpu else "interpreter",
                   gpu=GpuInfo(name="NVIDIA H200", index=0, compute_capability="9.0", sm_count=132, l2_bytes=1,
                               memory_bytes=1, state={}) if gpu else None,
                   ncu=NcuInfo(path=ncu, version="2025.3", counters_readable=readable,
                               counters_detail="not asked for"))


def _setup(tmp_path: Path, monkeypatch, answer: str, rc: int = 0, **env_kw):
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence

    ncu = _fake_ncu(tmp_path, answer, rc)
    monkeypatch.setenv("PATH", f"{Path(ncu).parent}:/usr/bin:/bin")
    lines: list[str] = []
    s = SimpleNamespace(env=_env(ncu, **env_kw), ws=SimpleNamespace(root=tmp_path), log=lines.append)
    light = LightEvidence(tmp_path / "k.py", {}, None, "NVIDIA H200", "k", "ncu profiles the final best")
    evidence = NcuEvidence(tmp_path / "k.py", None, {}, lambda ev: tmp_path / "v3" / "profile.ncu-rep", light,
                           log=lines.append)
    best = Evaluation(config={"BLOCK": 64}, status="ok", duration_ns=1e5, samples_ns=[1e5] * 5, wall_s=0.1,
                      measured=True, index=3)
    return s, evidence, light, best


def test_a_refusal_met_by_the_final_profile_is_recorded_and_leaves_a_light_card(tmp_path, monkeypatch):
    from kernelpilot.app.session import _note_counters

    s, evidence, light, best = _setup(tmp_path, monkeypatch, "==ERROR== ERR_NVGPUCTRPERM - no permission", rc=1)
    carded = evidence.profile(best)
    assert evidence.refused and "ERR_NVGPUCTRPERM" in evidence.refused
    assert carded.profile_error == evidence.disabled and light.reason == evidence.disabled
    _note_counters(s, evidence, best)
    env = json.loads((tmp_path / "env.json").read_text())["ncu"]
    assert env["counters_readable"] is False and "ERR_NVGPUCTRPERM" in env["counters_detail"]
    assert "NOT readable" in (tmp_path / "env.md").read_text()


def test_counters_read_by_the_final_profile_are_recorded_readable(tmp_path, monkeypatch):
    from kernelpilot.app.session import _note_counters

    s, evidence, _light, best = _setup(tmp_path, monkeypatch, "unused")
    evidence.metrics[best.key] = {"gpu__time_duration.sum": 1.0}  # what a profile that read counters leaves
    _note_counters(s, evidence, best)
    env = json.loads((tmp_path / "env.json").read_text())["ncu"]
    assert env["counters_readable"] is True and "v3" in env["counters_detail"]


@pytest.mark.parametrize("env_kw", [{"readable": True}, {"gpu": False}])
def test_a_probed_env_or_one_without_a_gpu_is_left_alone_even_by_a_refusal(tmp_path, monkeypatch, env_kw):
    from kernelpilot.app.session import _note_counters

    s, evidence, _light, best = _setup(tmp_path, monkeypatch, "==ERROR== ERR_NVGPUCTRPERM", rc=1, **env_kw)
    evidence.profile(best)
    assert evidence.refused is not None  # an answer _note_counters would record for an unprobed env with a GPU
    before = s.env
    _note_counters(s, evidence, best)
    assert s.env is before and not (tmp_path / "env.json").exists()


def test_a_profile_that_failed_otherwise_says_nothing_about_the_counters(tmp_path, monkeypatch):
    from kernelpilot.app.session import _note_counters

    s, evidence, _light, best = _setup(tmp_path, monkeypatch, "==ERROR== the application returned an error", rc=1)
    evidence.profile(best)  # an ncu failure that is not a refusal: no answer about the counters
    assert evidence.refused is None and best.key not in evidence.metrics
    before = s.env
    _note_counters(s, evidence, best)
    assert s.env is before and not (tmp_path / "env.json").exists()
