"""A kernel file and a shape as the config store's key parts (:class:`KeyParts`): what ``tune --workload`` puts a
decided config under and what library code looks it up by (issue 26; docs/workloads.md, "The config store").

Every part is found out, not declared:

- **kernel hash**: the contract's source hash (``KernelFile.source_sha256``, :func:`kernelpilot.kernels.contract.
  build_kernel_file`): sha256 over the kernel file's bytes, then the reference file's when it is another file.
  :func:`source_hash` computes it for a ``.py`` kernel from the bytes alone (no import: library code can hash its
  own ``__file__``); a ``.cu`` kernel's hash also covers its local headers and sidecar, so take it from the loaded
  ``KernelFile`` (the API, :mod:`kernelpilot.api.configs`, does).
- **arch**: this machine's GPU as the CUDA driver reports it (:func:`this_arch`, through
  :class:`kernelpilot.bundle.driver.CudaDriver`, no torch), ``cpu`` without one (interpreted measurements serve
  no GPU); or given.
- **toolchain**: :func:`kernelpilot.store.lookup.runtime_toolchain` (torch, triton, torch's CUDA), or given.
- **dtype**: the shape's ``dtype`` key (the convention of ``SHAPE``), or given; :data:`NO_DTYPE` when the shape
  has none (a kernel of one dtype).
- **stride pattern**: :func:`strides_of` the call's tensors (:func:`kernelpilot.workload.strides.stride_pattern`;
  anything with ``.shape`` and ``.stride()``, no torch imported), or given; ``contiguous`` by default.

Standard library and pydantic only: no torch, no Triton.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from kernelpilot.store.model import (ConfigStoreError, canonical_json, normalize_arch, normalize_dtype,
                                     normalize_toolchain)

__all__ = ["NO_DTYPE", "KeyParts", "LoadedKernel", "describe", "key_parts", "literal_shape", "source_hash", "strides_of", "this_arch"]

#: The dtype of a shape that has no ``dtype`` key (put and lookup agree on it).
NO_DTYPE = "unspecified"
_HEX = re.compile(r"^[0-9a-fA-F]{8,64}$")
#: Names whose use could rebind ``SHAPE`` unseen: a file using one is imported for its ``SHAPE``.
_REBINDERS = frozenset({"globals", "vars", "setattr", "exec", "eval", "__import__", "locals"})


def source_hash(kernel: str | Path, ref: str | Path | None = None) -> str:
    """The contract's source hash of a ``.py`` kernel file, from its bytes (nothing is imported): sha256 of the
    kernel file, updated with the reference file's bytes when ``ref`` is another file. Equal to
    ``load_kernel(kernel, ref).source_sha256`` (a test checks it on the examples).

    Returns:
        64 hex digits.

    Raises:
        ConfigStoreError: a file is missing or unreadable; ``kernel`` is not a ``.py`` file (a ``.cu`` kernel's hash
            covers its headers and sidecar: use its ``KernelFile.source_sha256``).
    """
    path = Path(kernel).expanduser()
    if path.suffix.lower() != ".py":
        raise ConfigStoreError(f"{path}: the hash of a {path.suffix or 'suffix-less'} file is not read from its "
                               "bytes alone", "give a .py kernel, or the loaded kernel's source_sha256 (kernelpilot "
                               "configs lookup loads a .cu kernel for it)")
    try:
        digest = hashlib.sha256(path.read_bytes())
        if ref is not None and Path(ref).expanduser().resolve() != path.resolve():
            digest.update(Path(ref).expanduser().read_bytes())
    except OSError as exc:
        raise ConfigStoreError(f"cannot read {exc.filename or path}: {exc.strerror or exc}",
                               "give the path of the kernel file (and --ref of its reference file)") from exc
    return digest.hexdigest()


def literal_shape(kernel: str | Path) -> Optional[dict[str, Any]]:
    """A ``.py`` kernel file's ``SHAPE`` read without importing it: the module-level ``SHAPE = {...}`` when it is a
    dict of literals (or whole-number arithmetic such as ``2**26``; the last one, when assigned more than once).

    None — the caller then imports the file for the value it really has — when the file has no such assignment,
    assigns it another way (computed, augmented, annotated), or could change it after (``SHAPE[k] = ...``,
    ``SHAPE.update(...)``, ``global SHAPE``, ``del``, an import, def or class of that name, ``import *``, or any use of ``globals``, ``vars``, ``setattr``, ``exec``,
    ``eval``, ``__import__``, ``__dict__``), or cannot be read or parsed. Raises nothing.
    """
    try:
        tree = ast.parse(Path(kernel).expanduser().read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    top = {id(t) for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and (node.id in _REBINDERS or (
                node.id == "SHAPE" and not isinstance(node.ctx, ast.Load) and id(node) not in top)):
            return None
        if isinstance(node, ast.Attribute) and (node.attr == "__dict__" or (
                isinstance(node.value, ast.Name) and node.value.id == "SHAPE")):
            return None
        if (isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                and node.value.id == "SHAPE"):
            return None
        if isinstance(node, (ast.Global, ast.Nonlocal)) and "SHAPE" in node.names:
            return None
        if "SHAPE" in (getattr(node, "name", None), getattr(node, "asname", None)) or (
                isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)):
            return None  # def/class SHAPE, import ... as SHAPE, except ... as SHAPE, case SHAPE, import *
    found: Optional[dict[str, Any]] = None
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        if not any(isinstance(t, ast.Name) and t.id == "SHAPE" for t in targets):
            continue
        value = node.value if not isinstance(node, ast.AugAssign) else None
        if not isinstance(value, ast.Dict) or any(k is None for k in value.keys):
            return None
        try:
            shape = {ast.literal_eval(k): _constant(v) for k, v in zip(value.keys, value.values)}
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, ArithmeticError):
            return None
        if not all(isinstance(k, str) for k in shape):
            return None
        found = shape
    return found


_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b}


def _constant(node: ast.expr) -> Any:
    """A literal (``ast.literal_eval``), or whole-number arithmetic of literals (``2**26``, ``1 << 20``,
    ``8 * 1024``) with exponents and shifts of at most 64. Raises ValueError for anything else."""
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _constant(node.left), _constant(node.right)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)):
            raise ValueError("arithmetic on something other than whole numbers")
        if isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= b <= 64:
            raise ValueError("an exponent or shift out of 0..64")
        return _OPS[type(node.op)](a, b)
    return ast.literal_eval(node)


@functools.lru_cache(maxsize=1)
def this_arch() -> str:
    """This machine's GPU arch (device 0 of those ``CUDA_VISIBLE_DEVICES`` shows, the device torch uses by default)
    as the CUDA driver reports it (``sm_90``: :meth:`kernelpilot.bundle.driver.CudaDriver.device_facts`, through
    ctypes, no torch); ``cpu`` when there is no driver or no device. Computed once per process. Raises nothing."""
    try:
        from kernelpilot.bundle.driver import CudaDriver

        return normalize_arch(CudaDriver().device_facts()[0])
    except Exception:  # no libcuda, no device, a broken driver: no GPU answers here
        return "cpu"


def strides_of(tensors: Iterable[Any] | Mapping[str, Any]) -> str:
    """The stride pattern of a call's tensors (:func:`kernelpilot.workload.strides.stride_pattern`): every item (a
    mapping's values, in order) that has ``.shape`` and a callable ``.stride()`` — a torch tensor, without torch
    imported here — in order; other items (numbers, None) are skipped. The convention both sides use: the kernel's
    inputs in the order its ``setup`` returns them (``run_kernel``'s keyword order).

    Raises:
        ConfigStoreError: a tensor's sizes and strides disagree or a stride is negative.
    """
    from kernelpilot.workload.strides import stride_pattern

    items = tensors.values() if isinstance(tensors, Mapping) else tensors
    sizes, strides = [], []
    for t in items:
        if hasattr(t, "shape") and callable(getattr(t, "stride", None)):
            sizes.append([int(n) for n in t.shape])
            strides.append([int(s) for s in t.stride()])
    try:
        return stride_pattern(sizes, strides)
    except ValueError as exc:
        raise ConfigStoreError(f"cannot read the tensors' stride pattern: {exc}",
                               "pass the kernel's input tensors, or the pattern as strides=") from exc


class KeyParts(BaseModel):
    """What a decided config is stored under, but its range (:class:`kernelpilot.store.model.StoreKey`), each part
    normalised as the store does; and the full shape it was found for.

    Attributes:
        kernel_hash: 64 hex digits (the contract's source hash). arch: ``sm_90`` or ``cpu``.
        toolchain: tool -> version. dtype: ``bfloat16`` (or :data:`NO_DTYPE`). strides: the stride pattern.
        shape: the full shape (the kernel's ``SHAPE`` under the given keys, when it could be read), dtype included.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kernel_hash: str
    arch: str
    toolchain: dict[str, str]
    dtype: str
    strides: str
    shape: dict[str, Any]

    def query(self) -> dict[str, Any]:
        """The keyword arguments of :func:`kernelpilot.store.lookup.lookup` (and ``ConfigStore.lookup``)."""
        return {"kernel_hash": self.kernel_hash, "arch": self.arch, "toolchain": dict(self.toolchain),
                "dtype": self.dtype, "strides": self.strides, "shape": dict(self.shape)}

    def put(self, store: Any, shape_range: Mapping[str, Any], config: Mapping[str, Any], duration_ns: float,
            **extra: Any) -> str:
        """``store.put`` (:meth:`kernelpilot.store.ConfigStore.put`) of ``config`` under these parts and
        ``shape_range`` (``Bucket.store_range()``); ``extra``: ``evidence``, ``decided_at``, ``gpu``. Returns
        ``added``/``improved``/``kept``; raises what ``put`` raises."""
        return store.put(self.kernel_hash, self.arch, self.toolchain, self.dtype, self.strides, shape_range, config,
                         duration_ns, **extra)


@runtime_checkable
class LoadedKernel(Protocol):
    """What :func:`key_parts` reads of a loaded kernel (a :class:`~kernelpilot.kernels.contract.KernelFile`, not
    imported here: library code keys the store without torch): its source hash (a ``.cu`` kernel's covers its headers
    and sidecar) and its ``SHAPE``."""

    source_sha256: str
    shape: dict[str, Any]


def key_parts(kernel: LoadedKernel | str | Path, shape: Optional[Mapping[str, Any]] = None, *, ref: str | Path | None = None,
              base_shape: Optional[Mapping[str, Any]] = None, arch: Optional[str] = None,
              toolchain: Optional[Mapping[str, Any]] = None, dtype: Optional[str] = None,
              strides: Optional[str] = None, tensors: Any = None) -> KeyParts:
    """The store key parts of a kernel at a shape (the rules are the module docstring's).

    Args:
        kernel: a loaded ``KernelFile`` (its ``source_sha256`` and ``shape`` are used), the path of a ``.py`` kernel
            file (hashed and its literal ``SHAPE`` read, nothing imported), or the hash itself (8 to 64 hex digits).
        shape: the shape's keys (``{"M": 512}``); keys left out take ``base_shape``'s values.
        ref: the reference file, when not the kernel file (with a path). base_shape: the kernel's ``SHAPE``
            (default: the ``KernelFile``'s, or the file's literal one; none with a bare hash).
        arch: default :func:`this_arch`. toolchain: default ``runtime_toolchain()``.
        dtype: default the shape's ``dtype`` key, else :data:`NO_DTYPE`; a shape whose dtype differs is refused.
        strides: the stride pattern; default :func:`strides_of` ``tensors`` when given, else ``contiguous``.
        tensors: the call's tensors (a sequence or a mapping such as ``setup``'s inputs).

    Raises:
        ConfigStoreError: a missing or unreadable kernel file; a kernel that is neither a file nor a hash; a
            malformed arch, toolchain or dtype; the shape's dtype differs from ``dtype``.
    """
    from kernelpilot.store.lookup import runtime_toolchain

    base: Optional[Mapping[str, Any]] = base_shape
    if isinstance(kernel, LoadedKernel):
        kernel_hash = str(kernel.source_sha256)
        base = base if base is not None else kernel.shape
    elif isinstance(kernel, Path) or (isinstance(kernel, str)
                                      and (Path(kernel).is_file() or not _HEX.match(kernel))):
        kernel_hash = source_hash(kernel, ref)
        base = base if base is not None else literal_shape(kernel)
    elif isinstance(kernel, str):
        kernel_hash = kernel.lower()
    else:
        raise ConfigStoreError(f"kernel {kernel!r} is neither a kernel file nor a source hash",
                               "give the kernel file's path, its loaded KernelFile, or its sha256")
    full = {**dict(base or {}), **dict(shape or {})}
    shape_dtype = full.get("dtype")
    if dtype is not None and shape_dtype is not None and normalize_dtype(str(shape_dtype)) != normalize_dtype(dtype):
        raise ConfigStoreError(f"the shape's dtype {shape_dtype!r} is not the dtype given ({dtype!r})",
                               "give one dtype: the shape's dtype key or dtype=, not two different ones")
    the_dtype = normalize_dtype(str(dtype if dtype is not None else shape_dtype if shape_dtype is not None
                                    else NO_DTYPE))
    if strides is None:
        strides = strides_of(tensors) if tensors is not None else "contiguous"
    return KeyParts(kernel_hash=kernel_hash, arch=normalize_arch(arch if arch is not None else this_arch()),
                    toolchain=normalize_toolchain(toolchain if toolchain is not None else runtime_toolchain()),
                    dtype=the_dtype, strides=str(strides).strip() or "contiguous",
                    shape=dict(sorted(full.items())))


def describe(parts: KeyParts) -> str:
    """One line naming the parts (``kernel ab12cd34ef56 sm_90 bfloat16 contiguous torch=2.9.0 ...``). Raises nothing."""
    tools = " ".join(f"{k}={v}" for k, v in parts.toolchain.items()) or "no toolchain"
    return (f"kernel {parts.kernel_hash[:12]} {parts.arch} {parts.dtype} {parts.strides} {tools} at "
            f"{canonical_json(parts.shape)}")
