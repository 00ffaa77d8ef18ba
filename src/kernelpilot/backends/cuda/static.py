"""Static inspection of a CUDA C++ kernel file without a GPU: build the config's shared library for the target with
nvcc (:func:`kernelpilot.backends.cuda.build.build_shared`, the very binary a GPU run loads) and read it with the
tools static inspection already uses (:mod:`kernelpilot.backends.binary.tools`: ``cuobjdump --dump-resource-usage``,
``-sass``, ``-elf``; :mod:`kernelpilot.backends.binary.sass`; :mod:`kernelpilot.backends.binary.occupancy`).

One task dict per config, as :func:`kernelpilot.profile.static.config_tasks` builds them for Triton; the result is a
dumped :class:`~kernelpilot.backends.binary.models.StaticReport` or ``StaticFailure`` (never raised). Per function:
registers and static shared memory from ``ptxas -v`` (cuobjdump's ``SHARED`` adds the 1 KB per-block reservation on
sm_90: 17408 for 16384 B of ``__shared__`` arrays), spills and stack frame from the same log, the block size from
``THREADS_PER_BLOCK`` (sidecar or ``// kernelpilot:`` line; an expression over the tunables) or the kernel's
``__launch_bounds__`` (``EIATTR_MAX_THREADS``), dynamic shared memory from ``DYNAMIC_SHARED_BYTES`` (else 0, said
in the notes). The function reported is the ``__global__`` kernel with the most SASS instructions.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path
from typing import Any

from kernelpilot.backends.cuda.signature import eval_expr as eval_tunable_expr
from kernelpilot.errors import KernelpilotError
from kernelpilot.backends.binary.arch import arch_name, max_threads_per_block, parse_arch
from kernelpilot.backends.binary.tools import disassemble, find_tool, parse_resource_usage, run_tool
from kernelpilot.backends.binary.occupancy import ARCH_LIMITS, theoretical_occupancy
from kernelpilot.backends.binary.sass import MMA_OPCODES, instruction_mix, parse_sass, width_histogram
from kernelpilot.backends.binary.models import StaticFailure, StaticReport

__all__ = ["eval_tunable_expr", "inspect_task", "parse_max_threads", "parse_ptxas_functions"]

_kernels: dict[str, Any] = {}
def parse_ptxas_functions(log: str) -> dict[str, dict[str, int]]:
    """``ptxas -v`` output -> ``{mangled function: {"registers", "smem", "stack", "spill_stores", "spill_loads"}}``
    (bytes except registers)."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line) or re.search(r"Function properties for (\S+)", line)
        if m:
            current = m.group(1)
            out.setdefault(current, {"registers": 0, "smem": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0})
            continue
        if current is None:
            continue
        rec = out[current]
        if (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)):
            rec["stack"], rec["spill_stores"], rec["spill_loads"] = (int(x) for x in m.groups())
        if (m := re.search(r"Used (\d+) registers", line)):
            rec["registers"] = int(m.group(1))
        if (m := re.search(r"(\d+) bytes smem", line)):
            rec["smem"] = int(m.group(1))
    return out


def parse_max_threads(elf: str) -> dict[str, int]:
    """``cuobjdump -elf`` output -> ``{mangled function: threads}`` from ``EIATTR_MAX_THREADS`` (set by
    ``__launch_bounds__``; the product of its x, y, z)."""
    out: dict[str, int] = {}
    current = None
    lines = elf.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*\.nv\.info\.(\S+)\s*$", line)
        if m:
            current = m.group(1)
        elif "EIATTR_MAX_THREADS" in line and current:
            for nxt in lines[i + 1:i + 4]:
                if "Value:" in nxt:
                    dims = [int(x, 16) for x in re.findall(r"0x([0-9a-fA-F]+)", nxt)]
                    if dims:
                        out[current] = math.prod(dims)
                    break
    return out


def _kernel(path: str) -> Any:
    from kernelpilot.kernels.contract import load_kernel

    if path not in _kernels:
        _kernels[path] = load_kernel(path, interpreted=True)  # no GPU needed: nothing runs, nvcc builds
    return _kernels[path]


