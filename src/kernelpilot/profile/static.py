"""Static inspection: compile a kernel file's Triton kernel for a target GPU without a GPU, and report what the
compiler knows (docs/measuring.md, "Native code and static facts" and "Occupancy").

How it works, for one config:

1. **Capture the launch.** The kernel file is imported *not* interpreted, ``setup`` builds inputs on the CPU at the
   real GPU shape (``SHAPE``; the compile specializes on it) and ``run_kernel`` is called while
   ``triton.runtime.jit.JITFunction.run`` is replaced by a recorder: ``kernel[grid](...)`` ends in
   ``JITFunction.run(*args, grid=, warmup=, **kwargs)`` in Triton 3.6 and 3.9 alike (``KernelInterface.__getitem__``
   returns ``lambda *a, **k: self.run(grid=grid, warmup=False, *a, **k)``), so the recorder sees the JIT function,
   its arguments, the grid and ``num_warps``/``num_stages`` and launches nothing.
2. **Specialize as Triton does.** The signature and specialization come from Triton's own binder
   (``triton.runtime.jit.create_function_from_signature`` with ``native_specialize_impl``: pointer dtypes,
   integer scalars, 16-divisibility, integers equal to 1 turned into constexprs) and
   ``JITFunction._pack_args`` (options, constexprs, attributes); both exist with the same signatures in Triton 3.6
   and 3.9 (read from their sources). The run-time options Triton adds before binding (``debug``,
   ``instrumentation_mode``, and 3.9's ``fpsan_homomorphic_casts``) are added when the installed ``knobs`` has them.
3. **Compile** with ``triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32), options=...)``; Triton's own
   cache (``~/.triton/cache``) makes repeats cheap across runs, and results are memoized within a run.
4. **Read the binary** with the ``cuobjdump`` that Triton's wheel ships (``triton/backends/nvidia/bin``):
   ``--dump-resource-usage`` gives registers/thread and local memory; ``-sass`` gives the instruction mix.
   When a kernel uses local memory, ``ptxas -v`` (the same ptxas Triton picked for the arch) is run on the PTX to
   split it into spill stores and loads.

Shared memory: a Triton kernel declares only dynamic shared memory (``.extern .shared global_smem``), sized by
``metadata.shared`` at launch; that is what ``shared_mem_bytes`` reports and what the occupancy model gets. The
cubin's own ``SHARED`` figure is reported apart (``cubin_shared_bytes``): for the matmul example at 64x64x32, 2
stages, it is 1024 while Nsight Compute on an H200 reported ``launch__shared_mem_per_block_static`` 0, dynamic 16384
and driver-reserved 1024 for the same kernel (tests/fixtures/ncu/h200_matmul_bf16_64x64x32_s2.ncu-rep) — so that
1 KB is the per-block reservation the occupancy model already adds, not extra static memory.

A config whose shared memory exceeds the target's per-block maximum compiles on the CPU but would fail to load on
the GPU with Triton's ``OutOfResources``; it is reported as a failure with the message Triton would raise.

Compiles run in this process when Triton here is not in interpreter mode, else in child processes started with
``spawn`` and ``TRITON_INTERPRET`` removed before Triton is imported there; :func:`inspect_all` spreads the
configs over CPU cores with a ``ProcessPoolExecutor``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Optional, Union

from pydantic import BaseModel, Field

from kernelpilot.errors import ContractError, KernelpilotError, ToolMissingError
from kernelpilot.profile.occupancy import ARCH_LIMITS, Occupancy, theoretical_occupancy

#: Target used when no arch is given and no GPU is present: the GPUs docs/DESIGN.md "Where it runs" names
#: (H100/H200, compute capability 9.0). With a GPU present the arch always comes from the device.
DEFAULT_CPU_ARCH = "sm_90"

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
_RESOURCE_LINE = re.compile(r"Function\s+(\S+):\s*\n\s*(REG:.*)")
_STACK_FRAME = re.compile(r"(\d+)\s+bytes stack frame")
_SPILL_LINE = re.compile(r"(\d+)\s+bytes spill stores,\s*(\d+)\s+bytes spill loads")


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


class StaticReport(BaseModel):
    """What the compiler knows about one config of a kernel, compiled for a target without a GPU.

    Attributes:
        status: always ``"ok"`` (failures are :class:`StaticFailure`).
        kernel_name: the compiled Triton function's name.
        kernel_file: path of the kernel file.
        config: the tunables compiled.
        shape: the problem shape the launch was captured at (the compile specializes on it).
        arch: target, e.g. ``"sm_90"`` (Triton compiles ``sm_90a`` for 9.0).
        compute_capability: (major, minor) of the target.
        triton_version: the Triton that compiled it.
        num_warps, num_stages: the effective compile options (Triton's defaults when the launch gave none).
        threads_per_block: num_warps * 32, the block Triton launches (threads).
        max_threads_per_block: the largest block this binary could launch with on the target, in threads, by the
            driver's rule for ``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`` (see :func:`max_threads_per_block`); None
            for an arch without known limits.
        grid: the launch grid captured (programs per axis).
        signature: Triton signature (``{"a_ptr": "*bf16", "M": "i32", "BLOCK_M": "constexpr"}``).
        constexprs: constexpr arguments by name (including integers specialized to 1).
        input_dtypes: torch dtype of each tensor input ``setup`` made (``{"a": "bfloat16"}``).
        input_itemsize_bytes: bytes per element of each tensor input.
        output_names: tensors ``run_kernel`` writes.
        registers_per_thread: from ``cuobjdump --dump-resource-usage`` (REG).
        local_mem_bytes_per_thread: local memory per thread, LOCAL + STACK of the resource usage (spills are in
            the stack frame with current ptxas: vector_add at 4096 elements, 1 warp: STACK 168, LOCAL 0).
        n_spills: local memory in 4-byte units, the unit of Triton's ``CompiledKernel.n_spills`` (the driver's
            local size in bytes / 4, read after load on a GPU; here from the binary, not checked against a driver).
        spill_stores_bytes, spill_loads_bytes: from ``ptxas -v`` rerun on the PTX with Triton's flags (0 without
            local memory; None when not measured: ``spill_bytes=False``, ptxas failed, or its stack frame differed).
        stack_bytes_per_thread: STACK (stack frame) from the resource usage, included in the local memory.
        shared_mem_bytes: dynamic shared memory per block Triton launches with (``metadata.shared``), bytes.
        cubin_shared_bytes: the cubin's SHARED figure (see the module docstring on the 1 KB reservation).
        shared_mem_limit_bytes: the target's per-block maximum (None for an arch without known limits).
        occupancy: theoretical occupancy of (registers, shared_mem_bytes, threads) by the CUDA occupancy-calculator
            rules (docs/measuring.md, "Occupancy"); None for an arch without known limits.
        instruction_mix: static count of SASS instructions per group of :data:`INSTRUCTION_GROUPS` (instructions
            in the binary, not executed counts).
        opcode_counts: static count of every SASS base opcode.
        n_instructions: SASS instructions in the kernel.
        global_load_widths_bytes: LDG instructions by access width per thread in bytes (``LDG.E.128`` -> 16).
        global_store_widths_bytes: STG instructions by width in bytes.
        async_copy_widths_bytes: LDGSTS instructions by width in bytes.
        uses_tensor_cores: any MMA opcode (:data:`MMA_OPCODES`) in the SASS.
        compile_s: seconds in ``triton.compile`` (a Triton cache hit is milliseconds).
        capture_s: seconds to build the inputs and capture the launch.
        launches_captured: kernel launches ``run_kernel`` made (the first is the one reported).
        cubin_path, ptx_path, sass_path: where the binary, PTX and SASS were saved (when asked).
        notes: anything the numbers need to be read with.
        sass: the SASS text (kept only when asked; never in JSON).
    """

    status: Literal["ok"] = "ok"
    kernel_name: str
    kernel_file: str
    config: dict[str, Any]
    shape: dict[str, Any]
    arch: str
    compute_capability: tuple[int, int]
    triton_version: str
    num_warps: int
    num_stages: int
    threads_per_block: int
    max_threads_per_block: Optional[int] = None
    grid: list[int] = Field(default_factory=list)
    signature: dict[str, str] = Field(default_factory=dict)
    constexprs: dict[str, Any] = Field(default_factory=dict)
    input_dtypes: dict[str, str] = Field(default_factory=dict)
    input_itemsize_bytes: dict[str, int] = Field(default_factory=dict)
    output_names: list[str] = Field(default_factory=list)
    registers_per_thread: int
    local_mem_bytes_per_thread: int = 0
    n_spills: int = 0
    spill_stores_bytes: Optional[int] = 0
    spill_loads_bytes: Optional[int] = 0
    stack_bytes_per_thread: int = 0
    shared_mem_bytes: int
    cubin_shared_bytes: int = 0
    shared_mem_limit_bytes: Optional[int] = None
    occupancy: Optional[Occupancy] = None
    instruction_mix: dict[str, int] = Field(default_factory=dict)
    opcode_counts: dict[str, int] = Field(default_factory=dict)
    n_instructions: int = 0
    global_load_widths_bytes: dict[int, int] = Field(default_factory=dict)
    global_store_widths_bytes: dict[int, int] = Field(default_factory=dict)
    async_copy_widths_bytes: dict[int, int] = Field(default_factory=dict)
    uses_tensor_cores: bool = False
    compile_s: float = 0.0
    capture_s: float = 0.0
    launches_captured: int = 1
    cubin_path: Optional[str] = None
    ptx_path: Optional[str] = None
    sass_path: Optional[str] = None
    notes: list[str] = Field(default_factory=list)
    sass: Optional[str] = Field(default=None, exclude=True, repr=False)


class StaticFailure(BaseModel):
    """A config that could not be inspected, with the reason (recorded, never raised, by :func:`inspect_all`).

    Attributes:
        status: always ``"failed"``.
        kernel_file, config, arch: what was attempted.
        stage: where it failed: ``"load"`` (kernel file), ``"capture"`` (setup/run_kernel raised, e.g. a
            ValueError for an impossible tile), ``"compile"`` (Triton or ptxas), ``"resources"`` (compiled, but the
            block would not load on the target: shared memory over the per-block limit, or no block fits an SM),
            ``"worker"`` (inspected in an isolated worker that exited, crashed or hung: see ``failure``).
        error_type: the exception's class name (``OutOfResources``, ``ValueError``, ``CompilationError``, ...).
        message: the exception's message (for ``resources``: the message Triton raises at load on a GPU).
        hint: what to change.
        shared_mem_bytes, registers_per_thread: what the compile needed, when it got that far.
        compile_s: seconds spent before failing.
        failure: for ``stage="worker"``, the typed failure (:data:`kernelpilot.search.model.Status`: ``timeout``,
            ``worker_crash``, ...); None otherwise.
    """

    status: Literal["failed"] = "failed"
    kernel_file: str
    config: dict[str, Any]
    arch: str
    stage: str
    error_type: str
    message: str
    hint: str = ""
    shared_mem_bytes: Optional[int] = None
    registers_per_thread: Optional[int] = None
    compile_s: float = 0.0
    failure: Optional[str] = None


StaticResult = Union[StaticReport, StaticFailure]


class StaticSpace(BaseModel):
    """The result of inspecting (part of) a kernel's TUNABLES space.

    Attributes:
        kernel_file, arch, shape: what was compiled, for which target, at which shape.
        n_configs_total: size of the full TUNABLES space (product of the candidate lists).
        n_inspected: configs compiled (or attempted) here.
        sampled: True when ``limit`` cut the space (then ``sample_seed`` picked which configs).
        sample_seed: seed of the sample.
        n_ok, n_failed: outcomes.
        max_workers: processes used.
        wall_s: wall-clock seconds for the whole inspection.
        results: one :class:`StaticReport` or :class:`StaticFailure` per inspected config, in space order.
    """

    kernel_file: str
    arch: str
    shape: dict[str, Any]
    n_configs_total: int
    n_inspected: int
    sampled: bool
    sample_seed: int
    n_ok: int
    n_failed: int
    max_workers: int
    wall_s: float
    results: list[Union[StaticReport, StaticFailure]]


# --------------------------------------------------------------------------------------------------------------------
# arch


def parse_arch(arch: str | int | tuple[int, int]) -> tuple[int, int]:
    """Compute capability of an arch name: ``"sm_90"``, ``"sm_90a"``, ``"90"``, ``"9.0"``, 90 or (9, 0) -> (9, 0).

    Raises:
        ContractError: the text is not an arch name.
    """
    if isinstance(arch, tuple):
        return int(arch[0]), int(arch[1])
    text = str(arch).strip().lower()
    match = re.fullmatch(r"(?:sm_?|compute_)?(\d+)\.(\d)", text) or re.fullmatch(r"(?:sm_?|compute_)?(\d+)(\d)a?", text)
    if not match:
        raise ContractError(f"--arch {arch!r} is not a GPU architecture", "e.g. --arch sm_90 (H100/H200) or sm_80 (A100)")
    return int(match.group(1)), int(match.group(2))


def arch_name(cc: tuple[int, int]) -> str:
    """``(9, 0)`` -> ``"sm_90"``."""
    return f"sm_{cc[0]}{cc[1]}"


def default_arch() -> str:
    """The arch to compile for: this machine's GPU (``torch.cuda.get_device_capability()``) when one is present,
    else :data:`DEFAULT_CPU_ARCH`."""
    try:
        import torch

        if torch.cuda.is_available():
            return arch_name(tuple(torch.cuda.get_device_capability()))  # type: ignore[arg-type]
    except Exception:  # a broken CUDA install behaves as no GPU here
        pass
    return DEFAULT_CPU_ARCH


def max_threads_per_block(registers_per_thread: int, cc: tuple[int, int] = (9, 0)) -> int:
    """The largest block, in threads, a kernel using ``registers_per_thread`` registers can launch with on ``cc``:
    what the driver reports as ``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`` for the loaded function.

    Rule: min(the hardware limit per block (1024 threads on sm_80/89/90), the threads the register file holds for
    ONE block), the latter with the occupancy model's allocation granularity (``kernelpilot.profile.occupancy``):
    registers per warp = ceil(32 R / 256) * 256; warps per sub-partition = floor(16384 / that) (65,536 registers
    split over 4 sub-partitions); warps = that * 4; threads = warps * 32 (a whole number of warps).
    Worked: R = 255 -> 8192 per warp -> 2 warps per sub-partition -> 256 threads; R = 128 -> 4096 -> 4 -> 512;
    R = 96 -> 3072 -> 5 -> 640 (not 672: warps are allocated per sub-partition); R = 64 -> 2048 -> 8 -> 1024.

    Sources: CUDA Driver API, ``cuFuncGetAttribute`` (https://docs.nvidia.com/cuda/cuda-driver-api/
    group__CUDA__EXEC.html; the same words in the runtime's ``cudaFuncAttributes::maxThreadsPerBlock``): the attribute
    is the most threads per block "beyond which a launch of the function would fail", depending "on both the function
    and the device" -- the definition, not the formula. The formula: a block's registers must fit the register file
    and the bound is a whole number of warps (the rule ROCm/hip PR #1676 gave ``hipFuncGetAttributes``,
    https://github.com/ROCm/hip/pull/1676), with the allocation granularities of 256 registers per warp and warps per
    sub-partition (kokkos PR #5739, https://github.com/kokkos/kokkos/pull/5739; the CUDA occupancy calculator as
    docs/measuring.md "Occupancy" states it). Checked against the driver: the 41 configs of
    docs/device-runs/2026-11-22-h100/occupancy_driver.json (H100, Triton 3.6; e.g. 164 registers -> 384, 96 -> 640,
    70 -> 896) and, on the device, every example config (tests/test_occupancy_driver.py).

    Args:
        registers_per_thread: registers per thread (``cuobjdump`` REG, or the driver's ``CU_FUNC_ATTRIBUTE_NUM_REGS``);
            0 means no register limit.
        cc: compute capability (major, minor), one of :data:`kernelpilot.profile.occupancy.ARCH_LIMITS`.

    Returns:
        Threads per block (a multiple of 32, at most the hardware limit per block).

    Raises:
        ValueError: registers outside 0..255 (the per-thread maximum) or an unknown ``cc``.
    """
    from kernelpilot.profile.occupancy import limits_for

    arch = limits_for(cc)
    if registers_per_thread < 0 or registers_per_thread > arch.max_registers_per_thread:
        raise ValueError(f"registers_per_thread={registers_per_thread} is outside 0..{arch.max_registers_per_thread}")
    if registers_per_thread == 0:
        return arch.max_threads_per_block
    unit = arch.register_alloc_unit_per_warp
    per_warp = -(-registers_per_thread * arch.warp_size_threads // unit) * unit
    warps = (arch.registers_per_sm // arch.sub_partitions_per_sm // per_warp) * arch.sub_partitions_per_sm
    return min(arch.max_threads_per_block, warps * arch.warp_size_threads)


# --------------------------------------------------------------------------------------------------------------------
# SASS and resource usage parsing (pure text; usable on any cuobjdump output)


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


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """``cuobjdump --dump-resource-usage`` output -> ``{function: {"REG": 64, "SHARED": 1024, "LOCAL": 0, ...}}``.

    ``CONSTANT[0]`` is kept under that name; values are integers (bytes, except REG: registers per thread).
    """
    out: dict[str, dict[str, int]] = {}
    for name, fields in _RESOURCE_LINE.findall(text):
        out[name] = {k: int(v) for k, v in re.findall(r"([A-Z_]+(?:\[\d+\])?):(\d+)", fields)}
    return out


def parse_ptxas_spills(log: str) -> tuple[int, int] | None:
    """(spill stores, spill loads) in bytes from a ``ptxas -v`` log (summed over functions), or None if absent."""
    found = _SPILL_LINE.findall(log)
    if not found:
        return None
    return sum(int(s) for s, _ in found), sum(int(lo) for _, lo in found)


# --------------------------------------------------------------------------------------------------------------------
# Triton side (runs where Triton is imported in compile mode: this process when safe, else a child)


def _interpreter_env_on() -> bool:
    """True when ``TRITON_INTERPRET`` is set to a true value (as Triton's ``env_bool`` reads it)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on", "yes", "y")


def _triton_tainted() -> bool:
    """True when this process's Triton was imported under the interpreter (its ``tl`` helpers are not JITFunctions)
    or ``TRITON_INTERPRET`` is set now; compiling here would then fail or mislead."""
    if _interpreter_env_on():
        return True
    std = sys.modules.get("triton.language.standard")
    if std is None:
        return False
    return type(getattr(std, "cdiv", None)).__name__ != "JITFunction"


@contextlib.contextmanager
def _capture_launches(records: list[dict[str, Any]]) -> Iterator[None]:
    """Replace ``JITFunction.run`` with a recorder for the duration (Triton 3.6 and 3.9 launch through it)."""
    from triton.runtime.jit import JITFunction

    original = JITFunction.run

    def recorder(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> None:
        records.append({"fn": self, "args": args, "kwargs": dict(kwargs), "grid": grid, "warmup": warmup})

    JITFunction.run = recorder  # type: ignore[method-assign]
    try:
        yield
    finally:
        JITFunction.run = original  # type: ignore[method-assign]


def _tool(name: str) -> str:
    """Path of an NVIDIA tool Triton ships (``cuobjdump``, ``ptxas``...), via ``triton.knobs`` then ``PATH``.

    Raises:
        ToolMissingError: neither has it.
    """
    try:
        from triton import knobs

        tool = getattr(knobs.nvidia, name.replace("-", "_"))
        if tool is not None and tool.path and Path(tool.path).exists():
            return tool.path
    except Exception:  # older Triton without knobs, or a broken tool entry
        pass
    import shutil

    found = shutil.which(name)
    if found:
        return found
    raise ToolMissingError(f"{name} not found (Triton's wheel ships it under triton/backends/nvidia/bin)",
                           f"install a Triton wheel with the NVIDIA backend, or put {name} on PATH")


def _ptxas_for(capability: int) -> str:
    """The ptxas Triton itself uses for ``capability`` (3.6: ``ptxas`` below sm_100; 3.9: ``ptxas-blackwell`` from
    sm_90), via ``triton.backends.nvidia.compiler.get_ptxas``."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return get_ptxas(capability).path
    except Exception:
        return _tool("ptxas")


def _ptxas_command(capability: int, options: dict[str, Any], ptx: Path, out: Path) -> list[str]:
    """The ptxas command Triton's ``CUDABackend.make_cubin`` runs, rebuilt for a ``-v`` rerun on the same PTX.

    Mirrors, from the installed Triton: the ptxas it picks for the arch; ``-lineinfo`` (or ``-g`` /
    ``-suppress-debug-info`` per its knobs); ``--fmad=false`` without fp fusion; ``--opt-level 0`` when ptxas
    optimization is disabled; ``--regAllocOptLevel=2`` when its ``make_cubin`` passes it (3.9 does, 3.6 does not:
    read from both sources; on vector_add 4096/1 warp it changes the stack frame from 232 to 168 bytes); the
    ``ptx_options``; ``--gpu-name=sm_XYa``.
    """
    import inspect as _inspect

    from triton import knobs
    from triton.backends.nvidia.compiler import CUDABackend, sm_arch_from_capability

    try:
        source = _inspect.getsource(CUDABackend.make_cubin)
    except (OSError, TypeError):
        source = ""
    cmd = [_ptxas_for(capability)]
    if getattr(knobs.compilation, "disable_line_info", False):
        cmd += ["-lineinfo", "-suppress-debug-info"]
    elif getattr(knobs.nvidia, "disable_ptxas_opt", False):
        cmd += ["-g"]
    else:
        cmd += ["-lineinfo"]
    if not options.get("enable_fp_fusion", True):
        cmd += ["--fmad=false"]
    cmd += ["-v"]
    if getattr(knobs.nvidia, "disable_ptxas_opt", False):
        cmd += ["--opt-level", "0"]
    if "--regAllocOptLevel=2" in source:
        cmd += ["--regAllocOptLevel=2"]
    if options.get("ptx_options"):
        cmd += str(options["ptx_options"]).split(" ")
    return cmd + [f"--gpu-name={sm_arch_from_capability(capability)}", str(ptx), "-o", str(out)]


def _run_tool(cmd: list[str], what: str) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissingError(f"{what} could not run: {exc}", f"check {cmd[0]}") from exc
    if proc.returncode != 0:
        raise ToolMissingError(f"{what} failed ({proc.returncode}): {proc.stderr.strip()[:500]}", f"command: {' '.join(cmd)}")
    return proc.stdout + proc.stderr


def sass_cache_dir() -> Path:
    """Where disassembled SASS is kept between runs: ``$KERNELPILOT_CACHE_DIR/sass`` or ``~/.cache/kernelpilot/sass``.

    ``cuobjdump -sass`` costs about 0.75 s per cubin here whatever its size (tool start-up: 0.76 s for a 6 KB
    vector_add cubin, 0.74 s for a 25 KB matmul one, measured on this 2-core machine), so a re-run of
    ``--all-configs`` reads the SASS by the cubin's SHA-256 instead (Triton's own cache already skips the compile).
    """
    root = os.environ.get("KERNELPILOT_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "kernelpilot") / "sass"


def _disassemble(cuobjdump: str, cubin_path: Path, cubin: bytes) -> str:
    """``cuobjdump -sass`` of a cubin, through the on-disk cache of :func:`sass_cache_dir` (keyed by content)."""
    import gzip

    digest = hashlib.sha256(cubin).hexdigest()
    cache = sass_cache_dir() / f"{digest}.sass.gz"
    try:
        return gzip.decompress(cache.read_bytes()).decode()
    except (OSError, EOFError, ValueError):
        pass
    text = _run_tool([cuobjdump, "-sass", str(cubin_path)], "cuobjdump -sass")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(gzip.compress(text.encode()))
        os.replace(tmp, cache)
    except OSError:  # a read-only home only costs the speed-up
        pass
    return text


def _shared_limit_bytes(cc: tuple[int, int]) -> Optional[int]:
    limits = ARCH_LIMITS.get(cc)
    return limits.shared_mem_per_block_max_bytes if limits else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


class _Worker:
    """Per-process state: loaded kernel files, built inputs and compiled results (memoized within a run)."""

    def __init__(self) -> None:
        self.kernels: dict[tuple[str, int, int], Any] = {}
        self.case_key: Optional[tuple[str, str]] = None
        self.case_value: Any = None
        self.compiled: dict[str, dict[str, Any]] = {}
        self.backends: dict[int, Any] = {}

    def kernel(self, path: str) -> Any:
        """The kernel file imported in compile mode, re-imported when the file changed (size or mtime)."""
        from kernelpilot.kernels.contract import load_kernel

        st = Path(path).stat() if Path(path).exists() else None
        key = (path, st.st_mtime_ns if st else 0, st.st_size if st else 0)
        if key not in self.kernels:
            self.kernels = {key: load_kernel(path, interpreted=False)}
        return self.kernels[key]

    def case(self, kf: Any, shape: dict[str, Any]) -> Any:
        """Inputs at ``shape`` on the CPU (seed 0); only the last shape is kept (a 4096^3 matmul holds ~100 MB)."""
        from kernelpilot.kernels.contract import make_case

        key = (kf.source_sha256, json.dumps(shape, sort_keys=True, default=str))
        if key != self.case_key:
            self.case_key, self.case_value = None, None
            self.case_value, self.case_key = make_case(kf, shape, 0, "cpu"), key
        return self.case_value

    def backend(self, capability: int) -> tuple[Any, Any]:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend

        if capability not in self.backends:
            target = GPUTarget("cuda", capability, 32)
            self.backends[capability] = (target, make_backend(target))
        return self.backends[capability]


_WORKER: Optional[_Worker] = None


def _worker() -> _Worker:
    global _WORKER
    if _WORKER is None:
        _WORKER = _Worker()
    return _WORKER


def _worker_init() -> None:
    """Child-process initializer: compile mode for Triton (``TRITON_INTERPRET`` removed before Triton loads)."""
    os.environ.pop("TRITON_INTERPRET", None)
    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")


def _bind(fn: Any, args: tuple, kwargs: dict[str, Any], backend: Any) -> tuple[Any, dict, dict, dict, dict]:
    """Triton's own binding: (options, signature, constexprs, attrs, bound args) as ``JITFunction.run`` makes them.

    Raises:
        ToolMissingError: the installed Triton lacks the binder this relies on (checked on 3.6 and 3.9).
    """
    try:
        from triton import knobs
        from triton.runtime.jit import create_function_from_signature
    except ImportError as exc:
        raise ToolMissingError(f"this Triton has no create_function_from_signature ({exc})",
                               "use Triton 3.6 or newer for static inspection") from exc
    if not hasattr(fn, "_pack_args"):
        raise ToolMissingError("this Triton's JITFunction has no _pack_args", "use Triton 3.6 or newer for static inspection")
    kw = dict(kwargs)
    # What JITFunction.run adds before binding (3.6: debug, instrumentation_mode; 3.9 also fpsan_homomorphic_casts).
    kw["debug"] = kw.get("debug", getattr(fn, "debug", None)) or getattr(knobs.runtime, "debug", False)
    for opt in ("instrumentation_mode", "fpsan_homomorphic_casts"):
        if hasattr(knobs.compilation, opt):
            kw[opt] = getattr(knobs.compilation, opt)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound_args, specialization, options = binder(*args, **kw)
    options, signature, constexprs, attrs = fn._pack_args(backend, kw, bound_args, specialization, options)
    return options, signature, constexprs, attrs, bound_args


def _grid(grid: Any, bound_args: dict[str, Any]) -> list[int]:
    try:
        g = grid(bound_args) if callable(grid) else grid
        return [int(x) for x in (g if isinstance(g, (list, tuple)) else (g,))]
    except Exception:
        return []


def _fail(path: str, config: dict, arch: str, stage: str, exc: BaseException | None = None, *, error_type: str = "",
          message: str = "", hint: str = "", **extra: Any) -> dict[str, Any]:
    if exc is not None:
        error_type = error_type or type(exc).__name__
        message = message or (exc.message if isinstance(exc, KernelpilotError) else str(exc)).strip()
        hint = hint or (exc.hint if isinstance(exc, KernelpilotError) else "")
    return StaticFailure(kernel_file=path, config=config, arch=arch, stage=stage, error_type=error_type,
                         message=message[:4000], hint=hint, **extra).model_dump()


def _inspect_task(task: dict[str, Any]) -> dict[str, Any]:
    """Capture, compile and read one config; returns a dumped :class:`StaticReport` or :class:`StaticFailure`.

    Runs in a worker (or this process when safe); never raises for a config's own failure.
    """
    with warnings.catch_warnings():
        # Triton 3.9 warns once per process that TRITON_DEFAULT_FP_FUSION is unset (fusion stays on, as on 3.6).
        warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
        return _inspect_task_inner(task)


def _inspect_task_inner(task: dict[str, Any]) -> dict[str, Any]:
    path, config, arch = task["kernel_path"], dict(task["config"]), task["arch"]
    cc = parse_arch(arch)
    if _triton_tainted():
        return _fail(path, config, arch, "load", error_type="InterpreterMode",
                     message="Triton in this process was imported under TRITON_INTERPRET=1",
                     hint="static inspection must run in a process where TRITON_INTERPRET is unset")
    w = _worker()
    try:
        kf = w.kernel(path)
        from kernelpilot.kernels.contract import resolve_config, resolve_shape

        config = resolve_config(kf, config)
        shape = resolve_shape(kf, task.get("shape") or {})
    except KernelpilotError as exc:
        return _fail(path, config, arch, "load", exc)
    t0 = time.perf_counter()
    records: list[dict[str, Any]] = []
    try:
        case = w.case(kf, shape)
        from kernelpilot.kernels.contract import run_kernel

        with _capture_launches(records):
            run_kernel(kf, case.inputs, config)  # through the backend: an @triton.autotune kernel is pinned
    except Exception as exc:  # the user's run_kernel rejected the config (e.g. ValueError) or needs a GPU
        return _fail(path, config, arch, "capture", exc,
                     hint="run_kernel raised before launching; the config may be invalid for this kernel")
    capture_s = time.perf_counter() - t0
    if not records:
        return _fail(path, config, arch, "capture", error_type="NoLaunch",
                     message="run_kernel launched no @triton.jit kernel",
                     hint="run_kernel must launch the kernel with kernel[grid](...)")

    import triton
    from triton.compiler import ASTSource

    rec = records[0]
    target, backend = w.backend(cc[0] * 10 + cc[1])
    try:
        options, signature, constexprs, attrs, bound = _bind(rec["fn"], rec["args"], rec["kwargs"], backend)
    except KernelpilotError as exc:
        return _fail(path, config, arch, "compile", exc)
    except Exception as exc:
        return _fail(path, config, arch, "compile", exc, hint="Triton could not bind the launch's arguments")
    key = hashlib.sha256(json.dumps([str(rec["fn"].fn.__qualname__), kf.source_sha256, signature,
                                     {str(k): _jsonable(v) for k, v in constexprs.items()},
                                     {str(k): _jsonable(v) for k, v in attrs.items()},
                                     {k: _jsonable(v) for k, v in sorted(options.__dict__.items())}, arch],
                                    sort_keys=True, default=str).encode()).hexdigest()
    t1 = time.perf_counter()
    cached = w.compiled.get(key)
    if cached is None:
        try:
            kernel = triton.compile(ASTSource(rec["fn"], signature, constexprs, attrs), target=target,
                                    options=options.__dict__)
        except Exception as exc:
            msg = str(exc)
            return _fail(path, config, arch, "compile", exc, message=msg[-4000:], compile_s=time.perf_counter() - t1,
                         hint="Triton or ptxas rejected this config for the target")
        cached = {"cubin": kernel.asm["cubin"], "ptx": kernel.asm.get("ptx", ""), "shared": int(kernel.metadata.shared),
                  "name": kernel.metadata.name, "num_warps": int(kernel.metadata.num_warps),
                  "num_stages": int(kernel.metadata.num_stages), "compile_s": time.perf_counter() - t1,
                  "options": {k: _jsonable(v) for k, v in options.__dict__.items()}}
        w.compiled[key] = cached
    compile_s = cached["compile_s"]

    try:
        return _read_binary(task, kf, config, shape, cc, cached, signature, constexprs, bound, rec, records, case,
                            compile_s, capture_s, key)
    except KernelpilotError as exc:
        return _fail(path, config, arch, "compile", exc, compile_s=compile_s)


def _read_binary(task: dict[str, Any], kf: Any, config: dict, shape: dict, cc: tuple[int, int], cached: dict,
                 signature: dict, constexprs: dict, bound: dict[str, Any], rec: dict, records: list, case: Any,
                 compile_s: float, capture_s: float, key: str) -> dict[str, Any]:
    import torch
    import triton

    path, arch = task["kernel_path"], task["arch"]
    notes: list[str] = []
    regs = 0
    threads = cached["num_warps"] * 32
    shared = cached["shared"]
    limit = _shared_limit_bytes(cc)
    occupancy: Optional[Occupancy] = None
    max_threads: Optional[int] = None
    with tempfile.TemporaryDirectory(prefix="kp-static-") as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(cached["cubin"])
        cuobjdump = _tool("cuobjdump")
        usage = parse_resource_usage(_run_tool([cuobjdump, "--dump-resource-usage", str(cubin)], "cuobjdump"))
        res = usage.get(cached["name"]) or (next(iter(usage.values())) if usage else None)
        if res is None:
            raise ToolMissingError(f"cuobjdump reported no resource usage for {cached['name']}", "check the cubin")
        regs = int(res.get("REG", 0))
        # Resource checks first: a block that cannot load is a failure, and needs no disassembly (~0.75 s).
        fail_extra = {"shared_mem_bytes": shared, "registers_per_thread": regs, "compile_s": compile_s}
        if limit is not None and shared > limit:
            from triton.runtime.autotuner import OutOfResources

            return _fail(path, config, arch, "resources", OutOfResources(shared, limit, "shared memory"),
                         hint=f"{arch_name(cc)} allows {limit} bytes of shared memory per block; use smaller tiles or "
                              f"fewer num_stages", **fail_extra)
        if cc in ARCH_LIMITS:
            max_threads = max_threads_per_block(regs, cc)
            if threads > max_threads:
                # Triton (3.9 ``CompiledKernel._init_handles``) raises OutOfResources(..., "threads") at load when the
                # block exceeds the driver's CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK.
                from triton.runtime.autotuner import OutOfResources

                return _fail(path, config, arch, "resources", OutOfResources(threads, max_threads, "threads"),
                             hint=f"{regs} registers/thread allow at most {max_threads} threads per block on "
                                  f"{arch_name(cc)}; use fewer warps", **fail_extra)
            occupancy = theoretical_occupancy(regs, shared, threads, cc)
            if occupancy.blocks_per_sm == 0:
                return _fail(path, config, arch, "resources", error_type="OutOfResources",
                             message=f"no block of {threads} threads with {regs} registers/thread and {shared} bytes "
                                     f"of shared memory fits an {arch_name(cc)} SM (limiter: {occupancy.limiter})",
                             hint="use fewer warps or smaller tiles", **fail_extra)
        else:
            notes.append(f"no occupancy limits known for {arch_name(cc)}; occupancy not computed")
        if task.get("sass", True):
            sass_text = _disassemble(cuobjdump, cubin, cached["cubin"])
        else:
            sass_text = ""
            notes.append("SASS not read (sass=False): instruction mix and access widths are empty")
        # Spills live in the stack frame (STACK) with current ptxas (vector_add 4096 x 1 warp: STACK 168, LOCAL 0,
        # and ptxas -v: 168 B spill stores), so both count as local memory per thread.
        local = int(res.get("LOCAL", 0)) + int(res.get("STACK", 0))
        spills: tuple[int, int] | None = (0, 0)
        if local > 0 and not task.get("spill_bytes", True):
            spills = None
            notes.append("spill store/load bytes not measured (no ptxas -v rerun in this mode); n_spills and the "
                         "LDL/STL counts come from the binary")
        elif local > 0:
            ptx = Path(tmp) / "kernel.ptx"
            ptx.write_text(cached["ptx"])
            try:
                log = _run_tool(_ptxas_command(cc[0] * 10 + cc[1], cached["options"], ptx,
                                               Path(tmp) / "v.cubin"), "ptxas -v")
                spills = parse_ptxas_spills(log)
                frame = _STACK_FRAME.search(log)
                if frame and int(frame.group(1)) != int(res.get("STACK", 0)):
                    notes.append(f"ptxas -v rerun gave a {frame.group(1)} B stack frame, Triton's cubin has "
                                 f"{res.get('STACK', 0)} B: its spill bytes are not this binary's; not reported")
                    spills = None
            except KernelpilotError as exc:
                spills = None
                notes.append(f"spill bytes unknown: {exc.message}")
    instrs = parse_sass(sass_text, cached["name"]) or parse_sass(sass_text)
    mix, opcodes = instruction_mix(instrs)
    if len(records) > 1:
        notes.append(f"run_kernel launched {len(records)} kernels; the first ({cached['name']}) is reported")
    if cubin_shared := int(res.get("SHARED", 0)):
        notes.append(f"cubin SHARED {cubin_shared} B = the 1 KB per-block reservation (Nsight Compute counts it as "
                     f"driver shared memory, not static); the occupancy model adds it once"
                     if cubin_shared == 1024 else f"cubin declares {cubin_shared} B of static shared memory, not "
                     f"counted in shared_mem_bytes (Triton launches with metadata.shared)")
    tensors = {k: v for k, v in case.inputs.items() if isinstance(v, torch.Tensor)}
    report = StaticReport(
        kernel_name=cached["name"], kernel_file=path, config=config, shape=shape, arch=arch_name(cc),
        compute_capability=cc, triton_version=triton.__version__, num_warps=cached["num_warps"],
        num_stages=cached["num_stages"], threads_per_block=threads, grid=_grid(rec["grid"], bound),
        signature={str(k): str(v) for k, v in signature.items()},
        constexprs={(list(bound)[k[0]] if isinstance(k, tuple) and len(k) == 1 else str(k)): _jsonable(v)
                    for k, v in constexprs.items()},
        input_dtypes={k: str(v.dtype).replace("torch.", "") for k, v in tensors.items()},
        input_itemsize_bytes={k: int(v.element_size()) for k, v in tensors.items()},
        output_names=list(case.outputs), registers_per_thread=regs, local_mem_bytes_per_thread=local,
        n_spills=local // 4, spill_stores_bytes=None if spills is None else spills[0],
        spill_loads_bytes=None if spills is None else spills[1], stack_bytes_per_thread=int(res.get("STACK", 0)),
        shared_mem_bytes=shared, cubin_shared_bytes=int(res.get("SHARED", 0)), shared_mem_limit_bytes=limit,
        max_threads_per_block=max_threads, occupancy=occupancy, instruction_mix=mix, opcode_counts=opcodes,
        n_instructions=len(instrs),
        global_load_widths_bytes=width_histogram(instrs, "LDG"), global_store_widths_bytes=width_histogram(instrs, "STG"),
        async_copy_widths_bytes=width_histogram(instrs, "LDGSTS"),
        uses_tensor_cores=any(i.base in MMA_OPCODES for i in instrs), compile_s=round(compile_s, 4),
        capture_s=round(capture_s, 4), launches_captured=len(records), notes=notes,
        sass=sass_text if task.get("keep_sass") else None,
    )
    if task.get("save_dir"):
        out = Path(task["save_dir"])
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{kf.name}-{arch_name(cc)}-{key[:12]}"
        (out / f"{stem}.cubin").write_bytes(cached["cubin"])
        (out / f"{stem}.ptx").write_text(cached["ptx"])
        report.cubin_path, report.ptx_path = str(out / f"{stem}.cubin"), str(out / f"{stem}.ptx")
        if sass_text:
            (out / f"{stem}.sass").write_text(sass_text)
            report.sass_path = str(out / f"{stem}.sass")
    dumped = report.model_dump()
    dumped["sass"] = report.sass
    return dumped


def _safe_task(task: dict[str, Any]) -> dict[str, Any]:
    """:func:`_inspect_task` with any unexpected error turned into a failure record (a pool must not die)."""
    try:
        return _inspect_task(task)
    except BaseException as exc:  # noqa: BLE001 - recorded, never raised, by contract
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _fail(task["kernel_path"], dict(task["config"]), task["arch"], "compile", exc,
                     message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")


def _load(d: dict[str, Any]) -> StaticResult:
    if d.get("status") == "ok":
        sass = d.pop("sass", None)
        report = StaticReport.model_validate(d)
        report.sass = sass
        return report
    return StaticFailure.model_validate(d)


@contextlib.contextmanager
def _without_interpreter_env() -> Iterator[None]:
    """Remove ``TRITON_INTERPRET`` while child processes start (they inherit the environment), then restore it."""
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


def iter_tasks(tasks: list[dict[str, Any]], max_workers: Optional[int] = None,
               in_process: Optional[bool] = None) -> Iterator[tuple[int, StaticResult]]:
    """Inspect prepared tasks and yield ``(index in tasks, result)`` as each finishes (completion order).

    Tasks are handed to the workers in list order, so a caller can put the slow ones first. Closing the generator
    early (``break``, a deadline) cancels the tasks not yet started and waits for the running ones.

    Args:
        tasks: one dict per config (see :func:`run_tasks`).
        max_workers: processes for a pool (default: CPU cores, at most the task count).
        in_process: see :func:`run_tasks`.

    Yields:
        ``(i, StaticReport | StaticFailure)`` for ``tasks[i]``.

    Raises:
        KernelRunError: a worker process died (see :func:`run_tasks`).
    """
    if not tasks:
        return
    if in_process is None:
        in_process = len(tasks) == 1 and not _triton_tainted()
    if in_process:
        for i, t in enumerate(tasks):
            yield i, _load(_safe_task(t))
        return
    from concurrent.futures.process import BrokenProcessPool

    from kernelpilot.errors import KernelRunError

    workers = max(1, min(max_workers or os.cpu_count() or 1, len(tasks)))
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init)
    try:
        with _without_interpreter_env():  # workers start while submitting (spawn starts them on demand)
            futures = {pool.submit(_safe_task, t): i for i, t in enumerate(tasks)}
        for future in as_completed(futures):
            yield futures[future], _load(future.result())
    except BrokenProcessPool as exc:
        raise KernelRunError(
            f"a static-inspection worker process died ({exc}): a compile crashed, ran out of memory, or the calling "
            f"script re-ran its top level in the worker",
            "scripts that call kernelpilot's Python API must guard their top level with "
            "`if __name__ == \"__main__\":` (workers start with multiprocessing's spawn); try --workers 1") from exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_tasks(tasks: list[dict[str, Any]], max_workers: Optional[int] = None,
              in_process: Optional[bool] = None, progress: Optional[Callable[[int, int], None]] = None
              ) -> list[StaticResult]:
    """Inspect prepared tasks, in order. A task is ``{"kernel_path", "config", "arch", "shape", "keep_sass",
    "save_dir", "spill_bytes"}``, optionally ``"sass": False`` to skip the disassembly (~0.75 s a config; the
    instruction mix is then empty).

    Args:
        tasks: one dict per config (see :func:`inspect_configs`, which builds them).
        max_workers: processes for a pool (default: CPU cores, at most the task count).
        in_process: True to compile here, False to use child processes; None picks here when Triton in this process
            is in compile mode and there is a single task, else children.
        progress: called as ``progress(done, total)`` after each config finishes.

    Returns:
        One :class:`StaticReport` or :class:`StaticFailure` per task.

    Raises:
        KernelRunError: a worker process died (crash, out of memory, or a caller script without a
            ``__main__`` guard, which spawn-started workers re-run).
    """
    results: list[Optional[StaticResult]] = [None] * len(tasks)
    for done, (i, result) in enumerate(iter_tasks(tasks, max_workers=max_workers, in_process=in_process), 1):
        results[i] = result
        if progress:
            progress(done, len(tasks))
    return results  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------------------------------
# public API


def read_kernel_meta(kernel_path: str | Path) -> tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]:
    """(resolved path, TUNABLES, DEFAULT_CONFIG, SHAPE) of a kernel file, imported in this process's Triton mode.

    The file is imported under the interpreter when this process already runs Triton that way (or
    ``TRITON_INTERPRET`` is set), else in compile mode; only module-level constants are read.

    Raises:
        ContractError: the file breaks the kernel-file contract.
    """
    from kernelpilot.kernels.contract import load_kernel

    kf = load_kernel(kernel_path, interpreted=_triton_tainted())
    return str(kf.path), kf.tunables, kf.default_config, dict(kf.shape)


def space_configs(tunables: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every config of a TUNABLES space, in ``itertools.product`` order of the file's tunables."""
    keys = list(tunables)
    return [dict(zip(keys, values)) for values in itertools.product(*(tunables[k] for k in keys))]


def _check_shape_keys(shape: Optional[dict[str, Any]], known: dict[str, Any], path: str) -> None:
    for key in shape or {}:
        if key not in known:
            raise ContractError(f"{path}: --shape sets `{key}`, which SHAPE does not have ({', '.join(sorted(known))})",
                                "use the names in the kernel file's SHAPE")


def inspect_configs(kernel_path: str | Path, configs: list[dict[str, Any]], shape: Optional[dict[str, Any]] = None,
                    arch: Optional[str] = None, max_workers: Optional[int] = None, *, keep_sass: bool = False,
                    save_dir: str | Path | None = None, in_process: Optional[bool] = None,
                    spill_bytes: bool = True, progress: Optional[Callable[[int, int], None]] = None,
                    timeout_s: Optional[float] = None) -> list[StaticResult]:
    """Compile several configs of one kernel file for ``arch`` (in parallel) and read their binaries.

    Args:
        kernel_path: the kernel ``.py`` file.
        configs: configs (partial ones are completed from DEFAULT_CONFIG and validated against TUNABLES).
        shape: overrides of ``SHAPE`` (the real GPU shape is the default, since the compile specializes on it).
        arch: target (``"sm_90"``); None: this machine's GPU, or :data:`DEFAULT_CPU_ARCH` without one.
        max_workers: processes (default: CPU cores).
        keep_sass: keep each report's SASS text in ``.sass`` (not serialized).
        save_dir: also write each config's ``.cubin``, ``.ptx`` and ``.sass`` there.
        in_process: see :func:`run_tasks`.
        spill_bytes: for configs with local memory, rerun ``ptxas -v`` on the PTX to split it into spill store and
            load bytes (costs one more ptxas run per spilling config).
        progress: called as ``progress(done, total)`` after each config.
        timeout_s: run every config in an isolated worker (:func:`isolated_workers`) that may take this many seconds
            a config; a config whose worker exits, crashes or hangs is a ``stage="worker"`` failure and the others
            go on. None: the process pool (or this process) as ``in_process`` says, without a timeout.

    Returns:
        One :class:`StaticReport` or :class:`StaticFailure` per config, in order; failures are recorded, not raised.

    Raises:
        ContractError: the kernel file breaks the contract, a config or shape names unknown tunables/dimensions, or
            the arch is not an arch name.
        KernelRunError: a worker process died (see :func:`run_tasks`; not with ``timeout_s``).
        KernelFailed: with ``timeout_s``, importing the kernel file exited, crashed, hung or raised.
    """
    if timeout_s is not None:
        with isolated_workers(kernel_path, max_workers, timeout_s) as (iso, meta):
            tasks = config_tasks(kernel_path, configs, shape, arch, keep_sass=keep_sass, save_dir=save_dir,
                                 spill_bytes=spill_bytes, meta=meta)
            return run_isolated_tasks(iso, tasks, progress)
    tasks = config_tasks(kernel_path, configs, shape, arch, keep_sass=keep_sass, save_dir=save_dir,
                         spill_bytes=spill_bytes)
    return run_tasks(tasks, max_workers=max_workers, in_process=in_process, progress=progress)


@contextlib.contextmanager
def isolated_workers(kernel_path: str | Path, max_workers: Optional[int], timeout_s: float
                     ) -> Iterator[tuple[Any, tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]]]:
    """Compile-mode isolated workers for ``kernel_path`` (:class:`~kernelpilot.search.isolated.IsolatedKernel`, up
    to ``max_workers``, default CPU cores; ``TRITON_INTERPRET`` removed while they start) and the file's
    :func:`read_kernel_meta`, read in the first worker: this process never imports the kernel file.

    Raises:
        ContractError: the kernel file breaks the contract.
        KernelFailed: importing the kernel file exited, crashed, hung (over ``timeout_s``) or raised.
    """
    from kernelpilot.search.isolated import IsolatedKernel

    with IsolatedKernel(kernel_path, interpreted=False, timeout_s=timeout_s, device="cpu",
                        max_workers=max_workers or os.cpu_count() or 1, env=_without_interpreter_env()) as iso:
        yield iso, iso.call("kernelpilot.profile.static_isolated:_meta_in_worker")


def run_isolated_tasks(iso: Any, tasks: list[dict[str, Any]], progress: Optional[Callable[[int, int], None]] = None
                       ) -> list[StaticResult]:
    """Inspect prepared tasks in the workers of :func:`isolated_workers`, in task order; a worker that exits,
    crashes or hangs on a config gives that config a ``stage="worker"`` :class:`StaticFailure` with ``failure`` set.
    ``progress(done, total)`` after each config. Raises nothing for a config's own failure."""
    def failed(task: dict[str, Any], exc: KernelpilotError) -> StaticResult:
        return StaticFailure(kernel_file=task["kernel_path"], config=dict(task["config"]), arch=task["arch"],
                             stage="worker", error_type=type(exc).__name__, message=exc.message[:4000],
                             hint=exc.hint, failure=getattr(exc, "failure", "runtime_error"))

    results: list[Optional[StaticResult]] = [None] * len(tasks)
    for k, (i, r) in enumerate(iso.map("kernelpilot.profile.static_isolated:_task_in_worker", tasks, failed), 1):
        results[i] = r if isinstance(r, (StaticReport, StaticFailure)) else _load(r)
        if progress:
            progress(k, len(tasks))
    return results  # type: ignore[return-value]


def raise_static_failure(result: StaticFailure, what: str) -> None:
    """Raise the error a failed single config stands for (``what`` names it in the message): KernelFailed (with the
    typed ``failure``) for a worker that exited, crashed or hung; ContractError for ``load``/``capture``;
    KernelRunError for ``compile``/``resources``.

    Raises:
        KernelpilotError: always.
    """
    from kernelpilot.errors import KernelFailed, KernelRunError

    message = f"{what}: {result.stage} failed: {result.error_type}: {result.message}"
    if result.stage == "worker":
        raise KernelFailed(message, result.hint, result.failure or "runtime_error")
    cls = ContractError if result.stage in ("load", "capture") else KernelRunError
    raise cls(message, result.hint)


def config_tasks(kernel_path: str | Path, configs: list[dict[str, Any]], shape: Optional[dict[str, Any]] = None,
                 arch: Optional[str] = None, *, keep_sass: bool = False, save_dir: str | Path | None = None,
                 spill_bytes: bool = True, sass: bool = True,
                 meta: Optional[tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]]] = None
                 ) -> list[dict[str, Any]]:
    """The tasks :func:`run_tasks` / :func:`iter_tasks` take for ``configs`` (arguments as :func:`inspect_configs`),
    one per config in order, each config completed from DEFAULT_CONFIG and validated. ``sass=False`` skips the
    disassembly (``cuobjdump -sass``, ~0.75 s a config on a cold SASS cache): registers, spills, shared memory,
    max threads and occupancy are still read; the instruction mix and access widths stay empty. ``meta``: the
    kernel file's :func:`read_kernel_meta`, already read (in an isolated worker), so the file is not imported here.

    Raises:
        ContractError: as :func:`inspect_configs`.
    """
    arch = arch or default_arch()
    parse_arch(arch)
    path, tunables, default, base_shape = meta or read_kernel_meta(kernel_path)
    _check_shape_keys(shape, base_shape, path)
    from kernelpilot.kernels.contract import validate_config

    full = []
    for cfg in configs:
        merged = {**default, **cfg}
        validate_config(merged, tunables, path, what="--config")
        full.append(merged)
    return [{"kernel_path": path, "config": c, "arch": arch, "shape": dict(shape or {}), "keep_sass": keep_sass,
             "save_dir": str(save_dir) if save_dir else None, "spill_bytes": spill_bytes, "sass": sass} for c in full]


def inspect_config(kernel_path: str | Path, config: Optional[dict[str, Any]] = None,
                   shape: Optional[dict[str, Any]] = None, arch: Optional[str] = None, *, keep_sass: bool = False,
                   save_dir: str | Path | None = None, timeout_s: Optional[float] = None) -> StaticReport:
    """Compile one config for ``arch`` without a GPU and report registers, spills, shared memory, occupancy and the
    SASS instruction mix.

    Args:
        kernel_path: the kernel ``.py`` file.
        config: tunables to override (the rest from DEFAULT_CONFIG).
        shape: overrides of ``SHAPE``.
        arch: target such as ``"sm_90"``; None: the GPU here, else :data:`DEFAULT_CPU_ARCH`.
        keep_sass: keep the SASS text in the report's ``.sass``.
        save_dir: also write the cubin, PTX and SASS there.
        timeout_s: run it in an isolated worker with this limit (see :func:`inspect_configs`).

    Returns:
        The :class:`StaticReport`.

    Raises:
        ContractError: the file, config, shape or arch is wrong; or the config failed to capture (``run_kernel``
            raised) — the message carries the original error.
        KernelRunError: Triton or ptxas failed to compile it, or the compiled block cannot load on the target
            (``OutOfResources``: too much shared memory, or no block fits).
        KernelFailed: with ``timeout_s``, the kernel file exited, crashed, hung or raised in its worker.
    """
    result = inspect_configs(kernel_path, [config or {}], shape=shape, arch=arch, keep_sass=keep_sass,
                             save_dir=save_dir, timeout_s=timeout_s)[0]
    if isinstance(result, StaticFailure):
        raise_static_failure(result, f"{Path(result.kernel_file).name} {result.config} for {result.arch}")
    return result


def inspect_space(kernel_path: str | Path, shape: Optional[dict[str, Any]] = None, arch: Optional[str] = None,
                  max_workers: Optional[int] = None, limit: Optional[int] = None, seed: int = 0,
                  spill_bytes: bool = False, progress: Optional[Callable[[int, int], None]] = None,
                  timeout_s: Optional[float] = None) -> StaticSpace:
    """Inspect the whole TUNABLES space (or a sample of ``limit`` configs) in parallel over CPU cores.

    Args:
        kernel_path: the kernel ``.py`` file.
        shape: overrides of ``SHAPE``.
        arch: target (see :func:`inspect_config`).
        max_workers: processes (default: CPU cores).
        limit: inspect at most this many configs: DEFAULT_CONFIG plus a seeded random sample of the rest, kept in
            space order. None inspects all.
        seed: seed of the sample.
        spill_bytes: rerun ``ptxas -v`` for spilling configs (off by default here: the table needs n_spills, which
            the binary gives, and the rerun doubles the cost of every spilling config).
        progress: called as ``progress(done, total)`` after each config.
        timeout_s: inspect in isolated workers with this limit a config (see :func:`inspect_configs`): a config
            whose worker exits, crashes or hangs is a ``stage="worker"`` failure and the table goes on.

    Returns:
        A :class:`StaticSpace` saying how many of how many configs were inspected, with every result.

    Raises:
        ContractError: bad kernel file, shape, arch or ``limit < 1``.
        KernelRunError: a worker process died (see :func:`run_tasks`; not with ``timeout_s``).
        KernelFailed: with ``timeout_s``, importing the kernel file exited, crashed, hung or raised.
    """
    if limit is not None and limit < 1:
        raise ContractError(f"--limit {limit} must be at least 1", "e.g. --limit 32")
    arch = arch or default_arch()
    if timeout_s is not None:
        with isolated_workers(kernel_path, max_workers, timeout_s) as (iso, meta):
            return _space(meta, shape, arch, max_workers, limit, seed, spill_bytes, progress, iso)
    return _space(read_kernel_meta(kernel_path), shape, arch, max_workers, limit, seed, spill_bytes, progress, None)


def _space(meta: tuple[str, dict[str, list[Any]], dict[str, Any], dict[str, Any]], shape: Optional[dict[str, Any]],
           arch: str, max_workers: Optional[int], limit: Optional[int], seed: int, spill_bytes: bool,
           progress: Optional[Callable[[int, int], None]], iso: Any) -> StaticSpace:
    """:func:`inspect_space` once the kernel file's meta is known; ``iso``: isolated workers, or None for the pool."""
    path, tunables, default, base_shape = meta
    _check_shape_keys(shape, base_shape, path)
    every = space_configs(tunables)
    chosen = every
    sampled = limit is not None and limit < len(every)
    if sampled:
        rng = random.Random(seed)
        rest = [i for i, c in enumerate(every) if c != default]
        pick = set(rng.sample(rest, limit - 1)) | {i for i, c in enumerate(every) if c == default}
        chosen = [c for i, c in enumerate(every) if i in pick]
    workers = max(1, min(max_workers or os.cpu_count() or 1, len(chosen)))
    t0 = time.perf_counter()
    if iso is not None:
        iso.max_workers = workers
        results = run_isolated_tasks(iso, config_tasks(path, chosen, shape, arch, spill_bytes=spill_bytes, meta=meta),
                                     progress)
    else:
        results = inspect_configs(path, chosen, shape=shape, arch=arch, max_workers=workers, in_process=False,
                                  spill_bytes=spill_bytes, progress=progress)
    n_ok = sum(isinstance(r, StaticReport) for r in results)
    return StaticSpace(kernel_file=path, arch=arch, shape={**base_shape, **(shape or {})}, n_configs_total=len(every),
                       n_inspected=len(chosen), sampled=sampled, sample_seed=seed, n_ok=n_ok,
                       n_failed=len(results) - n_ok, max_workers=workers, wall_s=round(time.perf_counter() - t0, 3),
                       results=results)


def inspect_all(kernel_path: str | Path, shape: Optional[dict[str, Any]] = None, arch: Optional[str] = None,
                max_workers: Optional[int] = None, limit: Optional[int] = None) -> list[StaticResult]:
    """Every config of the TUNABLES space (``itertools.product``), compiled in parallel; failures recorded.

    Same arguments as :func:`inspect_space`, which also says how many configs the space holds.

    Returns:
        One :class:`StaticReport` or :class:`StaticFailure` per inspected config, in space order.

    Raises:
        ContractError: bad kernel file, shape or arch.
        KernelRunError: a worker process died (see :func:`run_tasks`).
    """
    return inspect_space(kernel_path, shape=shape, arch=arch, max_workers=max_workers, limit=limit).results
