"""Make the Triton interpreter (``TRITON_INTERPRET=1``) run real library kernels honestly on a CPU.

Three gaps between the interpreter and compiled Triton make correct kernels fail or give wrong numbers on a
machine without a GPU (measured on Triton 3.9 with Liger-Kernel 0.8.5, issue 10):

1. **Float scalar arguments** reach the kernel as Python floats, so ``eps.to(tl.float32)`` raises
   ``AttributeError``. Compiled Triton types a Python float argument by ``triton.runtime.jit.mangle_type``
   (``"fp32"``) and passes it as a 0-d scalar of that type. Patch ``float_scalar_args``: wrap
   ``interpreter._implicit_cvt`` so a float becomes an interpreter scalar of exactly that type.
2. **libdevice calls** (``from triton.language.extra.libdevice import rsqrt``) resolve to stubs whose body is
   ``...``: they return ``None`` in the interpreter. Patch ``libdevice``: while a kernel runs, the stubs (and
   the CUDA/HIP ``extern_elementwise`` versions) named in the kernel's globals are replaced by numpy functions
   on fp32/fp64 values (:data:`LIBDEVICE_NUMPY`), the same standing as the interpreter's own ``tl.math``
   functions (numpy's fp32 results are within a few ulp, libdevice's documented bounds are 1-4 ulp; results
   are not bit-identical to the GPU). Functions outside that table stay unsupported and are reported.
3. **bf16 on raw bits**: the interpreter stores bf16 as ``uint16`` and its ``binary_op``, ``unary_op``, clamp,
   ``fma`` and ``dot`` apply numpy to those integers (1.5 * 1.5 gives garbage); its fp32 -> bf16 cast (also used
   by ``tl.store`` into a bf16 tensor) truncates, where compiled Triton rounds to nearest even; casts between
   bf16 and integers/fp16/fp64 convert raw bits; the reduction and scan fast paths (sum, min/max/argmax,
   cumsum/cumprod) apply numpy to the raw bits of bf16 blocks. Patch ``bf16_values``: decode to fp32 (exact), compute, round
   back to bf16 to nearest even. For + - * / and sqrt this equals the correctly rounded bf16 result, because fp32
   has 24 >= 2*8+2 significand bits (double rounding is innocuous: Figueroa, "When is double rounding
   innocuous?", SIGNUM 1995). fp64 -> bf16 goes through fp32 (two roundings; a rare tie may land 1 ulp off).

Every patch is applied only after feature detection of the installed Triton's internals (never a version
string) and is skipped with a reason otherwise. :func:`install_workarounds` must run after
``TRITON_INTERPRET=1`` is set and ``triton`` imported, before the kernel module is imported (the libdevice patch
itself acts at launch time, so importing earlier is harmless). :func:`interpreter_limitations` scans a kernel
module's Triton source for constructs the interpreter still cannot run exactly, so a failed check can say
"the Triton interpreter cannot run libdevice.X: run on a GPU" instead of "wrong result".
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from types import ModuleType
from typing import Any, Callable

import numpy as np

#: libdevice function name -> numpy function on fp32/fp64 arrays. Only functions whose numpy counterpart computes
#: the same mathematical function are listed; anything else (``fast_*``, ``*_rn``/``*_rz`` rounding variants,
#: integer bit tricks, ``erfinv``...) is reported by :func:`interpreter_limitations`.
LIBDEVICE_NUMPY: dict[str, Callable[..., np.ndarray]] = {
    "rsqrt": lambda x: 1 / np.sqrt(x),  # the interpreter's own tl.math.rsqrt does the same
    "sqrt": np.sqrt, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x),
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "fabs": np.abs, "cbrt": np.cbrt, "pow": np.power, "atan2": np.arctan2,
    "fmod": np.fmod, "fmin": np.fmin, "fmax": np.fmax, "hypot": np.hypot, "copysign": np.copysign,
}

#: ``tl`` constructs the interpreter cannot run at all (it raises NotImplementedError or ignores them).
UNSUPPORTED_TL = {"inline_asm_elementwise": "tl.inline_asm_elementwise (PTX inline assembly)"}

_LIBDEVICE_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
                      "triton.language.extra.hip.libdevice")

_applied: list[str] = []
_skipped: dict[str, str] = {}


def install_workarounds() -> list[str]:
    """Apply the exact interpreter workarounds that the installed Triton needs; idempotent.

    Returns:
        the names of the patches in effect (``"float_scalar_args"``, ``"libdevice"``, ``"bf16_values"``), in that
        order; a patch whose feature detection failed is absent and its reason is in :func:`skipped_workarounds`.
        The patches change only ``triton.runtime.interpreter``, which compiled launches never use.

    Raises:
        nothing: a Triton whose internals differ gets a skip reason, not an error.
    """
    try:
        from triton.runtime import interpreter as interp
    except Exception as exc:  # triton missing or broken: nothing to patch
        _skipped["all"] = f"triton.runtime.interpreter cannot be imported: {type(exc).__name__}: {exc}"
        return list(_applied)
    for name, patch in (("float_scalar_args", _patch_float_scalars), ("libdevice", _patch_libdevice),
                        ("bf16_values", _patch_bf16)):
        if name in _applied or name in _skipped:
            continue
        reason = patch(interp)
        if reason is None:
            _applied.append(name)
        else:
            _skipped[name] = reason
    return list(_applied)


def skipped_workarounds() -> dict[str, str]:
    """Patch name -> why it was not applied (internals of the installed Triton differ, or already fixed)."""
    return dict(_skipped)


# ----------------------------------------------------------------------------------------------- float scalars

def _patch_float_scalars(interp: ModuleType) -> str | None:
    import triton
    import triton.language as tl

    cvt = getattr(interp, "_implicit_cvt", None)
    handle_cls = getattr(interp, "TensorHandle", None)
    mangle = getattr(getattr(triton.runtime, "jit", None), "mangle_type", None)
    if cvt is None or handle_cls is None or mangle is None:
        return "triton.runtime.interpreter has no _implicit_cvt/TensorHandle or jit has no mangle_type"
    if "_implicit_cvt(" not in _source(getattr(interp, "GridExecutor", None)):
        return "GridExecutor does not convert arguments through _implicit_cvt"
    if not isinstance(cvt(0.5), float):
        return "the interpreter already converts float arguments (nothing to fix)"
    type_name = mangle(0.5)
    np_dtype = {"fp32": np.float32, "fp64": np.float64}.get(type_name)
    if np_dtype is None:
        return f"jit.mangle_type(0.5) is {type_name!r}, not fp32/fp64"
    try:  # str_to_ty(name, c) on Triton 3.9; a single argument on some older versions
        ty = tl.str_to_ty(type_name, None)
    except TypeError:
        ty = tl.str_to_ty(type_name)

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):  # bool and int are not floats; np.float64 is, and compiled Triton agrees
            return tl.tensor(handle_cls(np.array([arg], dtype=np_dtype), ty), ty)
        return cvt(arg)

    implicit_cvt.__wrapped__ = cvt  # type: ignore[attr-defined]
    interp._implicit_cvt = implicit_cvt
    return None


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj) if obj is not None else ""
    except (OSError, TypeError):
        return ""


# --------------------------------------------------------------------------------------------------- libdevice

def _libdevice_stub_returns_none() -> bool:
    try:
        from triton.language.extra import libdevice
    except ImportError:
        return False
    stub = getattr(libdevice, "rsqrt", None)
    return stub is not None and getattr(stub, "__module__", "") == _LIBDEVICE_MODULES[0] and stub(1.0) is None


def _libdevice_name(value: Any) -> str | None:
    """``"rsqrt"`` for a libdevice stub or extern function object, else None."""
    if getattr(value, "__module__", None) in _LIBDEVICE_MODULES and callable(value):
        return getattr(value, "__name__", None)
    return None


def _make_libdevice_impl(name: str, interp: ModuleType) -> Callable[..., Any]:
    import triton.language as tl

    np_fn = LIBDEVICE_NUMPY[name]

    def impl(*args: Any, _semantic: Any = None, **_kw: Any) -> Any:
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        if not tensors:
            raise TypeError(f"libdevice.{name} needs a tensor argument in a Triton kernel")
        dtype = tensors[0].dtype.scalar if hasattr(tensors[0].dtype, "scalar") else tensors[0].dtype
        if dtype not in (tl.float32, tl.float64):  # libdevice has fp32 and fp64 entry points only
            raise TypeError(f"libdevice.{name} takes fp32 or fp64 tensors, got {dtype} "
                            "(compiled Triton rejects it too: cast with .to(tl.float32))")
        np_dtype = np.float32 if dtype == tl.float32 else np.float64
        arrays = [a.handle.data if isinstance(a, tl.tensor) else np.asarray(getattr(a, "value", a), dtype=np_dtype)
                  for a in args]
        data = np.asarray(np_fn(*np.broadcast_arrays(*arrays)), dtype=np_dtype)
        out = max(tensors, key=lambda t: len(t.shape))
        return tl.tensor(interp.TensorHandle(data, dtype), out.type)

    impl.__name__ = name
    return impl


def _patch_libdevice(interp: ModuleType) -> str | None:
    if not _libdevice_stub_returns_none():
        return "triton.language.extra.libdevice.rsqrt is not a stub returning None (nothing to fix, or unknown)"
    original = getattr(interp, "_patch_lang", None)
    body = _source(getattr(interp, "GridExecutor", None))
    if original is None or "_patch_lang(self.fn)" not in body or ".restore()" not in body:
        return "GridExecutor does not patch the language through _patch_lang(self.fn) ... .restore()"
    impls = {name: _make_libdevice_impl(name, interp) for name in LIBDEVICE_NUMPY}

    class _Scope:
        """The interpreter's patch scope plus the libdevice names swapped in kernel globals and modules."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.saved: list[tuple[Any, str, Any]] = []

        def swap(self, target: Any, name: str, value: Any) -> None:
            if isinstance(target, dict):
                self.saved.append((target, name, target[name]))
                target[name] = value
            else:
                self.saved.append((target, name, getattr(target, name)))
                setattr(target, name, value)

        def restore(self) -> None:
            while self.saved:
                target, name, old = self.saved.pop()
                if isinstance(target, dict):
                    target[name] = old
                else:
                    setattr(target, name, old)
            self.inner.restore()

    def patch_lang(fn: Any) -> Any:
        scope = _Scope(original(fn))
        seen_modules: set[int] = set()
        for glb in _reachable_globals(fn):
            for key, value in list(glb.items()):
                name = _libdevice_name(value)
                if name in impls:
                    scope.swap(glb, key, impls[name])
                elif isinstance(value, ModuleType) and value.__name__ in _LIBDEVICE_MODULES \
                        and id(value) not in seen_modules:
                    seen_modules.add(id(value))
                    for attr in impls:
                        if hasattr(value, attr):
                            scope.swap(value, attr, impls[attr])
        return scope

    patch_lang.__wrapped__ = original  # type: ignore[attr-defined]
    interp._patch_lang = patch_lang
    return None


