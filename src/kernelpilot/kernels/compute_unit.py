"""``COMPUTE_UNIT`` checked against what the kernel is given and, once compiled, against what it runs (issue 23:
observed, not declared).

A kernel file's ``COMPUTE_UNIT`` picks the peak its FLOPs are divided by (hardware/roofline.py); a unit faster than
the kernel can use lowers the speed-of-light floor: a fp32 × fp32 matmul declaring ``int8_tensor`` gets a floor
15× lower than its dtypes allow on an H100 (67 TFLOP/s fp32 against 1979 TOP/s int8 dense). Two checks:

* **dtypes** (:func:`check_unit_dtypes`, before any run): at least one operand tensor (an input that is not only an
  output, nor scratch) must have a dtype the unit can take: ``int8_tensor`` int8/uint8, ``fp8_tensor`` a float8
  type, ``bf16_tensor`` bfloat16, ``fp16_tensor`` float16, ``tf32_tensor`` float32, ``fp64``/``fp64_tensor``
  float64; ``fp32`` (the default, CUDA cores) takes anything. The tensor-core input types per unit are those of
  NVIDIA's PTX ISA, "Warp-level matrix multiply-accumulate instructions" (``mma`` / ``wgmma`` operand types).
* **SASS** (:func:`check_unit_sass`, once a config is compiled): a tensor-core unit needs tensor-core instructions
  (``HMMA``, ``HGMMA``, ``IMMA``, ``QGMMA``, ``DMMA``, ...; NVIDIA's "CUDA Binary Utilities", "Instruction Set
  Reference") in the binary of a kernel whose ``run_kernel`` launched one kernel; a file that launches several is
  not judged on the first alone.

This module reads only tensors' dtypes and opcode names: it imports nothing from ``hardware/`` or ``profile/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernelpilot.errors import DeclarationError

__all__ = ["TENSOR_CORE_OPCODES", "UNIT_DTYPES", "check_unit_dtypes", "check_unit_sass", "operand_dtypes"]

#: Compute unit -> the operand dtypes (torch names without ``torch.``) that can feed it; None: any dtype (``fp32``,
#: the CUDA cores, the default and the lowest floor a float kernel can claim besides fp64).
UNIT_DTYPES: dict[str, frozenset[str] | None] = {
    "fp32": None,
    "fp64": frozenset({"float64"}),
    "fp64_tensor": frozenset({"float64"}),
    "tf32_tensor": frozenset({"float32"}),
    "bf16_tensor": frozenset({"bfloat16"}),
    "fp16_tensor": frozenset({"float16"}),
    "fp8_tensor": frozenset({"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                             "float8_e8m0fnu"}),
    "int8_tensor": frozenset({"int8", "uint8"}),
}

#: SASS base opcodes that run on tensor cores: warp-level MMA (HMMA half/bf16/tf32, IMMA integer, DMMA fp64), Hopper
#: warpgroup MMA (HGMMA, QGMMA fp8, IGMMA integer) and Blackwell's tcgen05 forms (UTC*MMA).
TENSOR_CORE_OPCODES: frozenset[str] = frozenset({"HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "QGMMA", "IGMMA", "BGMMA",
                                                 "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCMMA", "UTCOMMA"})


def operand_dtypes(inputs: Mapping[str, Any], outputs: Iterable[str] = (), inplace: Iterable[str] = (),
                   scratch: Iterable[str] = ()) -> dict[str, str]:
    """Name -> dtype (``"bfloat16"``) of the tensors a kernel computes from: the inputs that are not only outputs
    (in-place outputs are read, so they count) and not scratch; when that leaves no tensor, every tensor input.
    Scalars are skipped. Raises nothing."""
    def dtype(v: Any) -> str | None:
        dt = getattr(v, "dtype", None)
        return str(dt).removeprefix("torch.") if dt is not None and hasattr(v, "shape") else None

    out_only = set(outputs) - set(inplace)
    skip = out_only | set(scratch)
    found = {k: d for k, v in inputs.items() if k not in skip and (d := dtype(v)) is not None}
    if not found:
        found = {k: d for k, v in inputs.items() if (d := dtype(v)) is not None}
    return found


def check_unit_dtypes(unit: str, dtypes: Mapping[str, str], where: str) -> None:
    """Refuse a ``COMPUTE_UNIT`` that none of the operand tensors can feed (see the module docstring).

    Args:
        unit: the declared unit (a key of :data:`UNIT_DTYPES`; an unknown one is left to the contract check).
        dtypes: operand name -> dtype name, from :func:`operand_dtypes`.
        where: the kernel file (named in the message).

    Raises:
        DeclarationError: no operand has a dtype the unit takes (the message names the unit and every dtype).
    """
    allowed = UNIT_DTYPES.get(unit)
    if allowed is None or not dtypes or any(d in allowed for d in dtypes.values()):
        return
    have = ", ".join(f"{k}: {d}" for k, d in dtypes.items())
    raise DeclarationError(
        f"{where}: COMPUTE_UNIT = {unit!r} needs {'/'.join(sorted(allowed))} operands, but the kernel's input tensors "
        f"are {have}: the unit's peak would set a floor lower than these dtypes allow",
        f"declare the unit the dtypes feed (fp32 tensors: 'fp32', or 'tf32_tensor' for a tl.dot with tf32; bfloat16: "
        f"'bf16_tensor'; float16: 'fp16_tensor'; int8: 'int8_tensor'), or give setup() the dtypes the unit takes")


def check_unit_sass(unit: str, opcode_counts: Mapping[str, int], where: str, *, launches: int = 1) -> None:
    """Refuse a tensor-core ``COMPUTE_UNIT`` whose compiled kernel has no tensor-core instruction.

    Args:
        unit: the declared unit; units not ending in ``_tensor`` are not checked.
        opcode_counts: SASS base opcode -> static count of the compiled kernel (an empty mapping: the SASS was not
            read, nothing is judged).
        where: the kernel file and config (named in the message).
        launches: kernel launches ``run_kernel`` made when captured; with more than one only the first was read,
            so nothing is judged.

    Raises:
        DeclarationError: a ``*_tensor`` unit and no opcode of :data:`TENSOR_CORE_OPCODES` in the SASS.
    """
    if not unit.endswith("_tensor") or not opcode_counts or launches != 1:
        return
    if any(op in TENSOR_CORE_OPCODES for op, n in opcode_counts.items() if n):
        return
    top = ", ".join(f"{op} {n}" for op, n in sorted(opcode_counts.items(), key=lambda kv: -kv[1])[:6])
    raise DeclarationError(
        f"{where}: COMPUTE_UNIT = {unit!r} but the compiled kernel has no tensor-core instruction (no "
        f"{'/'.join(sorted(TENSOR_CORE_OPCODES & {'HMMA', 'HGMMA', 'IMMA', 'QGMMA', 'DMMA'}))}; most frequent: {top}): "
        f"its FLOPs run on the CUDA cores, whose peak is far below the tensor cores'",
        "declare COMPUTE_UNIT = 'fp32' (or the unit the kernel's tl.dot really uses); `kernelpilot inspect KERNEL "
        "--arch sm_90` shows the SASS instruction mix")
