"""The backend seam: what kernelpilot needs from a kernel language (load, launch, export a config).

A backend answers :meth:`Backend.supports` with a :class:`Support` that carries its reason, so a refusal can be
shown to the user as it is. The shape follows two existing designs (Dao-AILab/quack's backend protocol with its
``Support`` verdict, and Kernel Tuner's one-class-per-language backend), kept to the calls kernelpilot makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: kernels.contract imports this package lazily, never at import time
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


@runtime_checkable
class Backend(Protocol):
    """One kernel language. Implementations are stateless; :mod:`kernelpilot.backends.registry` builds them.

    Attributes:
        name: short identifier recorded with results (``"triton"``; ``"cuda"`` planned).
    """

    name: str

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

    def kernel_names(self, kf: KernelFile) -> list[str]:
        """Names of the GPU kernels the file itself defines, as the device's activity records name them (one of
        them must run when the file is launched: :mod:`kernelpilot.measure.activity`); empty when the file only
        calls kernels defined elsewhere (a library). Raises nothing."""
        ...
