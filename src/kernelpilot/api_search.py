"""The search half of kernelpilot's Python API: ``tune`` and the evaluation cache (``cache list|show|clear``).

Re-exported by :mod:`kernelpilot.api`; each function is a thin call to its implementation in :mod:`kernelpilot.app`
or :mod:`kernelpilot.search`, imported when called (importing the API stays cheap).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from kernelpilot.app.tune import TuneResult

__all__ = ["tune", "tune_workload", "cache_list", "cache_show", "cache_clear", "PRUNE_MODES"]

#: ``kernelpilot tune --prune`` word -> the ``prune`` argument of :func:`kernelpilot.app.tune.tune`.
PRUNE_MODES: dict[str, bool | str] = {"drop": True, "report": "report", "off": False}


def tune(kernel: str | Path | None = None, *, resume: str | Path | None = None, strategy: str = "auto", budget_evals: int | None = None,
         budget_s: float | None = None, shape: dict[str, Any] | None = None, seed: int = 0,
         ref: str | Path | None = None, gpu: str | None = None, prune: bool | str = True,
         constraints: list[str] | None = None, max_spills: int | None = None, min_occupancy_pct: float | None = None,
         timeout_s: float | None = None, ab_samples: int = 30, race: bool = True, replay: str | Path | None = None,
         use_cache: bool = True, ray_address: str | None = None, out: str | Path | None = None,
         log: Callable[[str], None] | None = None, **options: Any) -> "TuneResult":
    """Search the kernel's configs: compile-ahead pruning, isolated workers, the evaluation cache, A/B decisions
    (``kernelpilot tune``; :func:`kernelpilot.app.tune.tune`).

    Args:
        kernel: the kernel file (TUNABLES, optional CONSTRAINTS, or a ``@triton.autotune`` kernel).
        strategy: ``guided``, ``exhaustive``, ``random``, ``local`` or ``bayes``; seed: its seed.
        budget_evals: the most new evaluations; budget_s: the most wall seconds (None: no limit).
        shape: overrides of SHAPE (CPU_SHAPE under the interpreter). ref: a separate reference file.
        gpu: spec name for limits and the speed-of-light floor (default: the GPU present).
        prune: True (or ``"drop"``): skip configs that cannot win; ``"report"``: report them, run all; False
            (or ``"off"``): no compile-ahead.
        constraints: extra constraint expressions. max_spills: prune configs spilling more registers (count);
            min_occupancy_pct: prune below this theoretical occupancy (%).
        timeout_s: seconds one config may take in its worker (a hang becomes ``timeout``; default 120, or the
            resumed search's own).
        ab_samples: interleaved samples per side per decision. race: stop clearly slower candidates early.
        replay: answer from this cache file or prefix (no GPU). use_cache: read and append the cache.
        ray_address: evaluate on this Ray cluster. out: folder for ``tune.json`` and ``tune.md``.
        log: progress callback, one line per call; an evaluation's line is a
            :class:`kernelpilot.progress.ProgressLine` (``.step``: done, total, best_ns, eta_s). options: the other keywords of the implementation
            (``devices``, ``cache_root``, ``start``).
        resume: a folder of an earlier ``tune --out`` search to continue (then ``kernel`` is None; only
            ``timeout_s``, ``budget_evals`` and ``budget_s`` given here change it; :func:`kernelpilot.app.tune.resume_tune`).

    Returns:
        A :class:`kernelpilot.app.tune.TuneResult` (``best`` None when no config ran correctly).

    Raises:
        OptionError: a budget, limit or count out of range; a kernel given with ``resume``, or neither.
        SearchError: unknown strategy or prune mode, bad space or constraints, a cache of another kernel version.
        ContractError: the kernel file breaks the contract. SpecError: unknown ``gpu``.
        RunFolderError: ``out`` not empty, or ``resume`` not a tune folder. Interrupted: SIGINT/SIGTERM stopped it.
    """
    from kernelpilot.app.tune import resume_tune
    from kernelpilot.app.tune import tune as _tune
    from kernelpilot.errors import OptionError

    if resume is not None:
        if kernel is not None:
            raise OptionError("--resume continues a search with the kernel and options it started with; a KERNEL was "
                              "given too", "give only --resume DIR (and, to change them, --timeout-s, --budget-evals, "
                              "--budget-s)")
        return resume_tune(resume, timeout_s=timeout_s, budget_evals=budget_evals, budget_s=budget_s, log=log)
    if kernel is None:
        raise OptionError("no kernel file given", "kernelpilot tune KERNEL ... (or --resume DIR)")

    if max_spills is not None:
        options["max_spills"] = max_spills
    return _tune(kernel, strategy=strategy, budget_evals=budget_evals, budget_s=budget_s, shape=shape, seed=seed,
                 ref=ref, gpu=gpu, prune=PRUNE_MODES.get(prune, prune) if isinstance(prune, str) else prune,
                 constraints=constraints, min_occupancy_pct=min_occupancy_pct,
                 timeout_s=timeout_s if timeout_s is not None else 120.0, ab_samples=ab_samples, race=race,
                 replay=replay, use_cache=use_cache,
                 ray_address=ray_address, out=out, log=log, **options)


def tune_workload(kernel: str | Path, *, out: str | Path, workload: str | Path | None = None,
                  ranges: list[str] | None = None, points: str = "pow2-mid", keys: list[str] | None = None,
                  rule: str = "pow2", strategy: str = "auto", budget_s: float | None = None,
                  budget_evals: int | None = None, top_k: int = 2, store: bool | str | Path = True,
                  log: Callable[[str], None] | None = None, **tune_options: Any) -> Any:
    """Tune a kernel for the shapes it really sees (``kernelpilot tune --workload``; issue 26): buckets, a search per
    bucket warm-started from its neighbour, every bucket's candidates checked at every workload shape, and a
    dispatch table (:func:`kernelpilot.app.workload_run.tune_workload` says how).

    Args:
        kernel: the kernel file. out: the run folder (new or empty).
        workload: a workload JSON file ``[{"shape": {"M": 512}, "weight": 3}, ...]`` (missing keys from the kernel's
            SHAPE, or CPU_SHAPE under the interpreter); ranges: instead, ``["M=1:16384"]`` expanded by ``points``
            (:func:`kernelpilot.workload.workload_from_ranges`: ``pow2-mid``, ``pow2`` or ``all``), weight 1 each.
        keys / rule / strategy / budget_s / budget_evals / top_k / store / log / tune_options: as
            :func:`kernelpilot.app.workload_run.tune_workload`.

    Returns:
        A :class:`kernelpilot.app.workload_run.WorkloadResult`.

    Raises:
        OptionError: neither or both of ``workload`` and ``ranges``. WorkloadError: a bad workload file or range.
        Everything :func:`tune` raises.
    """
    from kernelpilot.app.context import detect_device
    from kernelpilot.app.workload_run import tune_workload as _run
    from kernelpilot.errors import OptionError
    from kernelpilot.kernels.contract import load_kernel, resolve_shape
    from kernelpilot.workload import load_workload, workload_from_ranges

    if (workload is None) == (not ranges):
        raise OptionError("give a workload file or ranges, one of the two",
                          "--workload FILE ([{\"shape\": {...}, \"weight\": w}, ...]) or --workload-range M=1:16384")
    if isinstance(tune_options.get("prune"), str):
        tune_options["prune"] = PRUNE_MODES.get(tune_options["prune"], tune_options["prune"])
    if tune_options.get("timeout_s") is None:
        tune_options.pop("timeout_s", None)
    interpreted = tune_options.get("replay") is None and detect_device() == "cpu"
    base = resolve_shape(load_kernel(kernel, tune_options.get("ref"), interpreted=interpreted))
    wl = load_workload(workload, base) if workload is not None else workload_from_ranges(ranges, base, points=points)
    return _run(kernel, wl, out=out, keys=keys, rule=rule, strategy=strategy, budget_s=budget_s,
                budget_evals=budget_evals, top_k=top_k, store=store, log=log, **tune_options)


def cache_list(root: str | Path | None = None) -> dict[str, Any]:
    """Every evaluation-cache file in ``root`` (default ``$KERNELPILOT_CACHE`` or ``~/.kernelpilot/cache``)
    (``kernelpilot cache list``).

    Returns:
        ``{"caches": [CacheSummary, ...], "skipped": [warning, ...]}``: the readable files sorted by file name
        (kernel, GPU, shape, configs, ok, best time in ns); a file that cannot be read or has no valid header is
        skipped, with a warning naming it.

    Raises:
        OSError: the folder cannot be read.
    """
    from kernelpilot.search.cache_admin import survey_caches

    caches, skipped = survey_caches(root)
    return {"caches": caches, "skipped": skipped}


def cache_show(which: str | Path, root: str | Path | None = None) -> dict[str, Any]:
    """One cache file's summary and records (``kernelpilot cache show``).

    Args:
        which: a cache file, or a prefix of a cache file's name or of its context key. root: the cache folder.

    Returns:
        ``{"summary": CacheSummary, "evaluations": [Evaluation, ...]}`` (the last record of each config).

    Raises:
        SearchError: no file or several files match ``which``. OSError: the file cannot be read.
    """
    from kernelpilot.search.cache_admin import show_cache

    summary, evaluations = show_cache(which, root=root)
    return {"summary": summary, "evaluations": evaluations}


def cache_clear(which: str | Path | None = None, root: str | Path | None = None) -> dict[str, list[str]]:
    """Delete one cache file (``which``: file or prefix) or every cache file in ``root`` (``kernelpilot cache
    clear``).

    Returns:
        ``{"deleted": [path, ...]}`` (empty when nothing was deleted).

    Raises:
        SearchError: ``which`` matches no file or several. OSError: a file cannot be deleted.
    """
    from kernelpilot.search.cache_admin import clear_cache

    return {"deleted": [str(p) for p in clear_cache(which, root=root)]}