def _fail(task: dict[str, Any], stage: str, exc: BaseException | None = None, **extra: Any) -> dict[str, Any]:
    message = extra.pop("message", "") or (exc.message if isinstance(exc, KernelpilotError) else str(exc or ""))
    hint = extra.pop("hint", "") or (exc.hint if isinstance(exc, KernelpilotError) else "")
    return StaticFailure(kernel_file=task["kernel_path"], config=dict(task["config"]), arch=task["arch"], stage=stage,
                         error_type=extra.pop("error_type", type(exc).__name__ if exc else "Error"),
                         message=message[:4000], hint=hint, **extra).model_dump()


def _block_threads(kf: Any, config: dict[str, Any], func: str, elf_threads: dict[str, int]) -> tuple[int, str]:
    """(threads per block, where it came from); 0 when unknown."""
    given = getattr(kf.module, "THREADS_PER_BLOCK", None)
    if given is not None:
        return eval_tunable_expr(given, config) or 0, "THREADS_PER_BLOCK"
    if func in elf_threads:
        return elf_threads[func], "__launch_bounds__"
    for name in ("BLOCK_SIZE", "THREADS", "NUM_THREADS", "THREADS_PER_BLOCK", "BLOCK_DIM", "BLOCK_THREADS"):
        if isinstance(config.get(name), int):
            return int(config[name]), f"the tunable {name}"
    return 0, ""


def inspect_task(task: dict[str, Any]) -> dict[str, Any]:
    """Build and read one config of a ``.cu`` file (task keys as :func:`kernelpilot.profile.static.config_tasks`);
    returns a dumped StaticReport, or a StaticFailure at stage ``load``, ``compile`` or ``resources``. Raises
    nothing for the config's own faults."""
    from kernelpilot.backends.cuda.build import build_shared, nvcc_version
    from kernelpilot.kernels.contract import resolve_config, resolve_shape

    path, arch = task["kernel_path"], task["arch"]
    try:
        kf = _kernel(path)
        config = resolve_config(kf, dict(task["config"]))
        shape = resolve_shape(kf, task.get("shape") or {})
        cc = parse_arch(arch)
    except KernelpilotError as exc:
        return _fail(task, "load", exc)
    try:
        built = build_shared(kf.path, config, arch_name(cc), extra_flags=kf.extras.get("nvcc_flags"),
                             include_dirs=kf.extras.get("include_dirs"))
    except KernelpilotError as exc:
        return _fail(task, "compile", exc)
    try:
        return _report(task, kf, config, shape, cc, built, nvcc_version())
    except KernelpilotError as exc:
        return _fail(task, "compile", exc, compile_s=built.seconds)


