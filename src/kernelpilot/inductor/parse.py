"""Read Inductor's output code (the Python module torch.compile writes for a graph): its Triton kernels and its host
code. Pure text and AST work: no torch, no GPU.

Inductor's output module (torch 2.11) defines each Triton kernel as ``NAME = async_compile.triton('NAME', '''...''')``,
the string a module of its own holding ``@triton_heuristics.<kind>(size_hints=..., triton_meta=...,
inductor_meta={'grid_type': ...})`` over ``@triton.jit def NAME(...)``; its host code is a ``Runner`` class whose
``call(self, args)`` allocates buffers and launches ``NAME.run(*args, stream=stream0)`` (or, with CUDA-graph
partitions, calls ``partition_<i>(args)`` functions that do), and ``call = runner.call``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from kernelpilot.inductor.errors import InductorConvertError, NoTritonKernel

__all__ = ["BLOCK_PARAMS", "FLATTEN_PARAM", "GRID_TYPES", "KINDS", "TILE_PARAMS", "InductorKernel", "ParsedOutput",
           "parse_output"]

#: Launch parameters Inductor's configs set as constexpr kernel arguments (``triton.Config`` kwargs).
BLOCK_PARAMS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK")
#: Grid types whose grid the converted launcher derives (torch/_inductor/runtime/triton_heuristics.py, ``Grid1D``
#: .. ``Grid3D``: ``ceildiv(xnumel, XBLOCK)`` per axis, the numel itself where the config has no block), and
#: ``FixedGrid``: a template's grid, computed by the host code and passed as the last arguments of ``.run``
#: (``inductor_meta["extra_launcher_args"]``).
GRID_TYPES = ("Grid1D", "Grid2D", "Grid3D", "FixedGrid")
#: ``triton_heuristics`` decorators the converter reads (split scans, cooperative and combo kernels not). A
#: ``template`` (Inductor's GEMM and convolution templates, chosen by max-autotune) fixes its tile sizes in its body
#: and takes a fixed grid; its warps and stages are in the decorator.
KINDS = ("pointwise", "reduction", "persistent_reduction", "template")
#: A persistent template's tile sizes, fixed in its body by Inductor; the converter makes them constexpr arguments
#: (see :attr:`InductorKernel.persistent_sms`).
TILE_PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
#: A persistent template's loop over its tiles (``for tile_id in tl.range(start_pid, num_tiles, NUM_SMS):``) is given
#: ``flatten=FLATTEN``, a constexpr argument the space tunes: 0 keeps Inductor's two nested loops; 1 has Triton fuse
#: the tile loop with the K loop into one software-pipelined loop (``tl.range(..., flatten=True)``), so the next
#: tile's first TMA loads are issued during this tile's epilogue, as in the matmul example's persistent kernel and
#: Triton's persistent-matmul tutorial (``FLATTEN``); 2 (where the body's tile coordinates can be read, see
#: :func:`_epilogue_counter`) also has the epilogue find its tile from a counter of its own, so the pipelined loads and
#: the epilogue share no value (the tutorial's ``tile_id_c``). Measured on an H100 (docs/device-runs/2026-11-26-h100-gemm):
#: the example's kernel took 182.72 µs flattened and 189.73 µs not, at bf16 4096³; on another H100, Inductor's
#: template at fp16 4096³ took 189.98 µs not flattened and 186.77 µs flattened (docs/device-runs/2026-11-27-s7).
FLATTEN_PARAM = "FLATTEN"

_HOST_RENAMES = ((r"\bempty_strided_cuda\(", "_h.empty("), (r"\btorch\.cuda\._DeviceGuard\(", "_h.guard("),
                 (r"\btorch\.cuda\.set_device\(", "_h.set_device("), (r"\bget_raw_stream\(", "_h.stream("))


@dataclass
class InductorKernel:
    """One Inductor Triton kernel, as the converter needs it.

    Attributes:
        name: the kernel's name (Inductor's: ``triton_red_fused__softmax_0``).
        kind: its ``triton_heuristics`` decorator (one of :data:`KINDS`). grid_type: ``inductor_meta["grid_type"]``.
        source: ``@triton.jit`` and the ``def`` as Inductor wrote it (the heuristics decorator dropped).
        params: the arguments ``.run`` passes, in order (the signature less the block parameters).
        blocks: the block parameters of the signature (of :data:`BLOCK_PARAMS`), set from the config.
        fixed_blocks: block sizes the body fixes (``R0_BLOCK: tl.constexpr = 1024`` in a persistent reduction).
        size_hints: ``{"x": numel, "r0_": numel, ...}`` from the decorator. imports: the kernel module's imports.
        grid_args: how many grid values ``.run`` passes after ``params`` (a ``FixedGrid`` template's; else 0).
        launch: a template's own ``{"kwargs": {}, "num_warps", "num_stages"}`` from its decorator (else None); a
            persistent template's kwargs hold its tile sizes.
        persistent_sms: a persistent template's ``NUM_SMS`` (torch 2.11's ``triton_persistent_tma_mm`` and
            ``triton_persistent_mm``: ``NUM_SMS`` programs stride over every tile, so any tile size covers the output
            with ``NUM_SMS`` programs): its tile sizes (:data:`TILE_PARAMS`) are moved from the body into the
            signature as constexpr arguments and are in ``blocks``; None for any other kernel.
        flatten_values: the values of :data:`FLATTEN_PARAM` the body supports (``[0, 1]`` or ``[0, 1, 2]``; it is
            then in ``blocks``), or empty where it has no such argument.
    """

    name: str
    kind: str
    grid_type: str
    source: str
    params: list[str]
    blocks: list[str]
    fixed_blocks: dict[str, int]
    size_hints: dict[str, int]
    imports: list[str] = field(default_factory=list)
    grid_args: int = 0
    launch: dict | None = None
    persistent_sms: int | None = None
    flatten_values: list[int] = field(default_factory=list)


@dataclass
class ParsedOutput:
    """A parsed output module: its Triton kernels in order of definition, the host code (partitions, ``Runner``,
    ``runner``/``call``) with its launches routed through ``_h`` (see :func:`parse_output`), the buffer names
    ``call`` returns (None where it returns an expression), their allocations, and the extern calls seen."""

    kernels: list[InductorKernel]
    host: str
    returned: list[str | None]
    extern_calls: list[str]


def _kwarg(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _dict_entry(node: ast.expr | None, key: str) -> ast.expr | None:
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
    return None


def _kernel(name: str, module_src: str) -> InductorKernel:
    """Read one ``async_compile.triton`` source string (raises InductorConvertError on what it cannot read)."""
    tree = ast.parse(module_src)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(fns) != 1 or fns[0].name != name:
        raise InductorConvertError(f"{name}: its source defines {[f.name for f in fns]}, not one function {name}",
                                   "report the torch version; the converter reads one kernel per source string")
    fn = fns[0]
    decos = [ast.unparse(d) for d in fn.decorator_list]
    heur = [d for d in fn.decorator_list if isinstance(d, ast.Call) and ast.unparse(d.func).startswith("triton_heuristics.")]
    if "triton.jit" not in decos or len(heur) != 1:
        raise InductorConvertError(f"{name}: decorators {decos}: expected @triton_heuristics.<kind>(...) over @triton.jit",
                                   "the converter keeps plain @triton.jit kernels only")
    kind = ast.unparse(heur[0].func).split(".", 1)[1]
    if kind not in KINDS:
        raise InductorConvertError(f"{name}: Inductor kernel kind {kind!r} is not supported (supported: {', '.join(KINDS)})",
                                   "a split-scan, cooperative or combo kernel needs its own launcher")
    grid = _dict_entry(_kwarg(heur[0], "inductor_meta"), "grid_type")
    grid_type = ast.literal_eval(grid) if grid is not None else None
    if grid_type not in GRID_TYPES:
        raise InductorConvertError(f"{name}: grid type {grid_type!r} is not supported (supported: {', '.join(GRID_TYPES)})",
                                   "its grid is not ceildiv(numel, block) per axis; convert it by hand")
    if (grid_type == "FixedGrid") != (kind == "template"):
        raise InductorConvertError(f"{name}: a {kind} kernel with grid type {grid_type!r}",
                                   "the converter reads templates with a FixedGrid and other kernels with Grid1D-3D")
    hints = _kwarg(heur[0], "size_hints")
    size_hints = ast.literal_eval(hints) if hints is not None else {}
    args = [a.arg for a in fn.args.args]
    constexpr = {a.arg for a in fn.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
    unknown = sorted(constexpr - set(BLOCK_PARAMS))
    if unknown:
        raise InductorConvertError(f"{name}: constexpr arguments {unknown} are not launch parameters the converter sets",
                                   "their values come from Inductor's launcher; convert this kernel by hand")
    grid_args, launch = 0, None
    if kind == "template":
        extra = _dict_entry(_kwarg(heur[0], "inductor_meta"), "extra_launcher_args")
        grid_args = len(ast.literal_eval(extra)) if extra is not None else 3
        warps, stages = _kwarg(heur[0], "num_warps"), _kwarg(heur[0], "num_stages")
        launch = {"kwargs": {}, "num_warps": ast.literal_eval(warps) if warps is not None else 4,
                  "num_stages": ast.literal_eval(stages) if stages is not None else 2}
    consts = _body_ints(fn)
    fixed = {k: v for k, v in consts.items() if k in BLOCK_PARAMS}
    lines = module_src.splitlines()
    body = "\n".join(lines[fn.lineno - 1:fn.end_lineno])
    imports = [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    blocks = [a for a in args if a in BLOCK_PARAMS]
    sms = consts.get("NUM_SMS") if kind == "template" else None
    if launch is not None and sms is not None and all(t in consts for t in TILE_PARAMS):
        body, flats = _tiles_to_arguments(name, body)
        blocks = list(TILE_PARAMS) + ([FLATTEN_PARAM] if flats else [])
        launch = {**launch, "kwargs": {**{t: consts[t] for t in TILE_PARAMS}, **({FLATTEN_PARAM: 0} if flats else {})}}
    else:
        sms, flats = None, []
    return InductorKernel(name=name, kind=kind, grid_type=grid_type, source="@triton.jit\n" + body,
                          params=[a for a in args if a not in BLOCK_PARAMS], blocks=blocks,
                          fixed_blocks=fixed, size_hints={str(k): int(v) for k, v in size_hints.items()}, imports=imports,
                          grid_args=grid_args, launch=launch, persistent_sms=sms,
                          flatten_values=flats)


def _body_ints(fn: ast.FunctionDef) -> dict[str, int]:
    """Annotated integer constants at the top of a kernel's body (``R0_BLOCK: tl.constexpr = 1024`` in a persistent
    reduction, a template's ``BLOCK_M : tl.constexpr = 128`` and ``NUM_SMS``); booleans left out."""
    return {node.target.id: node.value.value for node in fn.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and isinstance(node.value, ast.Constant) and type(node.value.value) is int}


