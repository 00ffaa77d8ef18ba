"""The backend seam: what kernelpilot needs from a kernel language (load, launch, export a config, compile for a
target GPU without one).

A backend answers :meth:`Backend.supports` with a :class:`Support` that carries its reason, so a refusal can be
shown to the user as it is. The shape follows two existing designs (Dao-AILab/quack's backend protocol with its
``Support`` verdict, and Kernel Tuner's one-class-per-language backend, whose ``compile`` step is :meth:`Backend.compile_for` here), kept to the
calls kernelpilot makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: kernels.contract imports this package lazily, never at import time
    from kernelpilot.backends.binary.models import StaticFailure, StaticReport
    from kernelpilot.kernels.contract import KernelFile


@dataclass(frozen=True)
class Support:
    """A backend's answer to "can you handle this file?": ``ok`` and, when not, the reason in words."""

    ok: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> Support:
        """The backend handles the file."""
        return cls(True)

    @classmethod
    def no(cls, reason: str) -> Support:
        """The backend refuses the file; ``reason`` is shown to the user (say what is missing, not only "no")."""
        return cls(False, reason)

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class BinaryReading:
    """What :meth:`Backend.compile_for` reads from the binary besides registers, shared memory and occupancy.

    Attributes:
        sass: disassemble (``cuobjdump -sass``, ~0.75 s a config on a cold cache) for the instruction mix and access
            widths; False leaves them empty.
        keep_sass: keep the SASS text in the report's ``sass`` (not serialized).
        save_dir: also write the binary (cubin / shared library), PTX and SASS into this folder; None: not.
        spill_bytes: with local memory, rerun ``ptxas -v`` to split it into spill store and load bytes (Triton;
            nvcc's build log already has them).
    """

    sass: bool = True
    keep_sass: bool = False
    save_dir: str | None = None
    spill_bytes: bool = True

    def task(self, kernel: str | Path, config: dict[str, Any], shape: dict[str, Any], target: str) -> dict[str, Any]:
        """The task dict the back ends' compile workers take (keys ``kernel_path``, ``config``, ``arch``, ``shape``
        and the fields here), as :func:`kernelpilot.profile.static.config_tasks` builds them."""
        return {"kernel_path": str(kernel), "config": dict(config), "arch": target, "shape": dict(shape or {}),
                "keep_sass": self.keep_sass, "save_dir": self.save_dir, "spill_bytes": self.spill_bytes,
                "sass": self.sass}

    @classmethod
    def of_task(cls, task: dict[str, Any]) -> BinaryReading:
        """The reading a task dict asks for (absent keys: the defaults)."""
        return cls(sass=bool(task.get("sass", True)), keep_sass=bool(task.get("keep_sass", False)),
                   save_dir=str(task["save_dir"]) if task.get("save_dir") else None,
                   spill_bytes=bool(task.get("spill_bytes", True)))


@runtime_checkable
class Backend(Protocol):
    """One kernel language. Implementations are stateless; :mod:`kernelpilot.backends.registry` builds them.

    Attributes:
        name: short identifier recorded with results (``"triton"``, ``"cuda"``, ``"kernelbench"``, ``"torch"``).
        needs_gpu: True when the language has no CPU emulation (CUDA C++): such a file is refused where there is no
            GPU (:func:`kernelpilot.backends.registry.require_runnable`).
    """

    name: str
    needs_gpu: bool

    def supports(self, path: Path) -> Support:
        """Whether this backend can load ``path`` (by suffix or contents); never raises."""
        ...

    def load(self, path: Path, ref: Path | None, *, interpreted: bool) -> KernelFile:
        """Import and validate a kernel file (``ref``: optional file defining ``reference``).

        ``interpreted``: run without a GPU (Triton's interpreter). Raises ContractError naming the faulty piece.
        """
        ...

    def launch(self, kf: KernelFile, inputs: dict[str, Any], config: dict[str, Any]) -> None:
        """Launch the kernel once on ``inputs`` (a case's inputs, outputs written in place) with ``config``.

        Asynchronous on a GPU (no synchronize); the kernel's own exceptions propagate to the caller.
        """
        ...

    def limitations(self, kf: KernelFile) -> str | None:
        """When the kernel runs on a CPU emulation (Triton's interpreter): the constructs it cannot run exactly, in one
        sentence naming them and saying to run on a GPU; None when there are none or on a GPU. Raises nothing."""
        ...

    def export_config(self, config: dict[str, Any]) -> str:
        """``config`` written the way the language's users write it (``triton.Config({...}, num_warps=4)``)."""
        ...

    def kernel_files(self, path: Path, name: str | None = None) -> dict[Path, Path]:
        """The files that make up the kernel file ``path`` (one this back end ``supports``), each resolved, mapped to
        where it lies relative to the kernel's folder in a copy that names the kernel ``name`` (None: its own name);
        ``path`` is the first key. What a copy of the kernel takes along (a session's version folder:
        :func:`kernelpilot.versions.run_version.copy_version`) and what tells the kernel from its companions in such
        a folder (:func:`kernelpilot.backends.registry.main_kernel`): CUDA's sidecar ``STEM.py`` is renamed with its
        ``STEM.cu``, a header keeps its relative path (``../x.cuh`` for one outside the folder: the caller decides).
        Read without importing anything of the file; a companion that is absent is left out. Raises nothing."""
        ...

    def kernel_names(self, kf: KernelFile) -> list[str]:
        """Names of the GPU kernels the file itself defines, as the device's activity records name them (one of
        them must run when the file is launched: :mod:`kernelpilot.measure.activity`); empty when the file only
        calls kernels defined elsewhere (a library). Raises nothing."""
        ...

    def compile_for(self, kernel: str | Path, config: dict[str, Any], shape: dict[str, Any], target: str, *,
                    read: BinaryReading = BinaryReading()) -> StaticReport | StaticFailure:
        """Compile ``config`` of the kernel file ``kernel`` for the GPU ``target`` (an arch name, ``"sm_90"``)
        without one, and read the binary (registers/thread, spills, shared memory in bytes, theoretical occupancy,
        SASS instruction mix). ``config``: overrides of DEFAULT_CONFIG; ``shape``: overrides of SHAPE (the compile
        specializes on it). A language with no binary says so in a :class:`StaticFailure`.

        Runs where the caller put it (this process, a pool worker, an isolated worker): a back end that needs a
        particular process (Triton: not under its interpreter) says so in a ``load`` failure. A config's own fault
        (bad config, compile error, a block that cannot load) is a StaticFailure, never raised; an unexpected
        exception propagates to the caller, which records it (:func:`kernelpilot.profile.static.any_task`).
        """
        ...
