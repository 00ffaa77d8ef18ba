"""The kernel-file contract, language-neutral: validate a kernel module, and build inputs from it.

Loading and launching belong to the file's backend (:func:`kernelpilot.backends.backend_for`; Triton for ``.py``):
:func:`load_kernel` and :func:`run_kernel` here hand over to it. A kernel file is a Python module with
(docs/contract.md, compatible with the seed skills' Triton contract):

- ``setup(**shape, seed, device) -> {"inputs": {name: tensor | scalar}, "outputs": [names]}`` and optionally
  ``"inplace": [names]``; output names are keys of ``inputs`` naming the tensors ``run_kernel`` writes; in-place
  names are outputs that ``run_kernel`` also reads (RoPE rotating q and k): kernelpilot keeps pristine copies and
  restores them before every launch, outside any timed region (:meth:`Case.restore`);
- ``run_kernel(**inputs, **config)`` launches the kernel and writes the outputs in place;
- ``reference(**inputs)`` in the same module or in ``--ref ref.py``: returns the outputs (a tensor, a tuple in
  ``outputs`` order, or a dict) or writes them in place;
- ``TUNABLES`` (name -> candidate values), ``SHAPE`` (default problem shape); optional ``CPU_SHAPE`` (shape
  used without a GPU, under an interpreter), ``DEFAULT_CONFIG``, ``COMPUTE_UNIT``, ``flops(**shape)``,
  ``bytes_moved(**shape)``, ``atol``/``rtol``, ``CONSTRAINTS`` (a list of Python expressions over tunable
  names that every searched config must satisfy, e.g. ``"BLOCK_M * BLOCK_K * 2 * num_stages <= 200_000"``;
  solved by :mod:`kernelpilot.search.space`); ``CHECK_SHAPES`` (shapes, each merged over the checked one, at
  which correctness is also checked, added to the shapes kernelpilot draws itself: :mod:`kernelpilot.kernels.shapes`);
  ``SHAPE_RULES`` (the sizes the kernel is right at: a dimension a multiple of an int or of a tunable expression,
  a power of two, or fixed; the drawn shapes stay inside it and every verdict records it); ``setup()["partial"]``: inputs the kernel reads only in part (an
  embedding table), left out of the minimum bytes of the speed-of-light floor.

Every violation raises :class:`~kernelpilot.errors.ContractError` naming the missing or wrong piece.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import itertools
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from kernelpilot.errors import ContractError
from kernelpilot.kernels.shapes import parse_rules

COMPUTE_UNITS = ("fp32", "fp64", "tf32_tensor", "bf16_tensor", "fp16_tensor", "fp8_tensor", "int8_tensor")

Config = dict[str, Any]
Shape = dict[str, Any]

_loaded_counter = itertools.count()


@dataclass
class KernelFile:
    """A loaded, validated kernel file.

    Attributes:
        path: the kernel file.
        module: the imported module (by the backend; for Triton under its interpreter when ``interpreted``).
        reference_path: the file ``reference`` came from (the kernel file or ``--ref``).
        tunables: name -> candidate values (kept in the file's order).
        default_config: the starting config (``DEFAULT_CONFIG`` or each tunable's first candidate).
        shape / cpu_shape: default problem shape, and the small shape for interpreted runs (may be None).
        compute_unit: which peak the FLOPs run on (one of ``COMPUTE_UNITS``; default ``"fp32"``).
        source_sha256: hash of the kernel file and the reference file, recorded with every version.
        interpreted: True when loaded to run without a GPU (Triton: under ``TRITON_INTERPRET=1``).
        constraints: the file's ``CONSTRAINTS`` expressions (may be empty), checked by the search space.
        backend: the :class:`kernelpilot.backends.base.Backend` that loaded the file and launches it.
        extras: backend-specific facts (Triton: ``autotuner``, the ``@triton.autotune`` kernel's name, and
            ``autotune_configs``, its configs as written).
    """

    path: Path
    module: ModuleType
    reference_path: Path
    setup: Callable[..., dict]
    run_kernel: Callable[..., Any]
    reference: Callable[..., Any]
    tunables: dict[str, list[Any]]
    default_config: Config
    shape: Shape
    cpu_shape: Shape | None
    compute_unit: str
    source_sha256: str
    interpreted: bool
    flops_fn: Callable[..., float] | None = None
    bytes_fn: Callable[..., float] | None = None
    atol: float | None = None
    rtol: float | None = None
    check_shapes: list[Shape] | None = None
    shape_rules: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    constraints: list[str] = field(default_factory=list)
    backend: Any = None

    @property
    def name(self) -> str:
        """The kernel's name: the file's stem (``softmax`` for ``examples/softmax.py``)."""
        return self.path.stem


@dataclass
class DerivedSpace:
    """A search space a backend read from the kernel itself instead of ``TUNABLES`` (e.g. ``@triton.autotune``
    configs): candidates per name, the starting config, constraints, and facts the backend keeps in
    :attr:`KernelFile.extras`."""

    tunables: dict[str, list[Any]]
    default_config: Config
    constraints: list[str] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)


def import_module_file(path: Path, tag: str) -> ModuleType:
    """Import a Python file as a fresh module (a unique name per call, so a file loaded twice is two modules).

    Raises:
        ContractError: the file cannot be imported, or raised while importing (the message names the line).
    """
    name = f"kernelpilot_user_{tag}_{path.stem}_{next(_loaded_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ContractError(f"{path}: cannot be imported as a Python module", "give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and triton.jit look the module up while it executes
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's module failed at import time
        sys.modules.pop(name, None)
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f"{f.filename}:{f.lineno}" for f in reversed(tb) if f.filename == str(path)), str(path))
        raise ContractError(
            f"{path}: importing the kernel file failed at {where}: {type(exc).__name__}: {exc}",
            "fix the error above; the file must import without a GPU (kernels then run under an interpreter)",
        ) from exc
    return module


def _require_callable(module: ModuleType, name: str, path: Path, what: str) -> Callable[..., Any]:
    fn = getattr(module, name, None)
    if fn is None:
        raise ContractError(f"{path}: no `{name}` defined", what)
    if not callable(fn):
        raise ContractError(f"{path}: `{name}` is a {type(fn).__name__}, not a function", what)
    return fn


def _check_tunables(tunables: Any, path: Path) -> dict[str, list[Any]]:
    hint = 'define TUNABLES = {"BLOCK_SIZE": [256, 512, 1024], "num_warps": [2, 4, 8]} (name -> candidate values)'
    if not isinstance(tunables, dict) or not tunables:
        raise ContractError(f"{path}: TUNABLES must be a non-empty dict, got {type(tunables).__name__}", hint)
    out: dict[str, list[Any]] = {}
    for key, values in tunables.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ContractError(f"{path}: TUNABLES key {key!r} is not a valid keyword name", hint)
        if not isinstance(values, (list, tuple)) or not values:
            raise ContractError(f"{path}: TUNABLES[{key!r}] must be a non-empty list of candidates", hint)
        if len(set(map(repr, values))) != len(values):
            raise ContractError(f"{path}: TUNABLES[{key!r}] has repeated candidates {list(values)}", hint)
        out[key] = list(values)
    return out


def _check_shape(value: Any, path: Path, name: str) -> Shape:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ContractError(f"{path}: {name} must be a dict of name -> value, got {type(value).__name__}",
                            f'define {name} = {{"M": 4096, "N": 4096}}')
    return dict(value)


def load_kernel(path: str | Path, ref_path: str | Path | None = None, *, interpreted: bool = False) -> KernelFile:
    """Import and validate a kernel file with the backend that reads it (:func:`kernelpilot.backends.backend_for`).

    Args:
        path: the kernel file (``.py``: Triton; ``.cu``: CUDA C++, docs/cuda.md).
        ref_path: optional file defining ``reference``; default: the kernel file itself.
        interpreted: run without a GPU (Triton: imported under ``TRITON_INTERPRET=1``).

    Returns:
        The validated :class:`KernelFile`.

    Raises:
        ContractError: the file is missing, no backend reads it, it does not import (a ``.cu`` file: its
            ``solve`` cannot be parsed), or a required name is missing or malformed (the message names the file and
            the piece).
    """
    from kernelpilot.backends.registry import backend_for

    path = Path(path).resolve()
    if not path.is_file():
        raise ContractError(f"kernel file not found: {path}", "pass the path of a .py or .cu kernel file")
    flags = screen_before_import([path] + ([Path(ref_path).resolve()] if ref_path else []))
    kf = backend_for(path).load(path, Path(ref_path) if ref_path else None, interpreted=interpreted)
    kf.extras["screen_flags"] = flags + kf.extras.pop("screen_flags_cuda", [])  # a .cu file's sidecar and ref.py
    return kf


def screen_before_import(paths: list[Path]) -> list[str]:
    """Run the static screen (:mod:`kernelpilot.measure.screen`) on Python files before they are imported.

    Returns the ``flag`` findings as ``path:line: flag rule: message`` lines (recorded, shown, refused only under
    ``--strict``). Raises:
        ScreenRefused: a ``refuse`` finding (the message lists each with its line and what to do).
    """
    from kernelpilot.errors import ScreenRefused
    from kernelpilot.measure.screen import screen_file

    flags: list[str] = []
    for p in paths:
        if p.suffix != ".py" or not p.is_file():
            continue
        report = screen_file(p)
        if report.refused:
            refusals = [f for f in report.findings if f.severity == "refuse"]
            raise ScreenRefused(f"{p}: the static screen refused the file before running it:\n  "
                                + "\n  ".join(f"line {f.line}: {f.rule}: {f.message}" for f in refusals[:8]),
                                refusals[0].hint)
        flags += [line for line, f in zip(report.lines(), report.findings) if f.severity == "flag"]
    return flags


def build_kernel_file(path: Path, module: ModuleType, ref_path: Path | None, *, interpreted: bool,
                      derived: DerivedSpace | None = None, backend: Any = None,
                      no_tunables_hint: str = 'define TUNABLES = {"BLOCK_SIZE": [256, 512, 1024]}') -> KernelFile:
    """Validate an imported kernel module against the contract (for backends; users call :func:`load_kernel`).

    Args:
        path: the kernel file; ``module``: it, imported by the backend.
        ref_path: optional file defining ``reference`` (imported here); default: the kernel module.
        derived: the space when the backend read it from the kernel (then ``TUNABLES`` is not required and
            ``run_kernel`` need not accept the tunables as keywords).
        backend: recorded in :attr:`KernelFile.backend`.
        no_tunables_hint: the hint when neither ``TUNABLES`` nor a derived space exists.

    Raises:
        ContractError: a required name is missing or malformed.
    """
    setup = _require_callable(module, "setup", path,
                              'define setup(**shape, seed=0, device="cuda") -> {"inputs": {...}, "outputs": [...]}')
    run_kernel = _require_callable(module, "run_kernel", path,
                                   "define run_kernel(**inputs, **config) that launches the kernel")
    ref_file = Path(ref_path).resolve() if ref_path else path
    if ref_path:
        if not ref_file.is_file():
            raise ContractError(f"reference file not found: {ref_file}", "pass --ref pointing to a .py file")
        ref_module = import_module_file(ref_file, "ref")
    else:
        ref_module = module
    reference = _require_callable(ref_module, "reference", ref_file,
                                  "define reference(**inputs) in the kernel file or pass --ref ref.py")
    if derived is not None:
        tunables = derived.tunables
    elif not hasattr(module, "TUNABLES"):
        raise ContractError(f"{path}: no TUNABLES defined", no_tunables_hint)
    else:
        tunables = _check_tunables(module.TUNABLES, path)
    if not hasattr(module, "SHAPE"):
        raise ContractError(f"{path}: no SHAPE defined", 'define SHAPE = {"M": 4096, "N": 4096}, the default shape')
    shape = _check_shape(module.SHAPE, path, "SHAPE")
    cpu_shape = _check_shape(module.CPU_SHAPE, path, "CPU_SHAPE") if hasattr(module, "CPU_SHAPE") else None
    for key in tunables if derived is None else ():  # a derived space reaches the kernel another way
        if not _accepts(run_kernel, key):
            raise ContractError(f"{path}: run_kernel does not accept the tunable `{key}`",
                                f"add `{key}` as a keyword parameter of run_kernel (or **kwargs)")
    if not _accepts(setup, "seed"):
        raise ContractError(f"{path}: setup does not accept `seed`", "add seed=0 to setup's parameters")
    default = dict(derived.default_config) if derived is not None else {k: v[0] for k, v in tunables.items()}
    if hasattr(module, "DEFAULT_CONFIG"):
        given = module.DEFAULT_CONFIG
        if not isinstance(given, dict):
            raise ContractError(f"{path}: DEFAULT_CONFIG must be a dict", "e.g. DEFAULT_CONFIG = {'BLOCK_SIZE': 256}")
        default.update(given)
    validate_config(default, tunables, path, what="DEFAULT_CONFIG")
    unit = getattr(module, "COMPUTE_UNIT", "fp32")
    if unit not in COMPUTE_UNITS:
        raise ContractError(f"{path}: COMPUTE_UNIT {unit!r} is not one of {', '.join(COMPUTE_UNITS)}",
                            'e.g. COMPUTE_UNIT = "bf16_tensor" for a bf16 tl.dot kernel')
    constraints = getattr(module, "CONSTRAINTS", [])
    if not isinstance(constraints, (list, tuple)) or not all(isinstance(c, str) and c.strip() for c in constraints):
        raise ContractError(f"{path}: CONSTRAINTS must be a list of expression strings",
                            'e.g. CONSTRAINTS = ["BLOCK_M * BLOCK_K * 2 * num_stages <= 200_000"]')
    constraints = list(constraints) + (list(derived.constraints) if derived is not None else [])
    check_shapes = getattr(module, "CHECK_SHAPES", None)
    if check_shapes is not None and (not isinstance(check_shapes, (list, tuple))
                                     or not all(isinstance(c, dict) for c in check_shapes)):
        raise ContractError(f"{path}: CHECK_SHAPES must be a list of shape dicts",
                            'e.g. CHECK_SHAPES = [{"M": 1000, "N": 777}] (merged over the checked shape)')
    digest = hashlib.sha256(path.read_bytes())
    if ref_file != path:
        digest.update(ref_file.read_bytes())
    tol_src = ref_module if ref_module is not module else module
    return KernelFile(
        path=path, module=module, reference_path=ref_file, setup=setup, run_kernel=run_kernel, reference=reference,
        tunables=tunables, default_config=default, shape=shape, cpu_shape=cpu_shape, compute_unit=unit,
        source_sha256=digest.hexdigest(), interpreted=interpreted,
        flops_fn=getattr(module, "flops", None), bytes_fn=getattr(module, "bytes_moved", None),
        atol=getattr(tol_src, "atol", None), rtol=getattr(tol_src, "rtol", None), constraints=constraints,
        check_shapes=[dict(c) for c in check_shapes] if check_shapes is not None else None,
        shape_rules=parse_rules(getattr(module, "SHAPE_RULES", None), path),
        extras=dict(derived.extras) if derived is not None else {}, backend=backend,
    )


def validate_config(config: Config, tunables: dict[str, list[Any]], path: Path | str = "config", *,
                    what: str = "config") -> None:
    """Check that ``config`` sets every tunable to one of its candidates.

    Raises:
        ContractError: a key is not a tunable, a tunable is missing, or a value is not a candidate.
    """
    for key, value in config.items():
        if key not in tunables:
            raise ContractError(f"{path}: {what} sets `{key}`, which is not in TUNABLES ({', '.join(tunables)})",
                                "use only names listed in TUNABLES")
        if value not in tunables[key]:
            raise ContractError(f"{path}: {what} sets {key}={value!r}, not one of TUNABLES[{key!r}] = {tunables[key]}",
                                f"pick one of {tunables[key]}")
    missing = [k for k in tunables if k not in config]
    if missing:
        raise ContractError(f"{path}: {what} does not set {', '.join(missing)}", "every tunable needs a value")


def parse_assignments(items: list[str] | None, what: str = "--shape") -> dict[str, Any]:
    """Parse ``["M=8192", "dtype=bfloat16"]`` into ``{"M": 8192, "dtype": "bfloat16"}`` (int, then float, else str).

    Raises:
        ContractError: an item is not of the form ``name=value``.
    """
    out: dict[str, Any] = {}
    for item in items or []:
        for part in item.split(","):
            if not part:
                continue
            name, sep, raw = part.partition("=")
            if not sep or not name.strip().isidentifier():
                raise ContractError(f"{what} {part!r} is not of the form name=value", f"e.g. {what} M=8192")
            out[name.strip()] = _parse_scalar(raw.strip())
    return out


def _parse_scalar(raw: str) -> Any:
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    if raw in ("True", "False", "true", "false"):
        return raw.lower() == "true"
    return raw


def resolve_shape(kf: KernelFile, overrides: dict[str, Any] | None = None) -> Shape:
    """The shape to run: ``CPU_SHAPE`` when interpreted (if the file has one), else ``SHAPE``, then overrides.

    Raises:
        ContractError: an override names a dimension the file's shapes do not have.
    """
    base = dict(kf.cpu_shape if kf.interpreted and kf.cpu_shape is not None else kf.shape)
    known = set(kf.shape) | set(kf.cpu_shape or {})
    for key, value in (overrides or {}).items():
        if key not in known:
            raise ContractError(f"{kf.path}: --shape sets `{key}`, which SHAPE does not have ({', '.join(sorted(known))})",
                                "use the names in the kernel file's SHAPE")
        base[key] = value
    return base


def literal_shape(path: str | Path, interpreted: bool, overrides: dict[str, Any] | None = None) -> Shape | None:
    """The shape :func:`resolve_shape` will give for the ``.py`` kernel file at ``path``, read from its source
    without importing it: its top-level ``SHAPE`` (``CPU_SHAPE`` when ``interpreted`` and the file has one) as a
    literal, then ``overrides``. None when that cannot be known without running the file (not a ``.py``, no such
    assignment, a computed value, an override of a name the literals lack, a syntax error): a caller then waits
    for the import. Raises nothing."""
    import ast

    path = Path(path)
    try:
        tree = ast.parse(path.read_bytes()) if path.suffix == ".py" else None
    except (OSError, SyntaxError, ValueError):
        return None
    found: dict[str, Any] = {}
    for node in tree.body if tree is not None else []:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        for t in targets:
            if isinstance(t, ast.Name) and t.id in ("SHAPE", "CPU_SHAPE"):
                try:
                    found[t.id] = dict(_constant(node.value)) if node.value is not None else None
                except (ValueError, TypeError, OverflowError):
                    found[t.id] = None  # computed: known only by importing the file
    base = found["CPU_SHAPE"] if interpreted and "CPU_SHAPE" in found else found.get("SHAPE")
    if base is None or not set(overrides or {}) <= set(found.get("SHAPE") or {}) | set(found.get("CPU_SHAPE") or {}):
        return None
    return {**base, **(overrides or {})}


#: The arithmetic :func:`literal_shape` folds (``2**26``, ``1 << 20``, ``4 * 1024``); nothing else is evaluated.
_FOLD = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mult": lambda a, b: a * b,
         "FloorDiv": lambda a, b: a // b, "Pow": lambda a, b: a ** b, "LShift": lambda a, b: a << b}


def _constant(node: Any) -> Any:
    """A literal (:func:`ast.literal_eval`'s kinds) with integer arithmetic folded (:data:`_FOLD`, exponents and
    shifts up to 64). Raises ValueError for anything else (a name, a call, an attribute: a computed value)."""
    import ast

    if isinstance(node, ast.BinOp) and type(node.op).__name__ in _FOLD:
        a, b = _constant(node.left), _constant(node.right)
        if not (isinstance(a, int) and isinstance(b, int)) or (type(node.op).__name__ in ("Pow", "LShift")
                                                              and not 0 <= b <= 64):
            raise ValueError("not a small integer expression")
        return _FOLD[type(node.op).__name__](a, b)
    if isinstance(node, ast.Dict):
        return {_constant(k): _constant(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.List):
        return [_constant(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_constant(e) for e in node.elts)
    if node is None:
        raise ValueError("a ** unpacking in a dict")
    return ast.literal_eval(node)


def resolve_config(kf: KernelFile, overrides: dict[str, Any] | None = None) -> Config:
    """The default config with ``--config`` overrides applied and validated (raises ContractError)."""
    config = {**kf.default_config, **(overrides or {})}
    validate_config(config, kf.tunables, kf.path, what="--config")
    return config


def run_kernel(kf: KernelFile, inputs: dict[str, Any], config: Config) -> None:
    """Launch the kernel once with ``config`` through its backend (:meth:`kernelpilot.backends.base.Backend.launch`;
    Triton pins an ``@triton.autotune`` kernel to ``config``, keeping that config's hooks). Asynchronous on a GPU;
    the kernel's exceptions propagate to the caller. The kernel gets fresh plain aliases of the tensors in
    ``inputs`` (:mod:`kernelpilot.kernels.plain`): what it does to those objects (a class swapped, a storage
    replaced) never reaches the caller's, whose storage it writes. It returns once no other thread runs the kernel
    file's code (:func:`kernelpilot.kernels.threads.settle`: RuntimeError after 30 s)."""
    backend = kf.backend
    if backend is None:  # a KernelFile built by hand
        from kernelpilot.backends.registry import backend_for

        backend = kf.backend = backend_for(kf.path)
    backend.launch(kf, plain_aliases(inputs), config)
    settle_threads()  # work the launch left in the kernel file's threads is part of it (kernels/threads.py)


#: Names that moved to the Triton backend, re-exported here (imported on first use: the backend imports this module).
_MOVED = {"find_autotuner": "autotune", "autotune_space": "autotune", "autotune_config_dict": "config",
          "use_interpreter": "backend"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(f"kernelpilot.backends.triton.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


from kernelpilot.kernels.case import Case, _accepts, make_case, poison_tensor  # noqa: E402,F401 - re-exported
from kernelpilot.kernels.plain import plain_aliases  # noqa: E402
from kernelpilot.kernels.threads import settle as settle_threads  # noqa: E402
