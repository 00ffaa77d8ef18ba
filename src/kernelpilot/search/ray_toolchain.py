"""What a Ray actor measures with, observed on both ends (:mod:`kernelpilot.search.ray_pool`).

The driver of ``kernelpilot tune --ray`` files every answer of the actors in its own evaluation cache, under its own
environment (:class:`kernelpilot.search.cache.CacheContext`). An answer is only worth that if the actor ran the same
harness and stack: :func:`toolchain` reads, in any process and without importing torch or triton, the Python version,
the installed torch and triton versions, a sha256 of the kernelpilot sources that process imported (the version
string is 0.1.0 at every commit) and the name of its GPU through NVML (no CUDA context). The pool compares each
actor's against its own (:func:`toolchain_differences`) and refuses a cluster whose actors differ.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
from pathlib import Path
from typing import Any

from kernelpilot.facts import nvml_gpu_name

__all__ = ["TOOLCHAIN_HINT", "ready_answer", "refusal", "refused", "toolchain", "toolchain_differences"]


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _sources_sha256() -> str:
    """sha256 over the ``.py`` files of the kernelpilot package this process imported (relative path and bytes, in
    path order): the harness that runs the kernel, observed rather than its version string (0.1.0 for every
    commit)."""
    import kernelpilot

    root = Path(kernelpilot.__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _gpu_name(index: str | int | None) -> str | None:
    """Name of the GPU at physical ``index`` (Ray's id, an NVML index or UUID) through NVML, without creating a CUDA
    context in this process; None when NVML cannot tell."""
    return None if index is None else nvml_gpu_name(index)


def toolchain(gpu_index: str | int | None = None) -> dict[str, str | None]:
    """What this process would measure with: ``python`` (x.y.z), ``torch`` and ``triton`` (installed distribution
    versions, read without importing them), ``kernelpilot`` (sha256 of the imported package's sources) and ``gpu``
    (NVML's name of the GPU at ``gpu_index``; None without one). The driver and every actor compute it the same way;
    :func:`toolchain_differences` compares two."""
    return {"python": sys.version.split()[0], "torch": _dist_version("torch"), "triton": _dist_version("triton"),
            "kernelpilot": _sources_sha256(), "gpu": _gpu_name(gpu_index)}


def toolchain_differences(driver: dict[str, str | None], actor: dict[str, str | None]) -> list[str]:
    """``key: driver value != actor value`` for every key of :func:`toolchain` where the two differ; a ``gpu`` is
    compared only when both sides name one (the driver of an interpreted search has none; NVML may be absent).
    Empty when the actor may answer for the driver."""
    out = []
    for key in ("python", "torch", "triton", "kernelpilot", "gpu"):
        a, b = driver.get(key), actor.get(key)
        if key == "gpu" and (a is None or b is None):
            continue
        if a != b:
            if key == "kernelpilot":  # a sha256 is shown by its first 12 hex digits
                a, b = (f"sources {v[:12]}" if isinstance(v, str) and len(v) == 64 else v for v in (a, b))
            out.append(f"{key}: {a} != {b}")
    return out


#: The hint of every refusal.
TOOLCHAIN_HINT = ("install the same Python, torch, triton and kernelpilot (the same commit) on every node as on "
                  "the host that runs `kernelpilot tune --ray`, and use one GPU model throughout")


def refusal(lines: list[str]) -> str:
    """The message of a refused cluster: ``lines`` from :func:`refused`, joined."""
    return ("Ray actors run another toolchain than this driver, so their answers would be filed under the wrong "
            "environment: " + "; ".join(lines))


def ready_answer(answer: Any, label: str) -> tuple[str, dict[str, str | None]]:
    """``(label, toolchain)`` of an actor's ``ready`` answer; an answer of another shape (a node whose kernelpilot
    predates the check answers a bare label) gets an empty toolchain, which :func:`refused` refuses."""
    if (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], str)
            and isinstance(answer[1], dict)):
        return answer[0], answer[1]
    return (answer if isinstance(answer, str) else label), {}


def refused(label: str, driver: dict[str, str | None], tools: dict[str, str | None]) -> list[str]:
    """``label: difference`` for each :func:`toolchain_differences` (one line when the actor reported nothing)."""
    if not tools:
        return [f"{label}: kernelpilot: another version that reports no toolchain"]
    return [f"{label}: {d}" for d in toolchain_differences(driver, tools)]
