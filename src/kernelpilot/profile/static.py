"""Static inspection: compile a kernel file's kernel for a target GPU without a GPU, and report what the compiler
knows (docs/measuring.md, "Native code and static facts" and "Occupancy") — the public API.

The work is split by job; every name below stays importable from here:

- :mod:`kernelpilot.backends.binary.models`: the records (:class:`StaticReport`, :class:`StaticFailure`,
  :class:`StaticSpace`);
- :mod:`kernelpilot.backends.binary.arch`: arch names, the default target, :func:`max_threads_per_block`;
- :mod:`kernelpilot.backends.binary.sass`: SASS parsing and the instruction mix;
- :mod:`kernelpilot.backends.binary.tools`: ``cuobjdump`` / ``ptxas`` and their output;
- :mod:`kernelpilot.backends.triton.compile`: capturing a launch, compiling it with Triton for the target and
  reading the binary, one config at a time (a worker's job);
- here: building the tasks of configs, running them (in this process, a process pool, or isolated workers that
  survive a kernel that exits, crashes or hangs: :mod:`kernelpilot.profile.static_isolated`) and the results.

Compiles run in this process when Triton here is not in interpreter mode, else in child processes started with
``spawn`` and ``TRITON_INTERPRET`` removed before Triton is imported there; :func:`inspect_space` spreads the
configs over CPU cores with a ``ProcessPoolExecutor``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from kernelpilot.backends.binary import tools
from kernelpilot.backends.binary.arch import (  # re-exported: their old import path keeps working
    DEFAULT_CPU_ARCH,
    arch_name,
    default_arch,
    max_threads_per_block,
    parse_arch,
)
from kernelpilot.backends.binary.tools import parse_ptxas_spills, parse_resource_usage, sass_cache_dir  # re-exported
from kernelpilot.backends.binary.sass import (  # re-exported
    ASYNC_COPY_OPCODES,
    INSTRUCTION_GROUPS,
    MMA_OPCODES,
    SassInstruction,
    access_width_bytes,
    instruction_mix,
    parse_sass,
    width_histogram,
)
from kernelpilot.backends.binary.models import StaticFailure, StaticReport, StaticResult, StaticSpace  # re-exported
from kernelpilot.backends.binary.models import dump_result
from kernelpilot.backends.binary.models import load_result as _load
from kernelpilot.backends.compile_env import compile_mode_unavailable as _triton_tainted
from kernelpilot.backends.compile_env import compile_worker_init as _worker_init
from kernelpilot.childproc import usable_cpus
from kernelpilot.errors import ContractError, KernelpilotError

_tool = tools.find_tool  # re-exported: tests/test_occupancy_driver.py finds cuobjdump through it

__all__ = [
    "ASYNC_COPY_OPCODES", "DEFAULT_CPU_ARCH", "INSTRUCTION_GROUPS", "MMA_OPCODES", "SassInstruction", "StaticFailure",
    "StaticReport", "StaticResult", "StaticSpace", "access_width_bytes", "arch_name", "compile_task", "config_tasks",
    "default_arch",
    "inspect_config", "inspect_configs", "inspect_space", "instruction_mix", "isolated_workers", "iter_tasks",
    "max_threads_per_block", "parse_arch", "parse_ptxas_spills", "parse_resource_usage", "parse_sass",
    "quiet_compiler_output",
    "any_task", "raise_static_failure", "read_kernel_meta", "run_isolated_tasks", "run_tasks", "sass_cache_dir",
    "unexpected_failure", "width_histogram",
]


def iter_tasks(tasks: list[dict[str, Any]], max_workers: Optional[int] = None,
               in_process: Optional[bool] = None) -> Iterator[tuple[int, StaticResult]]:
    """Inspect prepared tasks and yield ``(index in tasks, result)`` as each finishes (completion order).

    Tasks are handed to the workers in list order, so a caller can put the slow ones first. Closing the generator
    early (``break``, a deadline) cancels the tasks not yet started and waits for the running ones.

    Args:
        tasks: one dict per config (see :func:`run_tasks`).
        max_workers: processes for a pool (default: CPU cores, at most the task count).
        in_process: see :func:`run_tasks`.

    Yields:
        ``(i, StaticReport | StaticFailure)`` for ``tasks[i]``.

    Raises:
        KernelRunError: a worker process died (see :func:`run_tasks`).
    """
    if not tasks:
        return
    if in_process is None:
        in_process = len(tasks) == 1 and not _triton_tainted()
    if in_process:
        for i, t in enumerate(tasks):
            yield i, _load(any_task(t))
        return
    from concurrent.futures.process import BrokenProcessPool

    from kernelpilot.errors import KernelRunError

    from kernelpilot.procguard import quiet_resource_tracker

    quiet_resource_tracker()  # a killed parent leaves the pool's semaphores: no warning from the tracker then
    workers = max(1, min(max_workers or usable_cpus(), len(tasks)))
    ctx = multiprocessing.get_context("spawn")
    # the pool's processes die with this one (parent-death signal: iter_tasks shuts the pool down in the thread that
    # started it, so that thread outlives them) and stay quiet if orphaned
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                               initargs=(os.getpid(),))
    try:
        # the workers leave the interpreter in their initializer, before Triton loads: this process's environment is
        # left alone (other threads import Triton too)
        futures = {pool.submit(any_task, t): i for i, t in enumerate(tasks)}
        for future in as_completed(futures):
            yield futures[future], _load(future.result())
    except BrokenProcessPool as exc:
        raise KernelRunError(
            f"a static-inspection worker process died ({exc}): a compile crashed, ran out of memory, or the calling "
            f"script re-ran its top level in the worker",
            "scripts that call kernelpilot's Python API must guard their top level with "
            "`if __name__ == \"__main__\":` (workers start with multiprocessing's spawn); try --workers 1") from exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def compile_task(task: dict[str, Any], quiet: bool | None = None) -> StaticResult:
    """One task compiled by the kernel file's back end (:func:`kernelpilot.backends.backend_for`, which asks each
    back end in turn) with :meth:`~kernelpilot.backends.base.Backend.compile_for`; a file no back end reads is a
    ``load`` failure. An unexpected exception of the back end propagates (the callers record it). ``quiet``: what
    the compiler prints is dropped (:func:`quiet_compiler_output`; by default in a child process only)."""
    from kernelpilot.backends.base import BinaryReading
    from kernelpilot.backends.registry import backend_for

    try:
        backend = backend_for(task["kernel_path"])
    except KernelpilotError as exc:
        return StaticFailure(kernel_file=task["kernel_path"], config=dict(task["config"]), arch=task["arch"],
                             stage="load", error_type=type(exc).__name__, message=exc.message[:4000], hint=exc.hint)
    with quiet_compiler_output(quiet):
        return backend.compile_for(task["kernel_path"], dict(task["config"]), dict(task.get("shape") or {}),
                                   task["arch"], read=BinaryReading.of_task(task))


@contextlib.contextmanager
def quiet_compiler_output(quiet: bool | None = None) -> Iterator[None]:
    """Drop what a compile prints on ``sys.stdout`` (``quiet``; None: only in a child process, where nothing else
    of the command's writes to it). Triton prints the whole PTX of a kernel whose ``ptxas`` failed (2.2 MB for the
    three compiles a time limit stopped in session 15's sgemm lane, docs/device-runs/2026-11-28-s15); the error it
    raises names the failure and the ``ptxas`` command, which the compile's failure record keeps."""
    import io

    quiet = multiprocessing.parent_process() is not None if quiet is None else quiet
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        yield


def unexpected_failure(task: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """A dumped ``compile`` :class:`StaticFailure` for an exception a back end raised unexpectedly (the message
    ends with three frames of its traceback). Raises nothing."""
    import traceback

    return StaticFailure(kernel_file=task["kernel_path"], config=dict(task["config"]), arch=task["arch"],
                         stage="compile", error_type=type(exc).__name__,
                         message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"[:4000],
                         hint=exc.hint if isinstance(exc, KernelpilotError) else "").model_dump()


def any_task(task: dict[str, Any]) -> dict[str, Any]:
    """One task in this process or a pool worker (:func:`compile_task`), dumped (:func:`dump_result`): any
    exception but ``KeyboardInterrupt`` is recorded as a ``compile`` failure, so a pool never dies of a config.
    Returns a dumped StaticReport or StaticFailure; never raises for a config's own failure."""
    try:
        return dump_result(compile_task(task))
    except BaseException as exc:  # noqa: BLE001 - recorded, never raised, by contract
        if isinstance(exc, KeyboardInterrupt):
            raise
        return unexpected_failure(task, exc)


def run_tasks(tasks: list[dict[str, Any]], max_workers: Optional[int] = None,
              in_process: Optional[bool] = None, progress: Optional[Callable[[int, int], None]] = None
              ) -> list[StaticResult]:
    """Inspect prepared tasks, in order. A task is ``{"kernel_path", "config", "arch", "shape", "keep_sass",
    "save_dir", "spill_bytes"}``, optionally ``"sass": False`` to skip the disassembly (~0.75 s a config; the
    instruction mix is then empty).

    Args:
        tasks: one dict per config (see :func:`inspect_configs`, which builds them).
        max_workers: processes for a pool (default: CPU cores, at most the task count).
        in_process: True to compile here, False to use child processes; None picks here when Triton in this process
            is in compile mode and there is a single task, else children.
        progress: called as ``progress(done, total)`` after each config finishes.

    Returns:
        One :class:`StaticReport` or :class:`StaticFailure` per task.

    Raises:
        KernelRunError: a worker process died (crash, out of memory, or a caller script without a
            ``__main__`` guard, which spawn-started workers re-run).
    """
    results: list[Optional[StaticResult]] = [None] * len(tasks)
    for done, (i, result) in enumerate(iter_tasks(tasks, max_workers=max_workers, in_process=in_process), 1):
        results[i] = result
        if progress:
            progress(done, len(tasks))
    return results  # type: ignore[return-value]



# --------------------------------------------------------------------------------------------------------------------
# public API


def read_kernel_meta(kernel_path: str | Path) -> tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]:
    """(resolved path, TUNABLES, DEFAULT_CONFIG, SHAPE) of a kernel file, imported in this process's Triton mode.

    The file is imported under the interpreter when this process already runs Triton that way (or
    ``TRITON_INTERPRET`` is set), else in compile mode; only module-level constants are read.

    Raises:
        ContractError: the file breaks the kernel-file contract.
    """
    from kernelpilot.kernels.contract import load_kernel

    kf = load_kernel(kernel_path, interpreted=_triton_tainted())
    return str(kf.path), kf.tunables, kf.default_config, dict(kf.shape)


def _kernel_space(kf: Any) -> tuple[list[dict[str, Any]], int]:
    """(valid configs, size of the unconstrained TUNABLES product) of a loaded kernel file: the configs of
    :meth:`kernelpilot.search.space.SearchSpace.from_kernel` (TUNABLES filtered by the file's CONSTRAINTS; no device
    limits, so a constraint naming one is skipped), in ``itertools.product`` order of the file's tunables.

    Raises:
        SearchError: a CONSTRAINTS expression is malformed or names something unknown.
    """
    from kernelpilot.search.space import SearchSpace

    space = SearchSpace.from_kernel(kf)
    product = 1
    for values in space.tunables.values():
        product *= len(values)
    return space.configs(), product


def _read_kernel_space(kernel_path: str | Path) -> tuple[tuple[str, dict[str, list[Any]], dict[str, Any],
                                                              dict[str, Any]], list[dict[str, Any]], int]:
    """(:func:`read_kernel_meta`, :func:`_kernel_space`) of a kernel file imported once in this process."""
    from kernelpilot.kernels.contract import load_kernel

    kf = load_kernel(kernel_path, interpreted=_triton_tainted())
    return (str(kf.path), kf.tunables, kf.default_config, dict(kf.shape)), *_kernel_space(kf)


def _check_shape_keys(shape: Optional[dict[str, Any]], known: dict[str, Any], path: str) -> None:
    from kernelpilot.options import check_shape_values

    check_shape_values(shape, known, path)
    for key in shape or {}:
        if key not in known:
            raise ContractError(f"{path}: --shape sets `{key}`, which SHAPE does not have ({', '.join(sorted(known))})",
                                "use the names in the kernel file's SHAPE")


def inspect_configs(kernel_path: str | Path, configs: list[dict[str, Any]], shape: Optional[dict[str, Any]] = None,
                    arch: Optional[str] = None, max_workers: Optional[int] = None, *, keep_sass: bool = False,
                    save_dir: str | Path | None = None, in_process: Optional[bool] = None,
                    spill_bytes: bool = True, progress: Optional[Callable[[int, int], None]] = None,
                    timeout_s: Optional[float] = None) -> list[StaticResult]:
    """Compile several configs of one kernel file for ``arch`` (in parallel) and read their binaries.

    Args:
        kernel_path: the kernel ``.py`` file.
        configs: configs (partial ones are completed from DEFAULT_CONFIG and validated against TUNABLES).
        shape: overrides of ``SHAPE`` (the real GPU shape is the default, since the compile specializes on it).
        arch: target (``"sm_90"``); None: this machine's GPU, or :data:`DEFAULT_CPU_ARCH` without one.
        max_workers: processes (default: CPU cores).
        keep_sass: keep each report's SASS text in ``.sass`` (not serialized).
        save_dir: also write each config's ``.cubin``, ``.ptx`` and ``.sass`` there.
        in_process: see :func:`run_tasks`.
        spill_bytes: for configs with local memory, rerun ``ptxas -v`` on the PTX to split it into spill store and
            load bytes (costs one more ptxas run per spilling config).
        progress: called as ``progress(done, total)`` after each config.
        timeout_s: run every config in an isolated worker (:func:`isolated_workers`) that may take this many seconds
            a config; a config whose worker exits, crashes or hangs is a ``stage="worker"`` failure and the others
            go on. None: the process pool (or this process) as ``in_process`` says, without a timeout.

    Returns:
        One :class:`StaticReport` or :class:`StaticFailure` per config, in order; failures are recorded, not raised.

    Raises:
        ContractError: the kernel file breaks the contract, a config or shape names unknown tunables/dimensions, or
            the arch is not an arch name.
        KernelRunError: a worker process died (see :func:`run_tasks`; not with ``timeout_s``).
        KernelFailed: with ``timeout_s``, importing the kernel file exited, crashed, hung or raised.
    """
    if timeout_s is not None:
        with isolated_workers(kernel_path, max_workers, timeout_s) as (iso, meta):
            tasks = config_tasks(kernel_path, configs, shape, arch, keep_sass=keep_sass, save_dir=save_dir,
                                 spill_bytes=spill_bytes, meta=meta)
            return run_isolated_tasks(iso, tasks, progress)
    tasks = config_tasks(kernel_path, configs, shape, arch, keep_sass=keep_sass, save_dir=save_dir,
                         spill_bytes=spill_bytes)
    return run_tasks(tasks, max_workers=max_workers, in_process=in_process, progress=progress)


@contextlib.contextmanager
def isolated_workers(kernel_path: str | Path, max_workers: Optional[int], timeout_s: float
                     ) -> Iterator[tuple[Any, tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]]]:
    """Compile-mode isolated workers for ``kernel_path`` (:class:`~kernelpilot.search.isolated.IsolatedKernel`, up
    to ``max_workers``, default CPU cores; each leaves the interpreter before Triton loads) and the file's
    :func:`read_kernel_meta`, read in the first worker: this process never imports the kernel file.

    Raises:
        ContractError: the kernel file breaks the contract.
        KernelFailed: importing the kernel file exited, crashed, hung (over ``timeout_s``) or raised.
    """
    from kernelpilot.search.isolated import IsolatedKernel

    with IsolatedKernel(kernel_path, interpreted=False, timeout_s=timeout_s, device="cpu",
                        max_workers=max_workers or usable_cpus()) as iso:
        yield iso, iso.call("kernelpilot.profile.static_isolated:_meta_in_worker")


