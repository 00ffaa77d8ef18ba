"""``kernelpilot.bundle.load``: a bundle's kernel as a callable that launches the cubin through the CUDA driver.

No Triton, no compiler and no pydantic run in the process (loading a bundle imports the standard library and
:mod:`kernelpilot.bundle.driver`, ctypes on ``libcuda``; that module says why, with the measured costs). The
manifest says which binary serves a call (the inputs must equal one entry's declared inputs: the grid rule
``exact-shape``), how to build its parameters (pointers from the inputs' data, scalars from the manifest) and how
to launch it (grid, 32 * num_warps threads, shared memory, cluster). Everything up to ``cuModuleLoadData`` runs
without a GPU: :meth:`BundleKernel.select` and :meth:`BundleKernel.pack` are plain Python; only the module load
and :func:`_launch` talk to the driver. ``kernelpilot bundle verify`` checks the manifest against its schema; a
manifest that lacks a field the launch needs is refused here too. Before anything is parsed, the manifest must hash
to its ``bundle_id`` (an edited manifest is refused by name), and every entry's grid must cover its outputs by the
tile recorded at export (:func:`kernelpilot.bundle.reader.check_coverage`).
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any, Optional

from kernelpilot.bundle.reader import (FORMAT_V2, MANIFEST, BundleError, check_coverage, read_files,
                                       read_manifest_data)

__all__ = ["BundleKernel", "LaunchArg", "LaunchEntry", "load"]

def _ver(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", str(text))[:2]) or (0,)


def _cc(arch: str) -> tuple[int, int]:
    m = re.fullmatch(r"(?:sm_?)?(\d+)(\d)a?", str(arch).strip().lower())
    if not m:
        raise BundleError(f"{arch!r} is not an arch name", "e.g. sm_90")
    return int(m.group(1)), int(m.group(2))


def _driver() -> Any:
    """The process's :class:`~kernelpilot.bundle.driver.CudaDriver` (made on first use, shared with workload
    bundles: :func:`kernelpilot.bundle.driver.shared_driver`).

    Raises:
        ToolMissingError: no CUDA driver library here.
    """
    from kernelpilot.bundle.driver import shared_driver

    return shared_driver()


class _Plain:
    """Attributes named in ``__slots__``, compared and shown by value. Plain classes, not dataclasses: making a
    dataclass runs generated code at import, 1-3 ms each on the H100 machine, and this module is on the path whose
    whole budget is about 15 ms (see :mod:`kernelpilot.bundle.driver`)."""

    __slots__: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The attributes as a dict."""
        return {k: getattr(self, k) for k in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.as_dict() == other.as_dict()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"


class LaunchArg(_Plain):
    """One runtime parameter as the manifest's ``args`` rule gives it (see ``ArgRule`` in the manifest schema)."""

    __slots__ = ("param", "type", "kind", "input", "offset_bytes", "value", "divisibility")

    def __init__(self, param: str, type: str, kind: str, input: Optional[str] = None, offset_bytes: int = 0,
                 value: Any = None, divisibility: int = 1) -> None:
        self.param, self.type, self.kind, self.input = param, type, kind, input
        self.offset_bytes, self.value, self.divisibility = int(offset_bytes), value, int(divisibility)


class LaunchEntry(_Plain):
    """What launching one entry needs, read from the manifest without pydantic (``BundleEntry`` is the schema).

    Attributes: as ``BundleEntry``: ``inputs`` maps a tensor input to ``{"shape", "stride", "dtype"}`` and a scalar
    input to its value; ``grid`` is (x, y, z) programs; shared memory in bytes; ``coverage`` the tile each program
    writes of each output (``EntryCoverage`` in the schema; None when absent, which :func:`load` refuses).
    """

    __slots__ = ("kernel_name", "cubin", "config", "shape", "inputs", "args", "grid", "num_warps",
                 "shared_mem_bytes", "ptx_version", "num_ctas", "constexprs", "coverage")

    def __init__(self, kernel_name: str, cubin: str, config: dict[str, Any], shape: dict[str, Any],
                 inputs: dict[str, Any], args: tuple[LaunchArg, ...], grid: tuple[int, int, int], num_warps: int,
                 shared_mem_bytes: int, ptx_version: str, num_ctas: int = 1,
                 constexprs: Optional[dict[str, Any]] = None, coverage: Optional[dict[str, Any]] = None) -> None:
        self.kernel_name, self.cubin, self.config, self.shape = kernel_name, cubin, config, shape
        self.inputs, self.args, self.grid, self.num_warps = inputs, args, grid, num_warps
        self.shared_mem_bytes, self.ptx_version, self.num_ctas = shared_mem_bytes, ptx_version, num_ctas
        self.constexprs, self.coverage = constexprs or {}, coverage

    @classmethod
    def from_manifest(cls, data: dict[str, Any], where: str) -> "LaunchEntry":
        """Build from one manifest entry. Raises BundleError naming ``where`` for a missing or ill-typed field."""
        try:
            grid = tuple(int(g) for g in data["grid"])
            if len(grid) != 3:
                raise ValueError(f"grid has {len(grid)} dimensions, not 3")
            return cls(kernel_name=str(data["kernel_name"]), cubin=str(data["cubin"]), config=dict(data["config"]),
                       shape=dict(data["shape"]), inputs=dict(data["inputs"]),
                       args=tuple(LaunchArg(**a) for a in data["args"]), grid=grid,  # type: ignore[arg-type]
                       num_warps=int(data["num_warps"]), shared_mem_bytes=int(data["shared_mem_bytes"]),
                       ptx_version=str(data["ptx_version"]), num_ctas=int(data.get("num_ctas", 1)),
                       constexprs=dict(data.get("constexprs") or {}), coverage=data.get("coverage"))
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"{where}: breaks the manifest schema ({type(exc).__name__}: {exc})",
                              "run `kernelpilot bundle verify` on it, or export the bundle again") from exc


