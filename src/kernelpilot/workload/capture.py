"""Capture a workload from a real PyTorch program: run it under the torch profiler, keep the calls of the reference
op, and map each call's argument sizes to the kernel's ``SHAPE`` keys; the call counts become the weights.

Why the profiler (``torch.profiler.profile(record_shapes=True)``) and not a ``TorchDispatchMode`` or a wrapper:

- it sees every op at the level the program called it, composite ones included: ``aten::rms_norm``,
  ``aten::layer_norm``, ``aten::linear``, ``aten::scaled_dot_product_attention`` are recorded as such. A
  ``TorchDispatchMode`` sits below autograd and sees them only decomposed (``rms_norm`` reaches it as ``pow``,
  ``mean``, ``rsqrt``, ``mul``), so an RMSNorm reference could not be captured at all;
- it changes nothing in the program: no wrapper to install where the program imported the function under its own
  name (``from torch.nn.functional import rms_norm`` keeps the original), no mode that alters dispatch;
- it records each tensor argument's sizes, dtype and strides and each scalar or int-list argument's value
  (``input_shapes``, ``input_dtypes``, ``structured_input_strides``, ``concrete_inputs``), which is what a mapping
  needs, on a CPU or a GPU program alike (only CPU activity is recorded: no CUPTI needed).

What counts as a call: an event whose name is the reference op (``aten::mm``; a ``torch.ops`` object is turned into
its name) and which is not inside another call of the same op (an op that calls itself is one call), and — unless
``include_backward`` — not inside an autograd backward function (``autograd::engine::evaluate_function: ...``): the
``aten::mm`` calls of a matmul's gradient have the transposed shapes and are not calls the program made. A
``torch.compile``-d region runs generated kernels, not aten ops: capture the program in eager mode.

The mapping (from :func:`parse_mapping`): ``SHAPE`` key -> one spec or a list of specs that must agree (a check that
the mapping fits the op: ``K`` of ``aten::mm`` is ``0.1`` and ``1.0``). A spec is ``ARG.SEL``, ``ARG`` the argument's
position in the op's schema (0-based) and ``SEL``:

- an int ``d`` (negative from the end): the argument's size along ``d`` (an int-list argument such as
  ``normalized_shape`` counts as its sizes);
- a slice ``a:b``: the product of the sizes ``[a:b]`` (``0.:-1``: every leading dimension folded into one: the rows
  of a layer norm over ``[batch, seq, hidden]``);
- ``dtype``: the argument's dtype as kernelpilot writes it (``float16``, ``bfloat16``, ``float32``, ...);
- ``value``: a scalar argument's value.

A mapping may instead be a callable ``(call: ProfiledCall) -> {KEY: value}``. Keys the mapping leaves out take the
base shape's value. :func:`kernelpilot.workload.infer.infer_mapping` finds a mapping by running the kernel file's
own ``setup`` and ``reference`` (observed, not declared). torch is imported only inside :func:`capture_workload`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict

from kernelpilot.workload.model import Workload, WorkloadError, build_workload, shape_id
from kernelpilot.workload.strides import stride_pattern

__all__ = ["DTYPE_NAMES", "NOT_TENSOR", "ProfiledCall", "Capture", "MappingSpec", "parse_mapping", "map_call",
           "op_name", "recorded_calls", "capture_workload", "parse_mapping_text"]

#: The profiler's dtype names (the C++ scalar types of c10/core/ScalarType.h as the profiler prints them) -> the
#: dtype names kernel files use in ``SHAPE``.
DTYPE_NAMES: dict[str, str] = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz", "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
    "signed char": "int8", "unsigned char": "uint8", "short int": "int16", "int": "int32", "long int": "int64",
    "bool": "bool", "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
}
#: The profiler's ``input_dtypes`` entries of arguments that are not tensors (``""``: None, an absent optional).
NOT_TENSOR = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "String", "Device", "Layout",
                        "ScalarType", "MemoryFormat"})
_SPEC = re.compile(r"^(\d+)\.(dtype|value|-?\d+|-?\d*:-?\d*)$")
_BACKWARD = "autograd::engine::evaluate_function"

#: A mapping: SHAPE key -> a spec or specs that must agree; or a callable from a call to {key: value}.
MappingSpec = Union[Mapping[str, Union[str, Sequence[str]]], Callable[["ProfiledCall"], Mapping[str, Any]]]


class ProfiledCall(BaseModel):
    """One recorded call of the reference op, as the profiler gives it.

    Attributes:
        op: the op's name (``aten::mm``).
        sizes: per argument in schema order, the tensor's sizes (``[]`` for a non-tensor or a 0-d tensor).
        dtypes: per argument, the profiler's dtype name (``float``, ``c10::BFloat16``; ``""`` for a non-tensor).
        strides: per argument, the tensor's strides in elements (``[]`` when not recorded).
        values: per argument, a scalar's or int list's value when the profiler recorded it, else None.
    """

    model_config = ConfigDict(frozen=True)

    op: str
    sizes: list[list[int]]
    dtypes: list[str]
    strides: list[list[int]]
    values: list[Any]

    def is_tensor(self, arg: int) -> bool:
        """True when argument ``arg`` is a tensor (its dtype entry names a scalar type, :data:`NOT_TENSOR`)."""
        return 0 <= arg < len(self.dtypes) and self.dtypes[arg] not in NOT_TENSOR

    def pattern(self) -> str:
        """The stride pattern of the call's tensor arguments (:func:`kernelpilot.workload.strides.stride_pattern`);
        ``contiguous`` when strides were not recorded."""
        pairs = [(s, t) for i, (s, t) in enumerate(zip(self.sizes, self.strides))
                 if self.is_tensor(i) and len(s) == len(t)]
        return stride_pattern([p[0] for p in pairs], [p[1] for p in pairs])


class Capture(BaseModel):
    """What :func:`capture_workload` saw.

    Attributes:
        workload: the mapped shapes, weight = number of calls at that shape (first-seen order).
        op: the reference op counted. calls: the calls counted (the weights' sum).
        backward_skipped: calls of the op inside autograd backward functions, not counted.
        patterns: :func:`~kernelpilot.workload.model.shape_id` of each shape -> stride pattern -> calls.
        unmapped: the ``SHAPE`` keys the mapping left to the base shape.
    """

    model_config = ConfigDict(frozen=True)

    workload: Workload
    op: str
    calls: int
    backward_skipped: int
    patterns: dict[str, dict[str, int]]
    unmapped: list[str]


def op_name(reference: Any) -> str:
    """The profiler's name of the reference op: a string as given (``aten::mm``; ``aten.mm`` is read as
    ``aten::mm``), a ``torch.ops`` packet or overload (``torch.ops.aten.mm.default``) by its qualified name.

    Raises:
        WorkloadError: anything else (a Python function: the profiler records the aten ops it calls, not it).
    """
    if isinstance(reference, str):
        name = reference.strip()
        if "::" not in name and name.count(".") == 1:
            name = name.replace(".", "::")
        if re.fullmatch(r"[A-Za-z_]\w*::[A-Za-z_]\w*", name):
            return name
    else:
        qualified = getattr(reference, "_qualified_op_name", None)
        if isinstance(qualified, str):
            return qualified
        name_fn = getattr(reference, "name", None)
        if callable(name_fn) and type(reference).__name__ == "OpOverload":
            return str(name_fn())
    raise WorkloadError(f"cannot tell which op {reference!r} is",
                        "name the reference op as the profiler does, e.g. 'aten::mm', 'aten::layer_norm', or pass "
                        "torch.ops.aten.mm")


def parse_mapping(mapping: Mapping[str, Union[str, Sequence[str]]],
                  base_shape: Mapping[str, Any]) -> dict[str, list[str]]:
    """Check a mapping against the grammar (module docstring) and the kernel's ``SHAPE``.

    Returns:
        key -> its specs (a single spec as a one-item list), in the mapping's order.

    Raises:
        WorkloadError: a key not in ``base_shape`` (named, with the known keys), no spec for a key, a spec not of the
            form ``ARG.SEL``.
    """
    out: dict[str, list[str]] = {}
    for key, specs in mapping.items():
        if key not in base_shape:
            raise WorkloadError(f"mapping key {key!r} is not in the kernel's SHAPE (known keys: "
                                f"{', '.join(base_shape) or 'none'})", "map the names of the kernel file's SHAPE")
        items = [specs] if isinstance(specs, str) else list(specs)
        if not items:
            raise WorkloadError(f"mapping for {key} has no spec", "e.g. {'M': '0.0', 'K': ['0.1', '1.0']}")
        for spec in items:
            if not isinstance(spec, str) or not _SPEC.match(spec.replace(" ", "")):
                raise WorkloadError(f"mapping for {key}: {spec!r} is not ARG.SEL",
                                    "ARG is the argument's position; SEL a dimension (0, -1), a slice of dimensions "
                                    "whose sizes multiply (:-1), dtype or value; e.g. {'M': '0.:-1', 'N': '0.-1'}")
        out[key] = [s.replace(" ", "") for s in items]
    return out


def parse_mapping_text(text: str, base_shape: Mapping[str, Any]) -> dict[str, list[str]]:
    """The command-line form of a mapping: ``KEY=SPEC[|SPEC...]`` items separated by ``,`` — e.g.
    ``"M=0.:-1,N=0.-1|2.:,dtype=0.dtype"`` (``|`` joins specs that must agree) — checked by :func:`parse_mapping`.

    Raises:
        WorkloadError: an item not of the form ``KEY=SPEC``, a key given twice, or what :func:`parse_mapping`
            refuses.
    """
    out: dict[str, list[str]] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, specs = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise WorkloadError(f"mapping item {item!r} is not KEY=SPEC", "e.g. M=0.:-1,N=0.-1|2.:,dtype=0.dtype")
        if key in out:
            raise WorkloadError(f"mapping gives {key} twice", "join specs of one key with |, e.g. K=0.1|1.0")
        out[key] = [s.strip() for s in specs.split("|")]
    if not out:
        raise WorkloadError("the mapping is empty", "e.g. M=0.:-1,N=0.-1,dtype=0.dtype")
    return parse_mapping(out, base_shape)


class _Absent(ValueError):
    """The argument a spec reads was None in this call (an optional argument left out)."""


def _resolve(spec: str, call: ProfiledCall) -> Any:
    """The value one spec reads from a call; raises :class:`_Absent` when the argument was None, ValueError naming
    what is missing otherwise."""
    m = _SPEC.match(spec)
    assert m is not None  # parse_mapping checked it
    arg, sel = int(m.group(1)), m.group(2)
    if arg >= len(call.sizes):
        raise ValueError(f"{call.op} was called with {len(call.sizes)} arguments, {spec} reads argument {arg}")
    if call.dtypes[arg] == "" and (arg >= len(call.values) or call.values[arg] is None):
        raise _Absent(f"argument {arg} of {call.op} is None in this call")
    if sel == "dtype":
        raw = call.dtypes[arg]
        if not call.is_tensor(arg):
            raise ValueError(f"argument {arg} of {call.op} is not a tensor (no dtype)")
        if raw not in DTYPE_NAMES:
            raise ValueError(f"argument {arg} of {call.op} has dtype {raw!r}, which kernelpilot does not name")
        return DTYPE_NAMES[raw]
    value = call.values[arg] if arg < len(call.values) else None
    if sel == "value":
        if isinstance(value, (bool, int, float, str)):
            return value
        raise ValueError(f"argument {arg} of {call.op} has no recorded scalar value")
    dims = call.sizes[arg] if call.is_tensor(arg) else None
    if not dims and isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        dims = value  # an int-list argument (normalized_shape) counts as its sizes
    if not dims:
        raise ValueError(f"argument {arg} of {call.op} has no sizes")
    if ":" in sel:
        a, _, b = sel.partition(":")
        picked = dims[int(a) if a else None:int(b) if b else None]
        if not picked:
            raise ValueError(f"{spec} selects no dimension of argument {arg} (sizes {dims})")
        return math.prod(picked)
    d = int(sel)
    if not -len(dims) <= d < len(dims):
        raise ValueError(f"argument {arg} of {call.op} has {len(dims)} dimensions ({dims}), {spec} reads {d}")
    return dims[d]


def map_call(call: ProfiledCall, mapping: MappingSpec) -> dict[str, Any]:
    """The shape keys one call gives under a mapping (a parsed one, :func:`parse_mapping`, or a callable).

    A spec whose argument is None in the call (an optional argument left out) is skipped; every other spec must be
    readable, at least one spec of each key must be read, and all those read must agree.

    Raises:
        WorkloadError: a spec reads what the call does not have (an argument past the last, a dimension past the
            rank, the dtype of a non-tensor), every spec of a key reads a None argument, or the specs of one key
            disagree (the message gives the call's argument sizes: the mapping does not fit the op).
    """
    if callable(mapping):
        return dict(mapping(call))
    out: dict[str, Any] = {}
    for key, specs in mapping.items():
        specs = [specs] if isinstance(specs, str) else list(specs)
        read: list[tuple[str, Any]] = []
        missing: list[str] = []
        for spec in specs:
            try:
                read.append((spec, _resolve(spec, call)))
            except _Absent as exc:  # an optional argument left None (weight=None): the other specs still count
                missing.append(str(exc))
            except ValueError as exc:
                raise WorkloadError(f"mapping for {key} does not fit a call of {call.op} (argument sizes "
                                    f"{call.sizes}): {exc}", "fix the mapping's ARG.SEL for this op's schema") from exc
        if not read:
            raise WorkloadError(f"mapping for {key} reads only arguments that are None in a call of {call.op} "
                                f"(argument sizes {call.sizes}): {missing[0]}",
                                "map the key to an argument every call passes")
        values = [v for _, v in read]
        if any(v != values[0] for v in values[1:]):
            raise WorkloadError(f"mapping for {key} reads different values from one call of {call.op}: "
                                + ", ".join(f"{s} = {v}" for s, v in read) + f" (argument sizes {call.sizes})",
                                "the specs of one key must read the same size; fix the mapping")
        out[key] = values[0]
    return out


def recorded_calls(events: Any, name: str) -> tuple[list[ProfiledCall], int, dict[str, int]]:
    """The counted calls of ``name`` among profiler events, the backward ones skipped, and the count of every op
    name seen (for a message when nothing matched)."""
    calls: list[ProfiledCall] = []
    backward = 0
    seen: dict[str, int] = {}
    for e in events:
        seen[e.name] = seen.get(e.name, 0) + 1
        if e.name != name:
            continue
        parents, p = [], e.cpu_parent
        while p is not None:
            parents.append(p.name)
            p = p.cpu_parent
        if name in parents:
            continue  # inside an outer call of the same op: one call
        if any(n.startswith(_BACKWARD) for n in parents):
            backward += 1
            continue
        sizes = [list(s) if isinstance(s, (list, tuple)) else [] for s in (e.input_shapes or [])]
        dtypes = [str(d or "") for d in (getattr(e, "input_dtypes", None) or [""] * len(sizes))]
        strides = [list(s) if isinstance(s, (list, tuple)) and all(isinstance(x, int) for x in s) else []
                   for s in (getattr(e, "structured_input_strides", None) or [[]] * len(sizes))]
        values = list(getattr(e, "concrete_inputs", None) or [None] * len(sizes))
        n = len(sizes)
        calls.append(ProfiledCall(op=name, sizes=sizes, dtypes=(dtypes + [""] * n)[:n],
                                  strides=(strides + [[]] * n)[:n], values=(values + [None] * n)[:n]))
    return calls, backward, seen


def capture_workload(fn: Callable[..., Any], reference: Any, mapping: MappingSpec, base_shape: Mapping[str, Any],
                     *, args: Sequence[Any] = (), kwargs: Optional[Mapping[str, Any]] = None,
                     include_backward: bool = False) -> Capture:
    """Run ``fn(*args, **kwargs)`` once under the torch profiler and return the reference op's calls as a workload.

    Args:
        fn: the program (a callable that runs the model, a serving step, a test loop), eager mode.
        reference: the op the kernel replaces, as :func:`op_name` reads it (``"aten::rms_norm"``,
            ``torch.ops.aten.mm``).
        mapping: SHAPE key -> spec(s) (module docstring; checked by :func:`parse_mapping`), or a callable.
        base_shape: the kernel's ``SHAPE`` (keys the mapping leaves out take its values).
        args, kwargs: passed to ``fn``. include_backward: count the op's calls inside autograd backward too.

    Returns:
        A :class:`Capture`: the workload (weight = calls per shape), the number of calls, the stride patterns seen.

    Raises:
        WorkloadError: a malformed mapping or reference; ``fn`` made no counted call of the op (the message lists
            the ops it did call, most frequent first); a call the mapping does not fit; a mapped value of the wrong
            type for ``SHAPE``. Whatever ``fn`` raises propagates unchanged.
        MissingDependencyError: torch is not installed.
    """
    name = op_name(reference)
    parsed: MappingSpec = mapping if callable(mapping) else parse_mapping(mapping, base_shape)
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError as exc:  # pragma: no cover - torch is a dependency of every kernelpilot install
        from kernelpilot.errors import MissingDependencyError

        raise MissingDependencyError("capturing a workload needs torch", "pip install torch") from exc
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn(*args, **dict(kwargs or {}))
    calls, backward, seen = recorded_calls(prof.events(), name)
    if not calls:
        common = ", ".join(n for n, _ in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))[:12]) or "none"
        more = f" ({backward} inside backward, not counted)" if backward else ""
        raise WorkloadError(f"the program made no call of {name}{more}; ops it called: {common}",
                            "name the op the kernel replaces as the profiler records it (one of the ops listed)")
    entries: list[dict[str, Any]] = []
    patterns: dict[str, dict[str, int]] = {}
    where = f"capture of {name}"
    for call in calls:
        # the full shape as the workload stores it (missing keys filled, types checked), so patterns key by it
        full = build_workload([{"shape": map_call(call, parsed)}], base_shape, where=where).entries[0].shape
        entries.append({"shape": full, "weight": 1.0})
        per = patterns.setdefault(shape_id(full), {})
        pat = call.pattern()
        per[pat] = per.get(pat, 0) + 1
    workload = build_workload(entries, base_shape, source=f"capture:{name}", where=where)
    mapped = set(parsed) if not callable(parsed) else set(map_call(calls[0], parsed))
    return Capture(workload=workload, op=name, calls=len(calls), backward_skipped=backward, patterns=patterns,
                   unmapped=[k for k in base_shape if k not in mapped])