def run_isolated_tasks(iso: Any, tasks: list[dict[str, Any]], progress: Optional[Callable[[int, int], None]] = None
                       ) -> list[StaticResult]:
    """Inspect prepared tasks in the workers of :func:`isolated_workers`, in task order; a worker that exits,
    crashes or hangs on a config gives that config a ``stage="worker"`` :class:`StaticFailure` with ``failure`` set.
    ``progress(done, total)`` after each config. Raises nothing for a config's own failure."""
    def failed(task: dict[str, Any], exc: KernelpilotError) -> StaticResult:
        return StaticFailure(kernel_file=task["kernel_path"], config=dict(task["config"]), arch=task["arch"],
                             stage="worker", error_type=type(exc).__name__, message=exc.message[:4000],
                             hint=exc.hint, failure=getattr(exc, "failure", "runtime_error"))

    results: list[Optional[StaticResult]] = [None] * len(tasks)
    for k, (i, r) in enumerate(iso.map("kernelpilot.profile.static_isolated:_task_in_worker", tasks, failed), 1):
        results[i] = r if isinstance(r, (StaticReport, StaticFailure)) else _load(r)
        if progress:
            progress(k, len(tasks))
    return results  # type: ignore[return-value]


def raise_static_failure(result: StaticFailure, what: str) -> None:
    """Raise the error a failed single config stands for (``what`` names it in the message): KernelFailed (with the
    typed ``failure``) for a worker that exited, crashed or hung; ContractError for ``load``/``capture``;
    KernelRunError for ``compile``/``resources``.

    Raises:
        KernelpilotError: always.
    """
    from kernelpilot.errors import KernelFailed, KernelRunError

    message = f"{what}: {result.stage} failed: {result.error_type}: {result.message}"
    if result.stage == "worker":
        raise KernelFailed(message, result.hint, result.failure or "runtime_error")
    cls = ContractError if result.stage in ("load", "capture") else KernelRunError
    raise cls(message, result.hint)


