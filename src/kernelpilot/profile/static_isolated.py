"""Worker side of static inspection (``inspect``, ``pipeline``) in isolated worker processes.

Compiling a config (the back end's :meth:`~kernelpilot.backends.base.Backend.compile_for`; Triton's captures a
launch by running the kernel file's ``setup`` and ``run_kernel``) may run the kernel file's code, so a kernel that
calls ``sys.exit``, segfaults or loops forever would end or hang the command. With a timeout,
:func:`kernelpilot.profile.static.inspect_configs` runs every config in a
:class:`~kernelpilot.search.isolated.IsolatedKernel` worker (compile mode, ``TRITON_INTERPRET`` removed) through the
functions here, named by string (so no module imports this one: it may import :mod:`~kernelpilot.profile.static`
without a cycle).
"""

from __future__ import annotations

from typing import Any
from kernelpilot.target import Target

__all__: list[str] = []


def _meta_in_worker(kf: Any, opts: Any, target: Target) -> tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]:
    """(resolved path, TUNABLES, DEFAULT_CONFIG, SHAPE) of the worker's kernel file."""
    return str(kf.path), kf.tunables, kf.default_config, dict(kf.shape)


def _space_in_worker(kf: Any, opts: Any, target: Target) -> tuple[list[dict[str, Any]], int]:
    """(valid configs of the worker's kernel file: TUNABLES filtered by its CONSTRAINTS, size of the unconstrained
    TUNABLES product), as :func:`kernelpilot.profile.static.inspect_space` inspects them."""
    from kernelpilot.profile.static import _kernel_space

    return _kernel_space(kf)


def _task_in_worker(kf: Any, opts: Any, target: Target, task: dict[str, Any]) -> dict[str, Any]:
    """One config compiled by the kernel file's back end (:func:`kernelpilot.profile.static.compile_task`), dumped;
    an ``Exception`` is recorded as a ``compile`` failure (as the process pool's ``any_task`` does);
    ``SystemExit``/``KeyboardInterrupt`` go up to the worker, which reports them as the kernel's exit (a ``worker``
    failure in the parent)."""
    from kernelpilot.backends.binary.models import dump_result
    from kernelpilot.profile.static import compile_task, unexpected_failure

    try:
        return dump_result(compile_task(task))
    except Exception as exc:  # noqa: BLE001 - recorded, never raised
        return unexpected_failure(task, exc)
