"""torch's process-wide settings as the worker found them, put back wherever a kernel file changed them.

A kernel file runs in the process that also times PyTorch eager and torch.compile of its reference (the baselines)
and, when the reference lives in the kernel file, in the process that computes the reference. A global switch set by
the file applies to all of them: ``torch.backends.cudnn.enabled = False`` at import makes a convolution reference,
eager and compiled alike, fall back to slow native kernels, and the kernel's speedup over them grows with no change
to the kernel; ``allow_tf32 = True`` computes the reference's fp32 matmuls in TF32 (the precision downgrade of the
integrity table: CUDA-L1's TF32 toggles). The static screen only flags such assignments (``sets_backend_flags``),
and a computed ``setattr`` escapes it.

So the settings of :data:`SETTINGS` are captured before the kernel file is imported (:func:`install`) and put back
(:func:`restore`) after the import, after every stage, and before every baseline call
(:func:`kernelpilot.report.benchmark` wraps the eager and torch.compile contenders with :func:`pristine`): the
reference and the baselines always run under the settings a plain ``import torch`` gives. A kernel that sets a switch
inside ``run_kernel`` keeps it for its own launch, and its correctness check judges what that does. Nothing is
refused: what was put back is recorded (``records["settings_restored"]``, one line per setting: name, the file's
value, the value put back). Cost: about 8 µs per capture on a 2-core CPU host (15 getters), paid once per stage and
once per baseline call, host time that the timers' opening spin keeps out of GPU times; before a baseline call the
compiler config gets the quick comparison (:func:`kernelpilot.measure.compiler_config.restore`), since the full one
cost 2.3-4.1 ms a call on an H200 host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["SETTINGS", "capture", "install", "installed", "pin", "pristine", "restore", "restored"]


def _attr(path: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    """Getter and setter of a module attribute ``torch.backends.x.y`` (``path`` under ``torch``)."""
    parent, _, last = path.rpartition(".")

    def get() -> Any:
        import torch

        return _resolve(torch, path)

    def put(value: Any) -> None:
        import torch

        setattr(_resolve(torch, parent), last, value)

    return get, put


def _call(getter: str, setter: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    """Getter and setter functions of ``torch`` (``torch.get_default_dtype`` / ``torch.set_default_dtype``)."""
    def get() -> Any:
        import torch

        return _resolve(torch, getter)()

    def put(value: Any) -> None:
        import torch

        _resolve(torch, setter)(value)

    return get, put


def _resolve(root: Any, path: str) -> Any:
    for part in path.split("."):
        root = getattr(root, part)
    return root


#: (name, (getter, setter)) of each process-wide setting that changes what the reference or a baseline computes or
#: how fast: precision switches, library choices, determinism, default dtype, CPU threads. Source: the switches
#: documented under torch.backends and torch's numerical-accuracy notes (TF32, reduced-precision reductions).
SETTINGS: tuple[tuple[str, tuple[Callable[[], Any], Callable[[Any], None]]], ...] = (
    ("torch.backends.cuda.matmul.allow_tf32", _attr("backends.cuda.matmul.allow_tf32")),
    ("torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
     _attr("backends.cuda.matmul.allow_fp16_reduced_precision_reduction")),
    ("torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
     _attr("backends.cuda.matmul.allow_bf16_reduced_precision_reduction")),
    ("torch.backends.cudnn.enabled", _attr("backends.cudnn.enabled")),
    ("torch.backends.cudnn.benchmark", _attr("backends.cudnn.benchmark")),
    ("torch.backends.cudnn.deterministic", _attr("backends.cudnn.deterministic")),
    ("torch.backends.cudnn.allow_tf32", _attr("backends.cudnn.allow_tf32")),
    ("torch.backends.mkldnn.enabled", _attr("backends.mkldnn.enabled")),
    ("torch.float32_matmul_precision", _call("get_float32_matmul_precision", "set_float32_matmul_precision")),
    ("torch.deterministic_algorithms", _call("are_deterministic_algorithms_enabled", "use_deterministic_algorithms")),
    ("torch.default_dtype", _call("get_default_dtype", "set_default_dtype")),
    ("torch.num_threads", _call("get_num_threads", "set_num_threads")),
    ("torch.backends.cuda.flash_sdp", _call("backends.cuda.flash_sdp_enabled", "backends.cuda.enable_flash_sdp")),
    ("torch.backends.cuda.mem_efficient_sdp",
     _call("backends.cuda.mem_efficient_sdp_enabled", "backends.cuda.enable_mem_efficient_sdp")),
    ("torch.backends.cuda.math_sdp", _call("backends.cuda.math_sdp_enabled", "backends.cuda.enable_math_sdp")),
)

_PRISTINE: dict[str, Any] | None = None
_RESTORED: dict[str, str] = {}


def capture() -> dict[str, Any]:
    """The current value of each setting of :data:`SETTINGS` that this torch has (name -> value). Raises nothing."""
    out: dict[str, Any] = {}
    for name, (get, _put) in SETTINGS:
        try:
            out[name] = get()
        except Exception:  # noqa: BLE001 - a switch this torch build does not have
            continue
    return out


def install(snapshot: dict[str, Any] | None = None) -> None:
    """Remember ``snapshot`` (default: :func:`capture` now) as the settings :func:`restore` puts back, and capture
    torch's compiler config (:func:`kernelpilot.measure.compiler_config.install`). Call it before any kernel file is
    imported. Raises nothing."""
    from kernelpilot.measure import compiler_config

    global _PRISTINE
    _PRISTINE = capture() if snapshot is None else dict(snapshot)
    compiler_config.install()


def pin(name: str, value: Any) -> None:
    """Set the setting ``name`` of :data:`SETTINGS` to ``value`` in this process and make it what :func:`restore`
    puts back here (nothing recorded: it is kernelpilot's own choice, not a file's). For the forked reference
    process, which pins ``torch.num_threads`` to 1: GNU OpenMP's thread pool does not survive a fork, and a child
    of a process that had run a parallel CPU op hangs in its first one (a 64 x 16384 float64 upcast, in CI,
    session 11). Raises KeyError for a name not in :data:`SETTINGS`, and what the setter raises."""
    _get, put = dict(SETTINGS)[name]
    put(value)
    if _PRISTINE is not None:
        _PRISTINE[name] = value


def installed() -> bool:
    """True once :func:`install` ran in this process (or in the process it was forked from). Raises nothing."""
    return _PRISTINE is not None


def restore(quick: bool = False) -> list[str]:
    """Put back every setting that differs from the installed snapshot, and torch.compile's config
    (:mod:`kernelpilot.measure.compiler_config`; ``quick``: its cheap comparison first, as before every baseline
    launch); returns one line per setting put back (``"torch.backends.cudnn.enabled: False -> True"``), also kept
    for :func:`restored`. Nothing installed: nothing done. Raises nothing (a setter that fails leaves that setting
    as it is, and its line says so)."""
    from kernelpilot.measure import compiler_config

    if _PRISTINE is None:
        return []
    now = capture()
    lines = []
    for line in compiler_config.restore(quick):  # torch.compile's config modules and environment
        lines.append(line)
        _RESTORED[line.split(":", 1)[0]] = line
    for name, (_get, put) in SETTINGS:
        if name in _PRISTINE and name in now and now[name] != _PRISTINE[name]:
            try:
                put(_PRISTINE[name])
                line = f"{name}: {now[name]!r} -> {_PRISTINE[name]!r}"
            except Exception as exc:  # noqa: BLE001 - recorded, not raised
                line = f"{name}: {now[name]!r}, could not be put back ({type(exc).__name__}: {exc})"
            lines.append(line)
            _RESTORED[name] = line
    return lines


def restored() -> list[str]:
    """Every setting put back in this process so far, one line each (the last time it was). Raises nothing."""
    return list(_RESTORED.values())


def pristine(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run after :func:`restore` (quick: it runs before every timed launch of a baseline, and its host time
    must stay small beside the launch's): a baseline contender that runs under the settings ``import torch`` gave,
    whatever the kernel's last launch set."""
    def run() -> Any:
        restore(quick=True)
        return fn()

    return run
