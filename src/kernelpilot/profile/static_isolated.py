"""Worker side of static inspection (``inspect``, ``pipeline``) in isolated worker processes.

Capturing a launch runs the kernel file's ``setup`` and ``run_kernel``
(:mod:`kernelpilot.backends.triton.compile`), so a kernel that calls ``sys.exit``, segfaults or loops forever would end or hang the command. With a timeout,
:func:`kernelpilot.profile.static.inspect_configs` runs every config in a
:class:`~kernelpilot.search.isolated.IsolatedKernel` worker (compile mode, ``TRITON_INTERPRET`` removed) through the
functions here, named by string (so no module imports this one: it may import :mod:`~kernelpilot.profile.static`
without a cycle).
"""

from __future__ import annotations

import traceback
from typing import Any

from kernelpilot.backends.triton.compile import _fail, _inspect_task

__all__: list[str] = []


def _meta_in_worker(kf: Any, opts: Any, device: str) -> tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]:
    """(resolved path, TUNABLES, DEFAULT_CONFIG, SHAPE) of the worker's kernel file."""
    return str(kf.path), kf.tunables, kf.default_config, dict(kf.shape)


def _space_in_worker(kf: Any, opts: Any, device: str) -> tuple[list[dict[str, Any]], int]:
    """(valid configs of the worker's kernel file: TUNABLES filtered by its CONSTRAINTS, size of the unconstrained
    TUNABLES product), as :func:`kernelpilot.profile.static.inspect_space` inspects them."""
    from kernelpilot.profile.static import _kernel_space

    return _kernel_space(kf)


def _task_in_worker(kf: Any, opts: Any, device: str, task: dict[str, Any]) -> dict[str, Any]:
    """One config: :func:`kernelpilot.backends.triton.compile._inspect_task`, an ``Exception`` recorded as a ``compile``
    failure (as the process pool's ``_safe_task`` does); ``SystemExit``/``KeyboardInterrupt`` go up to the worker,
    which reports them as the kernel's exit (a ``worker`` failure in the parent)."""
    if str(task["kernel_path"]).lower().endswith(".cu"):
        from kernelpilot.profile.static import any_task

        return any_task(task)
    try:
        return _inspect_task(task)
    except Exception as exc:  # noqa: BLE001 - recorded, never raised
        return _fail(task["kernel_path"], dict(task["config"]), task["arch"], "compile", exc,
                     message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
