"""The KernelBench backend: a solution file (``class ModelNew``) with its problem file as the reference, loaded as a
kernel file of kernelpilot's contract and launched through ``ModelNew.forward``.

The registry (:func:`kernelpilot.backends.registry.backend_for`) picks it for a ``.py`` file in the solution form
(:func:`kernelpilot.kernels.kernelbench.is_solution_file`); the rules of the form (seeds, casts, the problem's
reference) are in :mod:`kernelpilot.kernels.kernelbench`, and docs/kernelbench.md says what carries over from
KernelBench's own harness. The solution's ``@triton.jit`` kernels run as Triton kernels do (under the interpreter
without a GPU); each launch of ``ModelNew.forward`` must run one of them (:class:`KernelNotLaunched` otherwise).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpilot.backends.base import BinaryReading, Support
from kernelpilot.backends.binary.models import StaticResult
from kernelpilot.backends.triton.autotune import autotune_space, find_autotuner
from kernelpilot.backends.triton.backend import TritonBackend, use_interpreter
from kernelpilot.backends.triton.config import autotune_config_dict, to_triton_config
from kernelpilot.errors import ContractError
from kernelpilot.kernels.contract import KernelFile, import_module_file
from kernelpilot.kernels.kernelbench import (KB_SEED, PROBLEM_NAMES, KernelNotLaunched, build_model, device_of,
                                             dtype_of, is_problem_file, is_solution_file, load_inline_kernels,
                                             ordered_args,
                                             problem_reference, set_seed, to_device, top_level_names)

__all__ = ["KernelBenchBackend"]


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


def load_pair(solution: Path, problem: Path | None, *, interpreted: bool, backend: Any) -> KernelFile:
    """The KernelFile of a KernelBench solution with its problem as the reference (see the module docstring).

    Args:
        solution: the file defining ``ModelNew`` (imported by the Triton backend's rules: under the interpreter when
            ``interpreted``).
        problem: the file defining ``Model``, ``get_inputs``, ``get_init_inputs`` (``--ref``).
        backend: recorded in :attr:`KernelFile.backend` (the :class:`KernelBenchBackend`).

    Raises:
        ContractError: no problem given, the problem lacks one of its three names, the solution defines no
            ``@triton.jit`` kernel of its own, or either file fails to import.
    """
    if problem is None:
        raise ContractError(f"{solution}: a KernelBench solution (class ModelNew) needs its problem as the reference",
                            "pass the problem file: --ref PROBLEM.py (the file with Model, get_inputs, "
                            "get_init_inputs)")
    problem = Path(problem).resolve()
    if not is_problem_file(problem):
        missing = [n for n in PROBLEM_NAMES if n not in top_level_names(problem)] if problem.is_file() else []
        raise ContractError(f"{problem}: not a KernelBench problem"
                            + (f" (no {', '.join(missing)})" if missing else " (no such .py file)"),
                            "--ref of a KernelBench solution is its problem file: Model, get_inputs(), "
                            "get_init_inputs()")
    cuda_kernels = load_inline_kernels(solution)
    if cuda_kernels is not None and interpreted:  # refused before the import would try to build it
        from kernelpilot.backends.registry import NEEDS_GPU
        from kernelpilot.errors import ToolMissingError

        raise ToolMissingError(f"{solution.name}: a KernelBench solution that builds CUDA with load_inline runs only "
                               "on a GPU and none is visible here", NEEDS_GPU[1])
    use_interpreter(interpreted)
    if interpreted:
        from kernelpilot.backends.triton.interpreter import install_workarounds

        install_workarounds()
    sol_mod = import_module_file(solution, "kernel")
    prob_mod = import_module_file(problem, "ref")
    if not isinstance(getattr(sol_mod, "ModelNew", None), type):
        raise ContractError(f"{solution}: ModelNew is not a class", "define class ModelNew(nn.Module)")
    own = _own_jit_functions(sol_mod)
    if not own and not cuda_kernels:
        raise ContractError(f"{solution}: ModelNew's file defines no kernel of its own (no @triton.jit function, no "
                            "__global__ function built with load_inline): nothing of the solution's would run",
                            "define the kernel in the solution file (@triton.jit, or CUDA through load_inline) and "
                            "launch it from ModelNew.forward")
    launches = [0]
    _count_launches(own, launches)
    counted = bool(own)  # CUDA launches are not seen from Python: the GPU's activity records check those names
    models: dict[tuple[str, str], Any] = {}
    out_specs: dict[tuple, list[tuple[tuple[int, ...], Any]]] = {}

    def setup(seed: int = 0, device: str = "cuda") -> dict[str, Any]:
        import torch

        set_seed(seed)
        raw = prob_mod.get_inputs()
        inputs = {f"in{i}": to_device(v, device, torch.float32) for i, v in enumerate(raw)}
        key = tuple((tuple(v.shape), str(v.dtype), str(v.device)) if isinstance(v, torch.Tensor) else repr(v)
                    for v in inputs.values())
        if key not in out_specs:  # the reference's results, once per input layout: their shapes size the buffers
            ref = reference(**inputs)
            results = list(ref) if isinstance(ref, (tuple, list)) else [ref]
            out_specs[key] = [(tuple(r.shape), r.dtype) for r in results]
        specs = out_specs[key]
        names = ["out"] if len(specs) == 1 else [f"out{i}" for i in range(len(specs))]
        for n, (shape, dtype) in zip(names, specs):
            inputs[n] = torch.empty(shape, dtype=dtype, device=device)
        return {"inputs": inputs, "outputs": names}

    reference = problem_reference(prob_mod)

    def run_kernel(**inputs: Any) -> None:
        import torch

        args = ordered_args(inputs)
        device, dtype = device_of(args), dtype_of(args)
        key = (str(device), str(dtype))
        if key not in models:
            models[key] = build_model(sol_mod.ModelNew, prob_mod, device, dtype)
        before = launches[0]
        with torch.no_grad():
            result = models[key](*args)
        if counted and launches[0] == before:
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

    tunables: dict[str, list[Any]] = {}
    default: dict[str, Any] = {}
    constraints: list[str] = []
    extras: dict[str, Any] = {}
    found = find_autotuner(sol_mod)
    if found is not None:  # an @triton.autotune kernel: its configs are the space, each launch pinned to one
        name, tuner = found
        tunables, combos = autotune_space(tuner, solution)
        default, constraints = autotune_config_dict(tuner.configs[0]), [combos]
        extras = {"autotuner": name, "autotune_configs": list(tuner.configs), "autotune_pins": {}}
    kf = KernelFile(path=solution, module=sol_mod, reference_path=problem, setup=setup, run_kernel=run_kernel,
                    reference=reference, tunables=tunables, default_config=default, shape={}, cpu_shape=None,
                    compute_unit="fp32", source_sha256=_sha256(solution, problem), interpreted=interpreted,
                    atol=None, rtol=None, backend=backend, constraints=constraints, extras=extras)
    kf.extras["kernelbench"] = {"problem": str(problem), "model_seed": KB_SEED,
                                "own_kernels": [f.fn.__name__ for f in own] + list(cuda_kernels or []),
                                "launches_counted": counted}
    return kf



class KernelBenchBackend:
    """KernelBench solutions in ``.py`` files, with their problem as the reference (see the module docstring and
    :class:`kernelpilot.backends.base.Backend`)."""

    #: the language of the kernels that run (records and the experience log name the kernel language; the form is
    #: recorded in ``KernelFile.extras["kernelbench"]``)
    name = "triton"
    needs_gpu = False  # Triton solutions run under the interpreter; load_inline CUDA is refused without a GPU at load

    def supports(self, path: Path) -> Support:
        """Yes for a ``.py`` file in the solution form (``class ModelNew``, no ``setup``/``run_kernel``)."""
        if is_solution_file(path):
            return Support.yes()
        return Support.no(f"{Path(path).name} is not a KernelBench solution (no top-level class ModelNew, or it "
                          "defines setup/run_kernel)")

    def load(self, path: Path, ref: Path | None, *, interpreted: bool) -> KernelFile:
        """:func:`load_pair` of ``path`` and its problem ``ref``. Raises ContractError."""
        return load_pair(Path(path).resolve(), ref, interpreted=interpreted, backend=self)

    def kernel_files(self, path: Path, name: str | None = None) -> dict[Path, Path]:
        """``{path: name}``: a KernelBench solution is its one file."""
        path = Path(path).resolve()
        return {path: Path(name or path.name)}

    def launch(self, kf: KernelFile, inputs: dict[str, Any], config: dict[str, Any]) -> None:
        """``ModelNew.forward`` on the inputs, its result copied into the output buffers. A solution with an
        ``@triton.autotune`` kernel has its configs as the space: the autotuner is pinned to ``config`` first
        (:meth:`TritonBackend.launch`); else ``config`` is empty. Raises KernelNotLaunched, or what the solution
        raises."""
        if kf.extras.get("autotuner"):
            TritonBackend().launch(kf, inputs, config)
        else:
            kf.run_kernel(**inputs)

    def limitations(self, kf: KernelFile) -> str | None:
        """The Triton interpreter's limits for the solution's kernels (:meth:`TritonBackend.limitations`)."""
        return TritonBackend().limitations(kf)

    def export_config(self, config: dict[str, Any]) -> str:
        """The config as a ``triton.Config(...)`` line (the solution's ``@triton.autotune`` configs are the space)."""
        return to_triton_config(config)

    def compile_for(self, kernel: str | Path, config: dict[str, Any], shape: dict[str, Any], target: str, *,
                    read: BinaryReading = BinaryReading()) -> StaticResult:
        """Triton's compile for a target (:meth:`TritonBackend.compile_for`): the first ``@triton.jit`` launch
        ``ModelNew.forward`` makes is compiled and read."""
        return TritonBackend().compile_for(kernel, config, shape, target, read=read)

    def kernel_names(self, kf: KernelFile) -> list[str]:
        """The ``@triton.jit`` kernels the solution file defines (one must run at every launch)."""
        return list(kf.extras.get("kernelbench", {}).get("own_kernels", []))
