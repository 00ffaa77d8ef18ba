"""``kernelpilot inductor``: import torch.compile's (Inductor's) Triton kernels for a kernel file's reference as a
kernel file of their own (:mod:`kernelpilot.inductor`), to be checked, tuned and compared like any kernel."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kernelpilot.errors import ContractError, OptionError
from kernelpilot.inductor import CapturedCode, capture_kernel
from kernelpilot.inductor.convert import convert_capture
from kernelpilot.options import check_kernel_path, positive
from kernelpilot.target import Target

__all__ = ["MODES", "InductorImport", "import_inductor"]

#: torch.compile's modes, and kernelpilot's ``max-autotune-triton`` (max-autotune with GEMMs from Inductor's Triton
#: templates only: :data:`kernelpilot.inductor.capture.TRITON_GEMM_MODE`).
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "max-autotune-triton")


class InductorImport(BaseModel):
    """What ``kernelpilot inductor`` wrote.

    Attributes:
        kernel: the original kernel file. out: the kernel file written. out_sha256: its sha256.
        mode: torch.compile's mode. shape: the shape the code is specialized to (every dimension fixed).
        torch_version / triton_version / device_name: where Inductor's code was captured.
        kernel_sha256: the original file's sha256 at capture (the written file refuses another).
        kernels: Inductor's Triton kernels, in launch-definition order (tunable suffix ``_i`` = index).
        tunables / default_config / constraints: the written file's space; default_config is the config
            Inductor's autotuner launched where it was read (``default_sources``: per kernel ``autotuner``,
            ``first config`` or ``converter fallback``).
        n_configs: configs in the space before constraints (the product of the candidate counts).
        handed_over: per declared output, True when run_kernel writes it in place through Inductor's own buffer,
            False when the returned value is copied into it (an output the compiled call also reads: RoPE's q, k).
        validated: the written file was loaded through the kernel contract in a worker (its screen findings:
            ``screen_flags``); False with ``validate=False``.
    """

    kernel: str
    out: str
    out_sha256: str
    mode: str
    shape: dict[str, Any]
    torch_version: str
    triton_version: str
    device_name: str
    kernel_sha256: str
    kernels: list[str]
    tunables: dict[str, list[int]]
    default_config: dict[str, int]
    constraints: list[str]
    default_sources: dict[str, str]
    n_configs: int
    handed_over: dict[str, bool]
    validated: bool = False
    screen_flags: list[str] = []


def _flags_in_worker(kf: Any, opts: Any, target: Target) -> list[str]:
    """Worker side of the validation: the file loaded (the worker's start checked the contract); its screen flags."""
    return list(kf.extras.get("screen_flags", []))


def import_inductor(kernel: str | Path, *, out: str | Path, ref: str | Path | None = None,
                    shape: dict[str, Any] | None = None, mode: str = "default", spread: int = 1,
                    from_capture: str | Path | None = None, save_capture: str | Path | None = None,
                    validate: bool = True, timeout_s: float = 600.0) -> InductorImport:
    """Capture torch.compile's code for ``kernel``'s reference (on the GPU, in an isolated worker) and write it as a
    kernel file at ``out`` (:func:`kernelpilot.inductor.convert.convert_capture`).

    Args:
        kernel: the kernel file whose ``setup`` builds the inputs and whose ``reference`` is compiled.
        out: the kernel file to write (overwritten if it exists; never the kernel file itself).
        ref: a file defining ``reference`` instead. shape: overrides of SHAPE (the code is specialized to it).
        mode: torch.compile's mode (one of :data:`MODES`). spread: powers of two each side of Inductor's choice in
            TUNABLES (0: Inductor's config only).
        from_capture: convert a capture saved earlier (``save_capture``; JSON) instead of capturing: no GPU needed.
        save_capture: also write the capture as JSON there.
        validate: load the written file through the kernel contract in a worker process (and report its screen).
        timeout_s: seconds the capture (a max-autotune compile takes minutes) and the validation may take.

    Raises:
        OptionError: an unknown mode, a negative spread, ``out`` naming the kernel file, a non-positive timeout.
        InductorNoGpu: no CUDA GPU for the capture. InductorCaptureError: torch.compile failed.
        NoTritonKernel: Inductor generated no Triton kernel (``extern_kernels.mm``: cuBLAS): nothing to import.
        InductorConvertError: output code the converter does not support (the message names what).
        ContractError / KernelFailed: the kernel file is broken, or the written file does not load.
    """
    check_kernel_path(kernel)
    check_kernel_path(ref, "reference file")
    positive("--timeout-s", timeout_s, "600")
    if mode not in MODES:
        raise OptionError(f"--mode {mode!r} is not a torch.compile mode", f"one of {', '.join(MODES)}")
    if spread < 0:
        raise OptionError(f"--spread {spread} is negative", "0 keeps Inductor's config only; 1 adds x2 and /2")
    out = Path(out)
    if out.resolve() == Path(kernel).resolve():
        raise OptionError(f"--out {out} is the kernel file itself", "write the imported kernel to a new file")
    if from_capture is not None:
        try:
            cap = CapturedCode.model_validate_json(Path(from_capture).read_text())
        except (OSError, ValueError) as exc:
            raise ContractError(f"{from_capture}: not a capture: {exc}", "pass a file written by --save-capture") from exc
    else:
        cap = capture_kernel(kernel, ref=ref, shape=shape, mode=mode, timeout_s=timeout_s)
    if save_capture is not None:
        Path(save_capture).write_text(cap.model_dump_json(indent=1))
    conv = convert_capture(cap, out, spread=spread)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(conv.text)
    flags: list[str] = []
    if validate:
        from kernelpilot.search.isolated import run_isolated

        flags = run_isolated(out, "kernelpilot.inductor.importer:_flags_in_worker", interpreted=None, timeout_s=timeout_s)
    n = 1
    for values in conv.tunables.values():
        n *= len(values)
    return InductorImport(
        kernel=str(kernel), out=str(out), out_sha256=hashlib.sha256(out.read_bytes()).hexdigest(), mode=cap.mode,
        shape=cap.shape, torch_version=cap.torch_version, triton_version=cap.triton_version,
        device_name=cap.device_name, kernel_sha256=cap.kernel_sha256, kernels=conv.kernel_names,
        tunables=conv.tunables, default_config=conv.default_config, constraints=conv.constraints,
        default_sources=conv.default_sources, n_configs=n, handed_over=conv.handed_over, validated=validate,
        screen_flags=flags)
