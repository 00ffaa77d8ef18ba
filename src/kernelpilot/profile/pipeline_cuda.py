"""``kernelpilot pipeline KERNEL.cu``: the software-pipelining method on a CUDA C++ tiled K loop (docs/cuda.md,
"pipeline"), from the binary nvcc built for the target, without a GPU.

Per config: the tile (``--tile BM,BN,BK``, else the sidecar's ``TILE``: three tunable names or numbers, else the
tunables BM/BN/BK or BLOCK_M/BLOCK_N/BLOCK_K), the operands' element size (the largest ``const`` buffer of
``solve``), and then the Triton analysis itself (:func:`kernelpilot.profile.pipeline.pipeline_from_static`): the
compute/load ratio ``2·BM·BN·BK / ((BM·BK + BK·BN)·b)`` and its band, shared memory per stage and the stage sweep
against the per-block limit and the occupancy cliff (:mod:`kernelpilot.backends.binary.occupancy`, limits cited there), and
the SASS main-loop check with CUDA-core compute counted (:func:`kernelpilot.profile.sass_loop.check_main_loop`).
Added here: the variant the ratio implies for CUDA C++ (< 5: cp.async; 5–20: try both; > 20: little to gain; on
sm_90 also TMA), single- and double-buffer shared memory against the 48 KB static limit, the per-block opt-in limit
and the per-SM capacity, zero spills, and the compute count of the loop against the single-buffered variant of
the same file (the smallest value of a stages tunable: ``DOUBLE_BUFFER``, ``STAGES``, ``NUM_STAGES``...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.errors import ContractError
from kernelpilot.target import Target

__all__ = ["STATIC_SHARED_LIMIT_BYTES", "cuda_pipelines", "stage_tunable", "tile_of"]

#: Statically declared ``__shared__`` memory per block is limited to 48 KB; more needs dynamic shared memory and
#: ``cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, ...)`` (CUDA C++ Programming Guide,
#: "Shared Memory" of compute capability 8.x/9.x: "static allocations ... limited to 48 KB").
STATIC_SHARED_LIMIT_BYTES = 48 * 1024

_STAGE_NAMES = ("DOUBLE_BUFFER", "STAGES", "NUM_STAGES", "PIPELINE_STAGES", "N_STAGES", "BUFFERS")


def stage_tunable(tunables: dict[str, list[Any]]) -> str | None:
    """The tunable that sets the pipeline depth (``DOUBLE_BUFFER``, ``STAGES``, ...), or None."""
    return next((n for n in _STAGE_NAMES if n in tunables), None)


def tile_of(config: dict[str, Any], tile: Any, path: str) -> tuple[dict[str, str], tuple[int, int, int]]:
    """(names, (BM, BN, BK)) of a config: ``tile`` as three numbers or three tunable names, else the config's
    BM/BN/BK or BLOCK_M/BLOCK_N/BLOCK_K.

    Raises:
        ContractError: no tile can be read (the hint says to pass ``--tile BM,BN,BK`` or define ``TILE``).
    """
    def value(v: Any) -> int:
        return int(config[v]) if isinstance(v, str) else int(v)

    if tile is not None:
        if len(tile) != 3:
            raise ContractError(f"{path}: the tile {tile!r} is not three values", "--tile 128,128,32")
        try:
            return ({a: str(v) for a, v in zip("MNK", tile)}, (value(tile[0]), value(tile[1]), value(tile[2])))
        except (KeyError, ValueError) as exc:
            raise ContractError(f"{path}: the tile {tile!r} names no tunable of the config {config} ({exc})",
                                "TILE = ('BM', 'BN', 'BK') naming tunables, or numbers") from None
    for names in (("BM", "BN", "BK"), ("BLOCK_M", "BLOCK_N", "BLOCK_K"), ("TILE_M", "TILE_N", "TILE_K")):
        if all(n in config for n in names):
            return dict(zip("MNK", names)), tuple(int(config[n]) for n in names)  # type: ignore[return-value]
    raise ContractError(f"{path}: no tile (BM, BN, BK) among the tunables {sorted(config)}",
                        "pass --tile BM,BN,BK (numbers), or define TILE = ('BM', 'BN', 'BK') in the sidecar")


def _extras(report: Any, single: Any, cc: tuple[int, int]) -> list[str]:
    """The CUDA C++ lines of one config's report (see the module docstring)."""
    from kernelpilot.backends.binary.occupancy import limits_for

    lim = limits_for(cc)
    lines = []
    ratio = report.compute_load_ratio
    variant = ("cp.async (LDGSTS) double buffering: loads dominate the tile" if ratio < 5 else
               "try both a cp.async double buffer and the plain loop, and measure" if ratio <= 20 else
               "little to gain from pipelining at this ratio; larger gains come from the tile itself")
    if cc[0] >= 9 and ratio <= 20:
        variant += "; on sm_90 also TMA (cp.async.bulk.tensor, UTMALDG) with an mbarrier pipeline"
    lines.append(f"variant implied by the ratio {ratio:.3g} FLOP/B: {variant}")
    per = report.stage_bytes
    for s, word in ((1, "single buffer"), (2, "double buffer")):
        total = s * per
        fits = [f"{'≤' if total <= STATIC_SHARED_LIMIT_BYTES else '>'} 48 KB static",
                f"{'≤' if total <= lim.shared_mem_per_block_max_bytes else '>'} "
                f"{lim.shared_mem_per_block_max_bytes} B per block (opt-in)",
                f"{max(0, lim.shared_mem_per_sm_max_bytes // (total + lim.shared_mem_reserved_per_block_bytes))} "
                f"block(s) per SM by shared memory ({lim.shared_mem_per_sm_max_bytes} B/SM)"]
        lines.append(f"{word}: {total} B of tiles ({', '.join(fits)})")
    ml = report.main_loop
    if ml is not None and ml.found:
        count = sum(ml.mma.values())
        if single is not None and single.main_loop is not None and single.main_loop.found:
            base = sum(single.main_loop.mma.values())
            same = "unchanged" if base == count else (
                f"{count / base:g}x (the loop body holds {count // base} K tiles)" if base and count % base == 0
                else "CHANGED")
            lines.append(f"compute per loop iteration: {count} ({', '.join(f'{k} {v}' for k, v in ml.mma.items())}) vs "
                         f"{base} in the single-buffered variant {single.config}: {same} by pipelining")
        else:
            lines.append(f"compute per loop iteration: {count} ({', '.join(f'{k} {v}' for k, v in ml.mma.items())})")
    return lines


