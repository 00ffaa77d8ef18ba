"""The staging buffers of the reference process (:mod:`kernelpilot.measure.refproc`): their layout, views, allocation
and where large ones may live."""

from __future__ import annotations

from typing import Any

from kernelpilot.target import Target

__all__ = ["ALIGN", "alloc", "host_room", "layout", "uint8", "use_count", "view"]


def host_room(n_bytes: int) -> bool:
    """True when ``n_bytes`` of shared host memory fit with room to spare: the shared-memory file system
    (``/dev/shm``, where torch shares host tensors) has ``n_bytes`` + 1 GiB free and the host ``n_bytes`` + 4 GiB
    available (``MemAvailable``). False where either cannot be read (then large results stay on the device)."""
    import os

    try:
        st = os.statvfs("/dev/shm")
        with open("/proc/meminfo", encoding="ascii") as f:
            avail_kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    return st.f_bavail * st.f_frsize >= n_bytes + (1 << 30) and avail_kib * 1024 >= n_bytes + (4 << 30)


def use_count(t: Any) -> int:
    """How many tensors use ``t``'s storage (torch's own count; -1 where this torch lacks it: then a buffer with a
    view alive cannot be told apart, and every large call gets a new one)."""
    import torch

    counter = getattr(torch._C, "_storage_Use_Count", None)
    if counter is None:
        return -1
    return int(counter(t.untyped_storage()._cdata))


#: Byte alignment of every tensor in a staging buffer (the largest any dtype or vector load needs).
ALIGN = 256


def uint8() -> Any:
    import torch

    return torch.uint8


def layout(specs: dict[str, tuple[Any, tuple[int, ...]]]) -> dict[str, tuple[Any, tuple[int, ...], int, int]]:
    """name -> (dtype, shape, byte offset, byte count) of tensors packed one after the other, each aligned."""
    import math

    out, off = {}, 0
    for name, (dtype, shape) in specs.items():
        n = math.prod(shape) * dtype.itemsize
        out[name] = (dtype, shape, off, n)
        off += -(-max(n, 1) // ALIGN) * ALIGN
    return out


def view(stage: Any, dtype: Any, shape: tuple[int, ...], off: int, n: int) -> Any:
    """The tensor at ``off`` in a staging buffer (``dtype`` may be given by name: ``"torch.float64"``)."""
    import torch

    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.removeprefix("torch."))
    return stage[off:off + n].view(dtype).view(shape)


def alloc(nbytes: int, device: str, exact: bool = False) -> Any:
    """A staging buffer of at least ``nbytes`` (rounded up to a power of two, 1 MiB at least, so it grows rarely;
    ``exact``, or ``nbytes`` of :data:`~kernelpilot.measure.memory.LARGE_BYTES` or more: rounded up to 1 MiB only,
    where a power of two could waste a third of the device)."""
    import torch

    from kernelpilot.measure.memory import is_large

    if exact or is_large(nbytes):
        size = max(1 << 20, -(-nbytes // (1 << 20)) * (1 << 20))
    else:
        size = max(1 << 20, 1 << max(nbytes - 1, 1).bit_length())
    if not Target.from_device(device).is_gpu:  # made in shared memory at once (share_memory_ would copy it there: twice the bytes)
        new_shared = getattr(torch.UntypedStorage, "_new_shared", None)
        if new_shared is not None:
            return torch.empty(0, dtype=torch.uint8).set_(new_shared(size))
        return torch.empty(size, dtype=torch.uint8).share_memory_()
    return torch.empty(size, dtype=torch.uint8, device=device)
