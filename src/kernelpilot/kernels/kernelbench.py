"""KernelBench in, the form's own rules: detection, seeding, casting and the problem's reference. The solution is
loaded and launched by :class:`kernelpilot.backends.kernelbench.KernelBenchBackend`, which the backend registry picks
for a ``.py`` file in the solution form.

A KernelBench solution (``class ModelNew``) with its problem (``Model``, ``get_inputs``,
``get_init_inputs``) as a kernel file of kernelpilot's contract (docs/kernelbench.md).

The form is detected from the files' top-level definitions (:func:`is_solution_file`, :func:`is_problem_file`),
never declared. The pair becomes a :class:`~kernelpilot.kernels.contract.KernelFile` whose

- ``SHAPE`` is ``{}`` (a KernelBench problem has one fixed input set, the sizes written in ``get_inputs``);
- ``setup(seed, device)`` seeds torch with ``seed`` (``torch.manual_seed``, as KernelBench's ``set_seed``), calls
  ``get_inputs()``, casts every *floating* tensor to float32 (KernelBench's default precision) and moves every
  tensor to ``device``; the inputs are named ``in0, in1, ...`` in ``get_inputs()`` order, and one output buffer
  per result of ``Model.forward`` (``out``; ``out0, out1, ...`` for a tuple) is allocated;
- the models are built as KernelBench builds them: ``torch.manual_seed(42)`` before ``get_init_inputs()`` and again
  before each of ``Model(*init_inputs)`` and ``ModelNew(*init_inputs)`` (so layers created in the same order get
  the same parameters), then ``.to(device, dtype)``;
- ``reference(**inputs)`` is ``Model.forward`` on the inputs, with the model cast to the inputs' floating dtype
  (float64 when kernelpilot upcasts the reference's inputs: the same parameters, upcast);
- ``run_kernel(**inputs)`` is ``ModelNew.forward`` whose result is copied into the output buffers (a shape or
  count that differs from the reference's is an error, not a broadcast); every launch must run at least one
  ``@triton.jit`` kernel defined in the solution file itself, else :class:`KernelNotLaunched` is raised (the
  solution "calls the reference's library ops instead"). On a GPU the device's activity records check the same
  names (:mod:`kernelpilot.measure.activity`, through the backend's ``kernel_names``).

Facts about KernelBench (ScalingIntelligence/KernelBench, ``src/kernelbench/eval.py``) are restated in
docs/kernelbench.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from kernelpilot.errors import KernelRunError

__all__ = ["KB_SEED", "PROBLEM_NAMES", "KernelNotLaunched", "build_model", "device_of", "dtype_of", "is_problem_file",
           "is_solution_file", "load_inline_kernels", "ordered_args", "problem_reference", "reference_of", "set_seed", "to_device",
           "top_level_names"]

#: The seed KernelBench sets before ``get_init_inputs()`` and before building each model (``set_seed(42)``).
KB_SEED = 42
#: KernelBench's tolerance for float32 (``atol = rtol = 1e-4`` in ``eval.py``).
KB_TOL_FP32 = 1e-4

PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")
_CONTRACT_NAMES = ("setup", "run_kernel")


class KernelNotLaunched(KernelRunError):
    """A KernelBench solution's ``ModelNew.forward`` ran without launching any kernel defined in the solution file
    (it computed with the reference's library ops, or with kernels defined elsewhere). Its failure status in a
    check or search is ``kernel_not_launched``."""


def top_level_names(path: Path) -> set[str]:
    """Names a file defines at top level (classes, functions, assigned names); empty when it does not parse."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def is_solution_file(path: str | Path) -> bool:
    """True when ``path`` is a ``.py`` file defining ``class ModelNew`` at top level and neither ``setup`` nor
    ``run_kernel`` (a file of kernelpilot's own contract stays one, whatever else it defines). Read with ``ast``;
    nothing is imported. Raises nothing."""
    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        return False
    names = top_level_names(path)
    return "ModelNew" in names and not any(n in names for n in _CONTRACT_NAMES)


def is_problem_file(path: str | Path) -> bool:
    """True when ``path`` is a ``.py`` file defining ``Model``, ``get_inputs`` and ``get_init_inputs`` at top
    level (KernelBench's problem form). Raises nothing."""
    path = Path(path)
    return path.suffix == ".py" and path.is_file() and all(n in top_level_names(path) for n in PROBLEM_NAMES)


def set_seed(seed: int) -> None:
    """``torch.manual_seed(seed)``, as KernelBench's ``set_seed`` (which also seeds the current CUDA device)."""
    import torch

    torch.manual_seed(seed)  # seeds every device's generator too (KernelBench also calls torch.cuda.manual_seed)


def to_device(value: Any, device: Any, dtype: Any) -> Any:
    """A floating tensor cast to ``dtype`` and moved; another tensor only moved (KernelBench casts integer tensors
    too, which breaks index inputs: kernelpilot keeps their dtype); a non-tensor unchanged."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype) if value.is_floating_point() else value.to(device=device)
    return value


def build_model(cls: type, problem: ModuleType, device: Any, dtype: Any) -> Any:
    """``cls(*get_init_inputs())`` built as KernelBench builds it (seed 42 before the init inputs and the model),
    moved to ``device`` and cast to ``dtype``."""
    import torch

    set_seed(KB_SEED)
    init = [to_device(v, device, dtype) for v in problem.get_init_inputs()]
    set_seed(KB_SEED)
    with torch.no_grad():
        model = cls(*init)
    if hasattr(model, "to"):
        model = model.to(device=device, dtype=dtype)
    return model


def ordered_args(inputs: dict[str, Any]) -> list[Any]:
    """The positional arguments ``in0, in1, ...`` in order (the output buffers ``out*`` left out)."""
    keys = sorted((k for k in inputs if k.startswith("in") and k[2:].isdigit()), key=lambda k: int(k[2:]))
    return [inputs[k] for k in keys]


def dtype_of(args: list[Any]) -> Any:
    """The dtype of the first floating tensor in ``args`` (``torch.float32`` when there is none)."""
    import torch

    return next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), torch.float32)


def device_of(args: list[Any]) -> Any:
    """The device of the first tensor in ``args`` (the CPU when there is none)."""
    import torch

    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


def problem_reference(problem: ModuleType) -> Callable[..., Any]:
    """``reference(**inputs)`` for a KernelBench problem module: ``Model.forward`` on ``in0, in1, ...``, the model
    built once per (device, dtype) at the inputs' floating dtype (float64 under kernelpilot's upcast reference).
    Returns the model's result (a tensor or a tuple, in the order of the output buffers)."""
    cache: dict[tuple[str, str], Any] = {}

    def reference(**inputs: Any) -> Any:
        import torch

        args = ordered_args(inputs)
        device, dtype = device_of(args), dtype_of(args)
        key = (str(device), str(dtype))
        if key not in cache:
            cache[key] = build_model(problem.Model, problem, device, dtype)
        with torch.no_grad():
            return cache[key](*args)

    reference.__doc__ = f"Model.forward of {getattr(problem, '__file__', 'the problem')} (KernelBench form)"
    return reference


