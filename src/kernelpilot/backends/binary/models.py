"""The records of static inspection: one config's :class:`StaticReport` or :class:`StaticFailure`, and a whole
space's :class:`StaticSpace` (made by :mod:`kernelpilot.profile.static`, filled by
:mod:`kernelpilot.backends.triton.compile`).

Shared memory: a Triton kernel declares only dynamic shared memory (``.extern .shared global_smem``), sized by
``metadata.shared`` at launch; that is what ``shared_mem_bytes`` reports and what the occupancy model gets. The
cubin's own ``SHARED`` figure is reported apart (``cubin_shared_bytes``): for the matmul example at 64x64x32, 2
stages, it is 1024 while Nsight Compute on an H200 reported ``launch__shared_mem_per_block_static`` 0, dynamic 16384
and driver-reserved 1024 for the same kernel (tests/fixtures/ncu/h200_matmul_bf16_64x64x32_s2.ncu-rep) — so that
1 KB is the per-block reservation the occupancy model already adds, not extra static memory.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, Field

from kernelpilot.backends.binary.occupancy import Occupancy

__all__ = ["NO_BINARY", "StaticFailure", "StaticReport", "StaticResult", "StaticSpace", "dump_result",
           "load_result"]

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
            driver's rule for ``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`` (see
            :func:`kernelpilot.backends.binary.arch.max_threads_per_block`); None for an arch without known limits.
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
        cubin_shared_bytes: the cubin's SHARED figure (see this module's docstring on the 1 KB reservation).
        shared_mem_limit_bytes: the target's per-block maximum (None for an arch without known limits).
        occupancy: theoretical occupancy of (registers, shared_mem_bytes, threads) by the CUDA occupancy-calculator
            rules (docs/measuring.md, "Occupancy"); None for an arch without known limits.
        instruction_mix: static count of SASS instructions per group of
            :data:`kernelpilot.backends.binary.sass.INSTRUCTION_GROUPS` (instructions in the binary, not executed counts).
        opcode_counts: static count of every SASS base opcode.
        n_instructions: SASS instructions in the kernel.
        global_load_widths_bytes: LDG instructions by access width per thread in bytes (``LDG.E.128`` -> 16).
        global_store_widths_bytes: STG instructions by width in bytes.
        async_copy_widths_bytes: LDGSTS instructions by width in bytes.
        uses_tensor_cores: any MMA opcode (:data:`kernelpilot.backends.binary.sass.MMA_OPCODES`) in the SASS.
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


#: :attr:`StaticFailure.stage` of a kernel whose back end has no binary to compile for a target (its language runs
#: prebuilt kernels, e.g. plain PyTorch): not a fault of the config, so static pruning measures it.
NO_BINARY = "no_binary"


class StaticFailure(BaseModel):
    """A config that could not be inspected, with the reason (recorded, never raised, by
    :func:`kernelpilot.profile.static.inspect_configs`).

    Attributes:
        status: always ``"failed"``.
        kernel_file, config, arch: what was attempted.
        stage: where it failed: ``"load"`` (kernel file), ``"capture"`` (setup/run_kernel raised, e.g. a
            ValueError for an impossible tile), ``"compile"`` (Triton or ptxas), ``"resources"`` (compiled, but the
            block would not load on the target: shared memory over the per-block limit, or no block fits an SM),
            ``"worker"`` (inspected in an isolated worker that exited, crashed or hung: see ``failure``),
            :data:`NO_BINARY` (the kernel's back end compiles nothing for a target: a plain-PyTorch kernel; nothing
            to judge, so never a reason to skip the config).
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
        n_configs_total: valid configs of the space: the TUNABLES product (of the candidate lists) less those the
            kernel file's CONSTRAINTS exclude.
        n_excluded: configs of the TUNABLES product that CONSTRAINTS exclude (not inspected, not in ``results``).
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
    n_excluded: int = 0
    n_inspected: int
    sampled: bool
    sample_seed: int
    n_ok: int
    n_failed: int
    max_workers: int
    wall_s: float
    results: list[Union[StaticReport, StaticFailure]]



def load_result(d: dict[str, Any]) -> StaticResult:
    """A result dict a worker returned (``model_dump()`` of either record, plus the report's ``sass`` text) back as
    a :class:`StaticReport` (``status == "ok"``, its ``sass`` kept) or :class:`StaticFailure`.

    Raises:
        pydantic.ValidationError: the dict is neither record.
    """
    if d.get("status") == "ok":
        sass = d.pop("sass", None)
        report = StaticReport.model_validate(d)
        report.sass = sass
        return report
    return StaticFailure.model_validate(d)


def dump_result(result: StaticResult) -> dict[str, Any]:
    """The inverse of :func:`load_result`: ``model_dump()`` of either record plus, for a report, its ``sass`` text
    (excluded from serialization, kept across a process boundary). Raises nothing."""
    dumped = result.model_dump()
    if isinstance(result, StaticReport):
        dumped["sass"] = result.sass
    return dumped