#: The loop over a persistent template's tiles: ``for <name> in tl.range(<start>, <end>, NUM_SMS):`` on one line.
_TILE_LOOP = re.compile(r"^([ \t]*for[ \t]+\w+[ \t]+in[ \t]+tl\.range\([^\n]*?,[ \t]*NUM_SMS)[ \t]*\)[ \t]*:", re.M)


def _tiles_to_arguments(name: str, body: str) -> tuple[str, list[int]]:
    """A persistent template's ``def`` with its :data:`TILE_PARAMS` moved from body statements to constexpr
    arguments at the end of its signature, and ``(body, flatten_values)``: where the body has one loop over its tiles
    (:data:`_TILE_LOOP`), that loop is given ``flatten=FLATTEN``, :data:`FLATTEN_PARAM` joins the signature and
    ``flatten_values`` is ``[0, 1]`` (``[0, 1, 2]`` where :func:`_epilogue_counter` applies too); a body with none or
    several keeps its loops (``[]``). Raises InductorConvertError where the tile sizes are not one
    ``NAME : tl.constexpr = N`` line each."""
    head = re.search(rf"def {re.escape(name)}\((.*?)\):", body, re.S)
    gone = [re.compile(rf"^[ \t]*{t}[ \t]*:[ \t]*tl\.constexpr[ \t]*=[ \t]*\d+[ \t]*\n", re.M) for t in TILE_PARAMS]
    if head is None or any(len(g.findall(body)) != 1 for g in gone):
        raise InductorConvertError(f"{name}: its tile sizes are not one `NAME : tl.constexpr = N` line each",
                                   "report the torch version; the converter knows torch 2.11's persistent templates")
    for g in gone:
        body = g.sub("", body, count=1)
    params = head.group(1).rstrip().rstrip(",")
    values: list[int] = []
    if len(_TILE_LOOP.findall(body)) == 1:
        values = [0, 1]
        counted = _epilogue_counter(body)
        if counted is not None:
            body, values = counted, [0, 1, 2]
        body = _TILE_LOOP.sub(lambda m: f"{m.group(1)}, flatten={FLATTEN_PARAM}):", body, count=1)
    tiles = ", ".join(f"{t}: tl.constexpr" for t in TILE_PARAMS + ((FLATTEN_PARAM,) if values else ()))
    return body.replace(head.group(0), f"def {name}({params}, {tiles}):", 1), values