def config_tasks(kernel_path: str | Path, configs: list[dict[str, Any]], shape: Optional[dict[str, Any]] = None,
                 arch: Optional[str] = None, *, keep_sass: bool = False, save_dir: str | Path | None = None,
                 spill_bytes: bool = True, sass: bool = True,
                 meta: Optional[tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]] = None
                 ) -> list[dict[str, Any]]:
    """The tasks :func:`run_tasks` / :func:`iter_tasks` take for ``configs`` (arguments as :func:`inspect_configs`),
    one per config in order, each config completed from DEFAULT_CONFIG and validated. ``sass=False`` skips the
    disassembly (``cuobjdump -sass``, ~0.75 s a config on a cold SASS cache): registers, spills, shared memory,
    max threads and occupancy are still read; the instruction mix and access widths stay empty. ``meta``: the
    kernel file's :func:`read_kernel_meta`, already read (in an isolated worker), so the file is not imported here.

    Raises:
        ContractError: as :func:`inspect_configs`.
    """
    arch = arch or default_arch()
    parse_arch(arch)
    path, tunables, default, base_shape = meta or read_kernel_meta(kernel_path)
    _check_shape_keys(shape, base_shape, path)
    from kernelpilot.kernels.contract import validate_config

    full = []
    for cfg in configs:
        merged = {**default, **cfg}
        validate_config(merged, tunables, path, what="--config")
        full.append(merged)
    return [{"kernel_path": path, "config": c, "arch": arch, "shape": dict(shape or {}), "keep_sass": keep_sass,
             "save_dir": str(save_dir) if save_dir else None, "spill_bytes": spill_bytes, "sass": sass} for c in full]


