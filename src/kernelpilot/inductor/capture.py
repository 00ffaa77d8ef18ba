"""Capture what torch.compile (Inductor) generates for a kernel file's reference, on the GPU, in an isolated worker.

The worker builds the inputs with the kernel file's ``setup`` at the shape (seed 0), compiles the reference with
Inductor at ``mode`` and ``dynamic=False`` and runs it once under :func:`torch._inductor.utils.run_and_get_code`,
which hands back the output code Inductor wrote (its ``call(args)`` and its Triton kernels as source strings).

Which tensor is which argument of ``call(args)`` is *observed*, not guessed: Dynamo passes a graph only the tensors
it uses, in the order it first met them (an unused output buffer is dropped), so the capture compiles through a
backend of its own that records the example inputs Dynamo hands over, matches each by identity to the named input
it is, and then compiles them with Inductor's ``compile_fx`` under the same options ``torch.compile(mode=...)``
applies (:func:`torch._inductor.list_mode_options`). Non-tensor inputs are constants of the graph.

The config each Inductor kernel's autotuner settled on is read from the loaded output module (its kernels'
``launchers`` after the run); where it cannot be read it is None and the converter falls back to the first config.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kernelpilot.target import Target

__all__ = ["PERSISTENT_TMA_CHOICES", "TRITON_GEMM_MODE", "CapturedCode", "capture_in_worker", "capture_reference",
           "mode_options"]


class CapturedCode(BaseModel):
    """What one torch.compile of a reference produced (JSON-ready; the fixtures under tests/data/inductor are these).

    Attributes:
        kernel_path: the original kernel file (absolute, as captured). kernel_sha256: sha256 of its bytes.
        ref_path / ref_sha256: the ``--ref`` file, when one was given.
        shape: the shape the inputs were built at. mode: torch.compile's mode (``default``, ``max-autotune``).
        torch_version / triton_version / device_name: where it was captured.
        codes: the output code(s) Inductor wrote (Python source; normally one).
        arg_names: the kernel file's input names in the order of ``call(args)``.
        constants: the non-tensor inputs (name -> value), constants of the graph.
        outputs: the kernel file's declared output names (``setup()["outputs"]``); inplace: its in-place ones.
        returns: one ``{"shape", "stride", "dtype"}`` per tensor the compiled function returned, in order.
        chosen: Inductor kernel name -> the config its autotuner launched (``kwargs``, ``num_warps``, ``num_stages``),
            None where it could not be read.
        configs: Inductor kernel name -> every config its autotuner was given (same form), where readable.
        return_names: the output name of each returned tensor (a dict result's keys, else ``outputs`` in order).
        choices: the regex Inductor's GEMM choices were limited to by name (:data:`PERSISTENT_TMA_CHOICES`), or
            None where every choice competed.
    """

    kernel_path: str
    kernel_sha256: str
    ref_path: str | None = None
    ref_sha256: str | None = None
    shape: dict[str, Any]
    mode: str
    torch_version: str
    triton_version: str
    device_name: str
    codes: list[str]
    arg_names: list[str]
    constants: dict[str, Any]
    outputs: list[str]
    inplace: list[str] = []
    returns: list[dict[str, Any]] = []
    chosen: dict[str, dict[str, Any] | None] = {}
    configs: dict[str, list[dict[str, Any]]] = {}
    return_names: list[str] = []
    choices: str | None = None


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _flat_tensors(value: Any) -> list[Any]:
    """The tensors of a reference's result (a tensor, a tuple/list, or a dict in its order)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat_tensors(v)]
    return []


def _config_dict(cfg: Any) -> dict[str, Any]:
    return {"kwargs": {k: int(v) for k, v in dict(cfg.kwargs).items() if isinstance(v, int)},
            "num_warps": int(cfg.num_warps), "num_stages": int(cfg.num_stages)}


def _chosen_configs(code: str) -> tuple[dict[str, dict[str, Any] | None], dict[str, list[dict[str, Any]]]]:
    """``(chosen, configs)``: kernel name -> the config its autotuner launched, and -> every config it was given,
    read from the output module Inductor loaded for ``code`` (``PyCodeCache``): after a run, a CachingAutotuner keeps
    the launcher it picked (``launchers[0].config``) and its ``configs``."""
    from torch._inductor.codecache import PyCodeCache

    mods = list(getattr(PyCodeCache, "modules", [])) + list(getattr(PyCodeCache, "modules_no_attr", {}).values())
    found: dict[str, dict[str, Any] | None] = {}
    every: dict[str, list[dict[str, Any]]] = {}
    for mod in mods:
        try:
            if Path(mod.__file__).read_text() != code:
                continue
        except (OSError, TypeError, AttributeError):
            continue
        for name, obj in vars(mod).items():
            launchers = getattr(obj, "launchers", None)
            if not name.startswith("triton_") or launchers is None:
                continue
            cfg = getattr(launchers[0], "config", None) if len(launchers) == 1 else None
            found[name] = None if cfg is None else _config_dict(cfg)
            every[name] = [_config_dict(c) for c in getattr(obj, "configs", None) or []]
        break
    return found, every


#: kernelpilot's own mode: ``max-autotune`` with Inductor's GEMM choices limited to its Triton templates
#: (``torch._inductor.config.max_autotune_gemm_backends = "TRITON"``; the default, ``"ATEN,TRITON"``, lets cuBLAS win
#: and leaves no Triton kernel to import), its persistent TMA template among them
#: (``triton.enable_persistent_tma_matmul``, off by default in torch 2.11; Inductor offers it only where TMA is
#: available, sm_90 and later): on an H100 the plain template's best at bf16/fp16 4096³ was 1.16x slower than the
#: tutorial's best config (docs/device-runs/2026-11-26-h100-issue25, third session).
TRITON_GEMM_MODE = "max-autotune-triton"

#: The config patches :data:`TRITON_GEMM_MODE` adds to ``max-autotune``'s.
TRITON_GEMM_PATCHES = {"max_autotune_gemm_backends": "TRITON", "triton.enable_persistent_tma_matmul": True}


#: In :data:`TRITON_GEMM_MODE` the capture first limits Inductor's GEMM choices to its persistent TMA template (by
#: name, ``torch._inductor.config.test_configs.autotune_choice_name_regex``; torch 2.11 names its choices
#: ``triton_mm_persistent_tma_<i>``): that template's tile sizes become tunables of the imported kernel and its tile
#: loop can be flattened (:data:`kernelpilot.inductor.parse.FLATTEN_PARAM`), where the plain template's tiles stay as
#: max-autotune fixed them. Which template max-autotune picks varied from run to run on one H200 (the persistent one
#: at 128 × 256 × 64 in one call, the plain one in the next, on a host busy compiling), and the plain one, tuned,
#: ended slower each time it was picked: 219.82 vs 190.08 µs (H100), 199.20 vs 190.53 µs (H200), fp16 4096³
#: (docs/device-runs/2026-11-27-s7). Where no persistent TMA choice exists (before sm_90, shapes TMA cannot describe,
#: another torch), the capture is made again with every choice.
PERSISTENT_TMA_CHOICES = "persistent_tma"


def mode_options(mode: str) -> dict[str, Any]:
    """Inductor's config patches for ``mode``: :func:`torch._inductor.list_mode_options` of a torch.compile mode, or
    for :data:`TRITON_GEMM_MODE` those of ``max-autotune`` with :data:`TRITON_GEMM_PATCHES`. Raises whatever
    ``list_mode_options`` raises for an unknown mode."""
    from torch._inductor import list_mode_options

    if mode == TRITON_GEMM_MODE:
        return {**list_mode_options("max-autotune", False), **TRITON_GEMM_PATCHES}
    return dict(list_mode_options(mode, False))


def capture_reference(reference: Any, inputs: dict[str, Any], mode: str,
                      choices: str | None = None) -> tuple[list[str], list[str], Any]:
    """Compile ``reference(**inputs)`` with Inductor at ``mode`` (static shapes) and run it once.

    Args:
        reference: the kernel file's reference. inputs: name -> tensor (on the GPU) or constant.
        mode: ``"default"`` or ``"max-autotune"`` (any mode torch.compile accepts), or :data:`TRITON_GEMM_MODE`.
        choices: a regex Inductor's template choices must match by name (None: every choice).

    Returns:
        ``(codes, arg_names, result)``: Inductor's output code(s), the input names in ``call(args)`` order (observed
        by identity; see the module docstring), and the compiled function's result.

    Raises:
        RuntimeError: an example input Dynamo passed is none of the named tensors.
    """
    import torch
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    names = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]
    consts = {k: v for k, v in inputs.items() if k not in names}
    order: list[str] = []

    def fn(*tensors: Any) -> Any:
        return reference(**dict(zip(names, tensors)), **consts)

    def backend(gm: Any, example_inputs: list[Any]) -> Any:
        order.clear()
        for t in example_inputs:
            hit = next((n for n in names if inputs[n] is t), None)
            if hit is None:
                raise RuntimeError(f"graph input {type(t).__name__} {tuple(getattr(t, 'shape', ()))} is none of "
                                   f"the named inputs {names}")
            order.append(hit)
        patches = mode_options(mode)
        if choices is not None:
            patches["test_configs.autotune_choice_name_regex"] = choices
        return compile_fx(gm, example_inputs, config_patches=patches)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, dynamic=False, fullgraph=False)
    result, codes = run_and_get_code(compiled, *[inputs[n] for n in names])
    if any(inputs[n].is_cuda for n in names):
        torch.cuda.synchronize()
    return list(codes), list(order), result