def _epilogue_counter(body: str) -> str | None:
    """The body with its epilogue's tile coordinates taken, under ``FLATTEN == 2``, from a counter of its own, or
    None where the text is not as expected. Torch 2.11's persistent templates compute ``pid_m``/``pid_n`` from the
    loop variable in the statements between the loop's head and ``rm = pid_m * BLOCK_M``, and the epilogue after the
    K loop rematerializes ``rm = pid_m * BLOCK_M``: before that last line a ``if FLATTEN == 2:`` block (a constexpr
    branch, absent from the compiled kernel otherwise) advances ``<var>_c`` (set to ``start - NUM_SMS`` before the
    loop) by ``NUM_SMS`` and recomputes ``pid_m``/``pid_n`` from it with the same statements, their helper names
    suffixed ``_c``. The tile is the same one, so every value of FLATTEN computes the same result."""
    head = _TILE_LOOP.search(body)
    lead = re.match(r"([ \t]*)for[ \t]+(\w+)[ \t]+in[ \t]+tl\.range\(([^,\n]+),", head.group(1)) if head else None
    lines = body[head.end():].split("\n")[1:] if head else []
    remat = [i for i, ln in enumerate(lines) if re.fullmatch(r"[ \t]*rm = pid_m \* BLOCK_M[ \t]*", ln)]
    if lead is None or len(remat) != 2:
        return None
    indent, var, start = lead.group(1), lead.group(2), lead.group(3).strip()
    inner = re.match(r"[ \t]*", lines[remat[1]]).group(0)
    coords = [ln.strip() for ln in lines[:remat[0]] if ln.strip() and not ln.strip().startswith("#")]
    assigned = [re.match(r"(\w+)[ \t]*=", c) for c in coords]
    if not coords or None in assigned or not {"pid_m", "pid_n"} <= {a.group(1) for a in assigned}:
        return None
    renames = {var} | {a.group(1) for a in assigned} - {"pid_m", "pid_n"}
    redo = [re.sub(r"\b(" + "|".join(map(re.escape, sorted(renames))) + r")\b", r"\1_c", c) for c in coords]
    block = [f"{inner}if {FLATTEN_PARAM} == 2:  # the epilogue's tile from its own counter (kernelpilot)",
             f"{inner}    {var}_c += NUM_SMS"] + [f"{inner}    {c}" for c in redo]
    lines[remat[1]:remat[1]] = block
    return (body[:head.start()] + f"{indent}{var}_c = {start} - NUM_SMS\n" + body[head.start():head.end()] + "\n"
            + "\n".join(lines))