def inspect_config(kernel_path: str | Path, config: Optional[dict[str, Any]] = None,
                   shape: Optional[dict[str, Any]] = None, arch: Optional[str] = None, *, keep_sass: bool = False,
                   save_dir: str | Path | None = None, timeout_s: Optional[float] = None) -> StaticReport:
    """Compile one config for ``arch`` without a GPU and report registers, spills, shared memory, occupancy and the
    SASS instruction mix.

    Args:
        kernel_path: the kernel ``.py`` file.
        config: tunables to override (the rest from DEFAULT_CONFIG).
        shape: overrides of ``SHAPE``.
        arch: target such as ``"sm_90"``; None: the GPU here, else :data:`DEFAULT_CPU_ARCH`.
        keep_sass: keep the SASS text in the report's ``.sass``.
        save_dir: also write the cubin, PTX and SASS there.
        timeout_s: run it in an isolated worker with this limit (see :func:`inspect_configs`).

    Returns:
        The :class:`StaticReport`.

    Raises:
        ContractError: the file, config, shape or arch is wrong; or the config failed to capture (``run_kernel``
            raised) — the message carries the original error.
        KernelRunError: Triton or ptxas failed to compile it, or the compiled block cannot load on the target
            (``OutOfResources``: too much shared memory, or no block fits).
        KernelFailed: with ``timeout_s``, the kernel file exited, crashed, hung or raised in its worker.
    """
    result = inspect_configs(kernel_path, [config or {}], shape=shape, arch=arch, keep_sass=keep_sass,
                             save_dir=save_dir, timeout_s=timeout_s)[0]
    if isinstance(result, StaticFailure):
        raise_static_failure(result, f"{Path(result.kernel_file).name} {result.config} for {result.arch}")
    return result


