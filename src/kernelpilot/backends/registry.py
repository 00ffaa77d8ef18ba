"""Pick the backend for a kernel file: by suffix first, then by asking the backend (lazy imports, one instance each).

``.py`` -> Triton, or KernelBench when the file is a KernelBench solution (``class ModelNew``). ``.cu`` -> CUDA C++ (``.cuh`` is refused by it: a header has no ``solve``). Anything else ->
refused. :func:`require_runnable` refuses, up front, to run a kernel whose backend has no CPU emulation when no GPU
is present.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from kernelpilot.backends.base import Backend, Support
from kernelpilot.errors import ContractError
from kernelpilot.kernels.kernelbench import is_solution_file

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile

#: suffix -> "module:class" of the backend that handles it (imported on first use).
_BY_SUFFIX = {".py": "kernelpilot.backends.triton:TritonBackend", ".cu": "kernelpilot.backends.cuda:CudaBackend",
              ".cuh": "kernelpilot.backends.cuda:CudaBackend"}

#: A ``.py`` file in KernelBench's solution form (``class ModelNew``; docs/kernelbench.md) goes to this backend.
_KERNELBENCH = "kernelpilot.backends.kernelbench:KernelBenchBackend"

#: suffix -> why no backend takes it (none today).
_REFUSED: dict[str, Support] = {}

_instances: dict[str, Backend] = {}

#: (message, hint) when a kernel that needs a GPU (CUDA C++) is asked to run on a machine without one.
NEEDS_GPU = ("a CUDA .cu kernel runs only on a GPU and none is visible here",
             "run it on a GPU machine; `kernelpilot inspect`, `pipeline` and `roofline` work without one "
             "(they compile with nvcc for --arch, default sm_90)")


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
    if support is None and suffix == ".py" and is_solution_file(path):  # the KernelBench form, detected
        return _instance(_KERNELBENCH)
    if support is None:
        backend = _instance(_BY_SUFFIX[suffix])
        support = backend.supports(path)
        if support:
            return backend
    raise ContractError(f"{path}: {support.reason}",
                        "give a .py kernel file (setup/run_kernel/reference, README 'The kernel file') or a .cu file "
                        'with extern "C" void solve(...) (docs/cuda.md)')


def require_runnable(kf: KernelFile) -> None:
    """Refuse to run ``kf`` here when it was loaded without a GPU (``interpreted``) and its backend has no CPU
    emulation (``needs_gpu``: CUDA C++); Triton files run under its interpreter and pass.

    Raises:
        ToolMissingError: the message says a GPU is needed, the hint which commands work without one.
    """
    if kf.interpreted and getattr(kf.backend, "needs_gpu", False):
        from kernelpilot.errors import ToolMissingError

        raise ToolMissingError(f"{kf.path.name}: {NEEDS_GPU[0]}", NEEDS_GPU[1])
