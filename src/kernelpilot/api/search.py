"""The search half of kernelpilot's Python API: ``tune`` and the evaluation cache (``cache list|show|clear``).

Re-exported by :mod:`kernelpilot.api`; each function is a thin call to its implementation in :mod:`kernelpilot.app`
or :mod:`kernelpilot.search`, imported when called (importing the API stays cheap).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kernelpilot.options import PRUNE_MODES, TuneOptions  # PRUNE_MODES: the ``--prune`` words, kept importable here

if TYPE_CHECKING:
    from kernelpilot.app.tune import TuneResult

__all__ = ["tune", "tune_workload", "cache_list", "cache_show", "cache_clear", "PRUNE_MODES", "TuneOptions"]


def tune(kernel: str | Path | None = None, options: TuneOptions | None = None, *,
         resume: str | Path | None = None, out: str | Path | None = None,
         log: Callable[[str], None] | None = None, **keywords: Any) -> "TuneResult":
    """Search the kernel's configs: compile-ahead pruning, isolated workers, the evaluation cache, A/B decisions
    (``kernelpilot tune``; :func:`kernelpilot.app.tune.tune`).

    Args:
        kernel: the kernel file (TUNABLES, optional CONSTRAINTS, or a ``@triton.autotune`` kernel).
        options: the search's :class:`kernelpilot.options.TuneOptions` (strategy, seed, budgets, shape, ref, gpu,
            prune, constraints, max_spills, min_occupancy_pct, timeout_s (default 120), ab_samples, race, replay,
            use_cache, ray_address, devices, cache_root, start; each documented there, with its unit).
        keywords: instead of ``options``, its fields as keywords (``api.tune(k, strategy="exhaustive",
            budget_evals=8)``; a None value means "not given", ``prune`` may be a word: ``drop``, ``report``,
            ``off``); the two together are an error.
        out: the search's folder: ``tune-run.json`` (the options' JSON), ``evaluations.jsonl``, then ``tune.json``
            and ``tune.md``. log: progress callback, one line per call; an evaluation's line is a
            :class:`kernelpilot.progress.ProgressLine` (``.step``: done, total, best_ns, eta_s).
        resume: a folder of an earlier ``tune --out`` search to continue (then ``kernel`` is None); its stored
            options are read back whole, and only ``timeout_s``, ``budget_evals`` and ``budget_s`` given here
            (explicitly: the fields set in ``options``, or keywords) change them
            (:func:`kernelpilot.app.tune.resume_tune`).

    Returns:
        A :class:`kernelpilot.app.tune.TuneResult` (``best`` None when no config ran correctly).

    Raises:
        OptionError: a budget, limit or count out of range, an unknown option or one of the wrong type; a kernel
            given with ``resume``, or neither.
        SearchError: unknown strategy or prune mode, bad space or constraints, a cache of another kernel version.
        ContractError: the kernel file breaks the contract. SpecError: unknown ``gpu``.
        RunFolderError: ``out`` not empty, or ``resume`` not a tune folder (or its stored options unreadable).
        Interrupted: SIGINT/SIGTERM stopped it.
    """
    from kernelpilot.app.tune import RESUME_OPTIONS, resume_tune
    from kernelpilot.app.tune import tune as _tune
    from kernelpilot.errors import OptionError
    from kernelpilot.options import build_options

    if options is not None and keywords:
        raise OptionError(f"api.tune got options and keywords ({', '.join(sorted(keywords))})",
                          "give one TuneOptions, or the options as keywords")
    if resume is not None:
        if kernel is not None:
            raise OptionError("--resume continues a search with the kernel and options it started with; a KERNEL was "
                              "given too", "give only --resume DIR (and, to change them, --timeout-s, --budget-evals, "
                              "--budget-s)")
        given = ({k: getattr(options, k) for k in RESUME_OPTIONS if k in options.model_fields_set}
                 if options is not None else {k: keywords.get(k) for k in RESUME_OPTIONS})
        return resume_tune(resume, **given, log=log)
    if kernel is None:
        raise OptionError("no kernel file given", "kernelpilot tune KERNEL ... (or --resume DIR)")
    return _tune(kernel, options if options is not None else build_options(TuneOptions, **keywords), out=out, log=log)


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
    from kernelpilot.app.context import detect_target
    from kernelpilot.app.workload_run import tune_workload as _run
    from kernelpilot.errors import OptionError
    from kernelpilot.kernels.contract import load_kernel, resolve_shape
    from kernelpilot.options import build_options
    from kernelpilot.workload import load_workload, workload_from_ranges

    if (workload is None) == (not ranges):
        raise OptionError("give a workload file or ranges, one of the two",
                          "--workload FILE ([{\"shape\": {...}, \"weight\": w}, ...]) or --workload-range M=1:16384")
    options = build_options(TuneOptions, **tune_options)  # None values: the defaults; prune words read
    interpreted = options.replay is None and detect_target().interpreted
    base = resolve_shape(load_kernel(kernel, options.ref, interpreted=interpreted))
    wl = load_workload(workload, base) if workload is not None else workload_from_ranges(ranges, base, points=points)
    return _run(kernel, wl, out=out, keys=keys, rule=rule, strategy=strategy, budget_s=budget_s,
                budget_evals=budget_evals, top_k=top_k, store=store, log=log, options=options)


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
