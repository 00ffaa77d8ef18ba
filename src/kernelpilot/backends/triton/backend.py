"""The Triton backend: load a ``.py`` kernel file (under the interpreter without a GPU) and launch it with a config.

A kernel file either lists ``TUNABLES`` and takes the config as keywords of ``run_kernel``, or decorates one kernel
with ``@triton.autotune``: then the autotuner's configs are the space and each launch pins the autotuner to one of
them (:func:`kernelpilot.backends.triton.config.pinned_config`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.backends.base import BinaryReading, Support
from kernelpilot.backends.binary.models import StaticResult
from kernelpilot.backends.triton.autotune import autotune_space, autotuner_of, find_autotuner
from kernelpilot.backends.triton.config import autotune_config_dict, pinned_config, to_triton_config
from kernelpilot.kernels.contract import DerivedSpace, KernelFile, build_kernel_file, import_module_file
from kernelpilot.target import switch_interpreter


def use_interpreter(interpreted: bool) -> None:
    """Set or clear ``TRITON_INTERPRET`` for kernels imported from now on.

    Triton fixes interpreter mode for its own ``@triton.jit`` helpers (``tl.max``, ``tl.sum``, ``tl.cdiv``) when
    ``triton.language`` is first imported, and reads the variable again at every launch: it must be set before
    triton is imported in the process and stay set (:meth:`kernelpilot.target.Target.detect` sets it as soon as it
    finds no GPU, before anything imports triton; both call :func:`kernelpilot.target.switch_interpreter`).
    """
    switch_interpreter(interpreted)


class TritonBackend:
    """Triton kernels in ``.py`` files (see :class:`kernelpilot.backends.base.Backend`)."""

    name = "triton"
    needs_gpu = False  # the interpreter runs it on the CPU

    def supports(self, path: Path) -> Support:
        """Yes for a ``.py`` file; the contract's own checks happen in :meth:`load`."""
        if Path(path).suffix == ".py":
            return Support.yes()
        return Support.no(f"the Triton backend reads .py kernel files, not {Path(path).suffix or 'suffix-less'} ones")

    def load(self, path: Path, ref: Path | None, *, interpreted: bool) -> KernelFile:
        """Import ``path`` (with ``TRITON_INTERPRET=1`` when ``interpreted``) and validate the contract; an
        ``@triton.autotune`` kernel without ``TUNABLES`` supplies the space. Raises ContractError."""
        use_interpreter(interpreted)
        if interpreted:  # exact fixes for the interpreter's known faults, before the kernel module is imported
            from kernelpilot.backends.triton.interpreter import install_workarounds

            install_workarounds()
        module = import_module_file(Path(path), "kernel")
        derived = None
        found = find_autotuner(module) if not hasattr(module, "TUNABLES") else None
        if found is not None:
            name, tuner = found
            tunables, combos = autotune_space(tuner, Path(path))
            derived = DerivedSpace(tunables=tunables, default_config=autotune_config_dict(tuner.configs[0]),
                                   constraints=[combos],
                                   extras={"autotuner": name, "autotune_configs": list(tuner.configs),
                                           "autotune_pins": {}})
        return build_kernel_file(Path(path), module, ref, interpreted=interpreted, derived=derived, backend=self,
                                 no_tunables_hint='define TUNABLES = {"BLOCK_SIZE": [256, 512, 1024], "num_warps": '
                                                  '[2, 4, 8]}, or decorate the kernel with @triton.autotune(configs=[...])')

    def limitations(self, kf: KernelFile) -> str | None:
        """Under the interpreter: what in the kernel the interpreter cannot run exactly (e.g. ``the Triton
        interpreter cannot run libdevice.erfinv (in _kernel): run on a GPU``), and, when a launch was given fp8
        tensors, the interpreter's fp32 -> fp8 rounding where a probe finds it differs from torch's
        (:func:`kernelpilot.backends.triton.fp8_probe.fp8_cast_mismatch`); else None. Raises nothing."""
        if not kf.interpreted:
            return None
        from kernelpilot.backends.triton.fp8_probe import fp8_cast_mismatch
        from kernelpilot.backends.triton.interpreter import interpreter_note

        notes = []
        try:
            notes.append(interpreter_note(kf.module))
        except Exception:  # noqa: BLE001 - a scan that cannot read the source says nothing
            pass
        for dtype in sorted(kf.extras.get("fp8_inputs", ())):
            found = fp8_cast_mismatch(dtype)
            if found:
                notes.append(f"this case has {dtype} tensors and {found}: the kernel's fp8 results cannot be "
                             "checked under the interpreter, run on a GPU")
        return "; ".join(n for n in notes if n) or None

    def kernel_files(self, path: Path, name: str | None = None) -> dict[Path, Path]:
        """``{path: name}``: a Triton kernel file (its kernels are defined in it) is its one file."""
        path = Path(path).resolve()
        return {path: Path(name or path.name)}

    def launch(self, kf: KernelFile, inputs: dict[str, Any], config: dict[str, Any]) -> None:
        """``run_kernel(**inputs, **config)``; for an autotuned kernel the autotuner's config list becomes the one
        pinned ``triton.Config`` (so it launches without benchmarking, with that config's ``pre_hook``) and
        ``run_kernel(**inputs)`` is called. The autotuner's own ``pre_hook``/``post_hook`` are left as they are."""
        if kf.interpreted:  # fp8 tensors seen by a launch: limitations() then probes the interpreter's fp8 casts
            for v in inputs.values():
                dtype = getattr(v, "dtype", None)
                if dtype is not None and getattr(dtype, "is_floating_point", False) and v.element_size() == 1:
                    kf.extras.setdefault("fp8_inputs", set()).add(str(dtype).removeprefix("torch."))
        name = kf.extras.get("autotuner")
        if name is None:
            kf.run_kernel(**inputs, **config)
            return
        tuner = autotuner_of(getattr(kf.module, name))
        pins: dict[Any, Any] = kf.extras.setdefault("autotune_pins", {})
        try:
            key: Any = tuple(config.items())
            pin = pins.get(key)
        except TypeError:  # an unhashable value: no memo
            key, pin = None, None
        if pin is None:
            listed = kf.extras.get("autotune_configs") or list(tuner.configs)
            pin = pinned_config(listed, config)
            if key is not None:
                pins[key] = pin
        if len(tuner.configs) != 1 or tuner.configs[0] is not pin:
            tuner.configs = [pin]
        kf.run_kernel(**inputs)

    def export_config(self, config: dict[str, Any]) -> str:
        """The config as a ``triton.Config(...)`` line."""
        return to_triton_config(config)

    def compile_for(self, kernel: str | Path, config: dict[str, Any], shape: dict[str, Any], target: str, *,
                    read: BinaryReading = BinaryReading()) -> StaticResult:
        """Capture the launch ``run_kernel`` makes with ``config``, compile it with Triton for ``target`` and read
        the cubin (:func:`kernelpilot.backends.triton.compile._inspect_task`): a ``StaticReport``, or a
        ``StaticFailure`` at stage ``load`` (also: this process's Triton runs under its interpreter), ``capture``,
        ``compile`` or ``resources``. Unexpected exceptions propagate (see :meth:`Backend.compile_for`)."""
        from kernelpilot.backends.binary.models import load_result
        from kernelpilot.backends.triton.compile import _inspect_task

        return load_result(_inspect_task(read.task(kernel, config, shape, target)))

    def kernel_names(self, kf: KernelFile) -> list[str]:
        """The ``@triton.jit`` functions defined in the kernel file (through ``autotune``/``heuristics`` wrappers):
        Triton names the compiled kernel after the function. Raises nothing."""
        names: list[str] = []
        for value in list(vars(kf.module).values()):
            fn, depth = value, 0
            while hasattr(fn, "fn") and depth < 4 and type(fn).__name__ not in ("JITFunction", "InterpretedFunction"):
                fn, depth = fn.fn, depth + 1
            inner = getattr(fn, "fn", None)
            if type(fn).__name__ in ("JITFunction", "InterpretedFunction") and callable(inner) \
                    and getattr(inner, "__module__", None) == kf.module.__name__ and inner.__name__ not in names:
                names.append(inner.__name__)
        return names
