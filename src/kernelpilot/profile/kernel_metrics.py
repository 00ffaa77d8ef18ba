"""The normalized record of one profiled kernel launch: :class:`KernelMetrics`, with its stalls and ncu rule results.

Filled by :func:`kernelpilot.profile.metrics.metrics_from_action` (which re-exports these classes); every numeric
field is ``None`` when the report lacked the metric, and ``sources`` names the ncu metric behind each field.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, Field

__all__ = ["StallReason", "RuleResult", "KernelMetrics"]


class StallReason(BaseModel):
    """One warp stall reason: ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio``.

    Attributes:
        reason: ncu's reason name (``long_scoreboard``, ``barrier``, ``mio_throttle`` ...).
        ratio: average warps stalled for this reason per issued instruction (cycles between issues).
        share_pct: ``ratio`` as a percent of the sum of all stall ratios ("selected" excluded).
    """

    reason: str
    ratio: float
    share_pct: float


class RuleResult(BaseModel):
    """One of Nsight Compute's own rule results (``IAction.rule_results_as_dicts()``).

    Attributes:
        identifier: rule id, e.g. ``SOLBottleneck``, ``CPIStall``.
        section: section id the rule belongs to, e.g. ``SpeedOfLight``.
        title: the rule message's title (may be empty), e.g. ``Balanced Throughput``.
        message: the rule message text.
        type: message type from ``ncu_report.MsgType``: none, ok, optimization, warning, error.
        estimated_speedup_pct: ncu's estimated runtime improvement in percent, or None when not given.
        speedup_type: ``local`` (of the part the rule looks at) or ``global`` (of the whole kernel) or None.
    """

    identifier: str
    section: str
    title: str
    message: str
    type: str
    estimated_speedup_pct: Optional[float] = None
    speedup_type: Optional[str] = None


class KernelMetrics(BaseModel):
    """Normalized metrics of one profiled kernel launch; every number in base units, None when not reported.

    Throughputs and occupancies are percents of peak (0-100). ``memory_units_pct`` holds, per memory unit
    (DRAM, L1, L2), the busiest sub-metric of ncu's memory-SOL breakdown: the basis ncu uses to name the unit
    in its SOLBottleneck rule. ``occupancy_limits_blocks`` maps registers / shared_mem / warps / blocks
    (/ barriers) to blocks per SM from ``launch__occupancy_limit_*``; ``occupancy_limiters`` lists every kind
    at the minimum and ``occupancy_limiter`` is the first of them (order: warps, blocks, registers,
    shared_mem, barriers: a hardware cap tied with a resource limit is the one that binds). ``shared_mem_per_block_bytes`` is
    static + dynamic shared memory, without the driver-reserved part (``shared_mem_driver_bytes``).
    ``sources`` maps each filled field (``dict.key`` for dict entries) to the ncu metric name it came from.
    ``dram_bytes_read`` / ``dram_bytes_write`` are the bytes the launch read from / wrote to DRAM
    (``dram__bytes_read.sum`` / ``dram__bytes_write.sum``) and ``l2_cache_bytes`` the device's L2 size, bytes: the
    observation that confirms or refutes the floor's bytes (:mod:`kernelpilot.profile.floor_check`).

    Inputs of the numeric patterns (docs/measuring.md "Numeric patterns"; :mod:`kernelpilot.profile.patterns`):

    - ``global_load_sectors`` / ``global_load_requests`` (counts, LDG and LDGSTS at L1TEX) and their quotient
      ``global_load_sectors_per_request`` (sectors; None when there were no requests);
    - ``global_load_bytes_per_sector`` / ``global_store_bytes_per_sector``: bytes used per 32-byte sector by SASS
      global loads (LDG) / stores (STG), 0-32 B, meaningful only when ``global_load_inst_count`` /
      ``global_store_inst_count`` (instructions) are above 0;
    - ``global_sectors_theoretical`` / ``global_sectors_ideal``: L2 sectors that global accesses needed vs the
      ideal for the bytes requested (Source Counters section), sectors;
    - ``fma_pipe_pct`` / ``tensor_pipe_pct`` / ``fp64_pipe_pct``: pipe cycles active, % of peak (active cycles);
      ``tensor_gmma_inst_pct``: HGMMA (wgmma) instructions issued, % of peak;
    - ``global_atomic_sectors`` / ``global_atomic_requests``: ATOM + RED sectors / requests (counts);
    - ``shared_{load,store}_bank_conflicts`` and ``shared_{load,store}_wavefronts``: LDS / STS counts;
    - ``active_threads_per_warp_inst``: threads (0-32);
    - ``<reason>_stall_ratio``: cycles stalled per issued instruction for five named reasons, and
      ``stall_ratios`` for every reason ncu reported ("selected" excluded).
    """

    kernel_name: str
    device_name: Optional[str] = None
    compute_capability: Optional[tuple[int, int]] = None
    duration_ns: Optional[float] = None
    compute_sol_pct: Optional[float] = None
    memory_sol_pct: Optional[float] = None
    dram_pct: Optional[float] = None
    l1_throughput_pct: Optional[float] = None
    l2_throughput_pct: Optional[float] = None
    memory_units_pct: dict[str, float] = Field(default_factory=dict)
    l1_hit_rate_pct: Optional[float] = None
    l2_hit_rate_pct: Optional[float] = None
    achieved_occupancy_pct: Optional[float] = None
    theoretical_occupancy_pct: Optional[float] = None
    occupancy_limiter: Optional[str] = None
    occupancy_limiters: list[str] = Field(default_factory=list)
    occupancy_limits_blocks: dict[str, float] = Field(default_factory=dict)
    registers_per_thread: Optional[int] = None
    shared_mem_per_block_bytes: Optional[int] = None
    shared_mem_driver_bytes: Optional[int] = None
    shared_mem_config_bytes: Optional[int] = None
    block_size: Optional[int] = None
    grid_size: Optional[int] = None
    waves_per_sm: Optional[float] = None
    sm_count: Optional[int] = None
    sm_frequency_hz: Optional[float] = None
    dram_frequency_hz: Optional[float] = None
    dram_bytes_read: Optional[float] = None
    dram_bytes_write: Optional[float] = None
    l2_cache_bytes: Optional[int] = None
    local_load_inst_count: Optional[float] = None
    local_store_inst_count: Optional[float] = None
    register_spill_inst_count: Optional[float] = None
    global_load_sectors: Optional[float] = None
    global_load_requests: Optional[float] = None
    global_load_sectors_per_request: Optional[float] = None
    global_load_inst_count: Optional[float] = None
    global_load_bytes_per_sector: Optional[float] = None
    global_store_inst_count: Optional[float] = None
    global_store_bytes_per_sector: Optional[float] = None
    global_sectors_theoretical: Optional[float] = None
    global_sectors_ideal: Optional[float] = None
    fma_pipe_pct: Optional[float] = None
    tensor_pipe_pct: Optional[float] = None
    tensor_gmma_inst_pct: Optional[float] = None
    fp64_pipe_pct: Optional[float] = None
    global_atomic_sectors: Optional[float] = None
    global_atomic_requests: Optional[float] = None
    shared_load_bank_conflicts: Optional[float] = None
    shared_store_bank_conflicts: Optional[float] = None
    shared_load_wavefronts: Optional[float] = None
    shared_store_wavefronts: Optional[float] = None
    active_threads_per_warp_inst: Optional[float] = None
    long_scoreboard_stall_ratio: Optional[float] = None
    short_scoreboard_stall_ratio: Optional[float] = None
    barrier_stall_ratio: Optional[float] = None
    lg_throttle_stall_ratio: Optional[float] = None
    mio_throttle_stall_ratio: Optional[float] = None
    stall_ratios: dict[str, float] = Field(default_factory=dict)
    top_stalls: list[StallReason] = Field(default_factory=list)
    rules: list[RuleResult] = Field(default_factory=list)
    sources: dict[str, str] = Field(default_factory=dict)

