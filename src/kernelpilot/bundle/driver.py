"""The few CUDA driver calls a bundle needs, through ``ctypes`` on ``libcuda.so.1``.

Why not cuda-python: a bundle's point is a first launch that costs next to nothing over ``import torch``. On the
H100 machine (2026-11-24, torch 2.11, cuda-bindings 13.3.1, three fresh processes) importing
``cuda.bindings.driver`` after torch cost 17–31 ms, pydantic 44–68 ms, and loading ``libcuda.so.1`` with ctypes
0.1 ms (torch has it loaded already). Against a cold Triton compile of about 1.5 s, 100× leaves 15 ms for
everything, so the launch path uses the driver directly: thirteen entry points with the C signatures of CUDA 13's
``cuda.h`` (CUDA Driver API reference, "Module Management", "Execution Control", "Context Management").

Nothing here runs at import: :class:`CudaDriver` opens the library when made.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

from kernelpilot.bundle.reader import BundleError
from kernelpilot.errors import ToolMissingError

__all__ = ["CLUSTER_DIMENSION", "CTYPES", "CudaDriver", "LaunchAttribute", "LaunchConfig",
           "MAX_DYNAMIC_SHARED_SIZE_BYTES", "shared_driver"]

#: Triton's scalar parameter types -> the ctypes type a launch passes them as.
CTYPES = {"i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
          "i64": ctypes.c_int64, "u1": ctypes.c_uint8, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
          "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "fp32": ctypes.c_float, "f32": ctypes.c_float,
          "fp64": ctypes.c_double, "f64": ctypes.c_double}

_SHARED: list["CudaDriver"] = []


def shared_driver() -> "CudaDriver":
    """The process's :class:`CudaDriver`, made on first use and then shared by every loaded bundle.

    Raises:
        ToolMissingError: no CUDA driver library here.
    """
    if not _SHARED:
        _SHARED.append(CudaDriver())
    return _SHARED[0]

#: ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` (cuda.h, enum CUfunction_attribute).
MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
#: ``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`` (cuda.h, enum CUlaunchAttributeID).
CLUSTER_DIMENSION = 4
#: ``CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`` / ``_MINOR`` (cuda.h, enum CUdevice_attribute).
_CC_MAJOR, _CC_MINOR = 75, 76


class _ClusterDim(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _AttributeValue(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("clusterDim", _ClusterDim)]


class LaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute``: an enum id, padding to 8 bytes, a 64-byte value union (cuda.h)."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _AttributeValue)]


class LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig`` (cuda.h): grid and block dimensions, dynamic shared bytes, stream, attributes."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


_P, _U, _I = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
_SIGNATURES: dict[str, list[Any]] = {
    "cuInit": [_U],
    "cuDriverGetVersion": [ctypes.POINTER(_I)],
    "cuDeviceGet": [ctypes.POINTER(_I), _I],
    "cuDeviceGetAttribute": [ctypes.POINTER(_I), _I, _I],
    "cuCtxGetCurrent": [ctypes.POINTER(_P)],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_P), _I],
    "cuCtxSetCurrent": [_P],
    "cuModuleLoadData": [ctypes.POINTER(_P), ctypes.c_char_p],
    "cuModuleGetFunction": [ctypes.POINTER(_P), _P, ctypes.c_char_p],
    "cuFuncSetAttribute": [_P, _I, _I],
    "cuLaunchKernel": [_P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P],
    "cuLaunchKernelEx": [ctypes.POINTER(LaunchConfig), _P, _P, _P],
    "cuGetErrorName": [_I, ctypes.POINTER(ctypes.c_char_p)],
}


class CudaDriver:
    """``libcuda.so.1`` with the signatures above; every call checks its ``CUresult``.

    Raises (when made):
        ToolMissingError: no CUDA driver library on this machine.
    """

    def __init__(self, library: str = "libcuda.so.1") -> None:
        try:
            self.lib = ctypes.CDLL(library)
        except OSError as exc:
            raise ToolMissingError(f"no CUDA driver here ({library}: {exc})",
                                   "load a bundle on a GPU machine, or pass device_arch= and driver_cuda= to check "
                                   "it without one") from exc
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int

    def check(self, rc: int, what: str) -> None:
        """Raise BundleError naming ``what`` and the driver's error name unless ``rc`` is CUDA_SUCCESS (0)."""
        if rc:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise BundleError(f"{what} failed: {(name.value or b'').decode() or rc}",
                              "check the GPU and driver (nvidia-smi)")

    def device_facts(self, device: int = 0) -> tuple[str, str]:
        """(arch of device ``device`` like ``sm_90``, the driver's CUDA version like ``13.0``)."""
        self.check(self.lib.cuInit(0), "cuInit")
        dev, major, minor, version = _I(), _I(), _I(), _I()
        self.check(self.lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, dev), "cuDeviceGetAttribute")
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, dev), "cuDeviceGetAttribute")
        self.check(self.lib.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
        v = version.value
        return f"sm_{major.value}{minor.value}", f"{v // 1000}.{(v % 1000) // 10}"

    def ensure_context(self) -> None:
        """Make device 0's primary context current when no context is (torch's own is reused when it is)."""
        ctx = _P()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            dev = _I()
            self.check(self.lib.cuInit(0), "cuInit")
            self.check(self.lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
            self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def load_function(self, image: bytes, name: str, what: str, shared_mem_bytes: int = 0) -> tuple[int, int]:
        """``cuModuleLoadData(image)`` + ``cuModuleGetFunction(name)``; above 48 KiB of dynamic shared memory the
        function is allowed it (``cuFuncSetAttribute``). Returns (module, function) handles. ``what`` names the
        file in errors."""
        module, fn = _P(), _P()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), image), f"cuModuleLoadData({what})")
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()),
                   f"cuModuleGetFunction({name})")
        if shared_mem_bytes > 49152:
            self.check(self.lib.cuFuncSetAttribute(fn, MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_mem_bytes),
                       "cuFuncSetAttribute(max dynamic shared)")
        return int(module.value or 0), int(fn.value or 0)

    def launch(self, function: int, grid: tuple[int, int, int], threads: int, shared_mem_bytes: int, stream: int,
               params: int, cluster_x: Optional[int] = None) -> None:
        """Launch ``function`` on ``stream`` with ``params`` (address of the array of parameter addresses):
        ``cuLaunchKernel``, or ``cuLaunchKernelEx`` with a cluster of ``cluster_x`` blocks along x."""
        gx, gy, gz = grid
        if not cluster_x or cluster_x == 1:
            self.check(self.lib.cuLaunchKernel(function, gx, gy, gz, threads, 1, 1, shared_mem_bytes, stream, params,
                                               None), "cuLaunchKernel")
            return
        attr = LaunchAttribute(id=CLUSTER_DIMENSION)
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster_x, 1, 1
        config = LaunchConfig(gx * cluster_x, gy, gz, threads, 1, 1, shared_mem_bytes, stream,
                              ctypes.pointer(attr), 1)
        self.check(self.lib.cuLaunchKernelEx(ctypes.byref(config), function, params, None), "cuLaunchKernelEx")