def inspect_space(kernel_path: str | Path, shape: Optional[dict[str, Any]] = None, arch: Optional[str] = None,
                  max_workers: Optional[int] = None, limit: Optional[int] = None, seed: int = 0,
                  spill_bytes: bool = False, progress: Optional[Callable[[int, int], None]] = None,
                  timeout_s: Optional[float] = None) -> StaticSpace:
    """Inspect every valid config of the kernel's space (or a sample of ``limit`` of them) in parallel over CPU
    cores. The space is :meth:`kernelpilot.search.space.SearchSpace.from_kernel`'s: the TUNABLES product filtered by
    the file's CONSTRAINTS (a constraint naming a device limit is skipped: no device limits are known here).

    Args:
        kernel_path: the kernel ``.py`` file.
        shape: overrides of ``SHAPE``.
        arch: target (see :func:`inspect_config`).
        max_workers: processes (default: CPU cores).
        limit: inspect at most this many configs: DEFAULT_CONFIG plus a seeded random sample of the rest, kept in
            space order (without DEFAULT_CONFIG when CONSTRAINTS exclude it). None inspects all.
        seed: seed of the sample.
        spill_bytes: rerun ``ptxas -v`` for spilling configs (off by default here: the table needs n_spills, which
            the binary gives, and the rerun doubles the cost of every spilling config).
        progress: called as ``progress(done, total)`` after each config.
        timeout_s: inspect in isolated workers with this limit a config (see :func:`inspect_configs`): a config
            whose worker exits, crashes or hangs is a ``stage="worker"`` failure and the table goes on.

    Returns:
        A :class:`StaticSpace` saying how many of how many configs were inspected, with every result.

    Raises:
        ContractError: bad kernel file, shape, arch or ``limit < 1``, or CONSTRAINTS exclude every config.
        SearchError: a CONSTRAINTS expression is malformed or names something unknown.
        KernelRunError: a worker process died (see :func:`run_tasks`; not with ``timeout_s``).
        KernelFailed: with ``timeout_s``, importing the kernel file exited, crashed, hung or raised.
    """
    if limit is not None and limit < 1:
        raise ContractError(f"--limit {limit} must be at least 1", "e.g. --limit 32")
    arch = arch or default_arch()
    if timeout_s is not None:
        with isolated_workers(kernel_path, max_workers, timeout_s) as (iso, meta):
            every, product = iso.call("kernelpilot.profile.static_isolated:_space_in_worker")
            return _space(meta, every, product, shape, arch, max_workers, limit, seed, spill_bytes, progress, iso)
    meta, every, product = _read_kernel_space(kernel_path)
    return _space(meta, every, product, shape, arch, max_workers, limit, seed, spill_bytes, progress, None)


