"""Process pools are sized by the CPUs this process may use (kernelpilot.childproc.usable_cpus): the affinity mask
and the cgroup v2 quota, not the host's core count."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernelpilot.childproc import usable_cpus


def test_the_cgroup_quota_caps_the_affinity_and_a_missing_or_unlimited_quota_leaves_it(tmp_path):
    affinity = len(os.sched_getaffinity(0))
    assert usable_cpus(tmp_path) == affinity  # no cpu.max here
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert usable_cpus(tmp_path) == affinity
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # --cpus=1.5: two processes can run at once
    assert usable_cpus(tmp_path) == min(affinity, 2)
    (tmp_path / "cpu.max").write_text("1000 100000\n")  # a hundredth of a CPU still runs one
    assert usable_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text("garbage\n")
    assert usable_cpus(tmp_path) == affinity


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs and sched_setaffinity")
def test_a_process_pinned_to_one_cpu_has_one_usable_cpu():
    """Pinned with sched_setaffinity (what taskset does), a child sees one usable CPU though os.cpu_count()
    still counts every core."""
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))});"
            "from kernelpilot.childproc import usable_cpus; print(usable_cpus(), os.cpu_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) == 1 and int(out[1]) >= 2