def _report(task: dict[str, Any], kf: Any, config: dict[str, Any], shape: dict[str, Any], cc: tuple[int, int],
            built: Any, nvcc: str) -> dict[str, Any]:
    cuobjdump = find_tool("cuobjdump")
    so = built.path
    usage = parse_resource_usage(run_tool([cuobjdump, "--dump-resource-usage", str(so)], "cuobjdump"))
    sass_text = disassemble(cuobjdump, so, so.read_bytes())
    funcs = {name: parse_sass(sass_text, name) for name in usage}
    if not funcs:
        return _fail(task, "compile", error_type="NoKernel", message=f"{kf.path.name}: the build holds no __global__ "
                     "function for the target", hint="define the kernels solve launches with __global__")
    func = max(funcs, key=lambda n: len(funcs[n]))
    instrs, res = funcs[func], usage[func]
    ptxas = parse_ptxas_functions(built.log).get(func, {})
    elf = run_tool([cuobjdump, "-elf", str(so)], "cuobjdump -elf") if not isinstance(
        getattr(kf.module, "THREADS_PER_BLOCK", None), (int, str)) else ""
    threads, threads_from = _block_threads(kf, config, func, parse_max_threads(elf))
    regs = int(ptxas.get("registers") or res.get("REG", 0))
    static_smem = int(ptxas["smem"]) if "smem" in ptxas else max(0, int(res.get("SHARED", 0)) - 1024)
    dynamic = eval_tunable_expr(getattr(kf.module, "DYNAMIC_SHARED_BYTES", None), config)
    shared = static_smem + (dynamic or 0)
    stages = eval_tunable_expr(getattr(kf.module, "STAGES", None), config) or 1
    notes = [f"built by {nvcc} with -arch={built.arch} ({'cache hit' if built.hit else f'{built.seconds:.1f} s'}); "
             f"the binary a GPU run loads ({so.name})"]
    if len(funcs) > 1:
        notes.append(f"{len(funcs)} kernels in the binary; the largest ({func}) is reported: "
                     + ", ".join(f"{n} ({usage[n].get('REG', 0)} registers)" for n in funcs if n != func))
    notes.append("dynamic shared memory: " + (f"{dynamic} B from DYNAMIC_SHARED_BYTES" if dynamic is not None
                                              else "known only at launch; 0 assumed (set DYNAMIC_SHARED_BYTES)"))
    fail_extra = {"shared_mem_bytes": shared, "registers_per_thread": regs, "compile_s": built.seconds}
    limits = ARCH_LIMITS.get(cc)
    occupancy, max_threads = None, None
    if limits is not None and shared > limits.shared_mem_per_block_max_bytes:
        return _fail(task, "resources", error_type="OutOfResources", message=f"{shared} B of shared memory per block > "
                     f"{limits.shared_mem_per_block_max_bytes} B on {arch_name(cc)}", hint="use smaller tiles",
                     **fail_extra)
    if limits is not None:
        max_threads = max_threads_per_block(regs, cc)
        if threads > max_threads:
            return _fail(task, "resources", error_type="OutOfResources", message=f"{threads} threads per block with "
                         f"{regs} registers/thread: at most {max_threads} fit on {arch_name(cc)}",
                         hint="use fewer threads per block", **fail_extra)
        if threads:
            occupancy = theoretical_occupancy(regs, shared, threads, cc)
            notes.append(f"block size {threads} threads (from {threads_from})")
        else:
            notes.append("block size unknown (no THREADS_PER_BLOCK, __launch_bounds__ or BLOCK_SIZE tunable): "
                         "occupancy not computed")
    else:
        notes.append(f"no occupancy limits known for {arch_name(cc)}; occupancy not computed")
    mix, opcodes = instruction_mix(instrs)
    local = int(res.get("LOCAL", 0)) + int(res.get("STACK", 0))
    sig = kf.extras["signature"]
    report = StaticReport(
        kernel_name=func, kernel_file=str(kf.path), config=config, shape=shape, arch=arch_name(cc),
        compute_capability=cc, triton_version="", num_warps=-(-threads // 32), num_stages=stages,
        threads_per_block=threads, max_threads_per_block=max_threads,
        signature={p.name: p.ctype + ("*" if p.kind == "buffer" else "") for p in sig.params},
        input_dtypes={p.name: p.dtype for p in sig.buffers},
        input_itemsize_bytes={p.name: _itemsize(p.dtype) for p in sig.buffers}, output_names=list(sig.outputs),
        registers_per_thread=regs, local_mem_bytes_per_thread=local, n_spills=local // 4,
        spill_stores_bytes=ptxas.get("spill_stores", 0), spill_loads_bytes=ptxas.get("spill_loads", 0),
        stack_bytes_per_thread=int(res.get("STACK", 0)), shared_mem_bytes=shared,
        cubin_shared_bytes=int(res.get("SHARED", 0)),
        shared_mem_limit_bytes=limits.shared_mem_per_block_max_bytes if limits else None, occupancy=occupancy,
        instruction_mix=mix, opcode_counts=opcodes, n_instructions=len(instrs),
        global_load_widths_bytes=width_histogram(instrs, "LDG"), global_store_widths_bytes=width_histogram(instrs, "STG"),
        async_copy_widths_bytes=width_histogram(instrs, "LDGSTS"),
        uses_tensor_cores=any(i.base in MMA_OPCODES for i in instrs), compile_s=round(built.seconds, 4),
        launches_captured=0, notes=notes, sass=sass_text if task.get("keep_sass") else None,
    )
    if task.get("save_dir"):
        out = Path(task["save_dir"])
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{kf.name}-{arch_name(cc)}-{built.key[:12]}"
        shutil.copy2(so, out / f"{stem}.so")
        (out / f"{stem}.sass").write_text(sass_text)
        report.cubin_path, report.sass_path = str(out / f"{stem}.so"), str(out / f"{stem}.sass")
    dumped = report.model_dump()
    dumped["sass"] = report.sass
    return dumped


def _itemsize(dtype: str) -> int:
    import torch

    return int(getattr(torch, dtype).itemsize)