def _space(meta: tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]], every: list[dict[str, Any]],
           product: int, shape: Optional[dict[str, Any]], arch: str, max_workers: Optional[int], limit: Optional[int],
           seed: int, spill_bytes: bool, progress: Optional[Callable[[int, int], None]], iso: Any) -> StaticSpace:
    """:func:`inspect_space` once the kernel file's meta and valid configs (``every``, of ``product`` in the
    unconstrained space) are known; ``iso``: isolated workers, or None for the pool."""
    path, tunables, default, base_shape = meta
    _check_shape_keys(shape, base_shape, path)
    if not every:
        raise ContractError(f"{path}: CONSTRAINTS exclude every one of the {product} configs of TUNABLES",
                            "relax CONSTRAINTS or add candidate values to TUNABLES")
    chosen = every
    sampled = limit is not None and limit < len(every)
    if sampled:
        rng = random.Random(seed)
        rest = [i for i, c in enumerate(every) if c != default]
        kept = {i for i, c in enumerate(every) if c == default}  # empty when CONSTRAINTS exclude DEFAULT_CONFIG
        pick = set(rng.sample(rest, limit - len(kept))) | kept
        chosen = [c for i, c in enumerate(every) if i in pick]
    workers = max(1, min(max_workers or usable_cpus(), len(chosen)))
    t0 = time.perf_counter()
    if iso is not None:
        iso.max_workers = workers
        results = run_isolated_tasks(iso, config_tasks(path, chosen, shape, arch, spill_bytes=spill_bytes, meta=meta),
                                     progress)
    else:
        results = inspect_configs(path, chosen, shape=shape, arch=arch, max_workers=workers, in_process=False,
                                  spill_bytes=spill_bytes, progress=progress)
    n_ok = sum(isinstance(r, StaticReport) for r in results)
    return StaticSpace(kernel_file=path, arch=arch, shape={**base_shape, **(shape or {})}, n_configs_total=len(every),
                       n_excluded=product - len(every), n_inspected=len(chosen), sampled=sampled, sample_seed=seed,
                       n_ok=n_ok, n_failed=len(results) - n_ok, max_workers=workers,
                       wall_s=round(time.perf_counter() - t0, 3), results=results)
