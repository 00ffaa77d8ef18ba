"""Software-pipelining (multi-buffering) analysis for tiled ``tl.dot`` kernels (docs/measuring.md, "Software
pipelining", from the pipeline seed; issue 3 item 5).

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
  blocks per SM drop (the occupancy cliff) by :func:`~kernelpilot.backends.binary.occupancy.theoretical_occupancy` with the
  compiled registers/thread (registers are assumed not to change with S).
- the rule (docs/measuring.md): ratio < 5 -> async copies / more ``num_stages``; 5–20 -> measure both; > 20 -> pipelining
  gains little. Never past the occupancy cliff unless a measurement says it is faster.
- a SASS check of the main loop (the body of the innermost backward branch that holds MMAs): async global->shared
  copies (LDGSTS, or UTMALDG/UBLKCP for TMA) and MMAs (HGMMA, HMMA) in it, the barriers (BAR) and waits
  (``DEPBAR.LE SB0, n`` for cp.async groups, ``WARPGROUP.DEPBAR.LE gsb0, n`` for wgmma groups) around them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import BaseModel, Field

from kernelpilot.errors import ContractError
from kernelpilot.backends.binary.occupancy import ARCH_LIMITS, limits_for
from kernelpilot.profile.pipeline_math import (  # re-exported: the arithmetic keeps its old import path
    RATIO_HIGH,
    RATIO_LOW,
    StageRow,
    classify_ratio,
    compute_load_ratio,
    occupancy_cliffs,
    recommend,
    stage_bytes,
    stage_sweep,
)
from kernelpilot.profile.sass_loop import MainLoopCheck, check_main_loop, find_main_loop  # re-exported
from kernelpilot.profile.static import (
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

__all__ = [  # the pipeline_math and sass_loop names are re-exported: their old import path keeps working
    "PipelineReport", "analyze_pipeline", "analyze_pipelines", "default_pipeline_configs", "pipeline_from_static",
    "tile_tunables", "RATIO_LOW", "RATIO_HIGH", "StageRow", "classify_ratio", "compute_load_ratio",
    "occupancy_cliffs", "recommend", "stage_bytes", "stage_sweep", "MainLoopCheck", "check_main_loop",
    "find_main_loop",
]

_TILE_AXIS = re.compile(r"(?:^|_)([MNK])$")


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
        rule: which band of the software-pipelining rule applies.
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


def pipeline_from_static(report: StaticReport, candidates: Optional[list[int]] = None, *,
                         tile: Optional[tuple[dict[str, str], tuple[int, int, int]]] = None) -> PipelineReport:
    """The pipelining analysis of an already compiled config (its :class:`StaticReport`, with SASS kept for the loop
    check).

    ``tile``: (names, (BM, BN, BK)) given by the caller (a CUDA C++ kernel's ``--tile`` or ``TILE``) instead of the
    config's BLOCK_M/BLOCK_N/BLOCK_K tunables; its SASS loop check then also counts CUDA-core compute
    (:func:`check_main_loop` ``scalar_fallback``) in the report's own function.

    Raises:
        ContractError: the config has no BLOCK_M/BLOCK_N/BLOCK_K tunables (and no ``tile``), or no tensor inputs.
        ValueError: the arch has no known occupancy limits.
    """
    if tile is not None:
        names, (bm, bn, bk) = tile
    else:
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
                 f"unchanged at other S; compiled by " + (f"Triton {report.triton_version}" if tile is None
                                                          else "nvcc (see the inspect notes)"))
    if tile is None:
        main_loop = check_main_loop(parse_sass(report.sass)) if report.sass else None
    else:
        main_loop = check_main_loop(parse_sass(report.sass, report.kernel_name) or parse_sass(report.sass),
                                    scalar_fallback=True) if report.sass else None
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