def _jit_inner(value: Any) -> Callable[..., Any] | None:
    """The Python function under a ``@triton.jit`` object (InterpretedFunction, JITFunction, autotuner)."""
    seen = 0
    while value is not None and seen < 4 and not inspect.isfunction(value):
        value = getattr(value, "fn", None)
        seen += 1
    return value if inspect.isfunction(value) else None


def _reachable_globals(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    """The globals of ``fn`` and of every ``@triton.jit`` function reachable from them (deduplicated)."""
    out: list[dict[str, Any]] = []
    todo, seen = [fn], set()
    while todo:
        f = _jit_inner(todo.pop())
        if f is None or id(f.__globals__) in seen:
            continue
        seen.add(id(f.__globals__))
        out.append(f.__globals__)
        todo.extend(v for v in f.__globals__.values() if _is_jit(v))
    return out


def _is_jit(value: Any) -> bool:
    try:
        from triton.runtime.jit import KernelInterface
    except ImportError:
        return False
    return isinstance(value, KernelInterface) and _jit_inner(value) is not None


# -------------------------------------------------------------------------------------------------------- bf16

def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32 values; exact (bf16 is the top half of fp32)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values -> bf16 bit patterns (uint16), round to nearest even; NaN stays a quiet NaN of its sign."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    return np.where(nan, ((u >> 16) | 0x0040).astype(np.uint16), rounded)


def _patch_bf16(interp: ModuleType) -> str | None:
    import triton.language as tl

    builder_cls = getattr(interp, "InterpreterBuilder", None)
    handle_cls = getattr(interp, "TensorHandle", None)
    get_np = getattr(interp, "_get_np_dtype", None)
    needed = ("binary_op", "unary_op", "create_clampf", "create_fma", "create_dot", "cast_impl")
    if builder_cls is None or handle_cls is None or get_np is None or not all(hasattr(builder_cls, n) for n in needed):
        return f"InterpreterBuilder lacks one of {needed} or TensorHandle/_get_np_dtype is missing"
    if get_np(tl.bfloat16) != np.dtype(np.uint16):
        return "the interpreter does not store bf16 as uint16 raw bits"
    probe = handle_cls(_f32_to_bf16(np.array([1.5], np.float32)), tl.bfloat16)
    got = builder_cls.binary_op(builder_cls(), probe, probe, np.multiply)
    product_ok = got.data.dtype == np.uint16 and _bf16_to_f32(got.data)[0] == 2.25
    tie = handle_cls(np.array([1.01171875], np.float32), tl.float32)  # 1 + 2^-8 + 2^-9: RNE -> 1.015625
    cast = builder_cls.cast_impl(builder_cls(), tie, tl.bfloat16)
    if product_ok and _bf16_to_f32(cast.data)[0] == 1.015625:
        return "bf16 products and fp32->bf16 casts are already exact (nothing to fix)"

    orig_binary, orig_unary, orig_cast = builder_cls.binary_op, builder_cls.unary_op, builder_cls.cast_impl
    orig_fma, orig_dot, orig_clamp = builder_cls.create_fma, builder_cls.create_dot, builder_cls.create_clampf

    def is_bf16(h: Any) -> bool:
        return getattr(h, "dtype", None) is not None and h.dtype.scalar == tl.bfloat16 and h.data.dtype == np.uint16

    def f32(h: Any) -> Any:
        return handle_cls(_bf16_to_f32(h.data), tl.float32) if is_bf16(h) else h

    def back(h: Any) -> Any:  # the fp32 result of a bf16 operation, rounded back to bf16
        return handle_cls(_f32_to_bf16(h.data.astype(np.float32)), tl.bfloat16)

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if is_bf16(lhs) and is_bf16(rhs):
            result = op(_bf16_to_f32(lhs.data), _bf16_to_f32(rhs.data))
            if result.dtype == np.bool_:  # a comparison: keep the interpreter's own result layout
                return orig_binary(self, lhs, rhs, lambda a, b: result)
            return handle_cls(_f32_to_bf16(result.astype(np.float32)), tl.bfloat16)
        return orig_binary(self, lhs, rhs, op)

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if is_bf16(arg):
            return back(orig_unary(self, f32(arg), op))
        return orig_unary(self, arg, op)

    def create_clampf(self: Any, arg: Any, lo: Any, hi: Any, propagate_nans: Any) -> Any:
        if is_bf16(arg):
            return back(orig_clamp(self, f32(arg), f32(lo), f32(hi), propagate_nans))
        return orig_clamp(self, arg, lo, hi, propagate_nans)

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if is_bf16(z):  # the fp64 product of bf16 values is exact; the sum is rounded fp64 -> fp32 -> bf16
            wide = np.multiply(_bf16_to_f32(x.data), _bf16_to_f32(y.data), dtype=np.float64) + _bf16_to_f32(z.data)
            return handle_cls(_f32_to_bf16(wide.astype(np.float32)), tl.bfloat16)
        return orig_fma(self, x, y, z)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any, **kw: Any) -> Any:
        if is_bf16(a) or is_bf16(b):  # tensor cores multiply bf16 values and accumulate in d's type
            return orig_dot(self, f32(a), f32(b), d, *rest, **kw)
        return orig_dot(self, a, b, d, *rest, **kw)

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        dst = dst_type.scalar
        if is_bf16(src) and dst != tl.bfloat16 and dst != tl.float32:  # decode first: casts of raw bits are wrong
            return orig_cast(self, f32(src), dst_type)
        if dst == tl.bfloat16 and not is_bf16(src):  # compiled Triton rounds to nearest even (LLVM fptrunc)
            wide = src if src.data.dtype == np.float32 else orig_cast(self, src, tl.float32)
            return back(wide)
        return orig_cast(self, src, dst_type)

    for name, fn in (("binary_op", binary_op), ("unary_op", unary_op), ("create_clampf", create_clampf),
                     ("create_fma", create_fma), ("create_dot", create_dot), ("cast_impl", cast_impl)):
        fn.__wrapped__ = getattr(builder_cls, name)  # type: ignore[attr-defined]
        setattr(builder_cls, name, fn)
    # create_fadd & co. are ``lambda self, l, r: self.binary_op(...)``: they find the patched method on ``self``.
    _patch_bf16_reductions(interp)
    return None