def _host_nodes(tree: ast.Module) -> list[ast.stmt]:
    keep: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and re.fullmatch(r"partition_\d+", node.name):
            keep.append(node)
        elif isinstance(node, ast.ClassDef) and node.name == "Runner":
            keep.append(node)
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and node.targets[0].id in ("runner", "call", "recursively_apply_fns")):
            keep.append(node)
    return keep


def _returned(tree: ast.Module) -> list[str | None]:
    runner = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Runner"), None)
    call = next((n for n in (runner.body if runner else []) if isinstance(n, ast.FunctionDef) and n.name == "call"), None)
    rets = [n for n in ast.walk(call) if isinstance(n, ast.Return)] if call else []
    if len(rets) != 1 or not isinstance(rets[0].value, ast.Tuple):
        raise InductorConvertError("the output code's Runner.call has no single `return (...)`",
                                   "report the torch version; the converter reads torch 2.11's Runner.call")
    return [e.id if isinstance(e, ast.Name) else None for e in rets[0].value.elts]


def parse_output(code: str) -> ParsedOutput:
    """Parse one Inductor output module.

    Returns:
        :class:`ParsedOutput`. Its ``host`` is the host code as Inductor wrote it with these changes only: every
        ``NAME.run(`` of a Triton kernel becomes ``_h.NAME.run(``; ``empty_strided_cuda(``, ``torch.cuda._DeviceGuard(``,
        ``torch.cuda.set_device(`` and ``get_raw_stream(`` become methods of ``_h``; ``call``, ``Runner.call`` and the
        ``partition_<i>`` functions take ``_h`` as a last argument and pass it on.

    Raises:
        NoTritonKernel: the code defines no Triton kernel (the graph went to ``extern_kernels``: cuBLAS, or aten).
        InductorConvertError: a kernel kind, grid type, compile call or launch the converter does not support, or
            a ``.run`` whose argument count is not the kernel's.
    """
    tree = ast.parse(code)
    kernels: list[InductorKernel] = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        func = ast.unparse(node.value.func)
        if not func.startswith("async_compile."):
            continue
        name = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
        if func != "async_compile.triton":
            raise InductorConvertError(f"{name}: compiled with {func}, not a Triton kernel the converter reads",
                                       "only async_compile.triton kernels are imported")
        src = node.value.args[1]
        if not (isinstance(src, ast.Constant) and isinstance(src.value, str)):
            raise InductorConvertError(f"{name}: its source is not a string literal", "report the torch version")
        kernels.append(_kernel(name, src.value))
    extern = re.findall(r"\bextern_kernels\.(\w+)\(", code) + re.findall(r"\btorch\.ops\.aten\.(\w+)\b", code)
    if not kernels:
        what = ", ".join(f"extern_kernels.{e}" for e in extern) or "no kernel at all"
        raise NoTritonKernel(f"torch.compile generated no Triton kernel: the graph runs {what}"
                             + (" (cuBLAS)" if any(e in ("mm", "addmm", "bmm", "baddbmm") for e in extern) else ""),
                             "nothing to import: torch.compile's time is a library's (compare against it as is)", extern)
    nodes = _host_nodes(tree)
    host = "\n\n".join(ast.get_source_segment(code, n) or "" for n in nodes)
    by_name = {k.name: k for k in kernels}
    for call in (n for root in nodes for n in ast.walk(root) if isinstance(n, ast.Call)):
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "run" and isinstance(f.value, ast.Name) and f.value.id in by_name:
            k = by_name[f.value.id]
            if len(call.args) != len(k.params) + k.grid_args or any(a.arg != "stream" for a in call.keywords):
                raise InductorConvertError(f"{k.name}.run passes {len(call.args)} arguments and "
                                           f"{[a.arg for a in call.keywords]}; the kernel takes {k.params} + "
                                           f"{k.grid_args} grid values + stream",
                                           "report the torch version; the launch cannot be reproduced")
    for name in by_name:
        host = re.sub(rf"(?<![\w.]){re.escape(name)}\.run\(", f"_h.{name}.run(", host)
    for pattern, repl in _HOST_RENAMES:
        host = re.sub(pattern, repl, host)
    host = re.sub(r"def call\(self, args\):", "def call(self, args, _h):", host)
    host = re.sub(r"def (partition_\d+)\(args\):", r"def \1(args, _h):", host)
    host = re.sub(r"self\.partitions\[(\d+)\]\((\w+)\)", r"self.partitions[\1](\2, _h)", host)
    return ParsedOutput(kernels=kernels, host=host, returned=_returned(tree), extern_calls=extern)
