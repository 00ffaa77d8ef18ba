"""Compile a kernel file's Triton kernel for a target GPU without a GPU, and read the binary (the Triton side of
static inspection; the public API is :mod:`kernelpilot.profile.static`, docs/measuring.md "Native code and static
facts").

How it works, for one config (:func:`_inspect_task`):

1. **Capture the launch.** The kernel file is imported *not* interpreted, ``setup`` builds inputs on the CPU at the
   real GPU shape (``SHAPE``; the compile specializes on it) and ``run_kernel`` is called while
   ``triton.runtime.jit.JITFunction.run`` is replaced by a recorder: ``kernel[grid](...)`` ends in
   ``JITFunction.run(*args, grid=, warmup=, **kwargs)`` in Triton 3.6 and 3.9 alike (``KernelInterface.__getitem__``
   returns ``lambda *a, **k: self.run(grid=grid, warmup=False, *a, **k)``), so the recorder sees the JIT function,
   its arguments, the grid and ``num_warps``/``num_stages`` and launches nothing.
2. **Specialize as Triton does** (:func:`_bind`): Triton's own binder (``create_function_from_signature`` with
   ``native_specialize_impl``) and ``JITFunction._pack_args``, both with the same signatures in 3.6 and 3.9; the
   run-time options Triton adds before binding (``debug``, ``instrumentation_mode``, 3.9's
   ``fpsan_homomorphic_casts``) are added when the installed ``knobs`` has them.
3. **Compile** with ``triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32), options=...)``; Triton's own
   cache makes repeats cheap across runs, and results are memoized within a process.
4. **Read the binary** (:mod:`kernelpilot.backends.binary.tools`): ``cuobjdump --dump-resource-usage`` gives
   registers/thread and local memory, ``-sass`` the instruction mix; with local memory, ``ptxas -v`` on the PTX
   splits it into spill stores and loads. A config whose block could not load on the target (shared memory over the
   per-block maximum, more threads than its registers allow, no block fits an SM) is a ``resources`` failure with the
   message Triton would raise at load.

Compiling needs Triton in compile mode: :mod:`kernelpilot.backends.compile_env` says when this process cannot, and
makes child processes that can.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Optional

from kernelpilot.backends.binary.arch import arch_name, max_threads_per_block, parse_arch
from kernelpilot.backends.binary.models import StaticFailure, StaticReport
from kernelpilot.backends.binary.occupancy import ARCH_LIMITS, Occupancy, theoretical_occupancy
from kernelpilot.backends.binary.sass import MMA_OPCODES, instruction_mix, parse_sass, width_histogram
from kernelpilot.backends.binary.tools import (STACK_FRAME, disassemble, find_tool, parse_ptxas_spills,
                                               parse_resource_usage, ptxas_command, run_tool)
from kernelpilot.backends.compile_env import compile_mode_unavailable as _triton_tainted
from kernelpilot.errors import KernelpilotError, ToolMissingError

__all__: list[str] = []  # the worker side of kernelpilot.profile.static; nothing here is public API

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
        cuobjdump = find_tool("cuobjdump")
        usage = parse_resource_usage(run_tool([cuobjdump, "--dump-resource-usage", str(cubin)], "cuobjdump"))
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
            sass_text = disassemble(cuobjdump, cubin, cached["cubin"])
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
                log = run_tool(ptxas_command(cc[0] * 10 + cc[1], cached["options"], ptx,
                                               Path(tmp) / "v.cubin"), "ptxas -v")
                spills = parse_ptxas_spills(log)
                frame = STACK_FRAME.search(log)
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
