"""The timer out of the kernel's reach: functions bound before any kernel file is imported, and checked after.

A kernel file runs in the same process as the timer (the worker), so it can replace Python functions: patch
``torch.cuda.Event.elapsed_time`` to halve every time, ``time.perf_counter``, ``torch.cuda.synchronize``, or
kernelpilot's own ``compare``. Two defences (docs/measuring.md, "Timing"; issue 11's cheat got a 1.99× false
speedup accepted by patching the event timer at import):

1. :func:`bound` captures the timing functions once, before the kernel file is imported (the worker calls
   :meth:`TimerGuard.snapshot` first); the timers call those captured references, so a later patch does not
   change what they call.
2. :class:`TimerGuard` remembers the identity of every watched attribute — the timing and synchronisation
   functions of ``time``, ``torch.cuda``, ``torch.cuda.Event``, ``torch.profiler``, and every function and
   method of kernelpilot's measuring modules — and of the watched modules in ``sys.modules``.
   :meth:`TimerGuard.check` names each one that changed; the worker calls it after the import, after every
   launch phase and before it reports a result, and a change is the failure ``timer_tampered``.
"""

from __future__ import annotations

import importlib
import sys
import time
import types
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["BoundTimers", "TimerGuard", "Tampered", "bound", "namespace_changes", "namespace_snapshot"]

#: Attributes of third-party modules and classes the measurement relies on: (module, dotted attribute path).
WATCHED_ATTRS: tuple[tuple[str, str], ...] = (
    ("threading", "Thread.start"),  # attributes each thread it starts (kernels/threads.py)
    ("time", "perf_counter"), ("time", "perf_counter_ns"), ("time", "monotonic"), ("time", "time"),
    ("time", "sleep"), ("statistics", "median"), ("statistics", "quantiles"),
    ("torch", "equal"), ("torch", "isfinite"), ("torch", "allclose"), ("torch", "compile"),
    ("torch.cuda", "Event"), ("torch.cuda", "synchronize"), ("torch.cuda", "current_stream"),
    ("torch.cuda", "is_available"), ("torch.cuda", "get_device_properties"),
    ("torch.cuda", "Event.record"), ("torch.cuda", "Event.elapsed_time"), ("torch.cuda", "Event.synchronize"),
    ("torch.cuda", "Event.query"), ("torch.cuda", "Event.__init__"), ("torch.cuda", "Event.__new__"),
    ("torch.cuda", "Stream.synchronize"), ("torch.profiler", "profile"), ("torch.autograd", "profiler"),
    ("torch.autograd.profiler", "profile"), ("torch.autograd.profiler", "profile.__enter__"),
    ("torch.autograd.profiler", "profile.__exit__"),
    ("torch", "Tensor.copy_"), ("torch", "Tensor.fill_"), ("torch", "Tensor.clone"),
)
#: kernelpilot modules whose every function, class and method is watched.
WATCHED_MODULES: tuple[str, ...] = (
    "kernelpilot.measure.timing", "kernelpilot.measure.compare", "kernelpilot.measure.correctness",
    "kernelpilot.measure.guard", "kernelpilot.measure.activity", "kernelpilot.kernels.contract",
    "kernelpilot.kernels.workload", "kernelpilot.hardware.roofline", "kernelpilot.search.worker_child",
    "kernelpilot.search.stages", "kernelpilot.search.stage_steps", "kernelpilot.search.stats",
    "kernelpilot.records.evaluation", "kernelpilot.report.benchmark", "kernelpilot.api",
)


#: Namespaces every public attribute of which is watched by identity (issue 24: a kernel that rebinds
#: ``torch.softmax`` — at import, in ``run_kernel``, through ``vars(torch)`` or a function's ``__globals__`` — changes
#: what the reference and kernelpilot's own comparison compute; the static screen sees only the plain forms).
#: Attributes added later (a lazily imported submodule, a library's registration) are not rebindings.
WATCHED_NAMESPACES: tuple[str, ...] = ("torch", "torch.Tensor", "torch.nn.functional", "torch.linalg", "torch.fft",
                                       "torch.special", "math", "operator", "builtins")


def namespace_snapshot() -> dict[str, dict[str, Any]]:
    """The public attributes of :data:`WATCHED_NAMESPACES` (namespace -> name -> object), for
    :func:`namespace_changes`. Imports torch."""
    out = {}
    for label in WATCHED_NAMESPACES:
        try:
            ns = _resolve(*label.split(".", 1)) if "." in label else importlib.import_module(label)
        except (ImportError, AttributeError, KeyError):
            continue
        out[label] = {k: v for k, v in vars(ns).items() if not k.startswith("_")}
    return out


def namespace_changes(snapshot: dict[str, dict[str, Any]]) -> list[str]:
    """``namespace.name`` of every attribute of a :func:`namespace_snapshot` that now is another object or gone."""
    out = []
    for label, before in snapshot.items():
        try:
            now = vars(_resolve(*label.split(".", 1)) if "." in label else importlib.import_module(label))
        except (ImportError, AttributeError, KeyError):
            out.append(f"{label} (gone)")
            continue
        out += [f"{label}.{k}" for k, v in before.items() if now.get(k, _GONE) is not v
                and not _torch_own(f"{label}.{k}", v, now.get(k, _GONE))]
    return out


