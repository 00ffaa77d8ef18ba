"""KernelBench in: a KernelBench solution (``class ModelNew``) with its problem (``Model``, ``get_inputs``,
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
  names (:mod:`kernelpilot.measure.activity`, through the Triton backend's ``kernel_names``).

Facts about KernelBench (ScalingIntelligence/KernelBench, ``src/kernelbench/eval.py``) are restated in
docs/kernelbench.md.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from kernelpilot.errors import ContractError, KernelRunError

__all__ = ["KB_SEED", "KernelNotLaunched", "is_problem_file", "is_solution_file", "load_pair", "problem_reference",
           "reference_of"]

#: The seed KernelBench sets before ``get_init_inputs()`` and before building each model (``set_seed(42)``).
KB_SEED = 42
#: KernelBench's tolerance for float32 (``atol = rtol = 1e-4`` in ``eval.py``).
KB_TOL_FP32 = 1e-4

_PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")
_CONTRACT_NAMES = ("setup", "run_kernel")


class KernelNotLaunched(KernelRunError):
    """A KernelBench solution's ``ModelNew.forward`` ran without launching any kernel defined in the solution file
    (it computed with the reference's library ops, or with kernels defined elsewhere). Its failure status in a
    check or search is ``kernel_not_launched``."""


def _top_level_names(path: Path) -> set[str]:
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
    names = _top_level_names(path)
    return "ModelNew" in names and not any(n in names for n in _CONTRACT_NAMES)


def is_problem_file(path: str | Path) -> bool:
    """True when ``path`` is a ``.py`` file defining ``Model``, ``get_inputs`` and ``get_init_inputs`` at top
    level (KernelBench's problem form). Raises nothing."""
    path = Path(path)
    return path.suffix == ".py" and path.is_file() and all(n in _top_level_names(path) for n in _PROBLEM_NAMES)


def _set_seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)  # seeds every device's generator too (KernelBench also calls torch.cuda.manual_seed)


def _to(value: Any, device: Any, dtype: Any) -> Any:
    """A floating tensor cast to ``dtype`` and moved; another tensor only moved (KernelBench casts integer tensors
    too, which breaks index inputs: kernelpilot keeps their dtype); a non-tensor unchanged."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype) if value.is_floating_point() else value.to(device=device)
    return value


def _build(cls: type, problem: ModuleType, device: Any, dtype: Any) -> Any:
    """``cls(*get_init_inputs())`` built as KernelBench builds it (seed 42 before the init inputs and the model),
    moved to ``device`` and cast to ``dtype``."""
    import torch

    _set_seed(KB_SEED)
    init = [_to(v, device, dtype) for v in problem.get_init_inputs()]
    _set_seed(KB_SEED)
    with torch.no_grad():
        model = cls(*init)
    if hasattr(model, "to"):
        model = model.to(device=device, dtype=dtype)
    return model


def _ordered_args(inputs: dict[str, Any]) -> list[Any]:
    """The positional arguments ``in0, in1, ...`` in order (the output buffers ``out*`` left out)."""
    keys = sorted((k for k in inputs if k.startswith("in") and k[2:].isdigit()), key=lambda k: int(k[2:]))
    return [inputs[k] for k in keys]


def _dtype_of(args: list[Any]) -> Any:
    import torch

    return next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), torch.float32)


def _device_of(args: list[Any]) -> Any:
    import torch

    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


def problem_reference(problem: ModuleType) -> Callable[..., Any]:
    """``reference(**inputs)`` for a KernelBench problem module: ``Model.forward`` on ``in0, in1, ...``, the model
    built once per (device, dtype) at the inputs' floating dtype (float64 under kernelpilot's upcast reference).
    Returns the model's result (a tensor or a tuple, in the order of the output buffers)."""
    cache: dict[tuple[str, str], Any] = {}

    def reference(**inputs: Any) -> Any:
        import torch

        args = _ordered_args(inputs)
        device, dtype = _device_of(args), _dtype_of(args)
        key = (str(device), str(dtype))
        if key not in cache:
            cache[key] = _build(problem.Model, problem, device, dtype)
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
    if all(hasattr(module, n) for n in _PROBLEM_NAMES):
        return problem_reference(module)
    raise AttributeError(f"{getattr(module, '__file__', module)} defines neither reference nor a KernelBench Model")


def _own_jit_functions(module: ModuleType) -> list[Any]:
    """The innermost ``JITFunction``/``InterpretedFunction`` objects of the ``@triton.jit`` kernels the module
    itself defines (through ``autotune``/``heuristics`` wrappers)."""
    found: list[Any] = []
    for value in list(vars(module).values()):
        fn, depth = value, 0
        while hasattr(fn, "fn") and depth < 4 and type(fn).__name__ not in ("JITFunction", "InterpretedFunction"):
            fn, depth = fn.fn, depth + 1
        inner = getattr(fn, "fn", None)
        if type(fn).__name__ in ("JITFunction", "InterpretedFunction") and callable(inner) \
                and getattr(inner, "__module__", None) == module.__name__ and all(fn is not f for f in found):
            found.append(fn)
    return found


