"""Static screen of a kernel file: a cheap AST scan before anything in it runs.

The screen reads the source only (no import, no torch). It looks for what a kernel file has no reason to do and
what documented measurement cheats do: rebinding attributes of imported modules (timers above all), running hidden
code (``exec``/``eval``), raw memory access (``ctypes``), walking the heap or the caller's frames, reading
``/proc``. Those are *refused*. Legitimate-but-suspicious use (streams, threads, events and synchronization, PyTorch
compute inside ``run_kernel``, a ``setup`` that does the work, module state kept across calls, loosened
tolerances) is *flagged*: shown next to the results, never a failure on its own.

A static scan is evaded by anyone who tries (names built from strings, patches applied through a local variable):
it is the first of several defences, not the last; the runtime checks (timer identity, device activity, re-check
after timing) do not depend on it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable, Literal

from pydantic import BaseModel

Severity = Literal["refuse", "flag"]

#: rule id -> (severity, hint). The ids are stable: reports, tests and suppression lists refer to them.
RULES: dict[str, tuple[Severity, str]] = {
    "unparsable": ("refuse", "the file must be valid Python"),
    "patches_timer": ("refuse", "a kernel file must not touch the functions that time it; remove the assignment"),
    "patches_module": ("refuse", "do not rebind attributes of imported modules or their classes"),
    "patches_sys_modules": ("refuse", "do not replace or patch entries of sys.modules"),
    "writes_builtins": ("refuse", "do not rebind builtins"),
    "exec_eval": ("refuse", "write the code out instead of exec/eval/compile of strings"),
    "uses_ctypes": ("refuse", "ctypes/cffi give raw memory access; launch a Triton kernel instead"),
    "uses_gc": ("refuse", "do not walk the heap (gc.get_objects/get_referrers/get_referents)"),
    "inspects_frames": ("refuse", "do not inspect or trace the caller's frames"),
    "reads_proc": ("refuse", "a kernel file has no reason to read /proc or raw memory devices"),
    "reads_caller": ("refuse", "do not read the caller's process, module or files"),
    "sets_backend_flags": ("flag", "global precision/backend switches change the reference and baselines too"),
    "uses_streams": ("flag", "join side streams (current_stream().wait_stream(s)) before run_kernel returns"),
    "uses_threads": ("flag", "work left running in another thread after run_kernel returns is not timed"),
    "uses_processes": ("flag", "a kernel file should not start processes"),
    "events_or_sync": ("flag", "timing and synchronization belong to the harness, not to run_kernel"),
    "touches_timing": ("flag", "a kernel file should not read timers"),
    "imports_gc": ("flag", "garbage-collector control in a kernel file changes what the harness measures"),
    "reads_sys_modules": ("flag", "reading sys.modules is how modules get patched without naming them"),
    "dynamic_import": ("flag", "import modules by name with an import statement"),
    "dynamic_getattr": ("flag", "getattr with a computed name hides what is looked up"),
    "dynamic_setattr": ("flag", "setattr/delattr on objects the screen cannot name"),
    "torch_compute_in_run_kernel": ("flag", "run_kernel should launch the kernel, not compute with PyTorch"),
    "no_launch": ("flag", "run_kernel launches no Triton kernel that the screen can see"),
    "keys_on_pointers": ("flag", "results keyed on data pointers or object ids go stale when values change"),
    "module_state": ("flag", "state kept between calls (caches, counters) lets later calls skip work"),
    "setup_does_work": ("flag", "setup should only build inputs; results computed there are not timed"),
    "loosens_tolerance": ("flag", "module-level atol/rtol replace the dtype's tolerances; kept visible in reports"),
}

def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TIMER_PREFIXES = tuple(_names("""time. timeit. statistics. triton.testing. torch.cuda.Event torch.cuda.streams.
    torch.cuda.synchronize torch.Event torch.cuda.Stream torch.cuda.current_stream torch.cuda.default_stream
    kernelpilot.measure. torch.profiler torch.autograd.profiler"""))
_TIMER_ATTRS = _names("""elapsed_time synchronize perf_counter perf_counter_ns monotonic monotonic_ns process_time
    do_bench do_bench_cudagraph record median quantiles""")
_HEAP = _names("gc.get_objects gc.get_referrers gc.get_referents")
_FRAMES = _names("""sys._getframe sys._current_frames sys.settrace sys.setprofile inspect.currentframe inspect.stack
    inspect.getouterframes inspect.trace threading.settrace threading.setprofile traceback.extract_stack
    traceback.walk_stack traceback.print_stack traceback.format_stack""")
_FRAME_ATTRS = _names("f_back f_locals f_globals tb_frame gi_frame cr_frame")
_RAW_MODULES = _names("ctypes _ctypes cffi")
_IMPORT_RULES = {**dict.fromkeys(_RAW_MODULES, "uses_ctypes"), "gc": "imports_gc", "__main__": "reads_caller",
                 **dict.fromkeys(_names("threading _thread multiprocessing concurrent asyncio"), "uses_threads"),
                 **dict.fromkeys(_names("subprocess pty"), "uses_processes")}
_PROCESS_CALLS = _names("os.fork os.system os.popen os.execv os.execvp os.spawnv os.kill pty.spawn")
_STREAMS = _names("""torch.cuda.Stream torch.cuda.stream torch.cuda.set_stream torch.cuda.current_stream
    torch.cuda.default_stream torch.cuda.ExternalStream torch.cuda.StreamContext torch.Stream torch.cuda.streams.Stream
    torch.cuda.graph torch.cuda.CUDAGraph torch.cuda.graphs""")
_EVENTS = _names("""torch.cuda.Event torch.cuda.streams.Event torch.Event torch.cuda.synchronize
    torch.cuda.Event.elapsed_time torch.cuda.Event.record""")
_EVENT_METHODS = _names("elapsed_time wait_event record_event")
_TIMING = _names("""time.time time.time_ns time.perf_counter time.perf_counter_ns time.monotonic time.monotonic_ns
    time.process_time time.process_time_ns time.thread_time triton.testing.do_bench triton.testing.do_bench_cudagraph
    timeit.default_timer timeit.timeit""")
_BACKEND_CALLS = _names("torch.set_float32_matmul_precision torch.use_deterministic_algorithms torch.set_default_dtype")
_DYN_IMPORT = _names("importlib.import_module importlib.reload builtins.__import__ __import__")
_SENSITIVE = _names("torch triton time builtins kernelpilot statistics numpy gc sys os timeit importlib inspect ctypes "
                    "threading __main__")
#: Cheap glue a launcher may call: allocation, metadata, dtype and device helpers.
_GLUE = _names("""empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange tensor as_tensor
    as_strided device Size dtype finfo iinfo is_tensor is_floating_point get_default_dtype promote_types result_type
    broadcast_shapes no_grad inference_mode enable_grad set_grad_enabled Generator is_grad_enabled get_device
    is_complex numel""")
#: Tensor methods that compute (called on an object that is not an imported module).
_COMPUTE_METHODS = _names("""sum mean amax amin argmax argmin exp exp_ log log_ softmax log_softmax matmul mm bmm addmm
    baddbmm mv add add_ sub sub_ mul mul_ div div_ pow pow_ sqrt sqrt_ rsqrt rsqrt_ tanh sigmoid relu relu_ clamp clamp_
    cumsum cumprod prod norm var std abs abs_ neg square copy_ masked_fill masked_fill_ index_select gather scatter
    scatter_ index_add_ topk logsumexp lerp addcmul reciprocal erf sin cos max min maximum minimum outer cross""")
#: Ops heavy enough that a setup calling them is probably computing the answer rather than building inputs.
_HEAVY = _names("""matmul mm bmm addmm baddbmm einsum softmax log_softmax layer_norm rms_norm conv1d conv2d conv3d
    scaled_dot_product_attention linear logsumexp cumsum""")
_STATE_METHODS = _names("append update setdefault __setitem__ add pop clear extend insert")
_CONTAINER_CALLS = _names("""dict list set defaultdict OrderedDict WeakValueDictionary WeakKeyDictionary deque Counter
    collections.defaultdict collections.OrderedDict collections.deque weakref.WeakValueDictionary
    weakref.WeakKeyDictionary""")


class Finding(BaseModel):
    """One thing the screen saw: ``rule`` (a key of :data:`RULES`), ``severity`` (``refuse`` or ``flag``), the
    1-based ``line``, what was seen (``message``) and what to do (``hint``)."""

    rule: str
    severity: Severity
    line: int
    message: str
    hint: str


class ScreenReport(BaseModel):
    """Every finding for one file, in line order."""

    path: str
    findings: list[Finding] = []

    @property
    def refused(self) -> bool:
        """True when any finding has severity ``refuse``: the file must not run."""
        return any(f.severity == "refuse" for f in self.findings)

    @property
    def flags(self) -> list[Finding]:
        """The ``flag`` findings (shown, not refused)."""
        return [f for f in self.findings if f.severity == "flag"]

    def lines(self) -> list[str]:
        """One human-readable line per finding: ``path:line: severity rule: message``."""
        return [f"{self.path}:{f.line}: {f.severity} {f.rule}: {f.message}" for f in self.findings]


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Scanner:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.found: dict[tuple[str, int], Finding] = {}
        self.alias: dict[str, str] = {}  # local name -> dotted module path
        self.defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.containers: set[str] = set()
        self._collect()

    # -- bookkeeping ------------------------------------------------------------------------------------------------
    def add(self, rule: str, node: ast.AST | int, message: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 0)
        severity, hint = RULES[rule]
        self.found.setdefault((rule, line), Finding(rule=rule, severity=severity, line=line, message=message,
                                                     hint=hint))

    def _collect(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.alias[a.asname or a.name] = f"{node.module}.{a.name}"
        for _ in range(2):  # simple aliases: `Ev = torch.cuda.Event`, then `E2 = Ev`
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    full = self.resolve(node.value)
                    if full and node.targets[0].id not in self.alias:
                        self.alias[node.targets[0].id] = full
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and (isinstance(node.value, (ast.Dict, ast.List, ast.Set))
                                                 or (isinstance(node.value, ast.Call)
                                                     and self.name_of(node.value.func) in _CONTAINER_CALLS)):
                self.containers |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.jit = {name for name, fn in self.defs.items()
                    if any((self.name_of(d.func if isinstance(d, ast.Call) else d) or "").startswith("triton.")
                           for d in fn.decorator_list)}

    def name_of(self, node: ast.AST) -> str | None:
        """Dotted name of a Name/Attribute chain, its root replaced by what it was imported as (or None)."""
        parts = _dotted(node)
        if parts is None:
            return None
        root = self.alias.get(parts[0], parts[0] if parts[0] in ("__builtins__",) else None)
        if root is None:
            return ".".join(parts) if parts[0] in ("setattr", "delattr", "getattr", "exec", "eval", "compile",
                                                   "vars", "__import__", "id", "open", "reference", "run_kernel",
                                                   "dict", "list", "set") else None
        return ".".join([root, *parts[1:]])

    def resolve(self, node: ast.AST) -> str | None:
        """What module (or attribute of one) an expression denotes, when the screen can tell; else None."""
        name = self.name_of(node)
        if name is not None and ("." in name or name in self.alias.values()):
            return name
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Subscript) and self.name_of(node.value) == "sys.modules":
            if isinstance(node.slice, ast.Name) and node.slice.id == "__name__":
                return None  # the kernel file's own module
            return f"sys.modules[{_const_str(node.slice) or '?'}]"
        if isinstance(node, ast.Call):
            fn = self.name_of(node.func)
            arg0 = node.args[0] if node.args else None
            if fn in ("importlib.import_module", "__import__") and _const_str(arg0):
                return _const_str(arg0)
            if fn == "sys.modules.get":
                return f"sys.modules[{_const_str(arg0) or '?'}]"
            if fn == "getattr" and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                return f"{base}.{_const_str(node.args[1]) or '?'}" if base else None
        return None

    # -- rules ------------------------------------------------------------------------------------------------------
    def patch(self, full: str, node: ast.AST, how: str) -> None:
        via_sys = full.startswith("sys.modules")
        if full.startswith("sys.modules["):  # "sys.modules[time].perf_counter" -> "time.perf_counter"
            key, _, rest = full[len("sys.modules["):].partition("]")
            full = key + rest
        top = full.split(".")[0]
        last = full.rsplit(".", 1)[-1]
        if top in ("builtins", "__builtins__"):
            self.add("writes_builtins", node, f"{how} {full}")
        elif full.startswith(_TIMER_PREFIXES) or last in _TIMER_ATTRS:
            self.add("patches_timer", node, f"{how} {full}, a function the harness times with")
        elif full.startswith("torch.backends."):
            self.add("sets_backend_flags", node, f"{how} {full}")
        elif via_sys:
            self.add("patches_sys_modules", node, f"{how} {full} through sys.modules")
        else:
            self.add("patches_module", node, f"{how} {full}, an attribute of an imported module")

    def store_target(self, target: ast.AST, how: str) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self.store_target(t, how)
        elif isinstance(target, ast.Attribute):
            base = self.resolve(target.value)
            if base is not None or (isinstance(target.value, ast.Name) and target.value.id == "__builtins__"):
                self.patch(f"{base or 'builtins'}.{target.attr}", target, how)
        elif isinstance(target, ast.Subscript):
            holder = target.value
            key = _const_str(target.slice)
            if self.name_of(holder) == "sys.modules":
                if key is not None and key.split(".")[0] in (_SENSITIVE | set(self.alias.values())):
                    self.add("patches_sys_modules", target, f"{how} sys.modules[{key!r}]")
            elif isinstance(holder, ast.Name) and holder.id == "__builtins__":
                self.add("writes_builtins", target, f"{how} __builtins__[{key!r}]")
            elif isinstance(holder, ast.Attribute) and holder.attr == "__dict__" and self.resolve(holder.value):
                self.patch(f"{self.resolve(holder.value)}.{key or '?'}", target, how)
            elif (isinstance(holder, ast.Call) and self.name_of(holder.func) == "vars" and holder.args
                  and self.resolve(holder.args[0])):
                self.patch(f"{self.resolve(holder.args[0])}.{key or '?'}", target, how)

    def visit_call(self, node: ast.Call) -> None:
        fn = self.name_of(node.func)
        func = node.func
        if fn in ("setattr", "delattr") or (isinstance(func, ast.Attribute)
                                            and func.attr in ("__setattr__", "__delattr__")):
            unbound = isinstance(func, ast.Attribute) and getattr(func.value, "id", None) in ("object", "type")
            if fn in ("setattr", "delattr") or unbound:
                args = node.args  # setattr(target, name, value) / object.__setattr__(target, name, value)
            else:
                args = [func.value, *node.args]  # target.__setattr__(name, value)
            how = f"{fn or func.attr}() on"
            target = self.resolve(args[0]) if args else None
            name = _const_str(args[1]) if len(args) > 1 else None
            if target is not None:
                self.patch(f"{target}.{name or '?'}", node, how)
            else:
                self.add("dynamic_setattr", node, f"{how} an object the screen cannot name")
        elif fn == "getattr" and len(node.args) >= 2 and _const_str(node.args[1]) is None:
            self.add("dynamic_getattr", node, "getattr() with a computed attribute name")
        callee = fn or self.resolve(func)
        if callee in ("builtins.exec", "builtins.eval", "builtins.compile"):
            self.add("exec_eval", node, f"calls {callee}()")
        if fn in _DYN_IMPORT:
            mod = _const_str(node.args[0]) if node.args else None
            if mod and mod.split(".")[0] in _RAW_MODULES:
                self.add("uses_ctypes", node, f"imports {mod} dynamically")
            else:
                self.add("dynamic_import", node, f"{fn}({repr(mod) if mod else '<computed name>'})")
        if fn in _PROCESS_CALLS or (fn or "").startswith("subprocess."):
            self.add("uses_processes", node, f"calls {fn}()")
        if fn and fn.startswith("sys.modules.") and fn.rsplit(".", 1)[-1] in ("update", "__setitem__"):
            self.add("patches_sys_modules", node, f"calls {fn}()")
        if isinstance(func, ast.Attribute) and func.attr in _EVENT_METHODS and fn is None:
            self.add("events_or_sync", node, f"calls .{func.attr}()")

    def visit_reference(self, node: ast.AST, full: str) -> None:
        if full in ("exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"):
            self.add("exec_eval", node, f"uses {full}")
        elif full in _BACKEND_CALLS:
            self.add("sets_backend_flags", node, f"calls {full}")
        elif full in _HEAP:
            self.add("uses_gc", node, f"uses {full} to reach objects it was not given")
        elif full in _FRAMES:
            self.add("inspects_frames", node, f"uses {full}")
        elif full in _STREAMS:
            self.add("uses_streams", node, f"uses {full}")
        elif full in _EVENTS:
            self.add("events_or_sync", node, f"uses {full}")
        elif full in _TIMING:
            self.add("touches_timing", node, f"reads {full}")
        elif full == "os.getppid" or full.startswith("__main__") or full == "sys.modules.__main__":
            self.add("reads_caller", node, f"uses {full}")
        elif full.endswith(".__file__") and full.split(".")[0] in ("kernelpilot", "__main__"):
            self.add("reads_caller", node, f"reads {full}")
        elif full == "sys.modules" and not getattr(node, "_kp_store_base", False):
            self.add("reads_sys_modules", node, "reads sys.modules")

    def scan(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                node.value._kp_store_base = True  # type: ignore[attr-defined]
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for mod in mods:
                    rule = _IMPORT_RULES.get(mod.split(".")[0])
                    if rule:
                        self.add(rule, node, f"imports {mod}")
                if isinstance(node, ast.ImportFrom):
                    for a in node.names:
                        self.visit_reference(node, f"{node.module}.{a.name}")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    self.store_target(t, "assigns")
            elif isinstance(node, ast.Delete):
                for t in node.targets:
                    self.store_target(t, "deletes")
            elif isinstance(node, ast.Call):
                self.visit_call(node)
            if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(getattr(node, "ctx", None), ast.Load):
                full = self.name_of(node)
                if full:
                    self.visit_reference(node, full)
                if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
                    self.add("inspects_frames", node, f"reads .{node.attr} of a frame")
            if isinstance(node, (ast.Subscript, ast.Call)) and self.resolve(node) in ("sys.modules[__main__]",
                                                                                      "__main__"):
                self.add("reads_caller", node, "reaches the __main__ module")
            text = _const_str(node)
            if text is not None:
                if text.startswith(("/proc", "/dev/mem", "/dev/kmem", "/dev/shm/kernelpilot")):
                    self.add("reads_proc", node, f"uses the path {text!r}")
        self.scan_functions()
        self.scan_tolerances()

    # -- run_kernel and setup ---------------------------------------------------------------------------------------
    def reach(self, start: str, stop: set[str]) -> list[ast.AST]:
        """The function ``start`` and the module-level functions it names, transitively (not Triton kernels)."""
        seen, todo = [], [start]
        while todo:
            name = todo.pop()
            if name in seen or name not in self.defs or name in self.jit or name in stop:
                continue
            seen.append(name)
            todo += [n.id for n in ast.walk(self.defs[name]) if isinstance(n, ast.Name) and n.id in self.defs]
        return [self.defs[n] for n in seen]

    def launches(self, fns: list[ast.AST]) -> bool:
        for fn in fns:
            for n in ast.walk(fn):
                if isinstance(n, ast.Call):
                    if isinstance(n.func, ast.Subscript):
                        return True
                    name = self.name_of(n.func) or (n.func.id if isinstance(n.func, ast.Name) else "")
                    if name in self.jit or (name and "." in name and name.split(".")[0] not in (
                            "torch", "triton", "math", "builtins", "os", "sys", "time", "functools", "operator")):
                        return True
        return False

    def torch_ops(self, fns: list[ast.AST], heavy_only: bool) -> Iterable[tuple[ast.AST, str]]:
        for fn in fns:
            for n in ast.walk(fn):
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                    yield n, "the @ operator"
                if not isinstance(n, ast.Call):
                    continue
                name = self.name_of(n.func)
                if name and name.startswith("torch.") and not name.startswith(("torch.cuda.", "torch.backends.")):
                    op = name.rsplit(".", 1)[-1]
                    if (op in _HEAVY or name.startswith("torch.nn.functional.")) if heavy_only else op not in _GLUE:
                        yield n, name
                elif (isinstance(n.func, ast.Attribute) and name is None and self.resolve(n.func.value) is None
                      and not (isinstance(n.func.value, ast.Name) and n.func.value.id in self.containers)
                      and n.func.attr in (_HEAVY if heavy_only else _COMPUTE_METHODS)):
                    yield n, f".{n.func.attr}()"

    def state_writes(self, fns: list[ast.AST]) -> Iterable[tuple[ast.AST, str]]:
        for fn in fns:
            for n in ast.walk(fn):
                if isinstance(n, ast.Global):
                    yield n, f"global {', '.join(n.names)}"
                elif (isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
                      and n.value.id in self.containers):
                    yield n, f"stores into module-level {n.value.id}"
                elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _STATE_METHODS
                      and isinstance(n.func.value, ast.Name) and n.func.value.id in self.containers):
                    yield n, f"calls {n.func.value.id}.{n.func.attr}()"

    def scan_functions(self) -> None:
        run = self.reach("run_kernel", {"reference", "setup"})
        for node, op in self.torch_ops(run, heavy_only=False):
            self.add("torch_compute_in_run_kernel", node, f"run_kernel computes with {op}")
        for fn in run:
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and self.name_of(n.func) in ("reference", "setup"):
                    self.add("torch_compute_in_run_kernel", n, f"run_kernel calls {self.name_of(n.func)}()")
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                        "data_ptr", "untyped_storage", "_cdata"):
                    self.add("keys_on_pointers", n, f"run_kernel reads .{n.func.attr}()")
                elif isinstance(n, ast.Call) and self.name_of(n.func) == "id":
                    self.add("keys_on_pointers", n, "run_kernel reads id() of an object")
        for node, what in self.state_writes(run):
            self.add("module_state", node, f"run_kernel {what}")
        if run and not self.launches(run):
            self.add("no_launch", run[0], "run_kernel (and what it calls) launches no Triton kernel")
        setup = self.reach("setup", {"reference", "run_kernel"})
        for fn in setup:
            for n in ast.walk(fn):
                if isinstance(n, ast.Call):
                    name = self.name_of(n.func) or ""
                    if name in ("reference", "run_kernel") or name in self.jit or isinstance(n.func, ast.Subscript):
                        self.add("setup_does_work", n, f"setup calls {name or 'a kernel launch'}")
        for node, op in self.torch_ops(setup, heavy_only=True):
            self.add("setup_does_work", node, f"setup computes with {op}")
        for node, what in self.state_writes(setup):
            self.add("setup_does_work", node, f"setup {what}")

    def scan_tolerances(self) -> None:
        for node in self.tree.body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and n.id in ("atol", "rtol")]
            if names:
                self.add("loosens_tolerance", node, f"sets {', '.join(names)} = {ast.unparse(node.value)}")


def screen_source(source: str, path: str = "<string>") -> ScreenReport:
    """Screen kernel-file source text statically (nothing is imported or run).

    Args:
        source: the file's text.
        path: the name reported with the findings.

    Returns:
        A :class:`ScreenReport`; ``refused`` is True when any rule of severity ``refuse`` fired. A file that does
        not parse gives one ``unparsable`` refusal. Raises nothing.
    """
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        severity, hint = RULES["unparsable"]
        line = getattr(exc, "lineno", None) or 0
        return ScreenReport(path=path, findings=[Finding(rule="unparsable", severity=severity, line=line,
                                                         message=f"does not parse: {exc}", hint=hint)])
    scanner = _Scanner(tree)
    scanner.scan()
    findings = sorted(scanner.found.values(), key=lambda f: (f.line, f.severity != "refuse", f.rule))
    return ScreenReport(path=path, findings=findings)


def screen_file(path: str | Path) -> ScreenReport:
    """Screen one kernel file (a ``--ref`` file is screened by its own call).

    Raises:
        FileNotFoundError / OSError: the file cannot be read.
        UnicodeDecodeError: the file is not UTF-8 text.
    """
    path = Path(path)
    return screen_source(path.read_text(encoding="utf-8"), str(path))
