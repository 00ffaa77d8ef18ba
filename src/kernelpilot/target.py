"""The device a campaign runs on, as one typed value made once at set-up and passed down (issue 28).

Before this module the device travelled as a string (``"cuda"``, ``"cuda:1"``, ``"cpu"``, ``"replay"``) beside a
flag ``interpreted``, and every layer turned the pair into answers of its own (``device == "cuda"``,
``device_kind(device) != "cuda"``). A :class:`Target` holds both, with what set-up learns about the GPU (its name,
arch and limits), and answers the questions once: :attr:`Target.is_gpu`, :attr:`Target.measured`,
:attr:`Target.torch_device`, :attr:`Target.label`, :attr:`Target.record`.

The string the run records store as ``"device"`` (run.json, tune.json, the session state) is :attr:`Target.record`,
unchanged: ``"cuda"``, ``"cpu"`` or ``"replay"``; :meth:`Target.from_record` reads it back.

This module is at the bottom layer: it imports nothing from kernelpilot but :mod:`kernelpilot.errors`, so every
layer may take a Target. Detecting the device (:meth:`Target.detect`) imports torch, inside the call only.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kernelpilot.errors import OptionError

__all__ = ["Target", "TargetKind", "switch_interpreter"]

#: ``cuda``: a GPU torch can see. ``cpu``: no GPU (Triton kernels run under the interpreter). ``replay``: nothing
#: runs, answers come from a cache measured on a GPU (:class:`~kernelpilot.engine.runner.ReplayRunner`).
TargetKind = Literal["cuda", "cpu", "replay"]


def switch_interpreter(on: bool) -> None:
    """Set (``on``) or clear ``TRITON_INTERPRET`` for Triton kernels imported from now on.

    Triton fixes interpreter mode for its own ``@triton.jit`` helpers when ``triton.language`` is first imported and
    reads the variable again at every launch, so it must be set before triton is imported and stay set (the source
    of the rule: :func:`kernelpilot.backends.triton.backend.use_interpreter`'s docstring). Raises nothing.
    """
    if on:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)


class Target(BaseModel):
    """One device, as set-up found it.

    Attributes:
        kind: ``"cuda"``, ``"cpu"`` or ``"replay"`` (see :data:`TargetKind`).
        index: the GPU's index as this process numbers it (torch's ``cuda:<index>``, after
            ``CUDA_VISIBLE_DEVICES``); None: the current device (``"cuda"``) or no GPU.
        arch: the GPU's ISA target as its spec sheet names it (``gfx942``; NVIDIA sheets name none: None), or None.
        name: the GPU's name (NVML's, else the spec sheet's), or None (no GPU, or nothing known).
        interpreted: Triton kernels run under the Triton interpreter on the CPU: times are not measurements.
        limits: the device limits set-up read from the GPU's spec sheet, as constraint constants
            (:func:`kernelpilot.search.constraints.limits_from_spec`: ``max_threads_per_block``, ``sm_count``,
            ``max_shared_mem_per_block_bytes``, ...); None without a spec.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: TargetKind
    index: int | None = None
    arch: str | None = None
    name: str | None = None
    interpreted: bool = False
    limits: dict[str, float] | None = None

    # ------------------------------------------------------------------------------------------------ makers

    @classmethod
    def detect(cls, *, replay: bool = False) -> Target:
        """The device of this process, decided as set-up always has: ``replay`` gives the replay target (nothing
        runs, nothing is imported); else a GPU when ``torch.cuda.is_available()`` (not interpreted), else the CPU
        under the Triton interpreter, which is switched on here at once (``TRITON_INTERPRET=1``, before triton is
        imported: :func:`switch_interpreter`). Name, arch and limits come later (:meth:`with_spec`).

        Raises nothing (torch's own ImportError aside).
        """
        if replay:
            return cls(kind="replay")
        import torch

        if torch.cuda.is_available():
            return cls(kind="cuda")
        switch_interpreter(True)
        return cls(kind="cpu", interpreted=True)

    @classmethod
    def from_device(cls, device: str, interpreted: bool | None = None) -> Target:
        """The target a worker's device string names: ``"cuda"``, ``"cuda:<index>"``, ``"cpu"``, ``"replay"``.

        ``interpreted``: None gives what the string implies (the CPU is interpreted, a GPU and a replay are not).

        Raises:
            OptionError: a string that names none of these (``"cuda:x"``, ``"mps"``).
        """
        kind, colon, rest = device.partition(":")
        if kind not in ("cuda", "cpu", "replay") or (colon and (kind != "cuda" or not rest.isdigit())):
            raise OptionError(f"device {device!r} is not one kernelpilot runs on",
                              'give "cuda", "cuda:<index>", "cpu" or "replay"')
        return cls(kind=kind, index=int(rest) if rest else None,
                   interpreted=(kind == "cpu") if interpreted is None else interpreted)

    @classmethod
    def from_record(cls, device: str) -> Target:
        """The target a record's ``"device"`` string (:attr:`record`) stands for. Raises OptionError as
        :meth:`from_device`."""
        return cls.from_device(device)

    @classmethod
    def cpu(cls) -> Target:
        """The CPU under the Triton interpreter (what :meth:`detect` gives without a GPU; for tests and callers that
        run on the CPU by choice). Switches nothing on."""
        return cls(kind="cpu", interpreted=True)

    @classmethod
    def gpu(cls, index: int | None = None, name: str | None = None) -> Target:
        """A GPU (``cuda:<index>``, or the current one), not interpreted (for tests and a worker's own device)."""
        return cls(kind="cuda", index=index, name=name)

    def with_spec(self, name: str | None, arch: str | None, limits: dict[str, float] | None) -> Target:
        """This target with what set-up learnt about its GPU (see the attributes); the kind is kept."""
        return self.model_copy(update={"name": name, "arch": arch, "limits": dict(limits) if limits else None})

    def on_index(self, index: int | None) -> Target:
        """This target on GPU ``index`` (a worker's own GPU among several); the CPU and a replay are unchanged."""
        return self.model_copy(update={"index": index}) if self.kind == "cuda" else self

    # ---------------------------------------------------------------------------------------------- answers

    @property
    def is_gpu(self) -> bool:
        """True when kernels run on a GPU (kind ``cuda``)."""
        return self.kind == "cuda"

    @property
    def is_cpu(self) -> bool:
        """True when kernels run on the CPU (kind ``cpu``; set-up runs Triton kernels there interpreted)."""
        return self.kind == "cpu"

    @property
    def is_replay(self) -> bool:
        """True for a replay: nothing runs, answers come from a cache."""
        return self.kind == "replay"

    @property
    def measured(self) -> bool:
        """True when a time taken (or replayed) here is a measurement: not under the interpreter (a replay's times
        were measured on a GPU). The rule the records' ``measured`` field has always had: ``not interpreted``."""
        return not self.interpreted

    @property
    def torch_device(self) -> str:
        """The torch device type tensors go to: ``"cuda"`` on a GPU, else ``"cpu"`` (a replay builds what it builds
        on the CPU). No index: a worker is bound to its one GPU by ``CUDA_VISIBLE_DEVICES``, so its tensors go to
        ``"cuda"`` whatever :attr:`index` says (the rule of the former ``facts.device_kind``)."""
        return "cuda" if self.kind == "cuda" else "cpu"

    @property
    def label(self) -> str:
        """The device as workers and records name it: ``"cuda:<index>"`` (``"cuda"`` without an index), ``"cpu"``,
        ``"replay"``; :meth:`from_device` reads it back."""
        return f"cuda:{self.index}" if self.kind == "cuda" and self.index is not None else self.kind

    @property
    def record(self) -> str:
        """The string run records store as ``"device"``: ``"cuda"``, ``"cpu"`` or ``"replay"`` (no index)."""
        return self.kind

    def __str__(self) -> str:
        return self.label
