"""Theoretical occupancy by the CUDA occupancy-calculator rules (kernelpilot.backends.binary.occupancy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.profile.metrics import read_report
from kernelpilot.backends.binary.occupancy import ARCH_LIMITS, theoretical_occupancy

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"


def test_registers_limit_matmul_config() -> None:
    # 110 regs x 32 threads = 3520 -> rounded up to 256: 3584 registers per warp.
    # 65536 / 4 sub-partitions = 16384 per sub-partition; 16384 // 3584 = 4 warps -> x4 = 16 warps per SM.
    # 256 threads = 8 warps per block -> 16 // 8 = 2 blocks by registers.
    # Shared: 98304 (multiple of 128) + 1024 reserved = 99328; 233472 // 99328 = 2 blocks by shared memory.
    # Warps: 64 // 8 = 8 blocks. Blocks: min(2, 2, 8, 32) = 2 -> 16 warps -> 16 / 64 = 25 %.
    occ = theoretical_occupancy(110, 98304, 256, (9, 0), shared_mem_config_bytes=233472)
    assert (occ.blocks_by_registers, occ.blocks_by_shared_mem, occ.blocks_by_warps, occ.blocks_by_blocks) == (2, 2, 8, 32)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.occupancy_pct) == (2, 16, 25.0)
    assert occ.limiter == "registers" and occ.limiters == ["registers", "shared_mem"]


def test_register_rounding_to_256_per_warp() -> None:
    # 26 regs x 32 = 832 -> 1024 per warp; 16384 // 1024 = 16 warps per sub-partition -> 64 warps -> 16 blocks
    # of 4 warps. Without the rounding it would be 16384 // 832 = 19 -> 76 warps -> 19 blocks.
    occ = theoretical_occupancy(26, 0, 128)
    assert occ.blocks_by_registers == 16
    # 33 regs x 32 = 1056 -> 1280; 16384 // 1280 = 12 -> 48 warps -> 12 blocks of 4 warps -> 75 %.
    occ = theoretical_occupancy(33, 0, 128)
    assert (occ.blocks_by_registers, occ.blocks_per_sm, occ.occupancy_pct, occ.limiter) == (12, 12, 75.0, "registers")


def test_register_split_by_sub_partition() -> None:
    # 200 regs x 32 = 6400 per warp (a multiple of 256). Per sub-partition: 16384 // 6400 = 2 warps -> x4 = 8
    # warps per SM; dividing the whole SM's 65536 would wrongly give 10. 64 threads = 2 warps -> 4 blocks.
    occ = theoretical_occupancy(200, 0, 64)
    assert occ.blocks_by_registers == 4
    assert occ.occupancy_pct == pytest.approx(8 / 64 * 100)


def test_shared_memory_limit_with_reservation_and_rounding() -> None:
    # 40000 bytes -> rounded up to 128: 313 x 128 = 40064; + 1024 reserved = 41088 per block.
    # 233472 // 41088 = 5 blocks (5 x 41088 = 205440; 6 x 41088 = 246528 > 233472). 4 warps/block -> 20 warps.
    # Registers: 32 x 32 = 1024 -> 16 warps per sub-partition -> 64 warps -> 16 blocks. Warps: 16 blocks.
    occ = theoretical_occupancy(32, 40000, 128)
    assert occ.blocks_by_shared_mem == 5
    assert (occ.blocks_per_sm, occ.occupancy_pct, occ.limiter) == (5, 31.25, "shared_mem")
    # 46000 bytes -> 46080; + 1024 = 47104 -> 233472 // 47104 = 4 blocks (without the 1 KB it would be 5).
    assert theoretical_occupancy(32, 46000, 128).blocks_by_shared_mem == 4
    # 1 byte still costs 128 + 1024 = 1152: 32768 // 1152 = 28 blocks with a 32 KB carve-out.
    assert theoretical_occupancy(16, 1, 32, shared_mem_config_bytes=32768).blocks_by_shared_mem == 28


def test_configured_carveout_is_used() -> None:
    # Same 41088 bytes per block, 100 KB carve-out: 102400 // 41088 = 2 blocks -> 8 warps -> 12.5 %.
    occ = theoretical_occupancy(32, 40000, 128, shared_mem_config_bytes=102400)
    assert (occ.blocks_by_shared_mem, occ.occupancy_pct) == (2, 12.5)
    # A carve-out that cannot hold one block gives 0 blocks.
    assert theoretical_occupancy(32, 40000, 128, shared_mem_config_bytes=32768).blocks_per_sm == 0


def test_warps_limit() -> None:
    # 1024 threads = 32 warps per block: 64 // 32 = 2 blocks by warps. 16 regs x 32 = 512 per warp ->
    # 16384 // 512 = 32 warps per sub-partition -> 128 warps -> 4 blocks. min = 2 blocks -> 64 warps -> 100 %.
    occ = theoretical_occupancy(16, 0, 1024)
    assert (occ.blocks_by_warps, occ.blocks_by_registers, occ.blocks_per_sm) == (2, 4, 2)
    assert (occ.occupancy_pct, occ.limiter) == (100.0, "warps")
    # 96 threads = 3 warps: 64 // 3 = 21 blocks -> 63 warps -> 98.4375 %.
    assert theoretical_occupancy(16, 0, 96).occupancy_pct == pytest.approx(63 / 64 * 100)


def test_blocks_limit_tiny_blocks() -> None:
    # 32 threads = 1 warp: warps allow 64 blocks, registers (16 -> 512 per warp -> 128 warps) 128 blocks,
    # shared (0 + 1024 reserved) 233472 // 1024 = 228 blocks; the 32-block cap binds -> 32 warps -> 50 %.
    # Nsight Compute reported warps 64, registers 128, blocks 32 and 50 % for such a launch on the H200.
    occ = theoretical_occupancy(16, 0, 32)
    assert (occ.blocks_by_warps, occ.blocks_by_registers, occ.blocks_by_shared_mem, occ.blocks_by_blocks) == (64, 128, 228, 32)
    assert (occ.blocks_per_sm, occ.occupancy_pct, occ.limiter) == (32, 50.0, "blocks")


def test_zero_registers_and_zero_shared() -> None:
    occ = theoretical_occupancy(0, 0, 256)
    assert occ.blocks_by_registers == 32  # no register limit: the block cap
    assert occ.blocks_by_shared_mem == 233472 // 1024  # the 1 KB reservation still applies
    assert (occ.blocks_per_sm, occ.occupancy_pct, occ.limiter) == (8, 100.0, "warps")


def test_other_architectures() -> None:
    # sm_89: 48 warps and 24 blocks per SM. 32-thread blocks: 48 blocks by warps, capped at 24 -> 24/48 = 50 %.
    occ = theoretical_occupancy(16, 0, 32, cc=(8, 9))
    assert (occ.blocks_per_sm, occ.occupancy_pct, occ.limiter) == (24, 50.0, "blocks")
    # sm_89, 256 threads: 48 // 8 = 6 blocks -> 48 warps -> 100 %.
    assert theoretical_occupancy(32, 0, 256, cc=(8, 9)).occupancy_pct == 100.0
    # sm_80: 164 KB carve-out: (40064 + 1024) -> 167936 // 41088 = 4 blocks.
    assert theoretical_occupancy(32, 40000, 128, cc=(8, 0)).blocks_by_shared_mem == 4
    assert ARCH_LIMITS[(9, 0)].shared_mem_per_sm_max_bytes == 233472


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(registers_per_thread=256, shared_mem_per_block_bytes=0, threads_per_block=128), "registers_per_thread"),
        (dict(registers_per_thread=32, shared_mem_per_block_bytes=0, threads_per_block=1025), "threads_per_block"),
        (dict(registers_per_thread=32, shared_mem_per_block_bytes=0, threads_per_block=0), "threads_per_block"),
        (dict(registers_per_thread=32, shared_mem_per_block_bytes=232449, threads_per_block=128), "shared_mem_per_block"),
        (dict(registers_per_thread=32, shared_mem_per_block_bytes=0, threads_per_block=128, cc=(7, 5)), "7.5"),
        (dict(registers_per_thread=32, shared_mem_per_block_bytes=0, threads_per_block=128,
              shared_mem_config_bytes=300000), "shared_mem_config_bytes"),
    ],
)
def test_invalid_inputs(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        theoretical_occupancy(**kwargs)


def test_largest_shared_block_fits_once() -> None:
    # 227 KB = 232448 bytes + 1024 reserved = 233472 = the whole 228 KB carve-out: exactly one block.
    assert theoretical_occupancy(32, 232448, 128).blocks_per_sm == 1


# (registers, static+dynamic shared bytes, threads, launch__shared_mem_config_size) -> ncu's
# launch__occupancy_limit_{registers,shared_mem,warps,blocks} and sm__maximum_warps_per_active_cycle_pct,
# as Nsight Compute 2025.3.1 reported them for Triton matmul launches on an H200 (2026-11-22).
NCU_H200_LAUNCHES = [
    ((60, 1024, 32, 65536), (32, 32, 64, 32, 50.0)),
    ((36, 1024, 32, 65536), (48, 32, 64, 32, 50.0)),
    ((54, 4096, 32, 167936), (36, 32, 64, 32, 50.0)),
    ((96, 4096, 32, 135168), (20, 26, 64, 32, 31.25)),
    ((54, 8192, 64, 167936), (18, 18, 32, 32, 56.25)),
    ((62, 24576, 64, 233472), (16, 9, 32, 32, 28.125)),
    ((64, 16384, 128, 167936), (8, 9, 16, 32, 50.0)),
    ((72, 49152, 128, 200704), (7, 4, 16, 32, 25.0)),
    ((124, 73728, 128, 233472), (4, 3, 16, 32, 18.75)),
    ((110, 131072, 256, 233472), (2, 1, 8, 32, 12.5)),
    ((74, 3072, 64, 102400), (12, 25, 32, 32, 37.5)),
    ((158, 61440, 32, 233472), (12, 3, 64, 32, 4.6875)),
]


@pytest.mark.parametrize("launch, ncu", NCU_H200_LAUNCHES)
def test_matches_ncu_on_h200_launches(launch: tuple, ncu: tuple) -> None:
    regs, shared, threads, config = launch
    occ = theoretical_occupancy(regs, shared, threads, (9, 0), shared_mem_config_bytes=config)
    got = (occ.blocks_by_registers, occ.blocks_by_shared_mem, occ.blocks_by_warps, occ.blocks_by_blocks, occ.occupancy_pct)
    assert got == ncu


@pytest.mark.parametrize("name", ["h200_add_fp32_memory_bound.ncu-rep", "h200_matmul_bf16_4096.ncu-rep"])
def test_matches_fixture_reports(name: str) -> None:
    m = read_report(FIXTURES / name)[0]
    assert m.registers_per_thread is not None and m.shared_mem_per_block_bytes is not None
    assert m.block_size is not None and m.compute_capability is not None
    occ = theoretical_occupancy(m.registers_per_thread, m.shared_mem_per_block_bytes, m.block_size,
                                m.compute_capability, shared_mem_config_bytes=m.shared_mem_config_bytes)
    assert occ.blocks_by_registers == m.occupancy_limits_blocks["registers"]
    assert occ.blocks_by_shared_mem == m.occupancy_limits_blocks["shared_mem"]
    assert occ.blocks_by_warps == m.occupancy_limits_blocks["warps"]
    assert occ.blocks_by_blocks == m.occupancy_limits_blocks["blocks"]
    assert occ.occupancy_pct == pytest.approx(m.theoretical_occupancy_pct)
    assert occ.limiter == m.occupancy_limiter and occ.limiters == m.occupancy_limiters
