"""The static half of kernelpilot's Python API: ``inspect`` (one config or the whole space) and ``pipeline``.

Both compile for a target GPU without one; the kernel file runs only in isolated worker processes. Re-exported by
:mod:`kernelpilot.api`; the implementations (:mod:`kernelpilot.profile.static`, :mod:`kernelpilot.profile.pipeline`)
are imported when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kernelpilot.options import at_least, check_arch, check_kernel_path, positive

if TYPE_CHECKING:
    from kernelpilot.profile.static import StaticReport, StaticSpace

__all__ = ["inspect", "inspect_space", "pipeline"]


def _check(kernel: str | Path, arch: str | None, timeout_s: float | None) -> None:
    """The options every static command shares: a kernel file (not a folder), a known arch, a positive limit.

    Raises:
        ContractError: ``kernel`` is a folder. OptionError: an unknown ``arch``, a ``timeout_s`` not positive.
    """
    check_kernel_path(kernel)
    check_arch(arch)
    positive("--timeout-s", timeout_s, "300")


def inspect(kernel: str | Path, *, config: dict[str, Any] | None = None, shape: dict[str, Any] | None = None,
            arch: str | None = None, save: str | Path | None = None,
            timeout_s: float | None = None) -> "StaticReport":
    """Compile one config for ``arch`` (e.g. ``sm_90``; default this GPU, else ``sm_90``) and read the binary:
    registers, spills, shared memory (bytes), theoretical occupancy (%), SASS instruction mix (``kernelpilot
    inspect``; :func:`kernelpilot.profile.static.inspect_config`).

    Args:
        kernel: the kernel file. config / shape: overrides of DEFAULT_CONFIG / SHAPE (None or empty: none).
        save: also write the cubin, PTX and SASS into this folder.
        timeout_s: seconds the config's isolated worker may take (the kernel file's setup, run_kernel, compile).

    Returns:
        A :class:`kernelpilot.profile.static.StaticReport`.

    Raises:
        OptionError: an arch no spec knows, a ``timeout_s`` not positive, a shape value of the wrong type.
        ContractError: bad kernel file, config, shape or arch, or ``run_kernel`` raised while being captured.
        KernelRunError: Triton or ptxas failed to compile the config, or it cannot load on the target
            (``OutOfResources``: too much shared memory, or no block fits).
        KernelFailed: the kernel file exited, crashed, hung (over ``timeout_s``) or raised in its worker.
    """
    from kernelpilot.profile.static import inspect_config

    _check(kernel, arch, timeout_s)
    return inspect_config(kernel, config or {}, shape=shape or None, arch=arch, save_dir=save, timeout_s=timeout_s)


def inspect_space(kernel: str | Path, *, shape: dict[str, Any] | None = None, arch: str | None = None,
                  workers: int | None = None, limit: int | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  timeout_s: float | None = None) -> "StaticSpace":
    """Inspect every config of the TUNABLES space (or DEFAULT_CONFIG plus a seeded sample, ``limit`` configs in
    all) in parallel (``kernelpilot inspect --all-configs``; :func:`kernelpilot.profile.static.inspect_space`).

    Args:
        kernel: the kernel file. shape: overrides of SHAPE. arch: target, as for :func:`inspect`.
        workers: processes (default: CPU cores). progress: called with (configs done, configs in all).
        timeout_s: seconds one config's isolated worker may take.

    Returns:
        A :class:`kernelpilot.profile.static.StaticSpace`: one result per config; a config that fails to compile,
        exceeds the resources or whose worker exited, crashed or hung is a failure row, not an exception.

    Raises:
        OptionError: an arch no spec knows, ``limit``/``workers`` below 1, a ``timeout_s`` not positive.
        ContractError: bad kernel file, shape, TUNABLES or arch.
    """
    from kernelpilot.profile.static import inspect_space as _inspect_space

    _check(kernel, arch, timeout_s)
    at_least("--limit", limit, 1, "the most configs to inspect")
    at_least("--workers", workers, 1, "the number of processes")
    return _inspect_space(kernel, shape=shape or None, arch=arch, max_workers=workers, limit=limit,
                          progress=progress, timeout_s=timeout_s)


def pipeline(kernel: str | Path, *, config: dict[str, Any] | None = None, shape: dict[str, Any] | None = None,
             arch: str | None = None, timeout_s: float | None = None,
             tile: tuple[int, int, int] | None = None) -> dict[str, Any]:
    """Software pipelining of a tiled ``tl.dot`` kernel: compute/load ratio (FLOP/B), shared memory per stage
    (bytes), occupancy cliffs, a num_stages advice and the SASS main-loop check (``kernelpilot pipeline``;
    :mod:`kernelpilot.profile.pipeline`).

    Args:
        kernel: the kernel file. config: one config to analyse (None or empty: DEFAULT_CONFIG and its
            num_stages and BLOCK_K variants). shape: overrides of SHAPE. arch: target, as for :func:`inspect`.
        timeout_s: seconds one config's isolated worker may take.
        tile: (BM, BN, BK) of a CUDA C++ ``.cu`` kernel (``--tile``; default its ``TILE`` or BM/BN/BK tunables);
            a ``.cu`` file is analysed by :func:`kernelpilot.profile.pipeline_cuda.cuda_pipelines` (its notes add
            the variant implied, single/double-buffer shared memory, spills, compute per iteration).

    Returns:
        ``{"kernel_file": absolute path, "n_configs": int, "reports": [PipelineReport | StaticFailure, ...]}``
        (with the default configs, one that fails is its StaticFailure).

    Raises:
        ContractError: not a tiled kernel (no BLOCK_M/BLOCK_N/BLOCK_K), bad shape or arch; a requested ``config``
            that fails. KernelFailed: that config's worker exited, crashed or hung.
    """
    from kernelpilot.profile import pipeline as pl

    _check(kernel, arch, timeout_s)
    from kernelpilot.backends.registry import language_of

    if language_of(kernel) == "cuda":
        from kernelpilot.profile.pipeline_cuda import cuda_pipelines
        from kernelpilot.profile.static import StaticFailure, raise_static_failure

        reports: list[Any] = cuda_pipelines(kernel, [config] if config else None, shape=shape or None, arch=arch,
                                            tile=tile, timeout_s=timeout_s)
        if config and isinstance(reports[0], StaticFailure):
            raise_static_failure(reports[0], f"{Path(kernel).name} {reports[0].config}")
        return {"kernel_file": str(Path(kernel).resolve()), "n_configs": len(reports), "reports": reports}
    if tile is not None:
        from kernelpilot.errors import OptionError

        raise OptionError("--tile is read for CUDA C++ (.cu) kernels only",
                          "a Triton kernel's tile comes from its BLOCK_M/BLOCK_N/BLOCK_K tunables")
    if config:
        reports = [pl.analyze_pipeline(kernel, config, shape=shape or None, arch=arch,
                                                  timeout_s=timeout_s)]
    else:
        reports = pl.analyze_pipelines(kernel, None, shape=shape or None, arch=arch, timeout_s=timeout_s)
    return {"kernel_file": str(Path(kernel).resolve()), "n_configs": len(reports), "reports": reports}
