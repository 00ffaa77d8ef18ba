"""What the GPU looked like when a number was taken: clocks, temperature, throttle reasons (NVML, read-only).

kernelpilot never changes clocks (docs/measuring.md, "Timing"); it records them with every timing so a slow sample can be
explained by a throttled GPU rather than by the kernel.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.facts import nvml, nvml_driver_version


def gpu_state(index: int = 0) -> dict[str, Any]:
    """Current SM/memory clocks (MHz), temperature (°C), power (W) and active clock-event (throttle) reasons.

    Returns an empty dict when NVML is unavailable (no GPU, no driver, nvidia-ml-py missing): absence of
    evidence is recorded as absence, never as a guessed value.
    """
    nv = nvml()
    if nv is None:
        return {}
    out: dict[str, Any] = {}
    try:
        h = nv.nvmlDeviceGetHandleByIndex(index)
        out["sm_clock_mhz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
        out["mem_clock_mhz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)
        out["max_sm_clock_mhz"] = nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)
        out["temperature_c"] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        out["power_w"] = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons")
        mask = reasons_fn(h)
        out["clock_event_reasons_mask"] = int(mask)
        out["clock_event_reasons"] = _decode_reasons(nv, int(mask))
    except Exception as exc:  # a partial reading is still worth keeping
        out["nvml_error"] = f"{type(exc).__name__}: {exc}"
    return out


def _decode_reasons(nv: Any, mask: int) -> list[str]:
    names = []
    for attr in dir(nv):
        if attr.startswith(("nvmlClocksEventReason", "nvmlClocksThrottleReason")) and not attr.endswith(("All", "None")):
            bit = getattr(nv, attr)
            if isinstance(bit, int) and bit and mask & bit:
                names.append(attr.replace("nvmlClocksEventReason", "").replace("nvmlClocksThrottleReason", ""))
    return sorted(set(names))


driver_version = nvml_driver_version  # the NVIDIA driver version string from NVML, or None