def _persistent_template(codes: list[str]) -> bool:
    """Whether Inductor's output code launches a persistent template (its kernels read by
    :func:`kernelpilot.inductor.parse.parse_output`; unreadable code counts as no)."""
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.inductor.parse import parse_output

    try:
        return any(k.persistent_sms is not None for c in codes for k in parse_output(c).kernels)
    except KernelpilotError:
        return False


def capture_in_worker(kf: Any, opts: Any, target: Target, shape: dict[str, Any] | None, mode: str) -> dict[str, Any]:
    """Worker side of :func:`kernelpilot.inductor.capture_kernel`: returns ``{"captured": CapturedCode JSON}``, or
    ``{"problem": "no_gpu" | "failed", "message": ...}`` (returned, not raised: the parent turns it into the typed
    error, which the worker's pipe would not keep)."""
    import torch
    import triton

    from kernelpilot.kernels.case import make_case
    from kernelpilot.kernels.contract import resolve_shape

    if not target.is_gpu or not torch.cuda.is_available():
        return {"problem": "no_gpu",
                "message": f"the worker runs on {target.label}; Inductor emits Triton only for CUDA"}
    shp = resolve_shape(kf, shape)
    case = make_case(kf, shp, 0, "cuda")
    choices = PERSISTENT_TMA_CHOICES if mode == TRITON_GEMM_MODE else None
    codes: list[str] = []
    if choices is not None:
        try:
            codes, order, result = capture_reference(kf.reference, case.inputs, mode, choices)
        except Exception:  # noqa: BLE001 - no persistent TMA choice (or no such option): every choice, below
            codes = []
        if not _persistent_template(codes):
            choices = None
    if choices is None:
        try:
            codes, order, result = capture_reference(kf.reference, case.inputs, mode)
        except Exception as exc:  # noqa: BLE001 - a compile failure is the answer, reported by the parent
            return {"problem": "failed", "message": f"{type(exc).__name__}: {str(exc)[:1500]}"}
    returns = [{"shape": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype).replace("torch.", "")}
               for t in _flat_tensors(result)]
    chosen: dict[str, Any] = {}
    every: dict[str, Any] = {}
    for code in codes:
        got, listed = _chosen_configs(code)
        chosen.update(got)
        every.update(listed)
    names = list(result) if isinstance(result, dict) else list(case.outputs)[:len(returns)]
    consts = {k: v for k, v in case.inputs.items() if not isinstance(v, torch.Tensor)}
    ref_path = str(kf.reference_path) if Path(kf.reference_path) != Path(kf.path) else None
    cap = CapturedCode(
        kernel_path=str(kf.path), kernel_sha256=_sha256(kf.path), ref_path=ref_path,
        ref_sha256=_sha256(ref_path) if ref_path else None, shape=shp, mode=mode,
        torch_version=torch.__version__, triton_version=triton.__version__,
        device_name=torch.cuda.get_device_name(), codes=codes, arg_names=order,
        constants={k: v for k, v in consts.items() if isinstance(v, (int, float, str, bool)) or v is None},
        outputs=list(case.outputs), inplace=list(case.inplace), returns=returns, chosen=chosen,
        configs=every, return_names=names, choices=choices)
    return {"captured": cap.model_dump_json()}
