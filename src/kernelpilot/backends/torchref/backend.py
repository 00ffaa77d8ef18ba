"""The plain-PyTorch back end (see the package docstring): ``run_kernel`` uses torch ops only, so it runs as it is
on a CPU or a GPU, with no emulation and nothing to compile.

Which files it takes is observed from the source, not taken from the declaration alone (read with ``ast``, nothing
imported): a ``.py`` file that assigns ``BACKEND = "torch"`` at top level, imports neither ``triton`` nor any of its
submodules, and is not a KernelBench solution (those the registry gives to their own back end first). A file that
declares ``"torch"`` but imports Triton is refused here and read by the Triton back end, so the declaration cannot
take a Triton kernel out of Triton's checks.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from kernelpilot.backends.base import BinaryReading, Support
from kernelpilot.backends.binary.models import NO_BINARY, StaticFailure, StaticResult
from kernelpilot.kernels.contract import KernelFile, build_kernel_file, import_module_file

__all__ = ["DECLARATION", "TorchRefBackend"]

#: The top-level assignment that marks a plain-PyTorch kernel file: ``BACKEND = "torch"``.
DECLARATION = ("BACKEND", "torch")


def _facts(path: Path) -> tuple[bool, list[str]]:
    """(whether the module assigns ``BACKEND = "torch"`` at top level, the top-level modules it imports), read with
    ``ast``; (False, []) for a file that does not parse. Raises nothing."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False, []
    declared, imported = False, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module.split(".")[0])
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == DECLARATION[0]
                                                for t in node.targets):
            declared = isinstance(node.value, ast.Constant) and node.value.value == DECLARATION[1]
    return declared, imported


class TorchRefBackend:
    """Plain-PyTorch kernel files (see the module docstring and :class:`kernelpilot.backends.base.Backend`).

    Attributes:
        name: ``"torch"``, recorded with results. needs_gpu: False (torch ops run on the CPU as they are).
    """

    name = "torch"
    needs_gpu = False

    def supports(self, path: Path) -> Support:
        """Yes for a ``.py`` file declaring ``BACKEND = "torch"`` that imports no Triton; the reason otherwise."""
        path = Path(path)
        if path.suffix != ".py" or not path.is_file():
            return Support.no(f"the plain-PyTorch backend reads .py files, not {path.name}")
        declared, imported = _facts(path)
        if not declared:
            return Support.no(f'{path.name} does not declare BACKEND = "torch"')
        if "triton" in imported:
            return Support.no(f'{path.name} declares BACKEND = "torch" but imports triton: its kernels are Triton\'s')
        return Support.yes()

    def load(self, path: Path, ref: Path | None, *, interpreted: bool) -> KernelFile:
        """Import ``path`` and validate the contract (setup, run_kernel, reference, TUNABLES, SHAPE).
        ``interpreted`` is recorded only: torch ops need no emulation. Raises ContractError."""
        module = import_module_file(Path(path), "kernel")
        return build_kernel_file(Path(path), module, ref, interpreted=interpreted, backend=self)

    def kernel_files(self, path: Path, name: str | None = None) -> dict[Path, Path]:
        """``{path: name}``: a plain-PyTorch kernel is its one file."""
        path = Path(path).resolve()
        return {path: Path(name or path.name)}

    def launch(self, kf: KernelFile, inputs: dict[str, Any], config: dict[str, Any]) -> None:
        """``run_kernel(**inputs, **config)``; its own exceptions propagate."""
        kf.run_kernel(**inputs, **config)

    def limitations(self, kf: KernelFile) -> str | None:
        """None: torch ops run the same on the CPU as where they are timed (no emulation)."""
        return None

    def export_config(self, config: dict[str, Any]) -> str:
        """The config as the keyword arguments of ``run_kernel`` (``CHUNK=256``)."""
        return ", ".join(f"{k}={v!r}" for k, v in config.items())

    def kernel_names(self, kf: KernelFile) -> list[str]:
        """Empty: the file defines no GPU kernel of its own (its torch ops run PyTorch's)."""
        return []

    def compile_for(self, kernel: str | Path, config: dict[str, Any], shape: dict[str, Any], target: str, *,
                    read: BinaryReading = BinaryReading()) -> StaticResult:
        """A :class:`StaticFailure` at stage :data:`~kernelpilot.backends.binary.models.NO_BINARY`
        (``error_type="NoBinary"``): a plain-PyTorch kernel has no binary of its own for ``target``, so static
        pruning measures every config. Raises nothing."""
        return StaticFailure(kernel_file=str(kernel), config=dict(config), arch=target, stage=NO_BINARY,
                             error_type="NoBinary",
                             message=f"{Path(kernel).name} is a plain-PyTorch kernel: it has no binary of its own to "
                                     f"compile for {target} (its torch ops run PyTorch's prebuilt kernels)",
                             hint="time it with `kernelpilot bench`; static inspection reads Triton and CUDA C++ "
                                  "kernels")
