"""Turn a capture of torch.compile's output code (:class:`~kernelpilot.inductor.capture.CapturedCode`) into a kernel
file in kernelpilot's contract. Pure: text and AST work, no torch, no GPU (tested on the CPU from fixtures).

The file written (its docstring says the same to its reader):

- every Inductor Triton kernel becomes a module-level ``@triton.jit`` function under Inductor's name, its body as
  Inductor wrote it (the ``@triton_heuristics.<kind>`` decorator and ``set_driver_to_gpu()`` dropped; the kernel
  modules' imports kept: ``triton_helpers``, ``libdevice``, ``tl_math``);
- the host code (``Runner.call``, ``partition_<i>``) is kept as Inductor wrote it, launches routed through a
  launcher of the file (:data:`kernelpilot.inductor.runtime_text.RUNTIME`) instead of Inductor's CachingAutotuner;
- ``run_kernel`` builds the launchers from the config, hands the declared output tensors to the buffers Inductor
  allocates for the returned values (where the output is not also read by the call), and copies a returned value
  into its output only where it could not be handed over;
- ``setup``, ``reference`` (and ``flops``, ``bytes_moved``, ``COMPUTE_UNIT``, tolerances) come from the original
  kernel file, imported by absolute path (then by the relative path from the new file) after checking its sha256
  against the captured one; SHAPE is the captured shape, every dimension ``"fixed"`` in SHAPE_RULES.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.inductor.capture import CapturedCode
from kernelpilot.inductor.errors import InductorConvertError
from kernelpilot.inductor.parse import ParsedOutput, parse_output
from kernelpilot.inductor.runtime_text import RUNTIME
from kernelpilot.inductor.space import KernelSpace, kernel_space

__all__ = ["ConvertedFile", "convert_capture"]

#: Names the host code may use that the converted file defines (Inductor's output-module header, the file's own).
_HEADER_NAMES = {"torch", "math", "triton", "tl", "aten", "inductor_ops", "assert_size_stride", "assert_alignment",
                 "reinterpret_tensor", "extern_kernels", "empty_strided", "device", "inf", "nan", "Runner", "runner",
                 "call", "recursively_apply_fns", "_h"}


@dataclass
class ConvertedFile:
    """What :func:`convert_capture` produced: the file's ``text``, its space (``tunables``, ``default_config``,
    ``constraints``), the kernels (``kernel_names``, and per kernel where its default came from:
    ``default_sources``), and per declared output whether ``run_kernel`` hands it to Inductor's buffer
    (``handed_over``: output name -> True, or False where the returned value is copied into it)."""

    text: str
    tunables: dict[str, list[int]]
    default_config: dict[str, int]
    constraints: list[str]
    kernel_names: list[str]
    default_sources: dict[str, str]
    handed_over: dict[str, bool] = field(default_factory=dict)


def _free_names(host: str) -> set[str]:
    tree = ast.parse(host)
    bound = set(dir(builtins)) | _HEADER_NAMES
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            bound.add(n.name)
        if isinstance(n, ast.arg):
            bound.add(n.arg)
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bound.add(n.id)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def _hand_over(parsed: ParsedOutput, cap: CapturedCode, names: list[str]) -> tuple[str, dict[str, bool]]:
    """Route the allocation of each returned buffer to ``_h.out(j, ...)`` where the j-th output may take it."""
    host, handed = parsed.host, {}
    alias = dict(re.findall(r"(\w+) = (\w+); del \2  # reuse", host))
    used: set[str] = set()
    for j, (ret, out) in enumerate(zip(parsed.returned, names)):
        handed[out] = False
        if ret is None or out in cap.arg_names:
            continue  # an expression (a view), or an output the call also reads: copied after the call
        buf = ret
        while buf in alias:
            buf = alias[buf]
        pat = re.compile(rf"^(\s*){re.escape(buf)} = _h\.empty\((.*)\)\s*$", re.M)
        if buf in used or len(pat.findall(host)) != 1:
            continue
        host = pat.sub(lambda m: f"{m.group(1)}{buf} = _h.out({j}, {m.group(2)})", host)
        used.add(buf)
        handed[out] = True
    return host, handed


def _docstring(cap: CapturedCode, spaces: dict[str, KernelSpace], handed: dict[str, bool]) -> str:
    kernels = "\n".join(f"- ``{n}``: default from Inductor's {s.source}" for n, s in spaces.items())
    outs = "\n".join(f"- ``{o}``: " + ("written in place: Inductor's buffer for it is this tensor" if h else
                                        "copied from the tensor the call returns (it could not be handed over: the "
                                        "call also reads it, or its layout differs)") for o, h in handed.items())
    return f'''"""torch.compile's (Inductor's) Triton kernels for {Path(cap.kernel_path).name}'s reference, as a kernel file.

