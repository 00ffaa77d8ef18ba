"""A search-first ``optimize`` (``auto``) probes ncu's counter permission after its search, not before its first
version (the probe is an ncu run of a Python process: seconds before v0 otherwise). The probe is a real process:
a stand-in ``ncu`` script answering as the driver does when it refuses counters, or with the metric."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelpilot.measure.env import EnvInfo, GpuInfo, NcuInfo, with_counters_probed


def _fake_ncu(tmp_path: Path, answer: str) -> str:
    path = tmp_path / "ncu"
    path.write_text(f"#!/bin/sh\necho '{answer}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _env(ncu: str | None, gpu: bool = True, readable: bool | None = None) -> EnvInfo:
    return EnvInfo(date_utc="2026-11-27T00:00:00Z", hostname="h", python="3.11", platform="linux", kernelpilot="0",
                   torch="2", torch_cuda="13.0", triton="3.6.0", driver="580", mode="cuda" if gpu else "interpreter",
                   gpu=GpuInfo(name="NVIDIA H200", index=0, compute_capability="9.0", sm_count=132, l2_bytes=1,
                               memory_bytes=1, state={}) if gpu else None,
                   ncu=NcuInfo(path=ncu, version="2025.3", counters_readable=readable,
                               counters_detail="not asked for"))


@pytest.mark.parametrize("answer,readable", [("==ERROR== ERR_NVGPUCTRPERM", False),
                                              ("gpu__time_duration.sum  usecond  1.2", True)])
def test_an_unprobed_env_is_probed_now(tmp_path, answer, readable):
    probed = with_counters_probed(_env(_fake_ncu(tmp_path, answer)))
    assert probed.ncu.counters_readable is readable


def test_a_probed_env_or_one_without_a_gpu_is_left_alone(tmp_path):
    ncu = _fake_ncu(tmp_path, "ERR_NVGPUCTRPERM")
    done, cpu = _env(ncu, readable=True), _env(ncu, gpu=False)
    assert with_counters_probed(done) is done and with_counters_probed(cpu) is cpu


def test_a_refusal_found_after_the_search_disables_the_final_profile_and_is_recorded(tmp_path):
    from kernelpilot.app.session import _probe_late
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence

    lines: list[str] = []
    s = SimpleNamespace(env=_env(_fake_ncu(tmp_path, "ERR_NVGPUCTRPERM")), ws=SimpleNamespace(root=tmp_path),
                        log=lines.append)
    light = LightEvidence(tmp_path / "k.py", {}, None, "NVIDIA H200", "k", "ncu profiles the final best")
    evidence = NcuEvidence(tmp_path / "k.py", None, {}, lambda ev: tmp_path / "p.ncu-rep", light)
    _probe_late(s, evidence)
    assert evidence.disabled and "ERR_NVGPUCTRPERM" in evidence.disabled and lines == [evidence.disabled]
    assert light.reason == evidence.disabled  # the final best's light card says why it has no counters
    assert json.loads((tmp_path / "env.json").read_text())["ncu"]["counters_readable"] is False
    assert "NOT readable" in (tmp_path / "env.md").read_text()
