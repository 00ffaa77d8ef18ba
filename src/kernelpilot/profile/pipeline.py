"""Software-pipelining (multi-buffering) analysis for tiled ``tl.dot`` kernels (PRODUCT.md "Software pipelining",
from the pipeline seed; issue 3 item 5).

For a BLOCK_M x BLOCK_N x BLOCK_K tile with operands of ``b`` bytes per element:

- compute/load ratio per tile = 2·BM·BN·BK / ((BM·BK + BK·BN)·b) FLOP per byte loaded. BK cancels: the ratio is
  2·BM·BN / ((BM + BN)·b), so BLOCK_K changes the bytes per stage (and so the largest S and the occupancy cliff),
  not the ratio.
- shared memory per stage = (BM·BK + BK·BN)·b bytes; for S stages S times that (the model), compared with the
  compiled kernel's ``metadata.shared``. Triton (3.6 and 3.9, compiled here for sm_90) allocates S buffers on its
  wgmma path (matmul 64x64x32 bf16, 4 warps: 16384 / 24576 / 32768 B at 2 / 3 / 4 stages) but S - 1 on its
  mma.sync path (the same tile with 2 warps: 8192 B at 2 stages),
  so the stage sweep below uses the compiled kernel's buffer count offset when it has one.
- the largest S whose shared memory fits the per-block limit (232,448 B = 227 KB on sm_90), and the S at which
  blocks per SM drop (the occupancy cliff) by :func:`~kernelpilot.profile.occupancy.theoretical_occupancy` with the
  compiled registers/thread (registers are assumed not to change with S).
- the rule (PRODUCT.md): ratio < 5 -> async copies / more ``num_stages``; 5–20 -> measure both; > 20 -> pipelining
  gains little. Never past the occupancy cliff unless a measurement says it is faster.
- a SASS check of the main loop (the body of the innermost backward branch that holds MMAs): async global->shared
  copies (LDGSTS, or UTMALDG/UBLKCP for TMA) and MMAs (HGMMA, HMMA) in it, the barriers (BAR) and waits
  (``DEPBAR.LE SB0, n`` for cp.async groups, ``WARPGROUP.DEPBAR.LE gsb0, n`` for wgmma groups) around them.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import BaseModel, Field

from kernelpilot.errors import ContractError
from kernelpilot.profile.occupancy import ARCH_LIMITS, limits_for, theoretical_occupancy
from kernelpilot.profile.static import (
    ASYNC_COPY_OPCODES,
    MMA_OPCODES,
    SassInstruction,
    StaticFailure,
    StaticReport,
    config_tasks,
    inspect_configs,
    isolated_workers,
    parse_arch,
    parse_sass,
    raise_static_failure,
    read_kernel_meta,
    run_isolated_tasks,
)
from kernelpilot.search.guided import tunable_role

#: PRODUCT.md "Software pipelining" (the pipeline seed): below this FLOP/byte ratio a tile is load-bound enough
#: that async copies / more stages help; above ``RATIO_HIGH`` pipelining gains little; between: measure both.
RATIO_LOW = 5.0
RATIO_HIGH = 20.0

_TILE_AXIS = re.compile(r"(?:^|_)([MNK])$")


class StageRow(BaseModel):
    """Occupancy of the same kernel at ``stages`` pipeline stages (shared memory from the model or the compiled
    buffer offset; registers from the compiled config).

    Attributes:
        stages: S.
        shared_mem_bytes: shared memory per block at S stages, bytes.
        fits: shared memory within the per-block limit.
        blocks_per_sm, occupancy_pct, limiter: from the occupancy model (0 / None when it does not fit).
    """

    stages: int
    shared_mem_bytes: int
    fits: bool
    blocks_per_sm: int = 0
    occupancy_pct: float = 0.0
    limiter: Optional[str] = None


class MainLoopCheck(BaseModel):
    """What the SASS main loop holds (static instructions of the loop body).

    Attributes:
        found: a loop (backward branch) was found.
        start_address, end_address: byte offsets of the body (branch target .. the backward branch).
        n_instructions: instructions in the body.
        async_copies: async global->shared copies in the body by opcode (LDGSTS, UTMALDG, UBLKCP).
        mma: MMA instructions in the body by opcode (HGMMA, HMMA, ...).
        ffma: FFMA instructions in the body (fp32 FMAs: no tensor cores when there is no MMA).
        sync_global_loads: LDG instructions in the body (loads through registers).
        barrier_addresses: every BAR in the body.
        barriers_between: BARs that lie between an async copy and an MMA next to each other in the body's order
            (with no other copy or MMA between them).
        adjacent_pairs_without_barrier: copy/MMA neighbours (in body order) with no BAR between them.
        async_copy_waits: ``n`` of each ``DEPBAR.LE SB0, n`` in the body (cp.async groups left in flight).
        mma_waits: ``n`` of each ``WARPGROUP.DEPBAR.LE gsb0, n`` (wgmma groups left in flight).
        meets_product_rule: async copies and MMAs in the loop with no barrier between them (the rule as PRODUCT.md
            states it: at least one copy/MMA neighbour pair without a BAR).
        overlapped: copies overlap MMAs: the rule above, or a BAR separates them but wgmma groups stay in flight
            across it (``mma_waits`` > 0 before the barrier), so the copies issue while an MMA runs.
        verdict: one sentence saying what was found.
    """

    found: bool
    start_address: Optional[int] = None
    end_address: Optional[int] = None
    n_instructions: int = 0
    async_copies: dict[str, int] = Field(default_factory=dict)
    mma: dict[str, int] = Field(default_factory=dict)
    ffma: int = 0
    sync_global_loads: int = 0
    barrier_addresses: list[int] = Field(default_factory=list)
    barriers_between: list[int] = Field(default_factory=list)
    adjacent_pairs_without_barrier: int = 0
    async_copy_waits: list[int] = Field(default_factory=list)
    mma_waits: list[int] = Field(default_factory=list)
    meets_product_rule: bool = False
    overlapped: bool = False
    verdict: str = ""


class PipelineReport(BaseModel):
    """Software-pipelining analysis of one config of a tiled kernel.

    Attributes:
        kernel_file, config, shape, arch: what was analysed.
        tile_tunables: the tunables read as BM, BN, BK (``{"M": "BLOCK_M", "N": "BLOCK_N", "K": "BLOCK_K"}``).
        block_m, block_n, block_k: the tile, elements.
        operand_dtype, bytes_per_element: dtype of the tl.dot operands (the non-output tensor inputs) and its size.
        num_stages, num_warps, threads_per_block: the config's pipeline depth and block.
        flops_per_tile: 2·BM·BN·BK per K step.
        bytes_per_tile: (BM·BK + BK·BN)·b loaded per K step (= shared memory per stage).
        compute_load_ratio: flops_per_tile / bytes_per_tile, FLOP per byte.
        stage_bytes: shared memory per stage, bytes (= bytes_per_tile).
        shared_model_bytes: S·stage_bytes at the config's S.
        compiled_shared_bytes: ``metadata.shared`` of the compiled kernel (None without a compile).
        compiled_buffers: compiled_shared_bytes // stage_bytes (stage buffers Triton allocated).
        shared_matches_model: compiled == model.
        shared_limit_bytes: the per-block limit of the arch.
        max_stages_under_limit: the largest S whose shared memory fits.
        registers_per_thread: compiled registers used for the occupancy sweep.
        stages: occupancy at S = 1 .. max(max_stages_under_limit, the config's S) (stopping after the first that
            does not fit).
        occupancy_cliffs: every S whose blocks per SM are fewer than at S - 1.
        next_cliff_stages: the first cliff above the config's S (None: none up to the limit).
        stages_safe: the largest S that fits and keeps the blocks per SM of the config's S (never past the cliff).
        past_cliff: the config's S already has fewer blocks per SM than some smaller S.
        rule: which band of the PRODUCT.md rule applies.
        recommendation: what to do, in one or two sentences.
        recommended_num_stages: the num_stages to use (a TUNABLES candidate when the file lists num_stages).
        stages_to_measure: num_stages values worth timing against each other.
        main_loop: the SASS check (None without SASS).
        notes: anything the numbers need to be read with.
    """

    kernel_file: str
    config: dict[str, Any]
    shape: dict[str, Any] = Field(default_factory=dict)
    arch: str
    tile_tunables: dict[str, str]
    block_m: int
    block_n: int
    block_k: int
    operand_dtype: str
    bytes_per_element: int
    num_stages: int
    num_warps: int
    threads_per_block: int
    flops_per_tile: int
    bytes_per_tile: int
    compute_load_ratio: float
    stage_bytes: int
    shared_model_bytes: int
    compiled_shared_bytes: Optional[int] = None
    compiled_buffers: Optional[int] = None
    shared_matches_model: Optional[bool] = None
    shared_limit_bytes: int
    max_stages_under_limit: int
    registers_per_thread: int
    stages: list[StageRow] = Field(default_factory=list)
    occupancy_cliffs: list[int] = Field(default_factory=list)
    next_cliff_stages: Optional[int] = None
    stages_safe: int
    past_cliff: bool = False
    rule: str
    recommendation: str
    recommended_num_stages: int
    stages_to_measure: list[int] = Field(default_factory=list)
    main_loop: Optional[MainLoopCheck] = None
    notes: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------------------------------
# arithmetic (pure)


def compute_load_ratio(block_m: int, block_n: int, block_k: int, bytes_per_element: int) -> float:
    """FLOP per byte loaded for one K step of a BM x BN x BK tile: 2·BM·BN·BK / ((BM·BK + BK·BN)·b).

    Source: PRODUCT.md "Software pipelining" (the pipeline seed). Example: 64x64x32 bf16 ->
    2·64·64·32 / ((2048 + 2048)·2) = 262144 / 8192 = 32.

    Raises:
        ValueError: a tile size or the element size is not positive.
    """
    if min(block_m, block_n, block_k, bytes_per_element) <= 0:
        raise ValueError(f"tile {block_m}x{block_n}x{block_k} and {bytes_per_element} B/element must be positive")
    return 2 * block_m * block_n * block_k / (stage_bytes(block_m, block_n, block_k, bytes_per_element))


def stage_bytes(block_m: int, block_n: int, block_k: int, bytes_per_element: int) -> int:
    """Shared memory of one pipeline stage, bytes: (BM·BK + BK·BN)·b (one A tile and one B tile)."""
    return (block_m * block_k + block_k * block_n) * bytes_per_element


def classify_ratio(ratio: float) -> tuple[str, str]:
    """(band, what the band says) of the PRODUCT.md rule: < 5 ``"low"``, 5–20 ``"middle"``, > 20 ``"high"``."""
    if ratio < RATIO_LOW:
        return "low", (f"compute/load ratio {ratio:.3g} < {RATIO_LOW:g} FLOP/B: loads dominate the tile; use async "
                       f"copies (cp.async / TMA; in Triton more num_stages)")
    if ratio <= RATIO_HIGH:
        return "middle", (f"compute/load ratio {ratio:.3g} is within {RATIO_LOW:g}–{RATIO_HIGH:g} FLOP/B: measure "
                          f"both the current depth and a deeper pipeline")
    return "high", f"compute/load ratio {ratio:.3g} > {RATIO_HIGH:g} FLOP/B: pipelining gains little"


def stage_sweep(stage_bytes_: int, registers_per_thread: int, threads_per_block: int, cc: tuple[int, int] = (9, 0),
                *, buffer_offset: int = 0, extra_bytes: int = 0, max_stages: int = 64) -> list[StageRow]:
    """Occupancy at S = 1, 2, ... stages until shared memory no longer fits (that S included, marked not fitting).

    Shared memory at S = max(0, S + buffer_offset)·stage_bytes + extra_bytes (offset and extra from the compiled
    kernel: see the module docstring). Occupancy by the CUDA occupancy-calculator rules (PRODUCT.md "Occupancy").

    Raises:
        ValueError: unknown ``cc`` or invalid registers/threads (from :func:`theoretical_occupancy`).
    """
    limit = limits_for(cc).shared_mem_per_block_max_bytes
    rows: list[StageRow] = []
    for s in range(1, max_stages + 1):
        shared = max(0, s + buffer_offset) * stage_bytes_ + extra_bytes
        if shared > limit:
            rows.append(StageRow(stages=s, shared_mem_bytes=shared, fits=False))
            break
        occ = theoretical_occupancy(registers_per_thread, shared, threads_per_block, cc)
        rows.append(StageRow(stages=s, shared_mem_bytes=shared, fits=True, blocks_per_sm=occ.blocks_per_sm,
                             occupancy_pct=occ.occupancy_pct, limiter=occ.limiter))
    return rows


def occupancy_cliffs(rows: list[StageRow]) -> list[int]:
    """Every S (among fitting rows) whose blocks per SM are fewer than at the previous S."""
    fitting = [r for r in rows if r.fits]
    return [b.stages for a, b in itertools.pairwise(fitting) if b.blocks_per_sm < a.blocks_per_sm]


def recommend(ratio: float, num_stages: int, rows: list[StageRow], candidates: Optional[list[int]] = None
              ) -> dict[str, Any]:
    """The num_stages advice of PRODUCT.md's rule, never past the occupancy cliff.

    Args:
        ratio: compute/load ratio (FLOP/B).
        num_stages: the config's S.
        rows: :func:`stage_sweep` output.
        candidates: the file's num_stages candidates (advice is restricted to them when given).

    Returns:
        ``{"rule", "recommendation", "recommended_num_stages", "stages_to_measure", "stages_safe",
        "next_cliff_stages", "past_cliff", "max_stages_under_limit", "cliffs", "band"}``. Past the cliff means
        fewer blocks per SM than a shallower pipeline of at least 2 stages.
    """
    band, rule = classify_ratio(ratio)
    fitting = [r for r in rows if r.fits]
    by_s = {r.stages: r for r in fitting}
    max_fit = max((r.stages for r in fitting), default=0)
    cliffs = occupancy_cliffs(rows)
    next_cliff = next((c for c in cliffs if c > num_stages), None)
    here = by_s.get(num_stages)
    # Past the cliff: fewer blocks/SM than some shallower pipeline (S >= 2; S = 1 is no pipelining at all).
    shallower = [r for r in fitting if 2 <= r.stages < num_stages]
    past = here is not None and any(r.blocks_per_sm > here.blocks_per_sm for r in shallower)
    # Largest S keeping the current blocks per SM (never past the next cliff), within the limit.
    safe = (next_cliff - 1) if next_cliff is not None else max_fit
    safe = max(1, min(safe, max_fit)) if max_fit else num_stages
    allowed = sorted(c for c in (candidates or []) if isinstance(c, int)) or list(range(1, max_fit + 1))

    def pick_at_most(limit_s: int) -> int:
        ok = [c for c in allowed if c <= limit_s and c in by_s]
        return max(ok) if ok else num_stages

    if here is None:
        chosen = pick_at_most(min(safe, max_fit))
        text = (f"num_stages={num_stages} does not fit the per-block shared memory limit; use at most "
                f"{max_fit} (recommended {chosen}).")
        measure = [chosen]
    elif band == "low":
        chosen = pick_at_most(safe)
        text = (f"Raise num_stages to {chosen}: the deepest pipeline that fits and keeps {here.blocks_per_sm} "
                f"blocks/SM" + (f" (the occupancy cliff is at {next_cliff})." if next_cliff else "."))
        measure = sorted({num_stages, chosen})
    elif band == "middle":
        chosen = pick_at_most(safe)
        text = (f"Measure num_stages={num_stages} against {chosen} (deepest without losing blocks/SM"
                + (f"; cliff at {next_cliff}" if next_cliff else "") + ").")
        measure = sorted({num_stages, chosen})
    else:
        chosen = num_stages
        text = f"Keep num_stages={num_stages}; by the seed rule deeper pipelines buy little at this ratio."
        measure = [num_stages]
        # The rule's thresholds were measured on a GA104 (pipeline seed). On an H200 the bf16 matmul at
        # 128x64x32 (ratio 42.7 FLOP/B) ran 1.144x faster at num_stages 3 than 2 (docs/device-runs/2026-11-22-h200):
        # so one more stage that keeps the blocks per SM is still worth a measurement.
        deeper = [c for c in allowed if num_stages < c <= safe and c in by_s]
        if deeper:
            measure = [num_stages, min(deeper)]
            text += (f" Still measure num_stages={min(deeper)} (same blocks/SM): on an H200 a bf16 matmul at ratio "
                     "42.7 FLOP/B ran 1.14x faster with 3 stages than 2.")
    if here is not None and past:
        best_blocks = max(r.blocks_per_sm for r in shallower)
        lower = max((r.stages for r in shallower if r.blocks_per_sm == best_blocks and r.stages in allowed),
                    default=None)
        text += (f" num_stages={num_stages} is past an occupancy cliff ({here.blocks_per_sm} blocks/SM vs "
                 f"{best_blocks} at fewer stages): keep it only if it measures faster")
        if lower is not None:
            text += f"; otherwise use {lower}."
            if band == "high":
                chosen = lower
            measure = sorted(set(measure) | {lower})
        else:
            text += "."
    return {"band": band, "rule": rule, "recommendation": text, "recommended_num_stages": chosen,
            "stages_to_measure": measure, "stages_safe": safe, "next_cliff_stages": next_cliff, "past_cliff": past,
            "max_stages_under_limit": max_fit, "cliffs": cliffs}


# --------------------------------------------------------------------------------------------------------------------
# SASS main loop


def find_main_loop(instrs: list[SassInstruction]) -> Optional[tuple[int, int]]:
    """(start, end) byte offsets of the main loop: the innermost backward-branch body holding an MMA; else the one
    holding most async copies; else the largest loop; None without a backward branch.

    A backward branch is a BRA/JMP whose target is below its own address (a branch to itself, the padding loop
    after EXIT, is not a loop).
    """
    loops = []
    for i in instrs:
        target = i.branch_target()
        if target is not None and target < i.address:
            loops.append((target, i.address))
    if not loops:
        return None

    def count(lo: int, hi: int, ops: tuple[str, ...]) -> int:
        return sum(1 for i in instrs if lo <= i.address <= hi and i.base in ops)

    with_mma = [lp for lp in loops if count(*lp, MMA_OPCODES)]
    if with_mma:
        return min(with_mma, key=lambda lp: lp[1] - lp[0])
    with_copies = [lp for lp in loops if count(*lp, ASYNC_COPY_OPCODES)]
    if with_copies:
        return max(with_copies, key=lambda lp: count(*lp, ASYNC_COPY_OPCODES))
    return max(loops, key=lambda lp: lp[1] - lp[0])


def _wait_count(instr: SassInstruction) -> Optional[int]:
    found = re.findall(r"0x([0-9a-fA-F]+)|\b(\d+)\b", instr.operands.split(",")[-1])
    if not found:
        return None
    hexa, dec = found[-1]
    return int(hexa, 16) if hexa else int(dec)


def _counts(instrs: list[SassInstruction]) -> dict[str, int]:
    return {op: sum(1 for x in instrs if x.base == op) for op in sorted({x.base for x in instrs})}


def check_main_loop(instrs: list[SassInstruction]) -> MainLoopCheck:
    """Check the SASS main loop for a software pipeline (see :class:`MainLoopCheck` for every field).

    Rule (PRODUCT.md "Software pipelining"): a pipelined main loop shows async loads (LDGSTS, or UTMALDG for TMA)
    and MMAs (HGMMA on Hopper; HMMA the slower path; FFMA means no tensor cores) with no barrier between them.
    Both that literal rule and whether copies overlap a still-running wgmma across a barrier are reported.
    """
    span = find_main_loop(instrs)
    if span is None:
        return MainLoopCheck(found=False, verdict="no loop (backward branch) in the SASS: nothing to pipeline")
    lo, hi = span
    body = [i for i in instrs if lo <= i.address <= hi]
    copies = [i for i in body if i.base in ASYNC_COPY_OPCODES]
    mmas = [i for i in body if i.base in MMA_OPCODES]
    bars = [i for i in body if i.base == "BAR"]
    copy_waits = [n for i in body if i.base == "DEPBAR" and "SB0" in i.operands and (n := _wait_count(i)) is not None]
    mma_waits = [n for i in body if i.opcode.startswith("WARPGROUP.DEPBAR") and (n := _wait_count(i)) is not None]

    # Walk the body in order over copies (L), MMAs (M) and barriers (B): neighbours L/M of different kinds are
    # "pairs"; a pair with a B between them is separated by that barrier.
    between: list[int] = []
    free_pairs = 0
    last_kind: Optional[str] = None
    pending_bars: list[int] = []
    for i in body:
        kind = "L" if i.base in ASYNC_COPY_OPCODES else "M" if i.base in MMA_OPCODES else "B" if i.base == "BAR" else None
        if kind is None:
            continue
        if kind == "B":
            pending_bars.append(i.address)
            continue
        if last_kind is not None and last_kind != kind:
            if pending_bars:
                between.extend(pending_bars)
            else:
                free_pairs += 1
        last_kind, pending_bars = kind, []
    meets = bool(copies) and bool(mmas) and free_pairs > 0
    # wgmma groups left in flight by a WARPGROUP.DEPBAR placed before a separating barrier.
    in_flight_across = any(
        w.opcode.startswith("WARPGROUP.DEPBAR") and (_wait_count(w) or 0) > 0 and w.address < b
        and not any(m.address > w.address and m.address < b for m in mmas)
        for w in body for b in between
    )
    overlapped = meets or (bool(copies) and bool(mmas) and in_flight_across and any(m.base == "HGMMA" for m in mmas))
    ffma = sum(1 for i in body if i.base == "FFMA")
    ldg = sum(1 for i in body if i.base == "LDG")
    where = f"main loop 0x{lo:x}–0x{hi:x} ({len(body)} instructions)"
    if not mmas and not copies:
        verdict = (f"{where}: no MMA and no async copy" + (f"; {ffma} FFMA (no tensor cores)" if ffma else "")
                   + (f"; {ldg} LDG (loads through registers)" if ldg else ""))
    elif not mmas:
        verdict = f"{where}: async copies but no tensor-core MMA" + (f" ({ffma} FFMA: no tensor cores)" if ffma else "")
    elif not copies:
        verdict = (f"{where}: MMAs ({', '.join(f'{k} {v}' for k, v in _counts(mmas).items())}) but no async "
                   f"global->shared copy" + (f" ({ldg} LDG: synchronous loads)" if ldg else "") + ": not pipelined")
    elif meets:
        verdict = (f"{where}: pipelined — async copies and MMAs share the loop with no barrier between "
                   f"{free_pairs} neighbouring copy/MMA pair(s) (the PRODUCT.md rule holds)")
    elif overlapped:
        verdict = (f"{where}: async copies and HGMMA share the loop; a BAR at "
                   f"{', '.join(f'0x{a:x}' for a in sorted(set(between)))} separates them (the PRODUCT.md rule does "
                   f"not hold literally), but wgmma groups stay in flight across it (WARPGROUP.DEPBAR.LE gsb0, "
                   f"{max(mma_waits)}), so the copies issue while an MMA runs")
    else:
        verdict = (f"{where}: async copies and MMAs share the loop but a barrier separates every neighbouring pair "
                   f"(at {', '.join(f'0x{a:x}' for a in sorted(set(between)))}) with MMAs drained before it: "
                   f"copies and MMAs do not overlap")
    return MainLoopCheck(
        found=True, start_address=lo, end_address=hi, n_instructions=len(body), async_copies=_counts(copies),
        mma=_counts(mmas), ffma=ffma, sync_global_loads=ldg, barrier_addresses=[b.address for b in bars],
        barriers_between=sorted(set(between)), adjacent_pairs_without_barrier=free_pairs,
        async_copy_waits=copy_waits, mma_waits=mma_waits, meets_product_rule=meets, overlapped=overlapped,
        verdict=verdict,
    )


# --------------------------------------------------------------------------------------------------------------------
# kernel-level analysis


def tile_tunables(config: dict[str, Any]) -> dict[str, str]:
    """Which tunables are BM, BN and BK: roles from :func:`~kernelpilot.search.guided.tunable_role` (``tile_k`` is
    K; other ``tile`` names ending in ``_M`` / ``_N``, or ``M`` / ``N``, are M / N).

    Raises:
        ContractError: the config lacks one of the three (not a tiled tl.dot kernel).
    """
    found: dict[str, str] = {}
    for name in config:
        role = tunable_role(name)
        if role == "tile_k":
            found.setdefault("K", name)
        elif role == "tile":
            m = _TILE_AXIS.search(name.upper())
            if m and m.group(1) in "MN":
                found.setdefault(m.group(1), name)
    missing = [axis for axis in "MNK" if axis not in found]
    if missing:
        raise ContractError(
            f"no BLOCK_{'/BLOCK_'.join(missing)} tunable in {sorted(config)}: pipelining analysis needs a tiled "
            f"tl.dot kernel with BLOCK_M, BLOCK_N and BLOCK_K tunables",
            "name the tile tunables BLOCK_M, BLOCK_N, BLOCK_K (or *_M, *_N, BLOCK_K*)")
    return found


def _operand_bytes(report: StaticReport) -> tuple[str, int, list[str]]:
    notes: list[str] = []
    operands = [k for k in report.input_itemsize_bytes if k not in report.output_names]
    if not operands:
        operands = list(report.input_itemsize_bytes)
    if not operands:
        raise ContractError(f"{report.kernel_file}: setup returned no tensor inputs", "tl.dot operands must be tensors")
    sizes = {report.input_itemsize_bytes[k] for k in operands}
    size = max(sizes)
    dtype = next(report.input_dtypes[k] for k in operands if report.input_itemsize_bytes[k] == size)
    if len(sizes) > 1:
        notes.append(f"operands have mixed element sizes {sorted(sizes)} B; the larger ({size} B) is used")
    return dtype, size, notes


def pipeline_from_static(report: StaticReport, candidates: Optional[list[int]] = None) -> PipelineReport:
    """The pipelining analysis of an already compiled config (its :class:`StaticReport`, with SASS kept for the loop
    check).

    Raises:
        ContractError: the config has no BLOCK_M/BLOCK_N/BLOCK_K tunables, or no tensor inputs.
        ValueError: the arch has no known occupancy limits.
    """
    names = tile_tunables(report.config)
    bm, bn, bk = (int(report.config[names[a]]) for a in "MNK")
    dtype, b, notes = _operand_bytes(report)
    cc = tuple(report.compute_capability)
    if cc not in ARCH_LIMITS:
        raise ValueError(f"no occupancy limits for {report.arch}: pipeline analysis needs them")
    per_stage = stage_bytes(bm, bn, bk, b)
    s_cur = report.num_stages
    compiled = report.shared_mem_bytes
    buffers = compiled // per_stage
    extra = compiled - buffers * per_stage
    offset = buffers - s_cur
    if buffers == 0:
        notes.append(f"compiled shared memory {compiled} B is below one stage ({per_stage} B): the sweep uses the "
                     f"model S x stage bytes")
        offset, extra = 0, 0
    elif compiled != s_cur * per_stage:
        notes.append(f"compiled shared memory {compiled} B = {buffers} stage buffer(s) of {per_stage} B"
                     + (f" + {extra} B" if extra else "") + f", not {s_cur} x {per_stage} = {s_cur * per_stage} B "
                     f"(the model): the stage sweep uses {buffers - s_cur:+d} buffer(s)"
                     + (f" and {extra} B extra" if extra else ""))
    rows = stage_sweep(per_stage, report.registers_per_thread, report.threads_per_block, cc,  # type: ignore[arg-type]
                       buffer_offset=offset, extra_bytes=extra, max_stages=max(64, s_cur + 1))
    ratio = compute_load_ratio(bm, bn, bk, b)
    advice = recommend(ratio, s_cur, rows, candidates)
    notes.append(f"BLOCK_K cancels in the ratio (2·BM·BN / ((BM+BN)·b) = {ratio:.4g}); it sets the bytes per stage, "
                 f"so the largest S and the cliff")
    notes.append(f"registers/thread ({report.registers_per_thread}) from the compiled num_stages={s_cur}, assumed "
                 f"unchanged at other S; compiled by Triton {report.triton_version}")
    main_loop = check_main_loop(parse_sass(report.sass)) if report.sass else None
    return PipelineReport(
        kernel_file=report.kernel_file, config=report.config, shape=report.shape, arch=report.arch,
        tile_tunables=names, block_m=bm, block_n=bn, block_k=bk, operand_dtype=dtype, bytes_per_element=b,
        num_stages=s_cur, num_warps=report.num_warps, threads_per_block=report.threads_per_block,
        flops_per_tile=2 * bm * bn * bk, bytes_per_tile=per_stage, compute_load_ratio=round(ratio, 6),
        stage_bytes=per_stage, shared_model_bytes=s_cur * per_stage, compiled_shared_bytes=compiled,
        compiled_buffers=buffers, shared_matches_model=compiled == s_cur * per_stage,
        shared_limit_bytes=limits_for(cc).shared_mem_per_block_max_bytes,  # type: ignore[arg-type]
        max_stages_under_limit=advice["max_stages_under_limit"], registers_per_thread=report.registers_per_thread,
        stages=rows, occupancy_cliffs=advice["cliffs"], next_cliff_stages=advice["next_cliff_stages"],
        stages_safe=advice["stages_safe"], past_cliff=advice["past_cliff"], rule=advice["rule"],
        recommendation=advice["recommendation"], recommended_num_stages=advice["recommended_num_stages"],
        stages_to_measure=advice["stages_to_measure"], main_loop=main_loop, notes=notes,
    )


def _stage_candidates(tunables: dict[str, list[Any]]) -> Optional[list[int]]:
    for name, values in tunables.items():
        if tunable_role(name) == "stages":
            return [int(v) for v in values]
    return None


def default_pipeline_configs(kernel_path: str | Path,
                             meta: Optional[tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]] = None
                             ) -> list[dict[str, Any]]:
    """Configs ``kernelpilot pipeline`` shows by default: DEFAULT_CONFIG, then it with each other num_stages
    candidate, then with each other BLOCK_K candidate (the two knobs the analysis is about). ``meta``: the file's
    :func:`~kernelpilot.profile.static.read_kernel_meta`, already read (in an isolated worker).

    Raises:
        ContractError: the kernel file breaks the contract or has no tile tunables.
    """
    _, tunables, default, _ = meta or read_kernel_meta(kernel_path)
    names = tile_tunables(default)
    out = [dict(default)]
    for name in [n for n in tunables if tunable_role(n) == "stages"] + [names["K"]]:
        for value in tunables[name]:
            cfg = {**default, name: value}
            if cfg not in out:
                out.append(cfg)
    return out


def analyze_pipelines(kernel_path: str | Path, configs: Optional[list[dict[str, Any]]], shape: Optional[dict[str, Any]] = None,
                      arch: Optional[str] = None, max_workers: Optional[int] = None, timeout_s: Optional[float] = None
                      ) -> list[Union[PipelineReport, StaticFailure]]:
    """Compile several configs (in parallel) and analyse each; a config that fails to compile or load is returned
    as its :class:`StaticFailure`. ``configs`` None: :func:`default_pipeline_configs`. ``timeout_s``: run the kernel
    file only in isolated workers with this limit a config (see :func:`kernelpilot.profile.static.inspect_configs`);
    a config whose worker exits, crashes or hangs is a ``stage="worker"`` failure.

    Raises:
        ContractError: bad kernel file, config, shape or arch, or no tile tunables.
        KernelFailed: with ``timeout_s``, importing the kernel file exited, crashed, hung or raised.
    """
    if timeout_s is None:
        meta = read_kernel_meta(kernel_path)
        tile_tunables({**meta[2]})
        results = inspect_configs(kernel_path, configs or default_pipeline_configs(kernel_path, meta), shape=shape,
                                  arch=arch, max_workers=max_workers, keep_sass=True)
    else:
        with isolated_workers(kernel_path, max_workers, timeout_s) as (iso, meta):
            tile_tunables({**meta[2]})
            tasks = config_tasks(kernel_path, configs or default_pipeline_configs(kernel_path, meta), shape, arch,
                                 keep_sass=True, meta=meta)
            results = run_isolated_tasks(iso, tasks)
    candidates = _stage_candidates(meta[1])
    return [pipeline_from_static(r, candidates) if isinstance(r, StaticReport) else r for r in results]


def analyze_pipeline(kernel_path: str | Path, config: Optional[dict[str, Any]] = None,
                     shape: Optional[dict[str, Any]] = None, arch: Optional[str] = None,
                     timeout_s: Optional[float] = None) -> PipelineReport:
    """Software-pipelining analysis of one config: ratio, shared memory per stage and for S stages (model vs
    compiled), the largest S under the per-block limit, the occupancy cliff, a num_stages recommendation and the SASS
    main-loop check.

    Args:
        kernel_path: a tiled tl.dot kernel file (BLOCK_M, BLOCK_N, BLOCK_K tunables).
        config: tunables to override (the rest from DEFAULT_CONFIG).
        shape: overrides of SHAPE (the compile specializes on it).
        arch: target (``"sm_90"``); None: the GPU here, else sm_90.

    Raises:
        ContractError: bad kernel file, config, shape or arch; no tile tunables; or run_kernel rejected the config.
        KernelRunError: the config did not compile, or cannot load on the target (e.g. too much shared memory).
        KernelFailed: with ``timeout_s`` (an isolated worker, see :func:`analyze_pipelines`), the kernel file
            exited, crashed, hung or raised.
    """
    if arch is not None:
        parse_arch(arch)
    result = analyze_pipelines(kernel_path, [config or {}], shape=shape, arch=arch, timeout_s=timeout_s)[0]
    if isinstance(result, StaticFailure):
        raise_static_failure(result, f"{Path(result.kernel_file).name} {result.config}")
    return result
