"""Pick the backend for a kernel file: by suffix first, then by asking the backend (lazy imports, one instance each).

``.py`` -> Triton. ``.cu``/``.cuh`` -> refused with the planned CUDA backend named. Anything else -> refused.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from kernelpilot.backends.base import Backend, Support
from kernelpilot.errors import ContractError

#: suffix -> "module:class" of the backend that handles it (imported on first use).
_BY_SUFFIX = {".py": "kernelpilot.backends.triton:TritonBackend"}

#: suffix -> why no backend takes it yet.
_REFUSED = {
    ".cu": Support.no("CUDA C++ kernels (.cu) are not supported yet: the CUDA backend is planned"),
    ".cuh": Support.no("CUDA C++ kernels (.cu) are not supported yet: the CUDA backend is planned"),
}

_instances: dict[str, Backend] = {}


def _instance(target: str) -> Backend:
    if target not in _instances:
        module_name, _, cls_name = target.partition(":")
        backend = getattr(importlib.import_module(module_name), cls_name)()
        if not isinstance(backend, Backend):  # a provider missing one of the protocol's callables
            raise TypeError(f"{target} does not implement the Backend protocol")
        _instances[target] = backend
    return _instances[target]


def backend_for(path: str | Path) -> Backend:
    """The backend that loads and launches ``path``.

    Raises:
        ContractError: no backend takes the file (the message is the backend's or the registry's reason, with a
            hint on what to pass instead).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    support = _REFUSED.get(suffix)
    if support is None and suffix not in _BY_SUFFIX:
        support = Support.no(f"no kernelpilot backend reads {suffix or 'suffix-less'} files")
    if support is None:
        backend = _instance(_BY_SUFFIX[suffix])
        support = backend.supports(path)
        if support:
            return backend
    raise ContractError(f"{path}: {support.reason}",
                        "give a .py kernel file (setup/run_kernel/reference, README 'The kernel file'); meanwhile a "
                        "compiled CUDA kernel can be wrapped in such a file's run_kernel")
