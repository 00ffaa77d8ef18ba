"""Export's worker side: compile one (config, shape) for the target and record how to launch it without Triton.

Runs in a compile-mode :class:`~kernelpilot.search.isolated.IsolatedKernel` worker (named by string from
:mod:`kernelpilot.bundle.export`). It reuses static inspection (:func:`kernelpilot.backends.triton.compile._inspect_task`:
capture, bind, compile, registers and spills from the binary, resource checks), then captures the same launch again
to map every runtime parameter of the compiled kernel to a ``run_kernel`` input (a tensor's pointer) or a value,
and compiles once more through Triton's cache to read the binary and its metadata. Last, it runs the first and the
last program of the captured launch under Triton's interpreter on the CPU inputs and records the tile each writes
of each output (:func:`_observe_coverage`): ``load`` refuses a grid that could not cover the outputs with it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from kernelpilot.target import Target

__all__: list[str] = []

_SCALAR_TYPES = ("i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp32", "f32", "fp64", "f64")


def _fail(message: str, hint: str = "") -> dict[str, Any]:
    return {"failure": {"stage": "bundle", "error_type": "BundleError", "message": message, "hint": hint}}


def _tensor_rule(value: Any, inputs: dict[str, Any]) -> tuple[str, int] | None:
    """(input name, byte offset) of the run_kernel input whose storage holds ``value``'s data, or None."""
    for name, t in inputs.items():
        if t is value:
            return name, 0
    for name, t in inputs.items():
        if hasattr(t, "untyped_storage") and hasattr(value, "untyped_storage"):
            if t.untyped_storage().data_ptr() == value.untyped_storage().data_ptr():
                return name, int(value.data_ptr() - t.data_ptr())
    return None


def _written(before: Any, after: Any) -> Any:
    """Bool mask of the elements of ``after`` that differ from ``before`` (NaN equal to NaN)."""
    diff = before != after
    if before.is_floating_point() or before.is_complex():
        diff &= ~(before.isnan() & after.isnan())
    return diff


def _sentinel(t: Any) -> Any:
    """A constant an honest write almost never produces, of ``t``'s dtype (floats 1234.5, integers 0x5A, True)."""
    import torch

    if t.dtype == torch.bool:
        return True
    return 1234.5 if t.is_floating_point() or t.is_complex() else 0x5A


def _run_program(fn: Any, args: tuple, kwargs: dict[str, Any], grid: list[int], program: tuple[int, int, int]) -> None:
    """Run one program of the launch under Triton's interpreter: ``tl.program_id`` gives ``program`` and
    ``tl.num_programs`` the real ``grid`` (the interpreter's executor is asked for a 1x1x1 grid; its builder is told
    the real dimensions and index). ``@triton.jit`` helpers the kernel calls run interpreted too, each undoing its
    patch of ``triton.language`` on return, so the process compiles normally afterwards. Raises what the
    interpreter raises."""
    from triton.runtime import interpreter as interp
    from triton.runtime.jit import JITFunction

    def nested(self: Any, *a: Any, **k: Any) -> Any:
        scope = interp._patch_lang(self.fn)
        try:
            return interp.InterpretedFunction(self.fn).rewrite()(*a, **k)
        finally:
            scope.restore()

    builder = interp.interpreter_builder
    cls = type(builder)
    builder.set_grid_dim = lambda *_: cls.set_grid_dim(builder, *grid)  # type: ignore[method-assign]
    builder.set_grid_idx = lambda *_: cls.set_grid_idx(builder, *program)  # type: ignore[method-assign]
    call = JITFunction.__call__
    JITFunction.__call__ = nested  # type: ignore[method-assign]
    try:
        interp.InterpretedFunction(fn.fn)[(1, 1, 1)](*args, **kwargs)
    finally:
        JITFunction.__call__ = call  # type: ignore[method-assign]
        del builder.set_grid_dim, builder.set_grid_idx


