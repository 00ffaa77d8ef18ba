"""Provenance: the software and hardware every number in a run was taken on (env.json + env.md)."""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess
import sys
from typing import Any

from pydantic import BaseModel

from kernelpilot.facts import utc_now_iso
from kernelpilot.measure.gpu_state import driver_version, gpu_state


class GpuInfo(BaseModel):
    """The GPU as torch and NVML see it. ``l2_bytes`` and memory in bytes; clocks in MHz (as seen, never set)."""

    name: str
    index: int
    compute_capability: str
    sm_count: int
    l2_bytes: int | None
    memory_bytes: int
    state: dict[str, Any]


class NcuInfo(BaseModel):
    """Nsight Compute: where it is, its version, and whether it could read hardware counters (None: not probed)."""

    path: str | None
    version: str | None
    counters_readable: bool | None
    counters_detail: str = ""


class EnvInfo(BaseModel):
    """Everything recorded in env.json."""

    date_utc: str
    hostname: str
    python: str
    platform: str
    kernelpilot: str
    torch: str
    torch_cuda: str | None
    triton: str | None
    driver: str | None
    mode: str  # "cuda" or "interpreter"
    gpu: GpuInfo | None
    ncu: NcuInfo


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:
        return None


def find_ncu() -> str | None:
    """Path of the ``ncu`` executable: PATH first, then /usr/local/cuda/bin (None when absent)."""
    return shutil.which("ncu") or shutil.which("ncu", path="/usr/local/cuda/bin:/opt/nvidia/nsight-compute")


def ncu_version(path: str | None) -> str | None:
    """``ncu --version``'s last line, or None."""
    if not path:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1] if lines else None


def probe_counters(path: str | None, timeout_s: float = 120.0) -> tuple[bool | None, str]:
    """Profile one tiny torch kernel with ncu to learn whether hardware counters can be read.

    Returns (True/False, detail); (None, reason) when there is no ncu or no GPU. ``ERR_NVGPUCTRPERM`` in ncu's
    output means the driver refuses counters to this user (NVIDIA's "ERR_NVGPUCTRPERM" help page).
    """
    if not path:
        return None, "ncu not found"
    code = "import torch; x = torch.ones(1024, device='cuda'); x.add_(1); torch.cuda.synchronize()"
    cmd = [path, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", sys.executable, "-c", code]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"ncu probe timed out after {timeout_s:.0f} s"
    text = proc.stdout + proc.stderr
    if "ERR_NVGPUCTRPERM" in text:
        return False, "ERR_NVGPUCTRPERM: the driver does not allow this user to read GPU performance counters"
    if "gpu__time_duration.sum" in text:
        return True, "read gpu__time_duration.sum of a probe kernel"
    tail = " | ".join(text.strip().splitlines()[-3:])
    return False, f"ncu exited {proc.returncode} without metrics: {tail}"


def gpu_info(index: int = 0) -> GpuInfo | None:
    """The CUDA device's properties, or None without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    p = torch.cuda.get_device_properties(index)
    return GpuInfo(name=p.name, index=index, compute_capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
                   l2_bytes=getattr(p, "L2_cache_size", None), memory_bytes=p.total_memory, state=gpu_state(index))


def collect_env(*, probe_ncu: bool = True) -> EnvInfo:
    """Collect provenance. ``probe_ncu`` runs one tiny ncu profile (seconds) to learn counter permission."""
    import torch

    from kernelpilot import __version__

    gpu = gpu_info()
    ncu_path = find_ncu()
    if gpu is None:
        readable, detail = None, "no GPU to profile"
    elif not probe_ncu:
        readable, detail = None, "not asked for (--no-probe, or the command does not profile)"
    else:
        readable, detail = probe_counters(ncu_path)
    return EnvInfo(
        date_utc=utc_now_iso(), hostname=socket.gethostname(),
        python=sys.version.split()[0], platform=platform.platform(), kernelpilot=__version__, torch=torch.__version__,
        torch_cuda=torch.version.cuda, triton=_version("triton"), driver=driver_version(),
        mode="cuda" if gpu is not None else "interpreter", gpu=gpu,
        ncu=NcuInfo(path=ncu_path, version=ncu_version(ncu_path), counters_readable=readable, counters_detail=detail),
    )


def _counters(n: NcuInfo) -> str:
    """``readable``, ``NOT readable — why`` or ``not probed — why``: the state, then the detail when it says more
    (a record written before the detail said why holds ``not probed`` there too: printed once)."""
    state = {True: "readable", False: "NOT readable", None: "not probed"}[n.counters_readable]
    detail = (n.counters_detail or "").strip()
    return state + (f" — {detail}" if detail and detail.lower() != state.lower() else "")


def render_env_md(env: EnvInfo) -> str:
    """env.md: the same facts as env.json, for people."""
    rows = [("date (UTC)", env.date_utc), ("host", env.hostname), ("mode", env.mode), ("Python", env.python),
            ("platform", env.platform), ("kernelpilot", env.kernelpilot), ("torch", env.torch),
            ("torch CUDA", env.torch_cuda or "—"), ("triton", env.triton or "—"), ("driver", env.driver or "—")]
    if env.gpu:
        g = env.gpu
        rows += [("GPU", f"{g.name} (index {g.index}, sm_{g.compute_capability.replace('.', '')})"),
                 ("SMs", str(g.sm_count)), ("L2", f"{(g.l2_bytes or 0) / 2**20:.0f} MiB" if g.l2_bytes else "—"),
                 ("memory", f"{g.memory_bytes / 2**30:.1f} GiB"),
                 ("clocks seen", ", ".join(f"{k}={v}" for k, v in g.state.items()) or "NVML unavailable")]
    else:
        rows.append(("GPU", "none — kernels run under the Triton interpreter; timing is not a measurement"))
    n = env.ncu
    rows += [("ncu", f"{n.path or 'not found'} ({n.version or '—'})"),
             ("ncu counters", _counters(n))]
    body = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return f"# Environment\n\n| what | value |\n|---|---|\n{body}\n"
