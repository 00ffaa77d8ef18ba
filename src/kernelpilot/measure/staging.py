"""The staging buffers of the reference process (:mod:`kernelpilot.measure.refproc`): their layout, views, allocation
and where large ones may live."""

from __future__ import annotations

from typing import Any

from kernelpilot.target import Target

__all__ = ["ALIGN", "alloc", "big_results_place", "device_room", "host_room", "layout", "uint8", "use_count", "view"]


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


def device_room(n_bytes: int, free_bytes: int) -> bool:
    """True when a buffer of ``n_bytes`` may stay on the GPU whose free memory is ``free_bytes``
    (``torch.cuda.mem_get_info``): room for four times ``n_bytes`` plus 4 GiB. The buffer is kept between calls, so
    beside it the reference process must still find room for its next float64 work (its inputs upcast and its
    results: three times the results for an op of two inputs, such as GeGLU), and the worker for its comparison
    chunks (:data:`~kernelpilot.measure.memory.CHUNK_ELEMENTS`) and its allocator's slack. A headroom rule, not a
    measured bound: KernelBench's largest problems (results of a sixth of the device and more) stay in host memory."""
    return free_bytes >= 4 * n_bytes + (4 << 30)


def big_results_place(n_bytes: int, device: str) -> str:
    """Where the worker keeps a buffer of ``n_bytes`` of large float64 reference results
    (:mod:`kernelpilot.measure.refproc`): on the GPU ``device`` when it has room (:func:`device_room`), where the
    comparison reads them without a copy; else in shared host memory when that has room (:func:`host_room`); else
    on the device after all. On a CPU: ``device``.

    Measured on an H200 (Liger GeGLU, 8192 x 16384 bf16, results of 1 GiB, docs/device-runs/2026-11-28-s16): a
    check cost 3.9-4.0 s with the results in host memory (1.75 s moving them back to the GPU for the comparison,
    1.53 s waiting for the reference process to copy them out) and 0.74-0.81 s with every copy on the device."""
    import torch

    if not Target.from_device(device).is_gpu:
        return device
    try:
        free, _ = torch.cuda.mem_get_info(torch.device(device))
    except RuntimeError:  # the free memory cannot be read: the host rule alone, as before the device rule existed
        free = 0
    if device_room(n_bytes, free):
        return device
    return "cpu" if host_room(n_bytes) else device


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
