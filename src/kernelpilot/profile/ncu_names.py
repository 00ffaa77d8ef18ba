"""Nsight Compute metric names kernelpilot reads, one constant per metric (or a tuple of fallbacks, first found wins).

The names are those of docs/measuring.md ("Diagnosing"), checked against real H200 ``--set full`` reports, plus the
GPU Speed Of Light section's own header metrics. :mod:`kernelpilot.profile.metrics` reads them into
:class:`~kernelpilot.profile.kernel_metrics.KernelMetrics` and re-exports every name here, so
``kernelpilot.profile.metrics.WAVES`` keeps working.
"""

from __future__ import annotations

import re

# --- metric names (docs/measuring.md "Diagnosing"; SpeedOfLight/Occupancy/LaunchStats section headers) -------------
DURATION = "gpu__time_duration.sum"
COMPUTE_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL_BREAKDOWN = "breakdown:" + MEMORY_SOL
DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
#: "L1/TEX Cache Throughput" of the GPU Speed Of Light section (active), elapsed as fallback.
L1_THROUGHPUT = ("l1tex__throughput.avg.pct_of_peak_sustained_active", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed")
#: "L2 Cache Throughput" of the GPU Speed Of Light section.
L2_THROUGHPUT = ("lts__throughput.avg.pct_of_peak_sustained_elapsed",)
L1_HIT_RATE = "l1tex__t_sector_hit_rate.pct"
L2_HIT_RATE = "lts__t_sector_hit_rate.pct"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
OCCUPANCY_LIMIT_PREFIX = "launch__occupancy_limit_"
#: Tie order when several occupancy limits are equal (the first listed wins): a hardware cap (warps, blocks)
#: that ties with a resource limit is what binds, since using fewer resources would not raise occupancy.
OCCUPANCY_LIMIT_KINDS = ("warps", "blocks", "registers", "shared_mem", "barriers")
REGISTERS = "launch__registers_per_thread"
SHARED_STATIC = "launch__shared_mem_per_block_static"
SHARED_DYNAMIC = "launch__shared_mem_per_block_dynamic"
SHARED_DRIVER = "launch__shared_mem_per_block_driver"
SHARED_TOTAL = "launch__shared_mem_per_block"  # static + dynamic + driver-reserved
SHARED_CONFIG = "launch__shared_mem_config_size"
BLOCK_SIZE = "launch__block_size"
GRID_SIZE = "launch__grid_size"
WAVES = "launch__waves_per_multiprocessor"
SM_COUNT = ("launch__sm_count", "device__attribute_multiprocessor_count")
#: "SM Frequency" and "DRAM Frequency" of the GPU Speed Of Light section: the clocks seen during the launch.
SM_FREQUENCY = ("gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second")
DRAM_FREQUENCY = ("dram__cycles_elapsed.avg.per_second",)
#: Bytes read from / written to DRAM by the launch (unit ``byte`` in the H200 ``--set full`` fixtures): what the
#: kernel moved, the observation :mod:`kernelpilot.profile.floor_check` holds the floor's bytes against.
DRAM_BYTES_READ = "dram__bytes_read.sum"
DRAM_BYTES_WRITE = "dram__bytes_write.sum"
#: The device's L2 size in bytes (no unit in the fixtures: 62914560 on the H200).
L2_CACHE_SIZE = "device__attribute_l2_cache_size"
LOCAL_LOADS = "smsp__sass_inst_executed_op_local_ld.sum"
LOCAL_STORES = "smsp__sass_inst_executed_op_local_st.sum"
SPILL_INSTRUCTIONS = "sass__inst_executed_register_spilling"
DEVICE_NAME = "device__attribute_display_name"
CC_MAJOR = "device__attribute_compute_capability_major"
CC_MINOR = "device__attribute_compute_capability_minor"
# --- pattern inputs (docs/measuring.md "Numeric patterns"; names read from the H200 `--set full` fixtures) -----------
#: Global-load sectors and requests of the LSU pipe (LDG and LDGSTS): sectors per request = sectors / requests.
GLOBAL_LOAD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_LOAD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
#: Bytes used per sector fetched by global loads / stores (SASS-level, 32 = every byte of a sector used). Recent
#: ncu versions report ``.ratio`` in byte/sector; a ``.pct`` variant (percent of 32 B) is converted.
GLOBAL_LOAD_BYTES_PER_SECTOR = ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",
                                "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct")
GLOBAL_STORE_BYTES_PER_SECTOR = ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
                                 "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct")
#: SASS global load (LDG) / store (STG) instructions executed: the byte-per-sector ratios mean nothing without them.
GLOBAL_LOAD_INST = "smsp__sass_inst_executed_op_global_ld.sum"
GLOBAL_STORE_INST = "smsp__sass_inst_executed_op_global_st.sum"
#: Source Counters section: L2 sectors global accesses needed vs the ideal for the bytes requested.
GLOBAL_SECTORS_THEORETICAL = "memory_l2_theoretical_sectors_global"
GLOBAL_SECTORS_IDEAL = "memory_l2_theoretical_sectors_global_ideal"
#: Pipe utilization, % of peak over active cycles. sm_90 counts HGMMA (wgmma) in the tensor pipe's cycles.
FMA_PIPE = ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active")
TENSOR_PIPE = ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
               "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")
TENSOR_GMMA_INST = "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"
FP64_PIPE = ("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active",
             "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active")
#: Global atomics (ATOM) and reductions (RED): sectors and requests at L1TEX.
GLOBAL_ATOMIC_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum")
GLOBAL_ATOMIC_REQUESTS = ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum")
#: Shared-memory bank conflicts and data wavefronts of shared loads / stores (LDS / STS).
SHARED_LOAD_BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
SHARED_STORE_BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
SHARED_LOAD_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
SHARED_STORE_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
#: Average active threads per executed warp instruction (32 = no divergence).
ACTIVE_THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"
#: Stall reasons given their own fields (the numeric patterns read them).
NAMED_STALLS = ("long_scoreboard", "short_scoreboard", "barrier", "lg_throttle", "mio_throttle")
SECTOR_BYTES = 32  # one L1/L2 sector is 32 bytes (CUDA memory model; ncu "sector" unit)
STALL_RE = re.compile(r"^smsp__average_warps_issue_stalled_(?P<reason>.+)_per_issue_active\.ratio$")
STALL_TEMPLATE = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
#: Reasons that are not stalls: "selected" counts the cycle a warp issues (one per instruction).
NOT_STALLS = frozenset({"selected"})
TOP_STALLS = 5