def _patch_bf16_reductions(interp: ModuleType) -> None:
    """``tl.sum``/``tl.max``/``tl.min``/``tl.argmax``/``tl.cumsum``/``tl.cumprod`` of bf16 blocks: numpy on values.

    The interpreter's fast paths (``ReduceOps.sum``/``min_max``, ``ScanOps.cumsum``/``cumprod``) apply numpy to the
    raw ``uint16`` bits (a sum of small bf16 values gives ~1e37). Here they decode to fp32, reduce, and round the
    result to bf16 once; max/min/argmax are then exact, and a sum differs from the GPU only by the order of its
    additions (the GPU rounds each step of its reduction tree to bf16), as any two reduction orders do.
    """
    import triton.language as tl

    reduce_cls, scan_cls = getattr(interp, "ReduceOps", None), getattr(interp, "ScanOps", None)

    def is_bf16(t: Any) -> bool:
        return t.dtype.scalar == tl.bfloat16 and t.handle.data.dtype == np.uint16

    def values(t: Any) -> Any:
        return tl.core.tensor(interp.TensorHandle(_bf16_to_f32(t.handle.data), tl.float32),
                              t.type.with_element_ty(tl.float32) if hasattr(t.type, "with_element_ty") else tl.float32)

    def rounded(t: Any) -> Any:  # an fp32 result tensor -> the same result in bf16
        ty = t.type.with_element_ty(tl.bfloat16) if hasattr(t.type, "with_element_ty") else tl.bfloat16
        return tl.core.tensor(interp.TensorHandle(_f32_to_bf16(t.handle.data), tl.bfloat16), ty)

    def wrap_value_op(cls: Any, name: str) -> None:
        orig = getattr(cls, name, None)
        if orig is None:
            return

        def method(self: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            if not is_bf16(input):
                return orig(self, input, *args, **kwargs)
            out = orig(self, values(input), *args, **kwargs)
            if isinstance(out, (list, tuple)):
                return type(out)(rounded(o) if o.dtype.scalar == tl.float32 else o for o in out)
            return rounded(out)

        method.__wrapped__ = orig  # type: ignore[attr-defined]
        setattr(cls, name, method)

    for cls, names in ((reduce_cls, ("sum",)), (scan_cls, ("cumsum", "cumprod"))):
        if cls is not None:
            for name in names:
                wrap_value_op(cls, name)
    orig_min_max = getattr(reduce_cls, "min_max", None)
    if orig_min_max is not None:
        def min_max(self: Any, input: Any, val_reduce_op: Any = None, idx_reduce_op: Any = None) -> Any:
            inner = input[0] if isinstance(input, tuple) else input
            if not is_bf16(inner):
                return orig_min_max(self, input, val_reduce_op, idx_reduce_op)
            out = orig_min_max(self, values(inner), val_reduce_op, idx_reduce_op)
            if isinstance(out, tuple):
                return (rounded(out[0]),) + tuple(out[1:])
            return rounded(out) if out.dtype.scalar == tl.float32 else out

        min_max.__wrapped__ = orig_min_max  # type: ignore[attr-defined]
        reduce_cls.min_max = min_max


# ------------------------------------------------------------------------------------------------- limitations

def interpreter_limitations(kernel_module: ModuleType, applied: list[str] | None = None) -> list[str]:
    """Constructs in a kernel module's Triton code that the interpreter cannot run exactly, as sentences.

    Scans the source of every ``@triton.jit`` function (also under ``@triton.autotune``/``heuristics``) bound in
    ``kernel_module`` and of every jit function those reach through their globals, for calls of libdevice
    functions without an exact numpy counterpart (all of them when the ``libdevice`` patch is not applied) and
    for ``tl.inline_asm_elementwise``.

    Args:
        kernel_module: an imported kernel file (or any module).
        applied: the workarounds in effect (default: those :func:`install_workarounds` applied in this process).

    Returns:
        deduplicated messages such as ``"the Triton interpreter cannot run libdevice.erfinv (in _kernel): run on a
        GPU"``; empty when nothing was found.
    """
    libdevice_ok = "libdevice" in (_applied if applied is None else applied)
    messages: dict[str, None] = {}
    roots = [v for v in vars(kernel_module).values() if _is_jit(v)]
    todo, seen = list(roots), set()
    while todo:
        fn = _jit_inner(todo.pop())
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        for callee, obj in _called(fn):
            name = _libdevice_name(obj)
            if name is not None and not (libdevice_ok and name in LIBDEVICE_NUMPY):
                messages[f"the Triton interpreter cannot run libdevice.{name} (in {fn.__name__}): run on a GPU"] = None
            elif callee.split(".")[-1] in UNSUPPORTED_TL and getattr(obj, "__module__", "").startswith("triton"):
                what = UNSUPPORTED_TL[callee.split(".")[-1]]
                messages[f"the Triton interpreter cannot run {what} (in {fn.__name__}): run on a GPU"] = None
            elif _is_jit(obj):
                todo.append(obj)
    return list(messages)


def _called(fn: Callable[..., Any]) -> list[tuple[str, Any]]:
    """(dotted callee text, resolved object or None) for each call in ``fn``'s source."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = _dotted(node.func)
            if parts:
                out.append((".".join(parts), _resolve(parts, fn.__globals__)))
    return out


def _dotted(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return base + [node.attr] if base else None
    return None


def _resolve(parts: list[str], glb: dict[str, Any]) -> Any:
    obj = glb.get(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part, None)
    return obj


def interpreter_note(kernel_module: ModuleType) -> str | None:
    """One sentence to attach to a failed interpreted check, or None when nothing unsupported was found.

    Example: ``"the Triton interpreter cannot run libdevice.erfinv (in _kernel): run on a GPU"``; several
    findings are joined with ``"; "``.
    """
    found = interpreter_limitations(kernel_module)
    return "; ".join(found) if found else None
