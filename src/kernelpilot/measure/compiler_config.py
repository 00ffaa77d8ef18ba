"""torch's compiler config modules and environment as the worker found them, put back wherever a kernel file changed
them: the part of :mod:`kernelpilot.measure.settings` that covers torch.compile.

The torch.compile baseline is compiled in the process that imported the kernel file. A file that sets
``torch._dynamo.config.cache_size_limit = 0`` (Dynamo then gives up and runs the reference eagerly),
``torch._inductor.config.max_autotune_pointwise`` or any other field of these modules, or a ``TORCHINDUCTOR_*`` /
``TORCHDYNAMO_*`` variable that the config module reads at its import, changes the baseline that its speedup is
judged against, with no change to the kernel. The static screen refuses a direct assignment; a computed ``setattr`` or
``os.environ`` write escapes it.

Importing the config modules costs about 1.4 s per worker (they pull in all of Dynamo and Inductor), so they are not
imported to be captured. Instead:

- :func:`install`, before the kernel file is imported, captures the torch-compiler variables of ``os.environ`` and
  each watched module already imported, and puts a finder first on ``sys.meta_path`` that captures a watched module
  the moment its import finishes, whoever imports it. Before that import runs, the environment is put back, so the
  defaults it reads are torch's.
- :func:`restore` puts back the environment variables and every field (``get_config_copy()``) that differs from its
  capture, through the module's own ``setattr``, and returns one line per value put back. A watched module that is
  imported but was never captured (the finder was removed from ``sys.meta_path``) cannot be judged; its line says
  so. The worker refuses a file that removes the finder as ``timer_tampered`` (:func:`watch_removed`, checked
  with the timer guard after the import and after every stage).
- ``restore(quick=True)``, before every baseline launch (:func:`kernelpilot.measure.settings.pristine`), compares
  first what is cheap: the module's own hash of its compiled-in fields (``get_hash()``, cached by torch until a field
  is set) and, one by one, the fields that hash leaves out (``_compile_ignored_keys``: ``recompile_limit``, which
  ``cache_size_limit`` aliases, is one). Only a module where one of them differs gets the full comparison. A value
  changed in place (an item of a list field) is found by the full restores, between stages and around every timing
  of the baselines.

Cost: a full :func:`restore` with Dynamo and Inductor imported took 1.06 ms on a loaded 2-core CPU host and 2.3-4.1
ms of host time per call on an H200 host with torch 2.11 (session 11: run before every baseline launch, it put that
host time inside the launches' events, and a round-robin timed torch.compile of a 183 µs matmul at 1784 µs); a quick
one, tens of µs.

Source: ``torch.utils._config_module.ConfigModule`` (``get_config_copy``, ``__setattr__``), torch 2.11-2.13.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
from typing import Any

__all__ = ["ENV_PREFIXES", "WATCHED", "install", "restore", "watch_removed"]

#: The config modules whose fields decide what torch.compile generates, and how fast.
WATCHED = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")
#: Environment variables those modules read at import (their ``env_name_default`` / ``env_name_force``).
ENV_PREFIXES = ("TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE_")

_ENV: dict[str, str] | None = None
_SNAP: dict[str, dict[str, Any]] = {}
_HASH: dict[str, Any] = {}  # each captured module's get_hash() at its capture (None: the module has none)
_PENDING: list[str] = []  # what was put back before a watched import, returned by the next restore()


def _env_now() -> dict[str, str]:
    """The watched variables of ``os.environ``; cache folders aside (torch sets ``TORCHINDUCTOR_CACHE_DIR`` itself
    when Inductor is first imported: where files go, not what is generated)."""
    return {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) and not k.endswith("_CACHE_DIR")}


def _config_of(module: Any) -> dict[str, Any] | None:
    get = getattr(module, "get_config_copy", None)
    try:
        return dict(get()) if callable(get) else None
    except Exception:  # noqa: BLE001 - a module torch does not make a ConfigModule
        return None


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that do not compare: the same object or not
        return a is b


class _Loader(importlib.abc.Loader):
    """The watched module's own loader, with the environment put back before it runs and a capture after."""

    def __init__(self, inner: Any, name: str) -> None:
        self.inner, self.name = inner, name

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ...: linecache and inspect ask the loader
        return getattr(self.inner, name)

    def exec_module(self, module: Any) -> None:
        _PENDING.extend(_restore_env())
        self.inner.exec_module(module)
        config = _config_of(module)
        if config is not None and self.name not in _SNAP:
            _capture(self.name, module, config)


