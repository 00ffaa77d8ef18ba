"""Target GPU architectures: arch names, the default target, and the largest block a binary can launch with.

Used by static inspection (:mod:`kernelpilot.profile.static`) and the Triton compile for a target
(:mod:`kernelpilot.backends.triton.compile`).
"""

from __future__ import annotations

import re

from kernelpilot.errors import ContractError

__all__ = ["DEFAULT_CPU_ARCH", "arch_name", "default_arch", "max_threads_per_block", "parse_arch"]

#: Target used when no arch is given and no GPU is present: the GPUs docs/DESIGN.md "Where it runs" names
#: (H100/H200, compute capability 9.0). With a GPU present the arch always comes from the device.
DEFAULT_CPU_ARCH = "sm_90"


def parse_arch(arch: str | int | tuple[int, int]) -> tuple[int, int]:
    """Compute capability of an arch name: ``"sm_90"``, ``"sm_90a"``, ``"90"``, ``"9.0"``, 90 or (9, 0) -> (9, 0).

    Raises:
        ContractError: the text is not an arch name.
    """
    if isinstance(arch, tuple):
        return int(arch[0]), int(arch[1])
    text = str(arch).strip().lower()
    match = re.fullmatch(r"(?:sm_?|compute_)?(\d+)\.(\d)", text) or re.fullmatch(r"(?:sm_?|compute_)?(\d+)(\d)a?", text)
    if not match:
        raise ContractError(f"--arch {arch!r} is not a GPU architecture", "e.g. --arch sm_90 (H100/H200) or sm_80 (A100)")
    return int(match.group(1)), int(match.group(2))


def arch_name(cc: tuple[int, int]) -> str:
    """``(9, 0)`` -> ``"sm_90"``."""
    return f"sm_{cc[0]}{cc[1]}"


def default_arch() -> str:
    """The arch to compile for: this machine's GPU (``torch.cuda.get_device_capability()``) when one is present,
    else :data:`DEFAULT_CPU_ARCH`."""
    try:
        import torch

        if torch.cuda.is_available():
            return arch_name(tuple(torch.cuda.get_device_capability()))  # type: ignore[arg-type]
    except Exception:  # a broken CUDA install behaves as no GPU here
        pass
    return DEFAULT_CPU_ARCH


def max_threads_per_block(registers_per_thread: int, cc: tuple[int, int] = (9, 0)) -> int:
    """The largest block, in threads, a kernel using ``registers_per_thread`` registers can launch with on ``cc``:
    what the driver reports as ``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`` for the loaded function.

    Rule: min(the hardware limit per block (1024 threads on sm_80/89/90), the threads the register file holds for
    ONE block), the latter with the occupancy model's allocation granularity (``kernelpilot.backends.binary.occupancy``):
    registers per warp = ceil(32 R / 256) * 256; warps per sub-partition = floor(16384 / that) (65,536 registers
    split over 4 sub-partitions); warps = that * 4; threads = warps * 32 (a whole number of warps).
    Worked: R = 255 -> 8192 per warp -> 2 warps per sub-partition -> 256 threads; R = 128 -> 4096 -> 4 -> 512;
    R = 96 -> 3072 -> 5 -> 640 (not 672: warps are allocated per sub-partition); R = 64 -> 2048 -> 8 -> 1024.

    Sources: CUDA Driver API, ``cuFuncGetAttribute`` (https://docs.nvidia.com/cuda/cuda-driver-api/
    group__CUDA__EXEC.html; the same words in the runtime's ``cudaFuncAttributes::maxThreadsPerBlock``): the attribute
    is the most threads per block "beyond which a launch of the function would fail", depending "on both the function
    and the device" -- the definition, not the formula. The formula: a block's registers must fit the register file
    and the bound is a whole number of warps (the rule ROCm/hip PR #1676 gave ``hipFuncGetAttributes``,
    https://github.com/ROCm/hip/pull/1676), with the allocation granularities of 256 registers per warp and warps per
    sub-partition (kokkos PR #5739, https://github.com/kokkos/kokkos/pull/5739; the CUDA occupancy calculator as
    docs/measuring.md "Occupancy" states it). Checked against the driver: the 41 configs of
    docs/device-runs/2026-11-22-h100/occupancy_driver.json (H100, Triton 3.6; e.g. 164 registers -> 384, 96 -> 640,
    70 -> 896) and, on the device, every example config (tests/test_occupancy_driver.py).

    Args:
        registers_per_thread: registers per thread (``cuobjdump`` REG, or the driver's ``CU_FUNC_ATTRIBUTE_NUM_REGS``);
            0 means no register limit.
        cc: compute capability (major, minor), one of :data:`kernelpilot.backends.binary.occupancy.ARCH_LIMITS`.

    Returns:
        Threads per block (a multiple of 32, at most the hardware limit per block).

    Raises:
        ValueError: registers outside 0..255 (the per-thread maximum) or an unknown ``cc``.
    """
    from kernelpilot.backends.binary.occupancy import limits_for

    arch = limits_for(cc)
    if registers_per_thread < 0 or registers_per_thread > arch.max_registers_per_thread:
        raise ValueError(f"registers_per_thread={registers_per_thread} is outside 0..{arch.max_registers_per_thread}")
    if registers_per_thread == 0:
        return arch.max_threads_per_block
    unit = arch.register_alloc_unit_per_warp
    per_warp = -(-registers_per_thread * arch.warp_size_threads // unit) * unit
    warps = (arch.registers_per_sm // arch.sub_partitions_per_sm // per_warp) * arch.sub_partitions_per_sm
    return min(arch.max_threads_per_block, warps * arch.warp_size_threads)

