"""Facts about the machine and the user that every layer asks for, each computed in one place (issue 28).

- the time now, in UTC (:func:`utc_now`, :func:`utc_now_iso`);
- kernelpilot's own folder (:func:`kernelpilot_home`);
- NVML, the read-only NVIDIA management library (:func:`nvml`, :func:`nvml_gpu_name`, :func:`nvml_device_count`,
  :func:`nvml_driver_version`): no CUDA context is created, and a missing library, driver or GPU is an answer
  (None), never an error.

What a device string names is :class:`kernelpilot.target.Target`'s (``Target.from_device``).

This module is at the bottom layer: it imports nothing from kernelpilot, so any module may import it.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from types import ModuleType

__all__ = ["kernelpilot_home", "nvml", "nvml_device_count", "nvml_driver_version", "nvml_gpu_name",
           "utc_now", "utc_now_iso"]


def utc_now() -> _dt.datetime:
    """The current time as a timezone-aware ``datetime`` in UTC. Raises nothing."""
    return _dt.datetime.now(_dt.timezone.utc)


def utc_now_iso(timespec: str = "seconds") -> str:
    """The current UTC time as ISO 8601 with its offset, to ``timespec`` (``datetime.isoformat``'s argument):
    ``"seconds"`` gives ``2026-11-24T10:31:05+00:00``, ``"milliseconds"`` ``2026-11-24T10:31:05.123+00:00``.
    Raises ValueError for a ``timespec`` ``isoformat`` does not know."""
    return utc_now().isoformat(timespec=timespec)


def kernelpilot_home() -> Path:
    """The user's kernelpilot folder: ``$KERNELPILOT_HOME`` if set and not blank (``~`` expanded), else
    ``~/.kernelpilot``. Not created here; raises nothing (``Path.home`` aside, which raises RuntimeError when no
    home folder can be found)."""
    env = os.environ.get("KERNELPILOT_HOME", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".kernelpilot"


def nvml() -> ModuleType | None:
    """The ``pynvml`` module (nvidia-ml-py), initialised and left initialised for the caller's reads; None when the
    package is missing or ``nvmlInit`` fails (no driver, no GPU). Raises nothing."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver or no GPU: no NVML
        return None
    return pynvml


def _text(value: bytes | str) -> str:
    """NVML answers ``bytes`` in older nvidia-ml-py releases and ``str`` in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_gpu_name(index: int | str) -> str | None:
    """The name NVML gives a GPU (``"NVIDIA H100 80GB HBM3"``), without creating a CUDA context. ``index``: the
    physical index (int, or its decimal text) or a UUID (``"GPU-…"``, ``"MIG-…"``). None without NVML or without
    such a device; raises nothing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            text = str(index)
            handle = (pynvml.nvmlDeviceGetHandleByUUID(text) if text.startswith(("GPU-", "MIG-"))
                      else pynvml.nvmlDeviceGetHandleByIndex(int(text)))
            return _text(pynvml.nvmlDeviceGetName(handle))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML, no such device: no name
        return None


def nvml_device_count() -> int | None:
    """How many GPUs NVML sees (``CUDA_VISIBLE_DEVICES`` does not narrow it), or None without NVML. Raises
    nothing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: no count
        return None


def nvml_driver_version() -> str | None:
    """The NVIDIA driver's version text from NVML (``"560.35.03"``), or None. Raises nothing."""
    nv = nvml()
    if nv is None:
        return None
    try:
        return _text(nv.nvmlSystemGetDriverVersion())
    except Exception:  # noqa: BLE001 - an NVML that cannot tell: no version
        return None