class _Finder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: finds a watched module with the finders after it and wraps its loader."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in WATCHED or fullname in _SNAP:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


def _hash_of(module: Any) -> Any:
    try:
        return module.get_hash()
    except Exception:  # noqa: BLE001 - no hash: every quick restore compares in full
        return None


def _capture(name: str, module: Any, config: dict[str, Any]) -> None:
    _SNAP[name] = config
    _HASH[name] = _hash_of(module)


def _unchanged(name: str, module: Any) -> bool:
    """The quick comparison: True when the module's hash of its compiled-in fields and each field that hash leaves
    out equal their capture (False when it cannot tell)."""
    snap, h = _SNAP[name], _HASH.get(name)
    if h is None or _hash_of(module) != h:
        return False
    try:
        ignored = module._compile_ignored_keys
        return all(_same(getattr(module, key), snap[key]) for key in ignored if key in snap)
    except Exception:  # noqa: BLE001 - a ConfigModule without the set: compare in full
        return False


def install() -> None:
    """Capture the environment's torch-compiler variables and each watched module already imported, and watch the
    imports of the others. Call before any kernel file is imported; calling it again captures anew. Raises nothing."""
    global _ENV
    _ENV = _env_now()
    _SNAP.clear()
    _HASH.clear()
    _PENDING.clear()
    for name in WATCHED:
        config = _config_of(sys.modules.get(name))
        if config is not None:
            _capture(name, sys.modules[name], config)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _restore_env() -> list[str]:
    if _ENV is None:
        return []
    now, lines = _env_now(), []
    for key in sorted(set(now) | set(_ENV)):
        if now.get(key) != _ENV.get(key):
            lines.append(f"os.environ[{key!r}]: {now.get(key)!r} -> {_ENV.get(key)!r}")
            if key in _ENV:
                os.environ[key] = _ENV[key]
            else:
                del os.environ[key]
    return lines


def restore(quick: bool = False) -> list[str]:
    """Put back the environment and every field of a watched module that differs from its capture; returns one line
    per value put back (``"torch._dynamo.config.recompile_limit: 0 -> 8"``), or per module that was imported
    without being captured. ``quick``: a module whose hash and compile-ignored fields equal their capture is not
    compared field by field (see the module docstring). Nothing installed: nothing done. Raises nothing (a field
    whose setter fails keeps its value, and its line says so)."""
    if _ENV is None:
        return []
    lines = [*_PENDING, *_restore_env()]
    _PENDING.clear()
    for name in WATCHED:
        module = sys.modules.get(name)
        if module is None:
            continue
        snap = _SNAP.get(name)
        if snap is not None and quick and _unchanged(name, module):
            continue
        now = _config_of(module)
        if now is None:
            continue
        if snap is None:
            lines.append(f"{name}: imported without being captured (the import watch was removed from "
                         "sys.meta_path): its fields could not be checked")
            continue
        for key, value in now.items():
            if key in snap and not _same(value, snap[key]):
                try:
                    setattr(module, key, snap[key])
                    lines.append(f"{name}.{key}: {value!r} -> {snap[key]!r}")
                except Exception as exc:  # noqa: BLE001 - recorded, not raised
                    lines.append(f"{name}.{key}: {value!r}, could not be put back ({type(exc).__name__}: {exc})")
    return lines


def watch_removed() -> str | None:
    """Why the import watch no longer works, or None: :func:`install` ran and its finder left ``sys.meta_path``
    while a watched module was still to be imported (a file that removes it would then change that module's
    fields unseen; the worker treats it as tampering with kernelpilot's instruments). Raises nothing."""
    if _ENV is None or any(isinstance(f, _Finder) for f in sys.meta_path):
        return None
    pending = [name for name in WATCHED if name not in _SNAP]
    return (f"the import watch of torch's compiler config was removed from sys.meta_path while "
            f"{', '.join(pending)} {'was' if len(pending) == 1 else 'were'} not yet captured") if pending else None
