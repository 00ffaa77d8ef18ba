"""``kernelpilot.bundle.load``: a bundle's kernel as a callable that launches the cubin through the CUDA driver.

No Triton and no compiler run in the process: the manifest says which binary serves a call (the inputs must equal
one entry's declared inputs: the grid rule ``exact-shape``), how to build its parameters (pointers from the inputs'
data, scalars from the manifest) and how to launch it (grid, 32 * num_warps threads, shared memory, cluster).
Everything up to ``cuModuleLoadData`` runs without a GPU: :meth:`BundleKernel.select` and :meth:`BundleKernel.pack`
are plain Python; only :func:`_launch` and the module load talk to the driver (``cuda-python``, imported there).
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any, Optional

from kernelpilot.bundle.manifest import BundleEntry, BundleError, BundleManifest, read_manifest, read_verified
from kernelpilot.errors import ToolMissingError

__all__ = ["BundleKernel", "load"]

_CTYPES = {"i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
           "i64": ctypes.c_int64, "u1": ctypes.c_uint8, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
           "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "fp32": ctypes.c_float, "f32": ctypes.c_float,
           "fp64": ctypes.c_double, "f64": ctypes.c_double}


def _ver(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", str(text))[:2]) or (0,)


def _cc(arch: str) -> tuple[int, int]:
    m = re.fullmatch(r"(?:sm_?)?(\d+)(\d)a?", str(arch).strip().lower())
    if not m:
        raise BundleError(f"{arch!r} is not an arch name", "e.g. sm_90")
    return int(m.group(1)), int(m.group(2))


def _driver() -> Any:
    """The ``cuda-python`` driver module.

    Raises:
        ToolMissingError: cuda-python is not installed.
    """
    try:
        from cuda.bindings import driver as cu  # cuda-bindings >= 12.6
    except ImportError:
        try:
            from cuda import cuda as cu  # type: ignore[no-redef]  # older cuda-python
        except ImportError as exc:
            raise ToolMissingError("loading a bundle needs cuda-python (the CUDA driver bindings)",
                                   "pip install 'kernelpilot[bundle]' (or: pip install cuda-python)") from exc
    return cu


def _check(result: tuple, what: str) -> Any:
    """``result`` of a cuda-python call, ``(CUresult, values...)``: the values, or BundleError naming the call."""
    cu = _driver()
    err, rest = result[0], result[1:]
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        raise BundleError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}",
                          "check the GPU and driver (nvidia-smi)")
    return rest[0] if len(rest) == 1 else rest


def _device_facts(device: int = 0) -> tuple[str, str]:
    """(arch of CUDA device ``device``, the driver's CUDA version) through the driver API.

    Raises:
        ToolMissingError: no cuda-python. BundleError: no driver or device.
    """
    cu = _driver()
    try:
        _check(cu.cuInit(0), "cuInit")
    except BundleError:
        raise
    except Exception as exc:  # cuda-bindings raises its own error when libcuda is absent
        raise ToolMissingError(f"no CUDA driver here ({type(exc).__name__}: {exc})",
                               "load a bundle on a GPU machine, or pass device_arch= and driver_cuda= to check it "
                               "without one") from exc
    dev = _check(cu.cuDeviceGet(device), "cuDeviceGet")
    a = cu.CUdevice_attribute
    major = _check(cu.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
    minor = _check(cu.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")
    version = _check(cu.cuDriverGetVersion(), "cuDriverGetVersion")
    return f"sm_{major}{minor}", f"{version // 1000}.{(version % 1000) // 10}"


class BundleKernel:
    """A loaded bundle: call it like the kernel file's ``run_kernel`` (its inputs, positional or by name; no
    config: the entry serving the inputs' shape carries it). Writes the outputs in place on the inputs' stream.

    Attributes:
        manifest: the :class:`BundleManifest`. bundle: the folder. load_s: not set here (see the bench).

    Raises (when called):
        BundleError: inputs outside the declared shapes (both sides named), a misaligned pointer, a CPU tensor, a
            driver failure. ToolMissingError: no cuda-python.
    """

    def __init__(self, bundle: Path, manifest: BundleManifest, cubins: dict[str, bytes],
                 config: Optional[dict[str, Any]] = None) -> None:
        self.bundle, self.manifest, self._cubins = bundle, manifest, cubins
        self.entries = [e for e in manifest.entries if not config or all(e.config.get(k) == v for k, v in config.items())]
        if not self.entries:
            raise BundleError(f"{bundle}: no entry has config {config} (entries: {[e.config for e in manifest.entries]})",
                              "pass a config the bundle holds, or none")
        self._functions: dict[str, Any] = {}

    def bind(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """run_kernel's inputs by name from a call's positional and keyword arguments (unknown keywords ignored,
        as run_kernel's ``**_`` does). Raises BundleError for a missing input, or for a run_kernel parameter that
        setup did not return (it took its default at export, which the binary now holds)."""
        params = self.manifest.run_kernel_params
        if len(args) > len(params):
            raise BundleError(f"{self.manifest.kernel}: run_kernel takes {len(params)} inputs ({', '.join(params)}), "
                              f"got {len(args)} positional arguments")
        inputs = dict(zip(params, args))
        inputs.update({k: v for k, v in kwargs.items() if k in params})
        needed = {n for e in self.entries for n in e.inputs}  # a run_kernel default (eps=...) is not an input
        missing = [p for p in params if p in needed and p not in inputs]
        fixed = [p for p in params if p not in needed and p in inputs]
        if fixed:
            raise BundleError(f"{self.manifest.kernel}: {', '.join(fixed)} took run_kernel's default at export and is "
                              f"compiled into the bundle; a call cannot pass it",
                              "call without it, or export with setup returning it as an input")
        if missing:
            raise BundleError(f"{self.manifest.kernel}: missing input(s) {', '.join(missing)}",
                              f"call it as run_kernel({', '.join(params)})")
        return inputs

    @staticmethod
    def _describe(inputs: dict[str, Any]) -> str:
        parts = []
        for k, v in inputs.items():
            if hasattr(v, "shape") and hasattr(v, "dtype"):
                parts.append(f"{k}: {str(v.dtype).replace('torch.', '')}{list(v.shape)} stride {list(v.stride())}")
            elif isinstance(v, dict):
                parts.append(f"{k}: {v['dtype']}{v['shape']} stride {v['stride']}")
            else:
                parts.append(f"{k}={v!r}")
        return "{" + ", ".join(parts) + "}"

    def select(self, inputs: dict[str, Any]) -> BundleEntry:
        """The entry whose declared inputs equal ``inputs`` (tensors: shape, strides, dtype; scalars: value).

        Raises:
            BundleError: none matches: the message gives the call's inputs and every declared shape.
        """
        for e in self.entries:
            if self._matches(e, inputs):
                return e
        declared = "; ".join(f"{e.shape} {self._describe({k: (v.model_dump() if hasattr(v, 'model_dump') else v) for k, v in e.inputs.items()})}"
                             for e in self.entries)
        raise BundleError(f"{self.manifest.kernel}: the call's inputs {self._describe(inputs)} are outside the "
                          f"bundle's declared shapes: {declared}",
                          "export the bundle with this shape too (--shapes), or call it with a declared shape")

    @staticmethod
    def _matches(e: BundleEntry, inputs: dict[str, Any]) -> bool:
        for name, spec in e.inputs.items():
            if name not in inputs:
                return False
            v = inputs[name]
            if hasattr(spec, "shape"):
                if not (hasattr(v, "shape") and hasattr(v, "stride")):
                    return False
                if (list(v.shape) != spec.shape or list(v.stride()) != spec.stride
                        or str(v.dtype).replace("torch.", "") != spec.dtype):
                    return False
            elif v != spec or type(v) is not type(spec) and not (isinstance(v, (int, float)) and isinstance(spec, (int, float))):
                return False
        return True

    def pack(self, e: BundleEntry, inputs: dict[str, Any]) -> list[tuple[str, int | float]]:
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
                    raise BundleError(f"{self.manifest.kernel}: {a.param} (input {a.input}) is at address {ptr:#x}, not "
                                      f"{a.divisibility}-byte aligned as the binary was specialized for",
                                      "pass tensors allocated by torch (16-byte aligned), not offset views")
                out.append((a.type, ptr))
            else:
                out.append((a.type, a.value))  # type: ignore[arg-type]
        return out

    def function(self, e: BundleEntry) -> Any:
        """The entry's ``CUfunction`` (``cuModuleLoadData`` + ``cuModuleGetFunction`` on first use; GPU only)."""
        if e.cubin not in self._functions:
            cu = _driver()
            _ensure_context(cu)
            module = _check(cu.cuModuleLoadData(self._cubins[e.cubin]), f"cuModuleLoadData({e.cubin})")
            fn = _check(cu.cuModuleGetFunction(module, e.kernel_name.encode()), f"cuModuleGetFunction({e.kernel_name})")
            if e.shared_mem_bytes > 49152:
                attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                _check(cu.cuFuncSetAttribute(fn, attr, e.shared_mem_bytes), "cuFuncSetAttribute(shared)")
            self._functions[e.cubin] = (module, fn)
        return self._functions[e.cubin][1]

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        inputs = self.bind(args, kwargs)
        e = self.select(inputs)
        params = self.pack(e, inputs)
        tensors = [v for v in inputs.values() if hasattr(v, "data_ptr")]
        if any(not getattr(t, "is_cuda", False) for t in tensors):
            raise BundleError(f"{self.manifest.kernel}: inputs must be CUDA tensors (got a tensor on "
                              f"{next(t.device for t in tensors if not getattr(t, 'is_cuda', False))})",
                              "move the inputs to the GPU")
        import torch

        stream = torch.cuda.current_stream(tensors[0].device).cuda_stream if tensors else 0
        _launch(self.function(e), e, params, stream)


def _ensure_context(cu: Any) -> None:
    """Make the device's primary context current when no context is (torch's own is reused when it is)."""
    ctx = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        _check(cu.cuInit(0), "cuInit")
        dev = _check(cu.cuDeviceGet(0), "cuDeviceGet")
        primary = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(cu.cuCtxSetCurrent(primary), "cuCtxSetCurrent")


def _launch(function: Any, e: BundleEntry, params: list[tuple[str, int | float]], stream: int) -> None:  # GPU only
    """Launch ``function`` as Triton's launcher does: grid x num_ctas blocks of 32 * num_warps threads, dynamic
    shared memory, the parameters then two null scratch pointers (global and profile scratch, Triton >= 3.5)."""
    cu = _driver()
    values = [ctypes.c_void_p(v) if t.startswith("*") else _CTYPES[t](v) for t, v in params]
    values += [ctypes.c_void_p(0), ctypes.c_void_p(0)]
    ptrs = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    gx, gy, gz = e.grid
    if gx * gy * gz == 0:
        return
    if e.num_ctas == 1:
        _check(cu.cuLaunchKernel(function, gx, gy, gz, 32 * e.num_warps, 1, 1, e.shared_mem_bytes, stream,
                                 ctypes.addressof(ptrs), 0), "cuLaunchKernel")
        return
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = gx * e.num_ctas, gy, gz
    config.blockDimX, config.blockDimY, config.blockDimZ = 32 * e.num_warps, 1, 1
    config.sharedMemBytes, config.hStream = e.shared_mem_bytes, stream
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = e.num_ctas, 1, 1
    config.attrs, config.numAttrs = [attr], 1
    _check(cu.cuLaunchKernelEx(config, function, ctypes.addressof(ptrs), 0), "cuLaunchKernelEx")


def load(bundle: str | Path, *, config: Optional[dict[str, Any]] = None, device_arch: Optional[str] = None,
         driver_cuda: Optional[str] = None) -> BundleKernel:
    """Load a bundle for this GPU: check the manifest, every file's sha256, the arch and the driver's PTX ISA,
    and return a :class:`BundleKernel` (cubins are loaded into the driver on first call). Imports no Triton and
    compiles nothing.

    Args:
        bundle: the bundle folder. config: keep only the entries with this config (subset match).
        device_arch: the device's arch (``sm_90``); None reads device 0 through the driver.
        driver_cuda: the driver's CUDA version (``12.8``); None reads it through the driver.

    Raises:
        BundleError: schema, a missing or tampered file (named, with both hashes), a cubin without the entry's
            kernel symbol, another arch (both named), a PTX ISA newer than the driver reads (both versions named),
            a config the bundle lacks.
        ToolMissingError: device facts are needed and cuda-python is not installed.
    """
    root = Path(bundle)
    m = read_manifest(root)
    cubins = read_verified(root, m)
    for e in m.entries:
        if e.kernel_name.encode() not in cubins[e.cubin]:
            raise BundleError(f"{root / e.cubin}: has no kernel {e.kernel_name} (the manifest's entry names it)",
                              "export the bundle again")
    if device_arch is None or driver_cuda is None:
        dev_arch, drv = _device_facts()
        device_arch, driver_cuda = device_arch or dev_arch, driver_cuda or drv
    if _cc(device_arch) != tuple(m.compute_capability) or _cc(m.arch) != _cc(device_arch):
        raise BundleError(f"{root}: the bundle is for {m.arch}, this device is {device_arch}",
                          f"export a bundle for {device_arch} (kernelpilot export ... --arch {device_arch})")
    if _ver(driver_cuda) < _ver(m.min_driver_cuda):
        isa = max((e.ptx_version for e in m.entries), key=_ver)
        raise BundleError(f"{root}: the bundle's PTX ISA {isa} needs a CUDA {m.min_driver_cuda} driver; this driver "
                          f"supports CUDA {driver_cuda}", "update the driver, or export with an older Triton/ptxas")
    return BundleKernel(root, m, cubins, config)