def cuda_pipelines(kernel: str | Path, configs: list[dict[str, Any]] | None, *, shape: dict[str, Any] | None = None,
                   arch: str | None = None, tile: tuple[Any, Any, Any] | None = None, timeout_s: float | None = None,
                   max_workers: int | None = None) -> list[Any]:
    """The pipelining analysis of a ``.cu`` file's configs (default: DEFAULT_CONFIG and, with a stages tunable,
    its other values), each a :class:`~kernelpilot.profile.pipeline.PipelineReport` whose ``notes`` end with the
    CUDA C++ lines of the module docstring, or the config's ``StaticFailure``. The sidecar and nvcc run only in
    isolated workers (``timeout_s`` a config, default 300 s).

    Raises:
        ContractError: bad kernel file, shape or arch; no tile (give ``tile``). KernelFailed: the sidecar exited,
            crashed or hung while imported.
    """
    from kernelpilot.backends.binary.arch import default_arch, parse_arch
    from kernelpilot.profile.pipeline import pipeline_from_static
    from kernelpilot.profile.static import StaticReport, config_tasks, isolated_workers, run_isolated_tasks

    arch = arch or default_arch()
    cc = parse_arch(arch)
    with isolated_workers(kernel, max_workers, timeout_s or 300.0) as (iso, meta):
        path, tunables, default, _ = meta
        side_tile = iso.call("kernelpilot.profile.pipeline_cuda:_tile_in_worker")
        stage = stage_tunable(tunables)
        wanted = [dict(c) for c in configs] if configs else [dict(default)] + (
            [{**default, stage: v} for v in tunables[stage] if v != default[stage]] if stage else [])
        full = [{**default, **c} for c in wanted]
        singles = []
        if stage:
            low = min(tunables[stage])
            singles = [{**c, stage: low} for c in full if c[stage] != low and {**c, stage: low} not in full]
        tasks = config_tasks(path, full + singles, shape, arch, keep_sass=True, meta=meta)
        results = run_isolated_tasks(iso, tasks)
    by_key = {tuple(sorted(t["config"].items())): r for t, r in zip(tasks, results)}
    out: list[Any] = []
    for task, res in zip(tasks[:len(full)], results[:len(full)]):
        if not isinstance(res, StaticReport):
            out.append(res)
            continue
        names, dims = tile_of(res.config, tile if tile is not None else side_tile, path)
        rep = pipeline_from_static(res, None, tile=(names, dims))
        single = None
        if stage:
            low_res = by_key.get(tuple(sorted({**res.config, stage: min(tunables[stage])}.items())))
            if isinstance(low_res, StaticReport):
                single = rep if low_res is res else pipeline_from_static(low_res, None, tile=tile_of(
                    low_res.config, tile if tile is not None else side_tile, path))
        spills = ("zero spills" if res.n_spills == 0 else
                  f"SPILLS: {res.local_mem_bytes_per_thread} B of local memory per thread "
                  f"({res.spill_stores_bytes} B stores, {res.spill_loads_bytes} B loads)")
        rep.notes += [spills, *_extras(rep, single, cc)]
        out.append(rep)
    return out


def _tile_in_worker(kf: Any, opts: Any, target: Target) -> Any:
    """The sidecar's ``TILE`` (three names or numbers), or None."""
    tile = getattr(kf.module, "TILE", None)
    return tuple(tile) if isinstance(tile, (list, tuple)) else None
