"""Run Nsight Compute on one kernel launch and keep the report.

Defaults follow docs/measuring.md ("Timing", "Diagnosing"): ``--set full``, ``--clock-control none`` (kernelpilot
never changes clocks), the profile filtered to the launches inside the NVTX range of :mod:`kernelpilot.profile.target` (warm-up launches are
outside it), the interpreter given by its full path (the device README: ncu needs it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelpilot.childproc import child_env
from kernelpilot.errors import CountersNotPermitted, ProfileError, ToolMissingError
from kernelpilot.measure.env import find_ncu
from kernelpilot.profile.target import NVTX_RANGE


def ncu_command(ncu: str, report_stem: Path, spec_file: Path, *, section_set: str = "full",
                clock_control: str = "none", max_launches: int = 16) -> list[str]:
    """The ncu command line for one profile (``report_stem`` gets ``.ncu-rep`` appended by ncu)."""
    return [ncu, "--set", section_set, "--clock-control", clock_control, "--nvtx", "--nvtx-include",
            f"{NVTX_RANGE}/", "--launch-count", str(max_launches), "--import-source", "no", "--force-overwrite",
            "--export", str(report_stem), sys.executable, "-m", "kernelpilot.profile.target", str(spec_file)]


def profile_kernel(kernel: Path, shape: dict[str, Any], config: dict[str, Any], report_path: Path, *,
                   ref: Path | None = None, seed: int = 0, warmup_launches: int = 3, section_set: str = "full",
                   clock_control: str = "none", timeout_s: float = 900.0) -> Path:
    """Profile the kernel file's launch at ``shape``/``config`` with ncu and write ``report_path`` (.ncu-rep).

    Returns:
        The report's path.

    Raises:
        ToolMissingError: ncu is not installed.
        CountersNotPermitted: the driver refused counter access (ERR_NVGPUCTRPERM; a ProfileError).
        ProfileError: the program failed, ncu timed out, or no kernel
            launch was profiled; the message carries ncu's last lines.
    """
    ncu = find_ncu()
    if ncu is None:
        raise ToolMissingError("ncu (Nsight Compute) not found on PATH or in /usr/local/cuda/bin",
                               "install Nsight Compute, or run with --no-profile to skip profiling")
    report_path = Path(report_path)
    if report_path.suffix != ".ncu-rep":
        raise ProfileError(f"report path {report_path} must end in .ncu-rep", "name the report FILE.ncu-rep")
    report_path.parent.mkdir(parents=True, exist_ok=True)
    spec = {"kernel": str(kernel), "ref": str(ref) if ref else None, "shape": shape, "config": config, "seed": seed,
            "warmup_launches": warmup_launches}
    env = child_env(compiled_triton=True)
    with tempfile.TemporaryDirectory(prefix="kp-ncu-") as tmp:
        spec_file = Path(tmp) / "target.json"
        spec_file.write_text(json.dumps(spec))
        stem = report_path.with_suffix("")
        cmd = ncu_command(ncu, stem, spec_file, section_set=section_set, clock_control=clock_control)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired as exc:
            raise ProfileError(f"ncu did not finish within {timeout_s:.0f} s", "the kernel may hang; check it "
                               "with `kernelpilot check` first, or raise the timeout") from exc
    text = proc.stdout + proc.stderr
    (report_path.parent / (report_path.stem + ".ncu.log")).write_text(" ".join(cmd) + "\n\n" + text)
    tail = "\n".join(text.strip().splitlines()[-8:])
    if "ERR_NVGPUCTRPERM" in text:
        raise CountersNotPermitted("ncu may not read GPU performance counters here (ERR_NVGPUCTRPERM)",
                           "ask an administrator to allow counter access (NVreg_RestrictProfilingToAdminUsers=0), "
                           "or run with --no-profile")
    if proc.returncode != 0:
        raise ProfileError(f"ncu exited with {proc.returncode}:\n{tail}", "run `kernelpilot check` on the same "
                           "config to see whether the kernel itself fails")
    if not report_path.is_file() or "No kernels were profiled" in text:
        raise ProfileError(f"ncu profiled no kernel launch:\n{tail}",
                           "run_kernel must launch at least one CUDA kernel")
    return report_path