#: torch's own rebindings when a part of it is imported later: ``torch._dynamo``'s import wraps ``torch.manual_seed``
#: (so Dynamo does not trace it). Accepted only as that wrapper of the very function seen before (importing
#: ``torch._dynamo`` up front instead cost every worker about 1.5 s).
_TORCH_OWN: dict[str, str] = {"torch.manual_seed": "torch._dynamo"}


def _torch_own(name: str, old: Any, new: Any) -> bool:
    module = _TORCH_OWN.get(name)
    return module is not None and module in sys.modules and getattr(new, "__wrapped__", None) is old


_GONE = object()


class Tampered(Exception):
    """A watched function or module was replaced; ``changed`` lists each as ``module.attribute``."""

    def __init__(self, changed: list[str]) -> None:
        super().__init__("the kernel file replaced functions kernelpilot measures with: " + ", ".join(changed))
        self.changed = changed


@dataclass(frozen=True)
class BoundTimers:
    """The timing functions as they were before any kernel file was imported (see the module docstring)."""

    event: Any
    record: Callable[..., Any]
    elapsed_time: Callable[..., float]
    synchronize: Callable[[], None]
    perf_counter: Callable[[], float]
    perf_counter_ns: Callable[[], int]
    spin: Callable[[int], None]  # torch.cuda._sleep: the opening spin of measure.timing.time_event_sequence


_BOUND: BoundTimers | None = None


def bound() -> BoundTimers:
    """The captured timing functions (captured on the first call; needs torch). Raises ImportError without torch."""
    global _BOUND
    if _BOUND is None:
        import torch

        _BOUND = BoundTimers(event=torch.cuda.Event, record=torch.cuda.Event.record,
                             elapsed_time=torch.cuda.Event.elapsed_time, synchronize=torch.cuda.synchronize,
                             perf_counter=time.perf_counter, perf_counter_ns=time.perf_counter_ns,
                             spin=torch.cuda._sleep)
    return _BOUND


def _resolve(module: str, path: str) -> Any:
    obj: Any = sys.modules.get(module) or importlib.import_module(module)
    for part in path.split("."):
        obj = obj.__dict__[part] if isinstance(obj, type) and part in obj.__dict__ else getattr(obj, part)
    return obj


def _watchable(value: Any) -> bool:
    return isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type, classmethod, staticmethod,
                              property, types.MethodType))


class TimerGuard:
    """Identities of the watched attributes and modules (see the module docstring)."""

    def __init__(self) -> None:
        self._attrs: dict[str, Any] = {}
        self._modules: dict[str, types.ModuleType] = {}
        self._namespaces: dict[str, dict[str, Any]] = {}

    @classmethod
    def snapshot(cls) -> TimerGuard:
        """Import the watched modules, bind the timers (:func:`bound`) and remember every identity. Call it before
        importing a kernel file."""
        guard = cls()
        bound()
        guard._namespaces = namespace_snapshot()
        for module, path in WATCHED_ATTRS:
            try:
                guard._attrs[f"{module}.{path}"] = _resolve(module, path)
            except (ImportError, AttributeError, KeyError):
                continue  # not in this torch build: nothing to watch
        for name in WATCHED_MODULES:
            mod = importlib.import_module(name)
            guard._modules[name] = mod
            for attr, value in vars(mod).items():
                if _watchable(value):
                    guard._attrs[f"{name}.{attr}"] = value
                if isinstance(value, type) and value.__module__ == name:
                    for meth, fn in vars(value).items():
                        if isinstance(fn, (types.FunctionType, classmethod, staticmethod, property)):
                            guard._attrs[f"{name}.{attr}.{meth}"] = fn
        return guard

    def changed(self) -> list[str]:
        """Every watched attribute or module that is no longer the object remembered (empty: untouched)."""
        out = [name for name, mod in self._modules.items() if sys.modules.get(name) is not mod]
        out += namespace_changes(self._namespaces)
        for key, value in self._attrs.items():
            module, path = self._split(key)
            try:
                now = _resolve(module, path) if module not in self._modules else self._lookup(module, path)
            except (ImportError, AttributeError, KeyError):
                out.append(f"{key} (deleted)")
                continue
            if now is not value:
                out.append(key)
        return out

    def check(self) -> None:
        """Raise :class:`Tampered` naming what changed; return quietly when nothing did."""
        changed = self.changed()
        if changed:
            raise Tampered(changed)

    def _split(self, key: str) -> tuple[str, str]:
        for module in sorted(self._modules, key=len, reverse=True):
            if key.startswith(module + "."):
                return module, key[len(module) + 1:]
        for module, path in WATCHED_ATTRS:
            if key == f"{module}.{path}":
                return module, path
        raise KeyError(key)

    def _lookup(self, module: str, path: str) -> Any:
        obj: Any = self._modules[module]
        for part in path.split("."):
            obj = vars(obj)[part]
        return obj