Captured with torch {cap.torch_version} and Triton {cap.triton_version} on {cap.device_name}, torch.compile mode
{cap.mode!r}, dynamic=False, at the shape {cap.shape} (the code is specialized to it: every dimension is "fixed" in
SHAPE_RULES). Original kernel file: {cap.kernel_path} (sha256 {cap.kernel_sha256}){f", reference from {cap.ref_path}" if cap.ref_path else ""}.
setup and reference are the original's, imported by path; the import refuses a file whose sha256 changed.

Kernels (each a module-level @triton.jit function under Inductor's name, its body as Inductor wrote it; its
launch parameters are TUNABLES, suffixed by the kernel's index):
{kernels}

run_kernel launches them through Inductor's host code (``call``, kept as Inductor wrote it; its ``NAME.run`` launches
go to this file's _Launcher with the config's block sizes, warps and stages and Inductor's grid, not to Inductor's
CachingAutotuner; its allocations and device selection go to _Host, on the inputs' device). Outputs:
{outs}
"""'''


def _run_kernel(cap: CapturedCode, names: list[str], handed: dict[str, bool], parsed: ParsedOutput,
                spaces: dict[str, KernelSpace]) -> str:
    tensors = list(dict.fromkeys(cap.arg_names + cap.outputs))
    consts = list(cap.constants)
    tun = [n for s in spaces.values() for n in s.tunables]
    sig = ", ".join(tensors + consts + tun + ["**_"])
    lines = [f"def run_kernel(*, {sig}):",
             '    """Launch Inductor\'s kernels at the config through its host code; writes '
             f'{", ".join(cap.outputs)} (see the module docstring)."""']
    checked = {k: v for k, v in cap.constants.items() if isinstance(v, (int, float, str, bool))}
    if checked:
        lines += [f"    if ({', '.join(checked)},) != ({', '.join(repr(v) for v in checked.values())},):",
                  f"        raise ValueError(f\"the kernels were compiled for {str(checked).replace('{', '{{').replace('}', '}}')}; "
                  f"got {{({', '.join(checked)},)}}\")"]
    launchers = []
    for k in parsed.kernels:
        s = spaces[k.name]
        i = list(spaces).index(k.name)
        blocks = "{" + ", ".join(f"{b!r}: {t}" for b, t in s.blocks.items()) + "}"
        programs = f", programs={k.persistent_sms}" if k.persistent_sms is not None else ""
        launchers.append(f"        {k.name!r}: _Launcher({k.name}, {k.params!r}, {k.grid_type!r}, {blocks}, "
                         f"num_warps_{i}, num_stages_{i}{programs}),")
    outs = ", ".join(n if handed.get(n) else "None" for n in names)
    lines += [f"    h = _Host({cap.arg_names[0]}.device, [{outs}], {{", *launchers, "    })",
              f"    got = call([{', '.join(cap.arg_names)}], h)"]
    for j, n in enumerate(names):
        lines.append(f"    if got[{j}] is not {n}:\n        {n}.copy_(got[{j}])")
    return "\n".join(lines) + "\n"


