"""Pick the backend for a kernel file: each back end that may read the file's suffix is asked, in the order of
:data:`BACKENDS`, whether it takes the file (:meth:`~kernelpilot.backends.base.Backend.supports`: by contents, never
by a declaration alone); the first that says yes reads it (lazy imports, one instance each).

A ``.py`` file may belong to several back ends: a KernelBench solution (``class ModelNew``), a plain-PyTorch
"kernel", else a Triton kernel file (Triton takes every ``.py`` file, so it comes last of them). ``.cu`` -> CUDA C++ (``.cuh`` is refused by it: a header has no ``solve``). Anything else ->
refused. Adding a back end is one line of :data:`BACKENDS` and its folder. :func:`require_runnable` refuses, up
front, to run a kernel whose backend has no CPU emulation when no GPU is present. :func:`kernel_files` and
:func:`main_kernel` say which files belong to a kernel (a ``.cu`` file's sidecar and headers), so nothing outside
``backends/`` tests a suffix for that.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from kernelpilot.backends.base import Backend, Support
from kernelpilot.errors import ContractError

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile

#: (the back end's ``name``, suffixes it may read, "module:class" imported on first use), asked in this order: the
#: first whose ``supports`` says yes reads the file. More particular back ends of a suffix come before the general
#: one. (A test checks each name against the class's ``name``.)
BACKENDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("triton", (".py",), "kernelpilot.backends.kernelbench:KernelBenchBackend"),  # class ModelNew (kernelbench.md)
    ("torch", (".py",), "kernelpilot.backends.torchref:TorchRefBackend"),  # plain-PyTorch "kernels"
    ("triton", (".py",), "kernelpilot.backends.triton:TritonBackend"),  # every other .py kernel file
    ("cuda", (".cu", ".cuh"), "kernelpilot.backends.cuda:CudaBackend"),
)

_instances: dict[str, Backend] = {}
_languages: dict[tuple, str | None] = {}

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


def backend_names() -> tuple[str, ...]:
    """The names back ends record with results (``"triton"``, ``"torch"``, ``"cuda"``), each once, in
    :data:`BACKENDS` order; imports no back end. Raises nothing."""
    return tuple(dict.fromkeys(name for name, _, _ in BACKENDS))


def language_of(path: str | Path) -> str | None:
    """The ``name`` of the back end that reads ``path`` (:func:`backend_for`: ``"triton"``, ``"torch"``,
    ``"cuda"``), or None when none does; for callers that word or route things by the kernel's language instead of
    testing its suffix. Imports nothing of the file (the back ends read it with ``ast`` at most); remembered per
    (path, SHA-256 of its bytes), so a file rewritten in place is asked again. Raises nothing."""
    path = Path(path)
    try:
        key: tuple = (str(path), hashlib.sha256(path.read_bytes()).hexdigest())
    except OSError:
        key = (str(path),)
    if key not in _languages:
        try:
            _languages[key] = backend_for(path).name
        except ContractError:
            _languages[key] = None
    return _languages[key]


def backend_for(path: str | Path) -> Backend:
    """The backend that loads and launches ``path``.

    Raises:
        ContractError: no backend takes the file (the message is the backend's or the registry's reason, with a
            hint on what to pass instead).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    support = Support.no(f"no kernelpilot backend reads {suffix or 'suffix-less'} files")
    for _, suffixes, target in BACKENDS:
        if suffix in suffixes:
            backend = _instance(target)
            support = backend.supports(path)  # the last refusal is the one shown (the most general back end's)
            if support:
                return backend
    raise ContractError(f"{path}: {support.reason}",
                        "give a .py kernel file (setup/run_kernel/reference, README 'The kernel file') or a .cu file "
                        'with extern "C" void solve(...) (docs/cuda.md)')


def kernel_files(path: str | Path, name: str | None = None) -> dict[Path, Path]:
    """The files that make up the kernel file ``path``, each mapped to its path relative to the kernel's folder in a
    copy that names the kernel ``name`` (its back end's :meth:`~kernelpilot.backends.base.Backend.kernel_files`: a
    ``.cu`` file's sidecar and local headers).

    Raises:
        ContractError: no back end reads ``path`` (as :func:`backend_for`).
    """
    return backend_for(path).kernel_files(Path(path), name)


def main_kernel(paths: Iterable[str | Path]) -> Path | None:
    """Of files lying together (``vN/kernel.cu`` and ``vN/kernel.py``), the one kernel file the others belong to:
    a file some back end reads that is not a companion (:func:`kernel_files` besides itself) of another such file;
    the first in name order when several are. None when no file qualifies. Raises nothing."""
    files = sorted(Path(p).resolve() for p in paths)
    readable = [p for p in files if p.is_file() and language_of(p) is not None]
    companions = {c for p in readable for c in kernel_files(p) if c != p}
    return next((p for p in readable if p not in companions), None)


def require_runnable(kf: KernelFile) -> None:
    """Refuse to run ``kf`` here when it was loaded without a GPU (``interpreted``) and its backend has no CPU
    emulation (``needs_gpu``: CUDA C++); Triton files run under its interpreter and pass.

    Raises:
        ToolMissingError: the message says a GPU is needed, the hint which commands work without one.
    """
    if kf.interpreted and (kf.backend is not None and kf.backend.needs_gpu):
        from kernelpilot.errors import ToolMissingError

        raise ToolMissingError(f"{kf.path.name}: {NEEDS_GPU[0]}", NEEDS_GPU[1])