class BundleKernel:
    """A loaded bundle: call it like the kernel file's ``run_kernel`` (its inputs, positional or by name; no
    config: the entry serving the inputs' shape carries it). Writes the outputs in place on the inputs' stream.

    Attributes:
        bundle: the folder. kernel: the kernel file's name. run_kernel_params: its inputs, in order.
        entries: the :class:`LaunchEntry` s kept (all, or those with the ``config`` asked for); all_entries: every
            entry of the manifest.
        manifest: the validated ``BundleManifest`` (pydantic; built on first access only).

    Raises (when called):
        BundleError: inputs outside the declared shapes (both sides named), a misaligned pointer, a CPU tensor, a
            driver failure. ToolMissingError: no CUDA driver.
    """

    def __init__(self, bundle: Path, data: dict[str, Any], config: Optional[dict[str, Any]] = None,
                 cubins: Optional[dict[str, bytes]] = None) -> None:
        where = str(bundle / MANIFEST)
        try:
            self.kernel, self.run_kernel_params = str(data["kernel"]), [str(p) for p in data["run_kernel_params"]]
        except (KeyError, TypeError) as exc:
            raise BundleError(f"{where}: breaks the manifest schema (no {exc})",
                              "run `kernelpilot bundle verify` on it, or export the bundle again") from exc
        self.bundle, self._data, self._cubins = bundle, data, cubins or {}
        every = [LaunchEntry.from_manifest(e, f"{where} entry {i}") for i, e in enumerate(data.get("entries") or [])]
        self.all_entries = every
        self.entries = [e for e in every if not config or all(e.config.get(k) == v for k, v in config.items())]
        if not self.entries:
            raise BundleError(f"{bundle}: no entry has config {config} (entries: {[e.config for e in every]})",
                              "pass a config the bundle holds, or none")
        self._functions: dict[str, tuple[int, int]] = {}

    @property
    def manifest(self) -> Any:
        """The manifest validated against its schema (imports pydantic; the launch path never needs it)."""
        from kernelpilot.bundle.manifest import BundleManifest

        return BundleManifest.model_validate(self._data)

    def bind(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """run_kernel's inputs by name from a call's positional and keyword arguments (unknown keywords ignored,
        as run_kernel's ``**_`` does). Raises BundleError for a missing input, or for a run_kernel parameter that
        setup did not return (it took its default at export, which the binary now holds)."""
        params = self.run_kernel_params
        if len(args) > len(params):
            raise BundleError(f"{self.kernel}: run_kernel takes {len(params)} inputs ({', '.join(params)}), "
                              f"got {len(args)} positional arguments")
        inputs = dict(zip(params, args))
        inputs.update({k: v for k, v in kwargs.items() if k in params})
        needed = {n for e in self.entries for n in e.inputs}  # a run_kernel default (eps=...) is not an input
        missing = [p for p in params if p in needed and p not in inputs]
        fixed = [p for p in params if p not in needed and p in inputs]
        if fixed:
            raise BundleError(f"{self.kernel}: {', '.join(fixed)} took run_kernel's default at export and is "
                              f"compiled into the bundle; a call cannot pass it",
                              "call without it, or export with setup returning it as an input")
        if missing:
            raise BundleError(f"{self.kernel}: missing input(s) {', '.join(missing)}",
                              f"call it as run_kernel({', '.join(params)})")
        return inputs

    @staticmethod
    def _describe(inputs: dict[str, Any]) -> str:
        parts = []
        for k, v in inputs.items():
            if hasattr(v, "shape") and hasattr(v, "dtype"):
                parts.append(f"{k}: {str(v.dtype).replace('torch.', '')}{list(v.shape)} stride {list(v.stride())}")
            elif isinstance(v, dict):
                parts.append(f"{k}: {v.get('dtype')}{v.get('shape')} stride {v.get('stride')}")
            else:
                parts.append(f"{k}={v!r}")
        return "{" + ", ".join(parts) + "}"

    def select(self, inputs: dict[str, Any]) -> LaunchEntry:
        """The entry whose declared inputs equal ``inputs`` (tensors: shape, strides, dtype; scalars: value).

        Raises:
            BundleError: none matches: the message gives the call's inputs and every declared shape.
        """
        for e in self.entries:
            if self._matches(e, inputs):
                return e
        declared = "; ".join(f"{e.shape} {self._describe(e.inputs)}" for e in self.entries)
        raise BundleError(f"{self.kernel}: the call's inputs {self._describe(inputs)} are outside the "
                          f"bundle's declared shapes: {declared}",
                          "export the bundle with this shape too (--shapes), or call it with a declared shape")

    @staticmethod
    def _matches(e: LaunchEntry, inputs: dict[str, Any]) -> bool:
        for name, spec in e.inputs.items():
            if name not in inputs:
                return False
            v = inputs[name]
            if isinstance(spec, dict):
                if not (hasattr(v, "shape") and hasattr(v, "stride")):
                    return False
                if (list(v.shape) != spec.get("shape") or list(v.stride()) != spec.get("stride")
                        or str(v.dtype).replace("torch.", "") != spec.get("dtype")):
                    return False
            elif v != spec or type(v) is not type(spec) and not (isinstance(v, (int, float)) and isinstance(spec, (int, float))):
                return False
        return True

    def pack(self, e: LaunchEntry, inputs: dict[str, Any]) -> list[tuple[str, int | float]]:
        """The kernel's runtime parameters in launch order as ``(Triton type, value)``: a pointer is the input's
        ``data_ptr()`` plus the recorded byte offset; scalars come from the manifest.

        Raises:
            BundleError: a pointer breaks the alignment Triton specialized the binary on (``divisibility``).
        """
        out: list[tuple[str, int | float]] = []
        for a in e.args:
            if a.kind == "tensor":
                ptr = int(inputs[a.input].data_ptr()) + a.offset_bytes
                if a.divisibility > 1 and ptr % a.divisibility:
                    raise BundleError(f"{self.kernel}: {a.param} (input {a.input}) is at address {ptr:#x}, not "
                                      f"{a.divisibility}-byte aligned as the binary was specialized for",
                                      "pass tensors allocated by torch (16-byte aligned), not offset views")
                out.append((a.type, ptr))
            else:
                out.append((a.type, a.value))
        return out

    def function(self, e: LaunchEntry) -> int:
        """The entry's ``CUfunction`` handle (module load + function lookup on first use; GPU only)."""
        if e.cubin not in self._functions:
            drv = _driver()
            drv.ensure_context()
            self._functions[e.cubin] = drv.load_function(self._cubins[e.cubin], e.kernel_name, e.cubin,
                                                         e.shared_mem_bytes)
        return self._functions[e.cubin][1]

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        inputs = self.bind(args, kwargs)
        e = self.select(inputs)
        params = self.pack(e, inputs)
        tensors = [v for v in inputs.values() if hasattr(v, "data_ptr")]
        if any(not getattr(t, "is_cuda", False) for t in tensors):
            raise BundleError(f"{self.kernel}: inputs must be CUDA tensors (got a tensor on "
                              f"{next(t.device for t in tensors if not getattr(t, 'is_cuda', False))})",
                              "move the inputs to the GPU")
        import torch

        stream = torch.cuda.current_stream(tensors[0].device).cuda_stream if tensors else 0
        _launch(self.function(e), e, params, stream)


def _launch(function: int, e: LaunchEntry, params: list[tuple[str, int | float]], stream: int) -> None:  # GPU only
    """Launch ``function`` as Triton's launcher does: grid x num_ctas blocks of 32 * num_warps threads, dynamic
    shared memory, the parameters then two null scratch pointers (global and profile scratch, Triton >= 3.5)."""
    from kernelpilot.bundle.driver import CTYPES

    values = [ctypes.c_void_p(v) if t.startswith("*") else CTYPES[t](v) for t, v in params]
    values += [ctypes.c_void_p(0), ctypes.c_void_p(0)]
    ptrs = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    if e.grid[0] * e.grid[1] * e.grid[2] == 0:
        return
    _driver().launch(function, e.grid, 32 * e.num_warps, e.shared_mem_bytes, stream, ctypes.addressof(ptrs),
                     e.num_ctas)


def _device(root: Path, data: dict[str, Any], device_arch: Optional[str], driver_cuda: Optional[str],
            isa: str) -> None:
    """Refuse a bundle for another arch than the device's, or needing a newer driver (both sides named)."""
    try:
        arch, cc, min_cuda = str(data["arch"]), tuple(data["compute_capability"]), str(data["min_driver_cuda"])
    except (KeyError, TypeError) as exc:
        raise BundleError(f"{root / MANIFEST}: breaks the manifest schema ({type(exc).__name__}: {exc})",
                          "run `kernelpilot bundle verify` on it, or export the bundle again") from exc
    if device_arch is None or driver_cuda is None:
        dev_arch, drv = _driver().device_facts()
        device_arch, driver_cuda = device_arch or dev_arch, driver_cuda or drv
    if _cc(device_arch) != cc or _cc(arch) != _cc(device_arch):
        raise BundleError(f"{root}: the bundle is for {arch}, this device is {device_arch}",
                          f"export a bundle for {device_arch} (kernelpilot export ... --arch {device_arch})")
    if _ver(driver_cuda) < _ver(min_cuda):
        raise BundleError(f"{root}: the bundle's {isa} needs a CUDA {min_cuda} driver; this driver supports CUDA "
                          f"{driver_cuda}", "update the driver, or export with an older toolchain")


def _load_v2(root: Path, data: dict[str, Any], config: Optional[dict[str, Any]], device_arch: Optional[str],
             driver_cuda: Optional[str]) -> Any:
    """A workload bundle (``kernelpilot-bundle/2``): :class:`~kernelpilot.bundle.ranges.RangeBundleKernel` for
    kind ``triton``, :class:`~kernelpilot.bundle.cudaso.CudaBundleKernel` for ``cuda-so``; files hashed, the
    coverage of every bucket checked at its samples and corners, the arch and driver checked. Raises as
    :func:`load`."""
    if config:
        raise BundleError(f"{root}: a workload bundle picks its config by the call's shape; config= is for "
                          f"single-config bundles", "call load() without config")
    try:
        files = [(str(f["path"]), str(f["sha256"])) for f in data["files"]]
    except (KeyError, TypeError) as exc:
        raise BundleError(f"{root / MANIFEST}: breaks the manifest schema ({type(exc).__name__}: {exc})",
                          "run `kernelpilot bundle verify` on it, or export the bundle again") from exc
    kind = data.get("kind")
    if kind == "cuda-so":
        from kernelpilot.bundle.cudaso import CudaBundleKernel

        c = CudaBundleKernel(root, data, {})
        c._files = read_files(root, files, [(lib["file"], "solve") for lib in c.libraries])
        _device(root, data, device_arch, driver_cuda, f"nvcc ({data.get('nvcc_version')})")
        return c
    if kind != "triton":
        raise BundleError(f"{root / MANIFEST}: kind {kind!r}, this kernelpilot reads 'triton' and 'cuda-so'",
                          "export the bundle with this kernelpilot")
    from kernelpilot.bundle.ranges import RangeBundleKernel, bucket_coverage, bucket_env_corners

    k = RangeBundleKernel(root, data)
    for b in k.buckets:
        for env in bucket_env_corners(b, k.keys):
            bucket_coverage(f"{root / MANIFEST} bucket {b['name']!r}", b, env,
                            max(int(k.entries[int(j)].get("num_ctas", 1)) for j in b["entries"]))
    cubins = read_files(root, files, [(e["cubin"], e["kernel_name"]) for e in k.entries])
    for e in k.entries:
        if str(e["kernel_name"]).encode() not in cubins[e["cubin"]]:
            raise BundleError(f"{root / e['cubin']}: has no kernel {e['kernel_name']} (the manifest's entry names it)",
                              "export the bundle again")
    isa = max((str(e["ptx_version"]) for e in k.entries), key=_ver)
    _device(root, data, device_arch, driver_cuda, f"PTX ISA {isa}")
    k._cubins = cubins
    return k


def load(bundle: str | Path, *, config: Optional[dict[str, Any]] = None, device_arch: Optional[str] = None,
         driver_cuda: Optional[str] = None, expect_id: Optional[str] = None) -> Any:
    """Load a bundle for this GPU: check the manifest's identity, every file's sha256, the fields the launch needs,
    every entry's grid against the outputs it must cover, the arch and the driver's PTX ISA, and return a
    :class:`BundleKernel` (cubins are loaded into the driver on first call). Imports no Triton and no pydantic,
    and compiles nothing.

    A workload bundle (``kernelpilot-bundle/2``, from a dispatch table) returns a
    :class:`~kernelpilot.bundle.ranges.RangeBundleKernel` (kind ``triton``: the call's shape picks the bucket, the
    grid and scalars follow from it, the arguments pick the specialization) or a
    :class:`~kernelpilot.bundle.cudaso.CudaBundleKernel` (kind ``cuda-so``: ``solve`` of the bucket's library); a
    shape outside every range raises :class:`~kernelpilot.bundle.reader.BundleShapeOutOfRange`.

    Args:
        bundle: the bundle folder. config: keep only the entries with this config (subset match).
        device_arch: the device's arch (``sm_90``); None reads device 0 through the driver.
        driver_cuda: the driver's CUDA version (``12.8``); None reads it through the driver.
        expect_id: the ``bundle_id`` to require (the one ``export``/``bundle verify`` printed); None checks only
            that the manifest hashes to its own id.

    Raises:
        BundleTampered: the manifest does not hash to its ``bundle_id`` (edited after export) or the id is not
            ``expect_id``; a tampered file (named, with both hashes).
        BundleCoverageError: an entry's grid launches fewer programs than its outputs need (named).
        BundleError: a missing field, a missing file, a cubin without the entry's kernel symbol, another arch (both
            named), a PTX ISA newer than the driver reads (both versions named), a config the bundle lacks.
        ToolMissingError: device facts are needed and there is no CUDA driver.
    """
    root = Path(bundle)
    data = read_manifest_data(root, expect_id)
    if data.get("format") == FORMAT_V2:
        return _load_v2(root, data, config, device_arch, driver_cuda)
    k = BundleKernel(root, data, config)  # every entry parsed (schema errors first), before any file is read
    for i, e in enumerate(k.all_entries):
        check_coverage(f"{root / MANIFEST} entry {i} ({e.cubin})", e.grid, e.num_ctas,
                       {n: v for n, v in e.inputs.items() if isinstance(v, dict)}, e.coverage)
    try:
        files = [(str(f["path"]), str(f["sha256"])) for f in data["files"]]
        arch, cc, min_cuda = str(data["arch"]), tuple(data["compute_capability"]), str(data["min_driver_cuda"])
    except (KeyError, TypeError) as exc:
        raise BundleError(f"{root / MANIFEST}: breaks the manifest schema ({type(exc).__name__}: {exc})",
                          "run `kernelpilot bundle verify` on it, or export the bundle again") from exc
    cubins = read_files(root, files, [(e.cubin, e.kernel_name) for e in k.all_entries])
    for e in k.all_entries:
        if e.kernel_name.encode() not in cubins[e.cubin]:
            raise BundleError(f"{root / e.cubin}: has no kernel {e.kernel_name} (the manifest's entry names it)",
                              "export the bundle again")
    if device_arch is None or driver_cuda is None:
        dev_arch, drv = _driver().device_facts()
        device_arch, driver_cuda = device_arch or dev_arch, driver_cuda or drv
    if _cc(device_arch) != cc or _cc(arch) != _cc(device_arch):
        raise BundleError(f"{root}: the bundle is for {arch}, this device is {device_arch}",
                          f"export a bundle for {device_arch} (kernelpilot export ... --arch {device_arch})")
    if _ver(driver_cuda) < _ver(min_cuda):
        isa = max((e.ptx_version for e in k.all_entries), key=_ver)
        raise BundleError(f"{root}: the bundle's PTX ISA {isa} needs a CUDA {min_cuda} driver; this driver "
                          f"supports CUDA {driver_cuda}", "update the driver, or export with an older Triton/ptxas")
    k._cubins = cubins
    return k
