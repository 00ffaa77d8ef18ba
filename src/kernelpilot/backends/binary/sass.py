"""SASS text: parse ``cuobjdump -sass`` output into instructions and count them (pure text, no tools run).

What :class:`~kernelpilot.backends.binary.models.StaticReport` reports as the instruction mix and access widths, and
what the pipeline's main-loop check (:mod:`kernelpilot.profile.sass_loop`) reads. Opcode and modifier meanings from
NVIDIA's "CUDA Binary Utilities" manual, "Instruction Set Reference"
(https://docs.nvidia.com/cuda/cuda-binary-utilities/index.html#instruction-set-reference).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Optional

from pydantic import BaseModel

__all__ = ["ASYNC_COPY_OPCODES", "INSTRUCTION_GROUPS", "MMA_OPCODES", "SassInstruction", "access_width_bytes",
           "instruction_mix", "parse_sass", "width_histogram"]

#: Instruction groups of :attr:`StaticReport.instruction_mix`: group name -> SASS base opcodes counted in it.
#: Opcode meanings from NVIDIA's "CUDA Binary Utilities" manual, "Instruction Set Reference"
#: (https://docs.nvidia.com/cuda/cuda-binary-utilities/index.html#instruction-set-reference).
INSTRUCTION_GROUPS: dict[str, tuple[str, ...]] = {
    "HGMMA": ("HGMMA",),            # Hopper warpgroup MMA (wgmma)
    "HMMA": ("HMMA",),              # warp-level half/bf16/tf32 MMA (mma.sync)
    "IMMA": ("IMMA",),              # integer MMA
    "FFMA": ("FFMA",),              # fp32 fused multiply-add
    "FMUL": ("FMUL",),
    "FADD": ("FADD",),
    "LDG": ("LDG",),                # global load (through registers)
    "STG": ("STG",),                # global store
    "LDGSTS": ("LDGSTS",),          # async global->shared copy (cp.async)
    "UTMALDG": ("UTMALDG",),        # TMA tensor load
    "UBLKCP": ("UBLKCP",),          # TMA bulk copy
    "UTMASTG": ("UTMASTG",),        # TMA tensor store
    "LDS": ("LDS",),
    "LDSM": ("LDSM",),              # shared->register matrix load (ldmatrix)
    "STS": ("STS",),
    "BAR": ("BAR",),                # block barrier (bar.sync / __syncthreads)
    "LDL": ("LDL",),                # local load: spills or local arrays
    "STL": ("STL",),                # local store
    "DFMA": ("DFMA",),              # fp64
    "DADD": ("DADD",),
    "DMUL": ("DMUL",),
    "SHFL": ("SHFL",),              # warp shuffle
    "MUFU": ("MUFU",),              # special-function unit (exp2, rcp, ...)
    "ATOM": ("ATOM", "ATOMG", "RED", "REDG"),
}

#: Opcodes that are tensor-core MMAs, and async global->shared copies (used by the pipeline check too).
MMA_OPCODES = ("HGMMA", "HMMA", "IMMA", "QGMMA", "IGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCMMA")
ASYNC_COPY_OPCODES = ("LDGSTS", "UTMALDG", "UBLKCP")

# ``/*0f30*/   @!P1 HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8].tnspB, R24 ;   /* 0x40e0... */``
_SASS_LINE = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(?:(@!?U?P[T0-9]+)\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*([^;]*);")
_FUNCTION_LINE = re.compile(r"^\s*Function\s*:\s*(\S+)")


class SassInstruction(BaseModel):
    """One SASS instruction from ``cuobjdump -sass``.

    Attributes:
        address: byte offset in the function (the ``/*0f30*/`` column).
        opcode: full opcode with modifiers (``LDGSTS.E.BYPASS.128``).
        base: opcode without modifiers (``LDGSTS``).
        predicate: guard predicate (``@!P1``) or None.
        operands: operand text up to the ``;``.
    """

    address: int
    opcode: str
    base: str
    predicate: Optional[str] = None
    operands: str = ""

    @property
    def modifiers(self) -> list[str]:
        """Opcode modifiers after the base (``["E", "BYPASS", "128"]``)."""
        return self.opcode.split(".")[1:]

    def branch_target(self) -> Optional[int]:
        """Target address of a ``BRA``/``JMP`` (the last hex literal among its operands), else None."""
        if self.base not in ("BRA", "JMP", "BRX"):
            return None
        found = re.findall(r"0x([0-9a-fA-F]+)", self.operands)
        return int(found[-1], 16) if found else None


def parse_sass(text: str, function: Optional[str] = None) -> list[SassInstruction]:
    """Instructions of one function in ``cuobjdump -sass`` (or ``nvdisasm``-like) output.

    Args:
        text: the disassembly.
        function: the function to take (``Function : name`` header); None takes the first one (or every line
            when the text has no headers).

    Returns:
        The instructions in address order.
    """
    out: list[SassInstruction] = []
    current: Optional[str] = None
    seen_header = False
    taking = function is None
    for line in text.splitlines():
        header = _FUNCTION_LINE.match(line)
        if header:
            if seen_header and function is None and out:
                break  # first function only
            seen_header = True
            current = header.group(1)
            taking = function is None or current == function
            continue
        if not taking:
            continue
        m = _SASS_LINE.match(line)
        if not m:
            continue
        opcode = m.group(3)
        out.append(SassInstruction(address=int(m.group(1), 16), opcode=opcode, base=opcode.split(".")[0],
                                   predicate=m.group(2), operands=m.group(4).strip()))
    return out


def access_width_bytes(instr: SassInstruction) -> int:
    """Bytes per thread of a memory instruction from its modifiers: ``.U8``/``.S8`` 1, ``.U16``/``.S16`` 2, none
    (32-bit) 4, ``.64`` 8, ``.128`` 16, ``.256`` 32 (modifier meanings: CUDA Binary Utilities manual, "Instruction
    Set Reference"). Cache-policy modifiers such as ``LTC128B`` are not widths and are ignored."""
    for mod in instr.modifiers:
        if mod in ("U8", "S8"):
            return 1
        if mod in ("U16", "S16"):
            return 2
        if mod in ("64", "128", "256"):
            return int(mod) // 8
    return 4


def instruction_mix(instrs: list[SassInstruction]) -> tuple[dict[str, int], dict[str, int]]:
    """(group counts per :data:`INSTRUCTION_GROUPS`, every base opcode's count) of a SASS listing."""
    opcodes = Counter(i.base for i in instrs)
    groups = {name: sum(opcodes.get(op, 0) for op in ops) for name, ops in INSTRUCTION_GROUPS.items()}
    return groups, dict(sorted(opcodes.items(), key=lambda kv: (-kv[1], kv[0])))


def width_histogram(instrs: list[SassInstruction], base: str) -> dict[int, int]:
    """Count of ``base`` instructions (e.g. ``"LDG"``) by access width in bytes (see :func:`access_width_bytes`)."""
    hist = Counter(access_width_bytes(i) for i in instrs if i.base == base)
    return dict(sorted(hist.items()))