def _observe_coverage(rec: dict[str, Any], grid: list[int], num_ctas: int, inputs: dict[str, Any]) -> dict[str, Any]:
    """The entry's ``coverage`` record (``EntryCoverage`` in the manifest schema), observed, not declared.

    The first and the last program of the launch run under Triton's interpreter on the worker's CPU inputs. A
    tensor input that a program changed is an output of that program; its written elements are those that changed
    on the inputs as built (pass 1) or, with the output refilled by a sentinel, that no longer hold it (pass 2: a
    write of an unchanged value shows there). Each program's tile is the bounding box of its writes per dimension;
    the recorded tile is the largest over the programs. An output whose recorded tile would not let the honest grid
    cover it (programs writing unequal parts) is listed ``unchecked`` with the reason, so the rule never refuses the
    launch it was observed on. Every input is restored after each pass. Raises nothing: a kernel the interpreter
    cannot run gets ``observed: False`` and the reason.
    """
    import torch

    tensors = {n: t for n, t in inputs.items() if isinstance(t, torch.Tensor)}
    programs = sorted({(0, 0, 0), (grid[0] - 1, grid[1] - 1, grid[2] - 1)}) if min(grid) > 0 else []
    saved = {n: t.detach().clone() for n, t in tensors.items()}
    tiles: dict[str, list[int]] = {}
    try:
        for program in programs:
            masks: dict[str, Any] = {}
            _run_program(rec["fn"], rec["args"], rec["kwargs"], grid, program)
            for n, t in tensors.items():
                if not torch.equal(saved[n], t):
                    m = _written(saved[n], t)
                    if bool(m.any()):
                        masks[n] = m
                    t.copy_(saved[n])
            for n in masks:
                tensors[n].fill_(_sentinel(tensors[n]))
            if masks:
                _run_program(rec["fn"], rec["args"], rec["kwargs"], grid, program)
            for n, m in masks.items():
                t = tensors[n]
                m |= t != _sentinel(t)
                t.copy_(saved[n])
            for n, t in tensors.items():
                if n not in masks and not torch.equal(saved[n], t):
                    t.copy_(saved[n])  # written in pass 2 only: restored all the same
            for n, m in masks.items():
                idx = m.nonzero()
                box = [int(idx[:, d].max() - idx[:, d].min()) + 1 for d in range(idx.shape[1])] if m.dim() else []
                tiles[n] = [max(a, b) for a, b in zip(tiles[n], box)] if n in tiles else box
    except Exception as exc:  # noqa: BLE001 - any interpreter failure: nothing observed, and said why
        for n, t in tensors.items():
            t.copy_(saved[n])
        return {"observed": False, "programs": [], "outputs": [], "unchecked": {},
                "why": f"the interpreter could not run the launch's programs ({type(exc).__name__}: {exc})"[:500]}
    total = grid[0] * grid[1] * grid[2] * max(1, num_ctas)
    outputs, unchecked = [], {}
    for n, tile in tiles.items():
        needed = 1
        for d, t in zip(tensors[n].shape, tile):
            needed *= -(-int(d) // t)
        if needed <= total:
            outputs.append({"input": n, "tile": tile})
        else:
            unchecked[n] = (f"a program writes up to a {tile} tile of {list(tensors[n].shape)}; {total} programs of "
                            f"it would not cover the tensor, so its programs write unequal parts")
    return {"observed": True, "programs": [list(p) for p in programs], "outputs": outputs, "unchecked": unchecked,
            "why": ""}


def _bundle_in_worker(kf: Any, opts: Any, target: Target, task: dict[str, Any]) -> dict[str, Any]:
    """One (config, shape): ``{"entry": dict, "cubin": bytes, "report": dumped StaticReport, ...}`` or
    ``{"failure": dict}``; raises nothing for the config's own failure."""
    import torch
    import triton
    from triton.compiler import ASTSource

    from kernelpilot.backends.triton.compile import _bind, _capture_launches, _grid, _inspect_task, _worker
    from kernelpilot.kernels.contract import resolve_config, resolve_shape, run_kernel
    from kernelpilot.backends.binary.arch import parse_arch

    report = _inspect_task({**task, "keep_sass": False, "save_dir": None, "spill_bytes": False, "sass": False})
    if report.get("status") != "ok":
        return {"failure": report}
    w = _worker()
    kfile = w.kernel(task["kernel_path"])
    config = resolve_config(kfile, dict(task["config"]))
    shape = resolve_shape(kfile, task.get("shape") or {})
    case = w.case(kfile, shape)
    records: list[dict[str, Any]] = []
    with _capture_launches(records):
        run_kernel(kfile, case.inputs, config)
    if len(records) != 1:
        return _fail(f"run_kernel launched {len(records)} kernels; a bundle entry holds exactly one launch",
                     "bundle a run_kernel that launches one @triton.jit kernel")
    rec = records[0]
    cc = parse_arch(task["arch"])
    target, backend = w.backend(cc[0] * 10 + cc[1])
    options, signature, constexprs, attrs, bound = _bind(rec["fn"], rec["args"], rec["kwargs"], backend)
    kernel = triton.compile(ASTSource(rec["fn"], signature, constexprs, attrs), target=target, options=options.__dict__)
    md = kernel.metadata
    for field in ("global_scratch_size", "profile_scratch_size"):
        if int(getattr(md, field, 0) or 0) > 0:
            return _fail(f"{md.name} needs {field}={getattr(md, field)} bytes; bundles do not allocate scratch yet",
                         "bundle a config without global scratch (no device-side TMA descriptors or printf)")
    for field in ("launch_cooperative_grid", "launch_pdl"):
        if getattr(md, field, False):
            return _fail(f"{md.name} launches with {field}; bundles do not support it yet")
    params = list(bound)
    divis: dict[int, int] = {}
    for key, specs in (attrs or {}).items():
        for spec in specs:
            if spec[0] == "tt.divisibility" and isinstance(key, tuple) and len(key) == 1:
                divis[key[0]] = int(spec[1])
    args, const = [], {}
    for i, name in enumerate(params):
        ty = str(signature.get(name, "constexpr"))
        value = bound[name]
        if ty == "constexpr":
            const[name] = value if isinstance(value, (bool, int, float, str)) or value is None else str(value)
            continue
        if ty.startswith("*"):
            hit = _tensor_rule(value, case.inputs)
            if hit is None:
                return _fail(f"{md.name}: parameter {name} gets a tensor that is none of run_kernel's inputs "
                             f"({', '.join(case.inputs)})", "bundles launch kernels on the inputs' own memory")
            args.append({"param": name, "type": ty, "kind": "tensor", "input": hit[0], "offset_bytes": hit[1],
                         "divisibility": divis.get(i, 1)})
        elif ty in _SCALAR_TYPES:
            args.append({"param": name, "type": ty, "kind": "scalar",
                         "value": value.item() if hasattr(value, "item") else value, "divisibility": divis.get(i, 1)})
        else:
            return _fail(f"{md.name}: parameter {name} has type {ty}, which bundles cannot launch yet",
                         "bundles launch pointer and integer/fp32/fp64 parameters")
    grid = _grid(rec["grid"], bound)
    grid = (grid + [1, 1, 1])[:3]
    ptx = kernel.asm.get("ptx", "")
    version = re.search(r"^\s*\.version\s+(\d+\.\d+)", ptx, re.M)
    tgt = re.search(r"^\s*\.target\s+(\w+)", ptx, re.M)
    inputs: dict[str, Any] = {}
    for name, v in case.inputs.items():
        if isinstance(v, torch.Tensor):
            inputs[name] = {"shape": list(v.shape), "stride": list(v.stride()), "dtype": str(v.dtype).replace("torch.", "")}
        elif isinstance(v, (bool, int, float, str)):
            inputs[name] = v
        else:
            return _fail(f"input {name} is a {type(v).__name__}; bundles take tensors and scalars")
    entry = {"kernel_name": md.name, "config": config, "shape": shape, "inputs": inputs, "constexprs": const,
             "args": args, "grid": grid, "num_warps": int(md.num_warps), "num_stages": int(md.num_stages),
             "num_ctas": int(getattr(md, "num_ctas", 1) or 1), "shared_mem_bytes": int(md.shared),
             "n_regs": int(report["registers_per_thread"]), "n_spills": int(report["n_spills"]),
             "spills": int(report["n_spills"]) > 0, "ptx_version": version.group(1) if version else "",
             "ptx_target": tgt.group(1) if tgt else "",
             "coverage": _observe_coverage(rec, grid, int(getattr(md, "num_ctas", 1) or 1), case.inputs)}
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        ptxas = get_ptxas(cc[0] * 10 + cc[1])
        ptxas_version = f"{Path(ptxas.path).name} {ptxas.version}"
    except Exception:  # noqa: BLE001 - a Triton without get_ptxas(arch): the version stays unknown
        ptxas_version = ""
    return {"ptxas_version": ptxas_version, "entry": entry, "cubin": bytes(kernel.asm["cubin"]), "function": rec["fn"].fn.__name__,
            "triton_version": triton.__version__, "torch_version": torch.__version__}