def reference_of(module: ModuleType) -> Callable[..., Any]:
    """The reference a reference file gives: its ``reference`` function, else (a KernelBench problem module) the
    problem's ``Model.forward`` (:func:`problem_reference`). Raises AttributeError when it has neither (as a
    missing ``reference`` attribute would)."""
    if hasattr(module, "reference"):
        return module.reference
    if all(hasattr(module, n) for n in PROBLEM_NAMES):
        return problem_reference(module)
    raise AttributeError(f"{getattr(module, '__file__', module)} defines neither reference nor a KernelBench Model")


_GLOBAL_FN = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?[\w:<>,\s*&]*?\b(\w+)\s*\(")


def load_inline_kernels(path: str | Path) -> list[str] | None:
    """For a solution that compiles CUDA with ``torch.utils.cpp_extension.load_inline``: the names of the
    ``__global__`` functions written in the file (its own kernels, as the device's activity records name them);
    None when the file never calls ``load_inline`` (read with ``ast``, nothing imported). Raises nothing."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(text)
    except (SyntaxError, ValueError, OSError):
        return None
    calls = any(isinstance(n, ast.Call) and ((isinstance(n.func, ast.Name) and n.func.id == "load_inline")
                                             or (isinstance(n.func, ast.Attribute) and n.func.attr == "load_inline"))
                for n in ast.walk(tree))
    if not calls:
        return None
    return list(dict.fromkeys(_GLOBAL_FN.findall(text)))