def convert_capture(cap: CapturedCode, out_path: str | Path, *, spread: int = 1) -> ConvertedFile:
    """Convert a capture into the text of a kernel file to be written at ``out_path``.

    Args:
        cap: the capture (from :func:`kernelpilot.inductor.capture_kernel` or a fixture).
        out_path: where the file will be written (the relative path to the original kernel file is recorded).
        spread: powers of two each side of Inductor's choice in TUNABLES (:mod:`kernelpilot.inductor.space`).

    Raises:
        NoTritonKernel: Inductor generated no Triton kernel (cuBLAS or aten calls only).
        InductorConvertError: more than one graph (graph breaks), an unsupported kernel kind or grid, a host name the
            file would not define, a call returning other than the declared outputs, no tensor argument.
    """
    if len(cap.codes) != 1:
        raise InductorConvertError(f"torch.compile wrote {len(cap.codes)} output modules (graph breaks?)",
                                   "import a reference that compiles to one graph (fullgraph)")
    parsed = parse_output(cap.codes[0])
    names = cap.return_names or cap.outputs[:len(parsed.returned)]
    if len(parsed.returned) != len(names) or sorted(names) != sorted(cap.outputs):
        raise InductorConvertError(f"the call returns {len(parsed.returned)} values; the kernel file declares the "
                                   f"outputs {cap.outputs}", "the reference must return exactly the declared outputs")
    if not cap.arg_names:
        raise InductorConvertError("the compiled graph takes no tensor", "the reference must compute from its inputs")
    host, handed = _hand_over(parsed, cap, names)
    free = _free_names(host)
    if free:
        raise InductorConvertError(f"the host code uses names the converted file does not define: {sorted(free)}",
                                   "report the torch version; the converter knows torch 2.11's output header")
    spaces = {k.name: kernel_space(k, i, cap.chosen.get(k.name), cap.configs.get(k.name, []), spread)
              for i, k in enumerate(parsed.kernels)}
    tunables = {n: v for s in spaces.values() for n, v in s.tunables.items()}
    default = {n: v for s in spaces.values() for n, v in s.default.items()}
    constraints = [c for s in spaces.values() for c in s.constraints]
    header = {"import triton", "import triton.language as tl"}
    imports = list(dict.fromkeys(i for k in parsed.kernels for i in k.imports if i not in header))
    extern = "from torch._inductor.select_algorithm import extern_kernels\n" if "extern_kernels" in host else ""
    out_dir = Path(out_path).resolve().parent
    rel = os.path.relpath(cap.kernel_path, out_dir)
    rel_ref = os.path.relpath(cap.ref_path, out_dir) if cap.ref_path else None
    source = {"torch": cap.torch_version, "triton": cap.triton_version, "device": cap.device_name, "mode": cap.mode,
              "kernel": cap.kernel_path, "kernel_sha256": cap.kernel_sha256, "ref": cap.ref_path,
              "ref_sha256": cap.ref_sha256, "shape": cap.shape, "inductor_kernels": list(spaces),
              "default_from": {n: s.source for n, s in spaces.items()}}
    ref_load = (f"_REF = _load_original({cap.ref_path!r}, {rel_ref!r}, {cap.ref_sha256!r}, 'ref')"
                if cap.ref_path else "_REF = _ORIGINAL")
    text = f'''{_docstring(cap, spaces, handed)}

import contextlib
import hashlib
import importlib.util
import math
from math import inf, nan
from pathlib import Path

import torch
import triton
import triton.language as tl
{chr(10).join(imports)}
{extern}
aten = torch.ops.aten
inductor_ops = torch.ops.inductor
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
empty_strided = torch.empty_strided

SOURCE = {source!r}


def _load_original(path, rel, sha256, tag):
    """The original kernel (or reference) file as a module: at ``path``, else at ``rel`` from this file; refused
    (ImportError) when its sha256 is not the one it had when torch.compile's code was captured. A ``.cu`` file is
    loaded as kernelpilot loads it (its module holds the sidecar's names or those made from ``solve``)."""
    where = Path(path)
    if not where.is_file():
        where = Path(__file__).resolve().parent / rel
    data = where.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ImportError(f"{{where}} changed since its torch.compile code was captured (sha256 {{sha256}}): "
                          "import it again with `kernelpilot inductor`")
    if where.suffix != ".py":  # a CUDA C++ file: setup is its sidecar's or made from solve's signature
        from kernelpilot.kernels.contract import load_kernel

        return load_kernel(where).module
    spec = importlib.util.spec_from_file_location(f"_inductor_{{tag}}_{{where.stem}}", where)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ORIGINAL = _load_original({cap.kernel_path!r}, {rel!r}, {cap.kernel_sha256!r}, "kernel")
{ref_load}
setup = _ORIGINAL.setup
reference = _REF.reference
COMPUTE_UNIT = getattr(_ORIGINAL, "COMPUTE_UNIT", "fp32")
if hasattr(_ORIGINAL, "flops"):
    flops = _ORIGINAL.flops
if hasattr(_ORIGINAL, "bytes_moved"):
    bytes_moved = _ORIGINAL.bytes_moved
if hasattr(_REF, "atol"):
    atol = _REF.atol
if hasattr(_REF, "rtol"):
    rtol = _REF.rtol

SHAPE = {cap.shape!r}
SHAPE_RULES = {{name: "fixed" for name in SHAPE}}
TUNABLES = {tunables!r}
DEFAULT_CONFIG = {default!r}
CONSTRAINTS = {constraints!r}

{chr(10).join(chr(10) + k.source + chr(10) for k in parsed.kernels)}
{RUNTIME}

{host}


{_run_kernel(cap, names, handed, parsed, spaces)}'''
    return ConvertedFile(text=text, tunables=tunables, default_config=default, constraints=constraints,
                         kernel_names=list(spaces), default_sources={n: s.source for n, s in spaces.items()},
                         handed_over=handed)