def _count_launches(jit_fns: list[Any], counter: list[int]) -> None:
    """Make each launch of ``jit_fns`` (``kernel[grid](...)`` goes through the object's ``run``, interpreted or
    compiled, also from an autotuner) add one to ``counter[0]``."""
    for fn in jit_fns:
        def run(*args: Any, _fn: Any = fn, **kwargs: Any) -> Any:
            counter[0] += 1
            return type(_fn).run(_fn, *args, **kwargs)  # the class's run as it is now (a capture may replace it)

        fn.run = run


def _sha256(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()


def load_pair(solution: Path, problem: Path | None, *, interpreted: bool) -> Any:
    """The KernelFile of a KernelBench solution with its problem as the reference (see the module docstring).

    Args:
        solution: the file defining ``ModelNew`` (imported by the Triton backend's rules: under the interpreter when
            ``interpreted``).
        problem: the file defining ``Model``, ``get_inputs``, ``get_init_inputs`` (``--ref``).

    Raises:
        ContractError: no problem given, the problem lacks one of its three names, the solution defines no
            ``@triton.jit`` kernel of its own, or either file fails to import.
    """
    from kernelpilot.backends.registry import backend_for
    from kernelpilot.kernels.contract import KernelFile, import_module_file

    if problem is None:
        raise ContractError(f"{solution}: a KernelBench solution (class ModelNew) needs its problem as the reference",
                            "pass the problem file: --ref PROBLEM.py (the file with Model, get_inputs, "
                            "get_init_inputs)")
    problem = Path(problem).resolve()
    if not is_problem_file(problem):
        missing = [n for n in _PROBLEM_NAMES if n not in _top_level_names(problem)] if problem.is_file() else []
        raise ContractError(f"{problem}: not a KernelBench problem"
                            + (f" (no {', '.join(missing)})" if missing else " (no such .py file)"),
                            "--ref of a KernelBench solution is its problem file: Model, get_inputs(), "
                            "get_init_inputs()")
    backend = backend_for(solution)  # .py -> Triton: sets the interpreter for the import below
    from kernelpilot.backends.triton.backend import use_interpreter

    use_interpreter(interpreted)
    if interpreted:
        from kernelpilot.backends.triton.interpreter import install_workarounds

        install_workarounds()
    sol_mod = import_module_file(solution, "kernel")
    prob_mod = import_module_file(problem, "ref")
    if not isinstance(getattr(sol_mod, "ModelNew", None), type):
        raise ContractError(f"{solution}: ModelNew is not a class", "define class ModelNew(nn.Module)")
    own = _own_jit_functions(sol_mod)
    if not own:
        raise ContractError(f"{solution}: ModelNew's file defines no @triton.jit kernel of its own: nothing of the "
                            "solution's would run (a load_inline CUDA solution is not read yet)",
                            "define the kernel in the solution file with @triton.jit and launch it from "
                            "ModelNew.forward")
    launches = [0]
    _count_launches(own, launches)
    models: dict[tuple[str, str], Any] = {}
    out_names: dict[str, list[str]] = {}

    def setup(seed: int = 0, device: str = "cuda") -> dict[str, Any]:
        import torch

        _set_seed(seed)
        raw = prob_mod.get_inputs()
        inputs = {f"in{i}": _to(v, device, torch.float32) for i, v in enumerate(raw)}
        ref = reference(**inputs)
        results = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        names = ["out"] if len(results) == 1 else [f"out{i}" for i in range(len(results))]
        out_names["names"] = names
        for n, r in zip(names, results):
            inputs[n] = torch.empty_like(r)
        return {"inputs": inputs, "outputs": names}

    reference = problem_reference(prob_mod)

    def run_kernel(**inputs: Any) -> None:
        import torch

        args = _ordered_args(inputs)
        device, dtype = _device_of(args), _dtype_of(args)
        key = (str(device), str(dtype))
        if key not in models:
            models[key] = _build(sol_mod.ModelNew, prob_mod, device, dtype)
        before = launches[0]
        with torch.no_grad():
            result = models[key](*args)
        if launches[0] == before:
            raise KernelNotLaunched(
                f"{solution.name}: ModelNew.forward launched none of the solution's own kernels "
                f"({', '.join(f.fn.__name__ for f in own)}): its result came from other code (the reference's "
                "library ops)", "launch the solution's @triton.jit kernel from ModelNew.forward")
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        names = sorted((k for k in inputs if k == "out" or (k.startswith("out") and k[3:].isdigit())),
                       key=lambda k: int(k[3:] or 0))
        if len(results) != len(names):
            raise ValueError(f"ModelNew.forward returned {len(results)} results; Model.forward returns {len(names)}")
        for n, r in zip(names, results):
            if not isinstance(r, torch.Tensor) or tuple(r.shape) != tuple(inputs[n].shape):
                got = tuple(r.shape) if isinstance(r, torch.Tensor) else type(r).__name__
                raise RuntimeError(f"ModelNew.forward result {n}: {got}, the reference's is {tuple(inputs[n].shape)}")
            inputs[n].copy_(r)

    kf = KernelFile(path=solution, module=sol_mod, reference_path=problem, setup=setup, run_kernel=run_kernel,
                    reference=reference, tunables={}, default_config={}, shape={}, cpu_shape=None,
                    compute_unit="fp32", source_sha256=_sha256(solution, problem), interpreted=interpreted,
                    atol=None, rtol=None, backend=backend)
    kf.extras["kernelbench"] = {"problem": str(problem), "model_seed": KB_SEED,
                                "own_kernels": [f.fn.__name__ for f in own]}
    return kf

