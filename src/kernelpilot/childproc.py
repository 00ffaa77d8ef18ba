"""The environment for kernelpilot's own child processes (ncu targets, report readers)."""

from __future__ import annotations

import os
from pathlib import Path


def child_env(*, compiled_triton: bool = False) -> dict[str, str]:
    """A copy of this process's environment with the folder holding the ``kernelpilot`` package first on
    ``PYTHONPATH``, so ``python -m kernelpilot....`` finds the same code whether installed or run from ``src/``.

    Args:
        compiled_triton: drop ``TRITON_INTERPRET`` so the child compiles kernels for the GPU.
    """
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if compiled_triton:
        env.pop("TRITON_INTERPRET", None)
    return env
