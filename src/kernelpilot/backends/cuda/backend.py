"""The CUDA C++ backend: a ``.cu`` file exposing ``extern "C" void solve(...)`` (the seed workflows' ABI), built by
nvcc per config (tunables are ``-D`` defines), loaded with ctypes and called with device pointers.

A ``.cu`` file becomes a :class:`~kernelpilot.kernels.contract.KernelFile` like any other (docs/cuda.md): the
backend assembles a module from

- the sidecar ``KERNEL.py`` beside ``KERNEL.cu`` when there is one (``setup``, ``reference``, ``TUNABLES``,
  ``DEFAULT_CONFIG``, ``CONSTRAINTS``, ``SHAPE``, ``COMPUTE_UNIT``, ``flops``, ``bytes_moved``, ``atol``/``rtol``,
  ``CHECK_SHAPES``, ``SHAPE_RULES``, ``NVCC_FLAGS``, ``INCLUDE_DIRS``, ``THREADS_PER_BLOCK``, ``DYNAMIC_SHARED_BYTES``, ``TILE``,
  ``STAGES``),
  screened before it is imported;
- ``// kernelpilot: NAME = literal`` lines of the source for the same constants (the sidecar wins), plus
  ``INPLACE`` (outputs solve also reads, for synthesized inputs) and ``FLOPS``/``BYTES_MOVED`` (expressions over
  the shape, ``"2*M*N*K"``);
- otherwise inputs synthesized from the signature (:mod:`kernelpilot.backends.cuda.inputs`), and the dimensions'
  defaults (1024 each) in ``SHAPE`` with ``ptr_size`` (0: by the rule);
- the reference: ``--ref``, else the sidecar's ``reference``, else ``ref.py`` in the same folder (the seed form:
  ``reference(**kwargs)`` writing the outputs in place, or returning them; its ``atol``/``rtol`` honoured).

Without a GPU the file loads (``inspect``, ``pipeline``, ``roofline`` need nothing more) but cannot run: a launch
raises :class:`~kernelpilot.errors.ToolMissingError`, and the commands that run kernels refuse up front
(:func:`kernelpilot.backends.registry.require_runnable`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpilot.backends.base import BinaryReading, Support
from kernelpilot.backends.binary.models import StaticResult
from kernelpilot.backends.registry import NEEDS_GPU
from kernelpilot.backends.cuda.signature import Signature, directives, global_kernels, local_includes, parse_solve
from kernelpilot.errors import ContractError, KernelRunError, ToolMissingError
from kernelpilot.kernels.contract import DerivedSpace, KernelFile, build_kernel_file, import_module_file

__all__ = ["CudaBackend"]

_counter = itertools.count()

#: The names a sidecar (or a ``// kernelpilot:`` line) may define, copied onto the kernel's module.
_CONSTANTS = ("INPLACE", "FLOPS", "BYTES_MOVED", "TUNABLES", "DEFAULT_CONFIG", "CONSTRAINTS", "SHAPE", "CPU_SHAPE", "COMPUTE_UNIT", "atol", "rtol",
              "CHECK_SHAPES", "SHAPE_RULES", "NVCC_FLAGS", "INCLUDE_DIRS", "THREADS_PER_BLOCK", "DYNAMIC_SHARED_BYTES", "TILE", "STAGES")
_FUNCTIONS = ("setup", "flops", "bytes_moved")



def _shape_expr(expr: str) -> Any:
    """``flops(**shape)`` / ``bytes_moved(**shape)`` from an arithmetic expression over the shape (``"2*M*N*K"``)."""
    from kernelpilot.backends.cuda.signature import eval_expr

    def fn(**shape: Any) -> int:
        return eval_expr(expr, shape)

    return fn


def _sidecar(path: Path) -> Path | None:
    side = path.with_suffix(".py")
    return side if side.is_file() else None


class CudaBackend:
    """CUDA C++ kernels in ``.cu`` files (see :class:`kernelpilot.backends.base.Backend` and the module docstring).

    Attributes:
        name: ``"cuda"``. needs_gpu: True (no CPU emulation: :func:`~kernelpilot.backends.registry.require_runnable`).
    """

    name = "cuda"
    needs_gpu = True

    def supports(self, path: Path) -> Support:
        """Yes for a ``.cu`` file; a header (``.cuh``) is refused with what to give instead."""
        suffix = Path(path).suffix.lower()
        if suffix == ".cu":
            return Support.yes()
        if suffix == ".cuh":
            return Support.no("a .cuh header has no solve(): give the .cu file that includes it and defines "
                              'extern "C" void solve(...)')
        return Support.no(f"the CUDA backend reads .cu files, not {suffix or 'suffix-less'} ones")

    def load(self, path: Path, ref: Path | None, *, interpreted: bool) -> KernelFile:
        """Parse ``solve``, read the sidecar and directives, pick the reference and validate the contract; nothing
        is compiled here (the first launch of a config builds it).

        Raises:
            ContractError: the signature, sidecar, directives or reference break the contract (each message names
                the piece); ScreenRefused: the sidecar or ``ref.py`` is refused by the static screen.
        """
        from kernelpilot.backends.cuda.inputs import DEFAULT_DIM, synthesized_setup
        from kernelpilot.kernels.contract import screen_before_import

        path = Path(path).resolve()
        source = path.read_text(errors="replace")
        sig = parse_solve(source, path)
        try:
            given = directives(source)
        except ContractError as exc:
            raise ContractError(f"{path}: {exc.message}", exc.hint) from None
        side_path = _sidecar(path)
        ref_path = Path(ref).resolve() if ref else None
        beside = path.parent / "ref.py"
        flags = screen_before_import([p for p in (side_path, ref_path or beside) if p is not None])
        side = import_module_file(side_path, "cuda_sidecar") if side_path else None
        if ref_path is None and side is not None and callable(getattr(side, "reference", None)):
            ref_path = side_path
        elif ref_path is None and beside.is_file():
            ref_path = beside
        if ref_path is None:
            raise ContractError(f"{path}: no reference to check solve against",
                                "put ref.py with reference(**kwargs) beside the file (the seed form), define "
                                f"reference in {path.with_suffix('.py').name}, or pass --ref FILE")
        module = ModuleType(f"kernelpilot_cuda_{path.stem}_{next(_counter)}")
        module.__file__ = str(path)
        for name, value in given.items():
            setattr(module, name, value)
        for name in (*_CONSTANTS, *_FUNCTIONS):
            if side is not None and hasattr(side, name):
                setattr(module, name, getattr(side, name))
        for name, fn_name in (("FLOPS", "flops"), ("BYTES_MOVED", "bytes_moved")):  # expressions over the shape
            if isinstance(getattr(module, name, None), str) and not hasattr(module, fn_name):
                setattr(module, fn_name, _shape_expr(getattr(module, name)))
        if not hasattr(module, "setup"):
            module.setup = synthesized_setup(sig, list(getattr(module, "INPLACE", [])))
            shape = dict(getattr(module, "SHAPE", {}))
            module.SHAPE = {**{d: shape.get(d, DEFAULT_DIM) for d in sig.dims}, "ptr_size": shape.get("ptr_size", 0),
                            **shape}
        elif not hasattr(module, "SHAPE"):
            raise ContractError(f"{side_path}: the sidecar defines setup() but no SHAPE",
                                'define SHAPE = {"N": 1 << 20}, the default problem shape')

        def run_kernel(**kwargs: Any) -> None:
            tunables = kf.tunables
            self.launch(kf, {k: v for k, v in kwargs.items() if k not in tunables},
                        {k: v for k, v in kwargs.items() if k in tunables})

        module.run_kernel = run_kernel
        derived = None if hasattr(module, "TUNABLES") else DerivedSpace(tunables={}, default_config={})
        kf = build_kernel_file(path, module, ref_path, interpreted=interpreted, derived=derived, backend=self)
        include_dirs = [(path.parent / p).resolve() for p in getattr(module, "INCLUDE_DIRS", [])]
        headers = local_includes(path, include_dirs)
        digest = hashlib.sha256()
        for p in [path, *headers, *(q for q in (side_path, ref_path) if q is not None)]:
            digest.update(p.read_bytes())
        kf.source_sha256 = digest.hexdigest()
        kf.extras.update({"signature": sig, "kernels": global_kernels(source), "headers": [str(h) for h in headers],
                          "sidecar": str(side_path) if side_path else None, "include_dirs": include_dirs,
                          "nvcc_flags": list(getattr(module, "NVCC_FLAGS", [])), "libs": {},
                          "screen_flags_cuda": flags, "synthesized": side is None or not hasattr(side, "setup")})
        return kf

    def _library(self, kf: KernelFile, config: dict[str, Any]) -> Any:
        """The loaded ``.so`` of ``config`` (built or found in the cache; one ``ctypes.CDLL`` per config)."""
        import ctypes

        from kernelpilot.backends.cuda.build import build_shared

        key = tuple(sorted(config.items()))
        libs = kf.extras.setdefault("libs", {})
        if key not in libs:
            built = build_shared(kf.path, config, extra_flags=kf.extras.get("nvcc_flags"),
                                 include_dirs=kf.extras.get("include_dirs"))
            lib = built.load()  # exactly the bytes its build record hashed (BuildIntegrityError otherwise)
            try:
                solve = lib.solve
            except AttributeError:
                raise ContractError(f"{kf.path}: the built library exports no `solve`",
                                    'declare it extern "C" void solve(...)') from None
            sig: Signature = kf.extras["signature"]
            solve.argtypes = [getattr(ctypes, p.ctypes_name) for p in sig.params]
            solve.restype = None
            lib.kp_error_string.restype = ctypes.c_char_p
            lib.kp_set_sync_keep(1 if os.environ.get("KERNELPILOT_CUDA_SYNC", "").lower() == "keep" else 0)
            libs[key] = lib
        return libs[key]

    def kernel_files(self, path: Path, name: str | None = None) -> dict[Path, Path]:
        """``path`` (as ``name``), its sidecar (``STEM.py`` when present, renamed with it) and every local
        ``#include "..."`` it reaches (:func:`~kernelpilot.backends.cuda.signature.local_includes`; the sidecar is
        not imported, so ``INCLUDE_DIRS`` are not searched), each at its path relative to ``path``'s folder."""
        path = Path(path).resolve()
        own = Path(name or path.name)
        files = {path: own}
        side = _sidecar(path)
        if side is not None:
            files[side.resolve()] = own.with_suffix(".py")
        for inc in local_includes(path):
            inc = Path(inc).resolve()
            files.setdefault(inc, Path(os.path.relpath(inc, path.parent)))
        return files

    def launch(self, kf: KernelFile, inputs: dict[str, Any], config: dict[str, Any]) -> None:
        """Call ``solve`` once: each buffer parameter gets its tensor's ``data_ptr()``, each scalar its value, in
        signature order, on the current (legacy default) stream. Asynchronous: ``solve``'s own
        ``cudaDeviceSynchronize`` is skipped unless ``KERNELPILOT_CUDA_SYNC=keep`` (docs/cuda.md).

        Raises:
            ToolMissingError: no GPU (loaded ``interpreted``). ContractError: an input missing, not a CUDA tensor,
            or of another element type than ``solve`` declares. CompileError: the config does not build.
            KernelRunError: the CUDA runtime reported a launch error (an illegal address surfaces at the next
            synchronization, as for any kernel).
        """
        import ctypes

        import torch

        if kf.interpreted:
            raise ToolMissingError(*NEEDS_GPU)
        lib = self._library(kf, config)
        sig: Signature = kf.extras["signature"]
        args: list[Any] = []
        for p in sig.params:
            if p.name not in inputs:
                raise ContractError(f"{kf.path}: setup() gave no input `{p.name}` for solve's parameter {p.name}",
                                    f"return `{p.name}` among setup()['inputs'] (solve takes {[q.name for q in sig.params]})")
            value = inputs[p.name]
            if p.kind != "buffer":
                args.append(getattr(ctypes, p.ctypes_name)(value.item() if hasattr(value, "item") else value))
                continue
            want = getattr(torch, p.dtype)
            if not isinstance(value, torch.Tensor) or not value.is_cuda:
                raise ContractError(f"{kf.path}: input `{p.name}` must be a CUDA tensor (solve takes {p.ctype}*)",
                                    "build it on device='cuda' in setup()")
            if value.dtype != want and not (value.element_size() == want.itemsize
                                             and not value.dtype.is_floating_point and not want.is_floating_point):
                raise ContractError(f"{kf.path}: input `{p.name}` is {str(value.dtype).replace('torch.', '')} but "
                                    f"solve takes {p.ctype}* ({p.dtype})", f"make `{p.name}` a {p.dtype} tensor")
            if not value.is_contiguous():
                raise ContractError(f"{kf.path}: input `{p.name}` is not contiguous: solve sees raw memory",
                                    "return contiguous tensors from setup() (.contiguous())")
            args.append(ctypes.c_void_p(value.data_ptr()))
        lib.solve(*args)
        code = lib.kp_last_error()
        if code:
            raise KernelRunError(f"{kf.path.name}: solve's launch failed: CUDA error {code}: "
                                 f"{lib.kp_error_string(code).decode(errors='replace')}",
                                 "check the grid/block sizes and shared memory solve launches with")

    def limitations(self, kf: KernelFile) -> str | None:
        """None: a ``.cu`` kernel never runs under an emulation (it is refused without a GPU instead)."""
        return None

    def export_config(self, config: dict[str, Any]) -> str:
        """The config as nvcc defines: ``-DBLOCK_SIZE=256 -DROWS_PER_BLOCK=2``."""
        from kernelpilot.backends.cuda.build import define_flags

        return " ".join(define_flags(config))

    def compile_for(self, kernel: str | Path, config: dict[str, Any], shape: dict[str, Any], target: str, *,
                    read: BinaryReading = BinaryReading()) -> StaticResult:
        """Build the config's shared library for ``target`` with nvcc (the binary a GPU run loads) and read it
        (:func:`kernelpilot.backends.cuda.static.inspect_task`): a ``StaticReport``, or a ``StaticFailure`` at stage
        ``load``, ``compile`` or ``resources``. ``read.sass`` and ``read.spill_bytes`` are not used: the report
        needs the SASS to pick the kernel, and nvcc's build log has the spill bytes. Unexpected exceptions
        propagate (see :meth:`Backend.compile_for`)."""
        from kernelpilot.backends.binary.models import load_result
        from kernelpilot.backends.cuda.static import inspect_task

        return load_result(inspect_task(read.task(kernel, config, shape, target)))

    def kernel_names(self, kf: KernelFile) -> list[str]:
        """The ``__global__`` functions of the ``.cu`` file and its local headers (CUPTI's demangled names start
        with them: :func:`kernelpilot.backends.cuda.signature.global_kernels`). Raises nothing."""
        names = list(kf.extras.get("kernels", []))
        for header in kf.extras.get("headers", []):
            try:
                names += [n for n in global_kernels(Path(header).read_text(errors="replace")) if n not in names]
            except OSError:
                pass
        return names
