"""The light profile: a bottleneck card without Nsight Compute counters (issue 3, item 6).

When ncu is missing or the driver refuses counters (ERR_NVGPUCTRPERM), kernelpilot still judges a kernel from what
it can get: the measured time, the analytic roofline at the shape, and the compile metadata of the kernel built for
the same GPU (registers, spills, shared memory, theoretical occupancy, SASS mix — :mod:`kernelpilot.profile.static`).
The card says which of those it had (``evidence_sources``) and why it is light (``light_reason``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.hardware.roofline import Roofline
from kernelpilot.profile.card import BottleneckCard, light_card
from kernelpilot.profile.static import StaticReport, inspect_config


def static_evidence(report: StaticReport) -> dict[str, Any]:
    """The compile metadata :func:`~kernelpilot.profile.card.light_card` reads, from a static report.

    Keys: registers_per_thread, shared_mem_bytes (bytes), threads_per_block, occupancy_pct (theoretical, %), limiter,
    spills (count of 4-byte spill slots, as ``n_spills``), instruction_mix (SASS group -> static count).
    """
    occ = report.occupancy
    return {"registers_per_thread": report.registers_per_thread, "shared_mem_bytes": report.shared_mem_bytes,
            "threads_per_block": report.threads_per_block,
            "occupancy_pct": occ.occupancy_pct if occ is not None else None,
            "limiter": occ.limiter if occ is not None else None, "spills": report.n_spills,
            "instruction_mix": dict(report.instruction_mix)}


def inspect_static(kernel: str | Path, config: dict[str, Any], shape: dict[str, Any],
                   arch: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """The compile a light card reads: (:func:`static_evidence` of ``config`` compiled for ``arch`` at ``shape``,
    None) or (None, the compile error's message). Raises nothing for the kernel's faults."""
    try:
        return static_evidence(inspect_config(kernel, config, shape, arch)), None
    except KernelpilotError as exc:  # a kernel the static path cannot capture still gets a card
        return None, exc.message


def light_profile(kernel: str | Path, config: dict[str, Any], shape: dict[str, Any], *, timing_ns: float | None,
                  roofline: Roofline | None, device_name: str | None, kernel_name: str, reason: str,
                  arch: str | None = None,
                  inspected: tuple[dict[str, Any] | None, str | None] | None = None) -> tuple[BottleneckCard, str | None]:
    """A light card for one config: compile for ``arch`` (default: the GPU present, else sm_90), then judge.
    ``inspected``: :func:`inspect_static`'s answer for the same config and shape, made beforehand (the compile is
    then not repeated).

    Returns:
        (the card, the compile error when the kernel could not be compiled statically — the card then rests on
        timing and roofline alone).

    Raises:
        ValueError: ``timing_ns`` is not positive, or under the roofline floor (from ``light_card``).
    """
    static, compile_error = inspected if inspected is not None else inspect_static(kernel, config, shape, arch)
    card = light_card(timing_ns=timing_ns, roofline=roofline, static=static, device_name=device_name,
                      kernel_name=kernel_name, reason=reason + (f"; no compile metadata: {compile_error}"
                                                                if compile_error else ""))
    return card, compile_error
