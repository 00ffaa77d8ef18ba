"""A ``.cu`` workload bundle (``kernelpilot-bundle/2``, kind ``cuda-so``): export and the loaded callable.

Export (:func:`export_cuda_workload`) builds, per distinct bucket config of the dispatch table, the shared library
kernelpilot builds for the kernel (:func:`kernelpilot.backends.cuda.build.build_shared`: ``solve`` plus the
``cudaDeviceSynchronize`` shim, ``-D`` defines from the config, ``-arch=sm_XYa``), checks its bytes against the hash
its build record holds, and copies them into the bundle, listed with their sha256 like cubins.

Load (:class:`CudaBundleKernel`, standard library only) reads every library once, checks its sha256 on the bytes
it keeps (a tampered file is refused by name) and, on the first call of a bucket, hands exactly those bytes to the
loader through an anonymous in-memory file, then calls ``solve`` with ctypes as the CUDA backend does
(buffers as ``data_ptr()``, integers and floats as their C types). ``solve``'s own ``cudaDeviceSynchronize`` is
kept (the shim's ``kp_set_sync_keep(1)``): a bundle runs the kernel as written, it is not a timing harness.
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from kernelpilot.bundle.reader import FORMAT_V2, MANIFEST, BundleError, BundleShapeOutOfRange
from kernelpilot.bundle.rules import lookup_functions
from kernelpilot.facts import utc_now_iso

__all__ = ["CudaBundleKernel", "export_cuda_workload"]

_LIB_FDS: list[int] = []


def _sidecar_literal(sidecar: Path, name: str) -> Any:
    """A module-level literal assignment of the sidecar, read with :mod:`ast` (the sidecar is not imported here).
    Raises BundleError when the name is assigned something that is not a literal."""
    if not sidecar.is_file():
        return None
    for node in ast.parse(sidecar.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError as exc:
                raise BundleError(f"{sidecar}: {name} is not a literal ({exc})",
                                  f"write {name} as a list literal to bundle the kernel") from exc
    return None


def export_cuda_workload(kernel: Path, dispatch: Any, dispatch_sha256: str, out: Path, *, target: str,
                         cc: tuple[int, int]) -> dict[str, Any]:
    """Write the libraries of a ``.cu`` workload bundle of ``dispatch`` into ``out``: one per distinct bucket
    config.

    Args:
        kernel: the ``.cu`` file (its sha256 already checked against the table's). dispatch: the table.
        dispatch_sha256: the table file's sha256. target / cc: ``sm_90`` and (9, 0).

    Returns:
        The manifest body (without ``bundle_id``): :func:`kernelpilot.bundle.export.export_workload` seals,
        verifies and writes it.

    Raises:
        BundleError: a dispatch key that is not an integer parameter of ``solve``; a built library whose bytes do
            not hash to its build record. CompileError: nvcc failed. ToolMissingError: no nvcc.
    """
    from kernelpilot.backends.cuda.build import build_shared, nvcc_version
    from kernelpilot.backends.cuda.signature import directives, parse_solve
    source = kernel.read_text(errors="replace")
    sig = parse_solve(source, kernel)
    consts = directives(source)
    side = kernel.with_suffix(".py")
    flags = _sidecar_literal(side, "NVCC_FLAGS") or consts.get("NVCC_FLAGS") or []
    incs = [(kernel.parent / p).resolve() for p in (_sidecar_literal(side, "INCLUDE_DIRS")
                                                   or consts.get("INCLUDE_DIRS") or [])]
    ints = {p.name for p in sig.params if p.kind == "int"}
    for k in dispatch.keys:
        if k not in ints:
            raise BundleError(f"{kernel.name}: dispatch key {k} is not an integer parameter of solve "
                              f"({', '.join(p.name for p in sig.params)})",
                              "dispatch a .cu kernel on solve's own dimensions")
    out.mkdir(parents=True, exist_ok=True)
    libraries, files, buckets, index = [], [], [], {}
    version = ""
    for b in dispatch.buckets:
        key = json.dumps(dict(b.config), sort_keys=True)
        if key not in index:
            built = build_shared(kernel, dict(b.config), target, extra_flags=list(flags), include_dirs=incs)
            data = Path(built.path).read_bytes()
            got = hashlib.sha256(data).hexdigest()
            if got != built.sha256:
                raise BundleError(f"{built.path}: hashes to {got}, its build record says {built.sha256}",
                                  "clear the kernelpilot build cache and export again")
            name = f"{kernel.stem}-{target}-{len(libraries)}.so"
            (out / name).write_bytes(data)
            files.append({"path": name, "sha256": got, "bytes": len(data)})
            index[key] = len(libraries)
            libraries.append({"file": name, "config": dict(b.config)})
            version = version or nvcc_version()
        buckets.append({"name": b.name, "ranges": {k: [int(b.ranges[k][0]), int(b.ranges[k][1])]
                                                   for k in dispatch.keys},
                        "config": dict(b.config), "library": index[key]})
    m = re.search(r"cuda_(\d+)\.\d+", version)
    manifest: dict[str, Any] = {
        "format": FORMAT_V2, "kind": "cuda-so", "kernel": kernel.name,
        "source_sha256": hashlib.sha256(kernel.read_bytes()).hexdigest(), "arch": target,
        "compute_capability": list(cc), "nvcc_arch": f"{target}a" if cc[0] >= 9 else target,
        "nvcc_version": version, "min_driver_cuda": f"{m.group(1)}.0" if m else "0.0",
        "created": utc_now_iso(),
        "solve": [{"name": p.name, "kind": p.kind, "ctype": p.ctype, "dtype": p.dtype, "ctypes_name": p.ctypes_name}
                  for p in sig.params],
        "dispatch": {"sha256": dispatch_sha256, "keys": list(dispatch.keys),
                     "key_inputs": {k: {"input": k, "dim": None} for k in dispatch.keys}, "arch": dispatch.arch,
                     "gpu_name": dispatch.gpu_name},
        "libraries": libraries, "buckets": buckets, "files": files}
    return manifest


def _dlopen_bytes(data: bytes, name: str) -> Any:
    """``ctypes.CDLL`` of exactly ``data`` (already hashed): through an anonymous in-memory file (``memfd``, kept
    open for the process's life, as a loaded library is never unloaded), else a private temporary copy."""
    if hasattr(os, "memfd_create"):
        try:
            fd = os.memfd_create(f"kp-bundle-{name}", 0)
        except OSError:
            fd = -1
        if fd >= 0:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            _LIB_FDS.append(fd)
            return ctypes.CDLL(f"/proc/self/fd/{fd}")
    tmp = tempfile.mkdtemp(prefix="kp-bundle-so-")
    path = Path(tmp) / name
    path.write_bytes(data)
    return ctypes.CDLL(str(path))


class CudaBundleKernel:
    """A loaded ``.cu`` workload bundle: call it like ``solve`` (its parameters, positional or by name, tensors for
    buffers). The call's shape (``solve``'s integer parameters named by the dispatch keys) picks the bucket and its
    library; ``solve`` runs on the calling thread.

    Attributes:
        bundle: the folder. kernel: the ``.cu`` file's name. params: ``solve``'s parameters (dicts). keys: the
            dispatch keys. buckets / libraries: the manifest's.

    Raises (when called):
        BundleShapeOutOfRange: the shape is outside every range (the shape and the ranges named).
        BundleError: a missing parameter, a buffer that is not a contiguous CUDA tensor of ``solve``'s element
            type, a library without ``solve``, a launch error ``solve`` reported.
    """

    def __init__(self, bundle: Path, data: dict[str, Any], files: dict[str, bytes]) -> None:
        where = str(bundle / MANIFEST)
        try:
            self.kernel = str(data["kernel"])
            self.params = [dict(p) for p in data["solve"]]
            self.keys = [str(k) for k in data["dispatch"]["keys"]]
            self.buckets = [dict(b) for b in data["buckets"]]
            self.libraries = [dict(lib) for lib in data["libraries"]]
            for b in self.buckets:
                self.libraries[int(b["library"])]["file"]  # noqa: B018 - a bucket names an existing library
            for p in self.params:
                getattr(ctypes, str(p["ctypes_name"]))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise BundleError(f"{where}: breaks the manifest schema ({type(exc).__name__}: {exc})",
                              "run `kernelpilot bundle verify` on it, or export the bundle again") from exc
        self.bundle, self._files = bundle, files
        self._table = [{"name": b["name"], "ranges": b["ranges"]} for b in self.buckets]
        self._libs: dict[int, Any] = {}

    def bind(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``solve``'s parameters by name. Raises BundleError for too many or missing ones."""
        names = [p["name"] for p in self.params]
        if len(args) > len(names):
            raise BundleError(f"{self.kernel}: solve takes {len(names)} parameters ({', '.join(names)}), got "
                              f"{len(args)}")
        inputs = dict(zip(names, args))
        inputs.update({k: v for k, v in kwargs.items() if k in names})
        missing = [n for n in names if n not in inputs]
        if missing:
            raise BundleError(f"{self.kernel}: missing parameter(s) {', '.join(missing)}",
                              f"call it as solve({', '.join(names)})")
        return inputs

    def select(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The bucket serving the call (the dispatch table's lookup on the keys' values). Raises
        BundleShapeOutOfRange naming the shape and every bucket's ranges."""
        lk = lookup_functions()
        env = {k: inputs[k] for k in self.keys}
        index = lk.find_bucket(env, self.keys, self._table)
        if index < 0:
            raise BundleShapeOutOfRange(f"{self.kernel}: {lk.miss_message(env, self.keys, self._table)}",
                                        "tune and export a workload that holds this shape")
        return self.buckets[index]

    def library(self, index: int) -> Any:
        """The loaded library ``index`` (``solve``'s argument types set, the shim told to keep the host wait).
        Raises BundleError when it exports no ``solve``."""
        if index not in self._libs:
            lib_file = self.libraries[index]["file"]
            lib = _dlopen_bytes(self._files[lib_file], lib_file)
            try:
                solve = lib.solve
            except AttributeError:
                raise BundleError(f"{self.bundle / lib_file}: exports no solve", "export the bundle again") from None
            solve.argtypes = [getattr(ctypes, p["ctypes_name"]) for p in self.params]
            solve.restype = None
            lib.kp_error_string.restype = ctypes.c_char_p
            lib.kp_set_sync_keep(1)
            self._libs[index] = lib
        return self._libs[index]

    def arguments(self, inputs: dict[str, Any]) -> list[Any]:
        """``solve``'s ctypes arguments. Raises BundleError for a buffer that is not a contiguous CUDA tensor of the
        parameter's element type, or a scalar of the wrong kind (both named)."""
        out = []
        for p in self.params:
            v = inputs[p["name"]]
            if p["kind"] != "buffer":
                if p["kind"] == "int" and (isinstance(v, bool) or not isinstance(v, int)):
                    raise BundleError(f"{self.kernel}: {p['name']} must be an int ({p['ctype']}), got {v!r}")
                out.append(getattr(ctypes, p["ctypes_name"])(v))
                continue
            dtype = str(getattr(v, "dtype", "")).replace("torch.", "")
            if not getattr(v, "is_cuda", False):
                raise BundleError(f"{self.kernel}: {p['name']} must be a CUDA tensor (solve takes {p['ctype']}*)",
                                  "move the inputs to the GPU")
            if dtype != p["dtype"]:
                raise BundleError(f"{self.kernel}: {p['name']} is {dtype}, solve takes {p['ctype']}* ({p['dtype']})")
            if not v.is_contiguous():
                raise BundleError(f"{self.kernel}: {p['name']} is not contiguous: solve sees raw memory",
                                  "pass .contiguous() tensors")
            out.append(ctypes.c_void_p(v.data_ptr()))
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        inputs = self.bind(args, kwargs)
        b = self.select(inputs)
        values = self.arguments(inputs)
        lib = self.library(int(b["library"]))
        lib.solve(*values)
        code = lib.kp_last_error()
        if code:
            raise BundleError(f"{self.kernel}: solve's launch failed: CUDA error {code}: "
                              f"{lib.kp_error_string(code).decode(errors='replace')}",
                              "check the grid and shared memory solve launches with at this shape")


def load_cuda(root: Path, data: dict[str, Any], files: dict[str, bytes]) -> CudaBundleKernel:
    """The callable of a ``cuda-so`` manifest whose files were read and hashed (:func:`kernelpilot.bundle.load`)."""
    return CudaBundleKernel(root, data, files)

