"""Theoretical occupancy by the CUDA occupancy-calculator rules (docs/measuring.md, "Occupancy").

For R registers/thread, S bytes of shared memory/block (static + dynamic) and W warps/block:

- blocks by warps     = floor(max warps/SM / W)
- registers per warp  = ceil(32 R / 256) * 256; warps by registers = floor(regs per sub-partition / that) * 4
  sub-partitions; blocks by registers = floor(warps by registers / W)
- shared per block    = ceil(S / 128) * 128 + 1024 reserved; blocks by shared = floor(carve-out / that)
- blocks              = min(max blocks/SM, the three limits above); occupancy = blocks * W / max warps/SM

Each per-resource limit is kept uncapped (not clipped to max blocks/SM), which is how Nsight Compute reports
``launch__occupancy_limit_{warps,registers,shared_mem}``; the cap is ``blocks_by_blocks``.

The carve-out (shared memory configured per SM) is chosen by the driver per launch; Nsight Compute reports it
as ``launch__shared_mem_config_size``. Pass it as ``shared_mem_config_bytes`` to reproduce ncu's numbers;
without it the architecture's maximum carve-out is used. Checked equal to ``launch__occupancy_limit_*`` and
``sm__maximum_warps_per_active_cycle_pct`` of both H200 fixtures (tests/test_occupancy.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pydantic import BaseModel

_GUIDE = (
    "CUDA C++ Programming Guide, 'Compute Capabilities' / 'Technical Specifications per Compute Capability' "
    "table, https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#compute-capabilities"
)

#: Order used to pick one limiter among equal limits: a hardware cap (warps, blocks) tied with a resource
#: limit is the one that binds, since using fewer registers or less shared memory would not raise occupancy.
LIMITER_ORDER = ("warps", "blocks", "registers", "shared_mem")


@dataclass(frozen=True)
class OccupancyLimits:
    """Per-SM resource limits of one compute capability, as the occupancy calculator uses them.

    Source: CUDA C++ Programming Guide, "Compute Capabilities" (table "Technical Specifications per Compute
    Capability" and the per-architecture "Shared Memory" notes: 1 KB of shared memory per block is reserved
    for system use), https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#compute-capabilities;
    allocation units (256 registers per warp, 128 bytes of shared memory, warps allocated per sub-partition)
    from the CUDA occupancy calculator as docs/measuring.md, "Occupancy", states them. For 9.0 the shared-memory
    figures match the H200 reports' ``device__attribute_max_shared_memory_per_multiprocessor`` (233472),
    ``..._per_block_optin`` (232448) and ``..._reserved_shared_memory_per_block`` (1024).

    Attributes (units in names; counts are per SM unless named per block/thread/warp):
        compute_capability: (major, minor).
        registers_per_sm: 32-bit registers in the register file.
        register_alloc_unit_per_warp: registers are allocated to a warp in multiples of this.
        max_registers_per_thread: most registers one thread may use.
        max_warps_per_sm, max_blocks_per_sm: resident warp and block caps.
        max_threads_per_block: largest block.
        shared_mem_per_sm_max_bytes: largest shared-memory carve-out per SM.
        shared_mem_per_block_max_bytes: largest shared memory one block may use (opt-in above 48 KB).
        shared_mem_reserved_per_block_bytes: shared memory the system reserves per resident block.
        shared_mem_alloc_unit_bytes: a block's shared memory is rounded up to a multiple of this.
        sub_partitions_per_sm: SM sub-partitions (warp schedulers); registers are split evenly between them,
            so warps are allocated in multiples of this (the calculator's warp allocation granularity).
        warp_size_threads: threads per warp.
    """

    compute_capability: tuple[int, int]
    registers_per_sm: int
    register_alloc_unit_per_warp: int
    max_registers_per_thread: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    shared_mem_per_sm_max_bytes: int
    shared_mem_per_block_max_bytes: int
    shared_mem_reserved_per_block_bytes: int = 1024
    shared_mem_alloc_unit_bytes: int = 128
    sub_partitions_per_sm: int = 4
    warp_size_threads: int = 32


#: Known architectures, keyed by compute capability. Source: see :class:`OccupancyLimits`.
ARCH_LIMITS: dict[tuple[int, int], OccupancyLimits] = {
    # A100: 164 KB shared/SM, 163 KB/block, 64 warps, 32 blocks.
    (8, 0): OccupancyLimits((8, 0), 65536, 256, 255, 64, 32, 1024, 167936, 166912),
    # Ada (L4, L40, RTX 40xx): 100 KB shared/SM, 99 KB/block, 48 warps, 24 blocks.
    (8, 9): OccupancyLimits((8, 9), 65536, 256, 255, 48, 24, 1024, 102400, 101376),
    # Hopper (H100, H200): 228 KB shared/SM, 227 KB/block, 64 warps, 32 blocks.
    (9, 0): OccupancyLimits((9, 0), 65536, 256, 255, 64, 32, 1024, 233472, 232448),
}


class Occupancy(BaseModel):
    """Theoretical occupancy of one launch configuration on one SM.

    Attributes:
        blocks_per_sm: resident blocks (the minimum of the four limits).
        warps_per_sm: resident warps = blocks_per_sm * warps per block.
        occupancy_pct: warps_per_sm / max warps per SM * 100.
        limiter: the limit that binds ("warps", "blocks", "registers" or "shared_mem"; ties in that order).
        limiters: every limit equal to blocks_per_sm, in the same order.
        blocks_by_registers, blocks_by_shared_mem, blocks_by_warps, blocks_by_blocks: blocks per SM each
            resource alone allows, not clipped to the block cap (``blocks_by_blocks``), as ncu reports its
            ``launch__occupancy_limit_*``. With 0 registers, ``blocks_by_registers`` is the block cap.
    """

    blocks_per_sm: int
    warps_per_sm: int
    occupancy_pct: float
    limiter: str
    limiters: list[str]
    blocks_by_registers: int
    blocks_by_shared_mem: int
    blocks_by_warps: int
    blocks_by_blocks: int


def _ceil_to(value: int, unit: int) -> int:
    """``value`` rounded up to a multiple of ``unit``."""
    return -(-value // unit) * unit


def limits_for(cc: tuple[int, int]) -> OccupancyLimits:
    """The :class:`OccupancyLimits` of compute capability ``cc``.

    Raises:
        ValueError: ``cc`` is not in :data:`ARCH_LIMITS`.
    """
    try:
        return ARCH_LIMITS[tuple(cc)]  # type: ignore[index]
    except KeyError:
        known = ", ".join(f"{a}.{b}" for a, b in sorted(ARCH_LIMITS))
        raise ValueError(f"no occupancy limits for compute capability {cc[0]}.{cc[1]} (known: {known})") from None


def theoretical_occupancy(
    registers_per_thread: int,
    shared_mem_per_block_bytes: int,
    threads_per_block: int,
    cc: tuple[int, int] = (9, 0),
    shared_mem_config_bytes: Optional[int] = None,
) -> Occupancy:
    """Theoretical occupancy by the CUDA occupancy-calculator rules (docs/measuring.md, "Occupancy").

    Args:
        registers_per_thread: registers per thread (``launch__registers_per_thread``; 0 = not limiting).
        shared_mem_per_block_bytes: static + dynamic shared memory per block, in bytes, without the
            system-reserved 1 KB (which this function adds).
        threads_per_block: threads per block (``launch__block_size``).
        cc: compute capability (major, minor); see :data:`ARCH_LIMITS`.
        shared_mem_config_bytes: shared memory configured per SM for the launch (the driver's carve-out,
            ``launch__shared_mem_config_size``); None uses the architecture's maximum.

    Returns:
        The :class:`Occupancy`. A configuration whose block cannot fit at all gets 0 blocks.

    Raises:
        ValueError: negative inputs, ``threads_per_block`` not in 1..max threads per block, registers above
            the per-thread maximum (255), shared memory above the per-block maximum, a carve-out above the
            per-SM maximum, or an unknown ``cc``.
    """
    arch = limits_for(cc)
    if threads_per_block < 1 or threads_per_block > arch.max_threads_per_block:
        raise ValueError(f"threads_per_block={threads_per_block} is outside 1..{arch.max_threads_per_block}")
    if registers_per_thread < 0 or registers_per_thread > arch.max_registers_per_thread:
        raise ValueError(
            f"registers_per_thread={registers_per_thread} is outside 0..{arch.max_registers_per_thread}"
        )
    if shared_mem_per_block_bytes < 0 or shared_mem_per_block_bytes > arch.shared_mem_per_block_max_bytes:
        raise ValueError(
            f"shared_mem_per_block_bytes={shared_mem_per_block_bytes} is outside "
            f"0..{arch.shared_mem_per_block_max_bytes} (per-block maximum for sm_{cc[0]}{cc[1]})"
        )
    carveout_bytes = arch.shared_mem_per_sm_max_bytes if shared_mem_config_bytes is None else shared_mem_config_bytes
    if carveout_bytes < 0 or carveout_bytes > arch.shared_mem_per_sm_max_bytes:
        raise ValueError(
            f"shared_mem_config_bytes={shared_mem_config_bytes} is outside 0..{arch.shared_mem_per_sm_max_bytes}"
        )

    warps_per_block = -(-threads_per_block // arch.warp_size_threads)
    # Each resource's limit is left uncapped, as ncu reports launch__occupancy_limit_* (an H200 report of a
    # 32-thread, 16-register kernel gave warps 64, registers 128, blocks 32); the cap enters through by_blocks.
    by_blocks = arch.max_blocks_per_sm
    by_warps = arch.max_warps_per_sm // warps_per_block
    if registers_per_thread == 0:
        by_registers = by_blocks
    else:
        registers_per_warp = _ceil_to(registers_per_thread * arch.warp_size_threads, arch.register_alloc_unit_per_warp)
        registers_per_sub_partition = arch.registers_per_sm // arch.sub_partitions_per_sm
        warps_by_registers = (registers_per_sub_partition // registers_per_warp) * arch.sub_partitions_per_sm
        by_registers = warps_by_registers // warps_per_block
    shared_per_block = (
        _ceil_to(shared_mem_per_block_bytes, arch.shared_mem_alloc_unit_bytes) + arch.shared_mem_reserved_per_block_bytes
    )
    by_shared = carveout_bytes // shared_per_block

    by_kind = {"warps": by_warps, "blocks": by_blocks, "registers": by_registers, "shared_mem": by_shared}
    blocks = min(by_kind.values())
    limiters = [kind for kind in LIMITER_ORDER if by_kind[kind] == blocks]
    warps = blocks * warps_per_block
    return Occupancy(
        blocks_per_sm=blocks,
        warps_per_sm=warps,
        occupancy_pct=warps / arch.max_warps_per_sm * 100.0,
        limiter=limiters[0],
        limiters=limiters,
        blocks_by_registers=by_registers,
        blocks_by_shared_mem=by_shared,
        blocks_by_warps=by_warps,
        blocks_by_blocks=by_blocks,
    )
