"""Issue 3, "occupancy you can trust": on the GPU, the occupancy model and the max-threads rule equal the CUDA driver
for EVERY config of EVERY example (``src/kernelpilot/examples/*.py``).

What runs, on the device (test marked ``gpu``):

1. **Every config.** Each example's TUNABLES space is enumerated in full (``itertools.product`` order; a config
   breaking one of the file's CONSTRAINTS is left out). vector_add 24, layer_norm 35, softmax 315, matmul 1162
   (1152 tiled, 10 persistent TMA): 1536 configs.
2. **Compiled as ``kernelpilot inspect`` does.** :func:`kernelpilot.profile.static.iter_tasks` captures each
   config's launch at the example's SHAPE, compiles it with Triton for the device's arch and reads the binary
   (``cuobjdump`` registers, Triton's ``metadata.shared``, ``num_warps``) in a ``ProcessPoolExecutor`` over every
   CPU core (``KP_OCC_WORKERS``), slow configs first; results stream back as they finish. The SASS disassembly is
   skipped (``sass=False``; occupancy does not need it). A config ``run_kernel`` refuses (ValueError) is counted
   ``rejected``; one whose shared memory exceeds the per-block maximum is counted ``out_of_resources`` (Triton
   raises OutOfResources before loading it) and checked against the device's own opt-in maximum.
3. **Asked of the driver.** Each cubin is loaded with ``cuModuleLoadData``, its function taken with
   ``cuModuleGetFunction`` and set up as Triton 3.6 ``loadBinary`` (``backends/nvidia/driver.c``) does: above
   48 KB of dynamic shared memory, ``cuFuncSetCacheConfig(PREFER_SHARED)`` and
   ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` = opt-in maximum - static shared. Then
   ``cuOccupancyMaxActiveBlocksPerMultiprocessor(function, num_warps * 32, metadata.shared)`` (the block and the
   dynamic shared memory Triton launches with) is compared with the model's ``blocks_per_sm`` and
   ``cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)`` with ``max_threads_per_block``; NUM_REGS and
   LOCAL_SIZE_BYTES are recorded beside the cuobjdump figures. cuda-python (``from cuda.bindings import driver``,
   12.x and 13.x; each call returns ``(CUresult, value...)``), else the older ``cuda.cuda`` module, else
   ``libcuda.so.1`` through ctypes.

Environment: ``KP_OCC_EXAMPLES=vector_add,softmax`` (a subset, to split the run in two), ``KP_OCC_LIMIT=N`` (per
example: DEFAULT_CONFIG plus a seeded sample), ``KP_OCC_SHARD=i/n`` (every n-th job from the i-th),
``KP_OCC_WORKERS`` (default: CPU cores), ``KP_OCC_DEADLINE_S`` (stop compiling after this many seconds, default
450; the test then fails listing the unfinished count), ``KP_OCC_OUT=path.json`` (the summary, rewritten as results
arrive, so a killed run leaves what it had). The default is every config of every example.

On the CPU the same job building, compile and comparison code runs against a stand-in driver (tests below without
the ``gpu`` mark), so the device run cannot fail on a plain bug.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = ROOT / "src" / "kernelpilot" / "examples"
#: Size of each example's space (the product of its candidate lists, less configs breaking its CONSTRAINTS:
#: matmul's keep 10 of its 1152 TMA == 1 configs).
EXPECTED_SPACE = {"vector_add": 24, "layer_norm": 35, "softmax": 315, "matmul": 1162}
#: Seed of the KP_OCC_LIMIT sample (a str seed is hashed with SHA-512 by ``random``: the same on every machine).
SAMPLE_SEED = "kernelpilot-issue3-occupancy"
#: Triton sets the large-shared-memory function attributes above this dynamic size (Triton 3.6 driver.c).
TRITON_SHARED_OPTIN_THRESHOLD_BYTES = 49152


# ---------------------------------------------------------------------------------------------------------------
# jobs


def example_names() -> list[str]:
    """The example kernel files' names (``src/kernelpilot/examples/*.py``), sorted."""
    return sorted(p.stem for p in EXAMPLES_DIR.glob("*.py") if not p.stem.startswith("_"))


def read_space_literals(path: Path) -> tuple[dict[str, list[Any]], dict[str, Any], list[str]]:
    """(TUNABLES, DEFAULT_CONFIG, CONSTRAINTS) of a kernel file read with ``ast`` (no import: runs anywhere).

    Raises:
        ValueError: TUNABLES is missing or not a literal.
    """
    tree = ast.parse(path.read_text())
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("TUNABLES", "DEFAULT_CONFIG", "CONSTRAINTS"):
                    found[target.id] = ast.literal_eval(node.value)
    if "TUNABLES" not in found:
        raise ValueError(f"{path}: no literal TUNABLES")
    tunables = found["TUNABLES"]
    default = found.get("DEFAULT_CONFIG") or {k: v[0] for k, v in tunables.items()}
    return tunables, default, list(found.get("CONSTRAINTS") or [])


def space_of(tunables: dict[str, list[Any]], constraints: list[str] = ()) -> list[dict[str, Any]]:
    """Every config of the product space, in ``itertools.product`` order, keeping those that satisfy every constraint.

    A constraint is a Python expression over tunable names (the kernel-file contract); one that names something else
    (a device limit such as ``max_shared_mem_per_block``) cannot be judged here and filters nothing.
    """
    keys = list(tunables)
    compiled = [compile(c, f"CONSTRAINTS[{i}]", "eval") for i, c in enumerate(constraints)]
    out = []
    for values in itertools.product(*(tunables[k] for k in keys)):
        config = dict(zip(keys, values))
        ok = True
        for code in compiled:
            try:
                ok = bool(eval(code, {"__builtins__": {"min": min, "max": max, "abs": abs}}, dict(config)))
            except NameError:
                ok = True
            if not ok:
                break
        if ok:
            out.append(config)
    return out


def select_jobs(examples: Optional[list[str]] = None, limit: Optional[int] = None,
                shard: Optional[tuple[int, int]] = None) -> list[dict[str, Any]]:
    """The jobs ``{"index", "example", "kernel_path", "config", "is_default"}``: every config of every example (or
    of ``examples``), in example then space order.

    Args:
        examples: example names (default: all of :func:`example_names`).
        limit: per example, at most this many configs: DEFAULT_CONFIG plus a seeded sample, kept in space order.
        shard: ``(i, n)``: only the jobs whose index is ``i`` modulo ``n`` (indices count the selection above).

    Raises:
        ValueError: an unknown example, ``limit < 1`` or a bad shard.
    """
    names = example_names()
    chosen = examples or names
    unknown = [e for e in chosen if e not in names]
    if unknown:
        raise ValueError(f"unknown examples {unknown} (known: {names})")
    if limit is not None and limit < 1:
        raise ValueError(f"KP_OCC_LIMIT={limit} must be at least 1")
    if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
        raise ValueError(f"KP_OCC_SHARD={shard[0]}/{shard[1]}: want i/n with 0 <= i < n")
    rng = random.Random(SAMPLE_SEED)
    jobs: list[dict[str, Any]] = []
    for name in chosen:
        path = EXAMPLES_DIR / f"{name}.py"
        tunables, default, constraints = read_space_literals(path)
        configs = space_of(tunables, constraints)
        if limit is not None and limit < len(configs):
            rest = [i for i, c in enumerate(configs) if c != default]
            keep = set(rng.sample(rest, limit - 1 if default in configs else limit))
            configs = [c for i, c in enumerate(configs) if i in keep or c == default]
        for config in configs:
            jobs.append({"index": len(jobs), "example": name, "kernel_path": str(path), "config": config,
                         "is_default": config == default})
    if shard is not None:
        jobs = [j for j in jobs if j["index"] % shard[1] == shard[0]]
    return jobs


def jobs_from_env(env: Optional[dict[str, str]] = None) -> list[dict[str, Any]]:
    """:func:`select_jobs` as ``KP_OCC_EXAMPLES``, ``KP_OCC_LIMIT`` and ``KP_OCC_SHARD`` ask (default: everything)."""
    env = os.environ if env is None else env
    examples = [e.strip() for e in env.get("KP_OCC_EXAMPLES", "").split(",") if e.strip()] or None
    limit = int(env["KP_OCC_LIMIT"]) if env.get("KP_OCC_LIMIT") else None
    shard = None
    if env.get("KP_OCC_SHARD"):
        i, n = env["KP_OCC_SHARD"].split("/")
        shard = (int(i), int(n))
    return select_jobs(examples, limit, shard)


def compile_cost(config: dict[str, Any]) -> float:
    """A rough relative compile cost, to start the slow configs first: tile elements (product of the ``BLOCK*``
    tunables) per warp, times pipeline stages (big tiles on few warps spill, and ptxas is slowest there)."""
    tile = math.prod(v for k, v in config.items() if k.upper().startswith("BLOCK") and isinstance(v, int)) or 1
    return tile / config.get("num_warps", 4) * config.get("num_stages", 1) * config.get("ROWS_PER_PROGRAM", 1)


def compile_order(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Jobs grouped by example (a worker keeps one example's inputs), the smallest space first, and within one
    example the costliest configs first, so the pool ends on short compiles.

    Measured cold on a 2-core CPU (docs/cpu-runs/inspect-all-configs.md): the slowest compiles are softmax's
    one-warp, four-row tiles (30-46 s each, ptxas on heavy spills), matmul's slowest 8.5 s; with the large matmul
    space last, softmax's long ones start in the first seconds instead of at the end of the run.
    """
    by_example: dict[str, list[dict[str, Any]]] = {}
    for job in jobs:
        by_example.setdefault(job["example"], []).append(job)
    groups = sorted(by_example.values(), key=lambda js: (len(js), js[0]["example"]))
    return [j for group in groups for j in sorted(group, key=lambda j: (-compile_cost(j["config"]), j["index"]))]


def static_tasks(jobs: list[dict[str, Any]], arch: str, save_dir: Path) -> list[dict[str, Any]]:
    """The :func:`kernelpilot.profile.static.run_tasks` task of each job: its config at the example's SHAPE, for
    ``arch``, cubin saved under ``save_dir``, no SASS, no ``ptxas -v`` rerun."""
    return [{"kernel_path": j["kernel_path"], "config": dict(j["config"]), "arch": arch, "shape": {},
             "keep_sass": False, "save_dir": str(save_dir), "spill_bytes": False, "sass": False} for j in jobs]


# ---------------------------------------------------------------------------------------------------------------
# the driver


# CUfunction_attribute and CUdevice_attribute values of cuda.h (for the ctypes path), and CU_FUNC_CACHE_PREFER_SHARED.
_FUNC_ATTR = {"MAX_THREADS_PER_BLOCK": 0, "SHARED_SIZE_BYTES": 1, "LOCAL_SIZE_BYTES": 3, "NUM_REGS": 4,
              "MAX_DYNAMIC_SHARED_SIZE_BYTES": 8}
_DEV_ATTR = {"MULTIPROCESSOR_COUNT": 16, "COMPUTE_CAPABILITY_MAJOR": 75, "COMPUTE_CAPABILITY_MINOR": 76,
             "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 81, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 97}
_CU_FUNC_CACHE_PREFER_SHARED = 2


class CudaDriver:
    """The few CUDA driver calls this test needs, on device 0's primary context.

    cuda-python's ``cuda.bindings.driver`` (or the older ``cuda.cuda``) mirrors the C API with outputs returned:
    ``cuModuleLoadData(image) -> (err, CUmodule)``, ``cuModuleGetFunction(hmod, name: bytes) -> (err, CUfunction)``,
    ``cuFuncGetAttribute(attrib, hfunc) -> (err, int)``, ``cuFuncSetAttribute(hfunc, attrib, value) -> (err,)``,
    ``cuFuncSetCacheConfig(hfunc, config) -> (err,)``,
    ``cuOccupancyMaxActiveBlocksPerMultiprocessor(func, blockSize, dynamicSMemSize) -> (err, int)``,
    ``cuDeviceGetAttribute(attrib, dev) -> (err, int)``. Without it, ``libcuda.so.1`` through ctypes.

    Args:
        cu: the bindings module to use (tests pass a stand-in); None imports cuda-python, else uses ctypes.
    """

    def __init__(self, cu: Any = None) -> None:
        self.api = "given"
        if cu is None:
            try:
                from cuda.bindings import driver as cu  # cuda-python 12.x / 13.x
                self.api = "cuda.bindings.driver"
            except ImportError:
                try:
                    from cuda import cuda as cu  # cuda-python 11.x / early 12.x
                    self.api = "cuda.cuda"
                except ImportError:
                    cu = None
                    self.api = "ctypes libcuda.so.1"
        self._cu = cu
        self._lib: Any = None
        if cu is None:
            import ctypes

            self._lib = ctypes.CDLL("libcuda.so.1")
        self._call("cuInit", 0)
        self.device = self._call("cuDeviceGet", 0)
        self._context = self._call("cuDevicePrimaryCtxRetain", self.device)
        self._call("cuCtxSetCurrent", self._context)
        self.compute_capability = (self.device_attribute("COMPUTE_CAPABILITY_MAJOR"),
                                   self.device_attribute("COMPUTE_CAPABILITY_MINOR"))
        self.sm_count = self.device_attribute("MULTIPROCESSOR_COUNT")
        self.shared_optin_bytes = self.device_attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        self.shared_per_sm_bytes = self.device_attribute("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR")
        self.name = self._device_name()

    # -- plumbing
    def _check(self, what: str, result: Any) -> Any:
        """Unpack a cuda-python ``(err, *values)`` tuple; raise on an error."""
        err, *values = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            raise RuntimeError(f"{what} failed: {err!r}")
        return values[0] if len(values) == 1 else (tuple(values) or None)

    def _call(self, name: str, *args: Any) -> Any:
        if self._cu is not None:
            return self._check(name, getattr(self._cu, name)(*args))
        return self._call_c(name, *args)

    def _call_c(self, name: str, *args: Any) -> Any:
        import ctypes

        lib = self._lib
        if name == "cuInit":
            self._c(name, lib.cuInit(ctypes.c_uint(args[0])))
            return None
        if name == "cuDeviceGet":
            dev = ctypes.c_int(0)
            self._c(name, lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(args[0])))
            return dev.value
        if name == "cuDevicePrimaryCtxRetain":
            ctx = ctypes.c_void_p(0)
            self._c(name, lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), ctypes.c_int(args[0])))
            return ctx
        if name == "cuCtxSetCurrent":
            self._c(name, lib.cuCtxSetCurrent(args[0]))
            return None
        raise NotImplementedError(name)

    @staticmethod
    def _c(what: str, rc: int) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def _device_name(self) -> str:
        try:
            if self._cu is not None:
                raw = self._check("cuDeviceGetName", self._cu.cuDeviceGetName(128, self.device))
            else:
                import ctypes

                buf = ctypes.create_string_buffer(128)
                self._c("cuDeviceGetName", self._lib.cuDeviceGetName(buf, 128, ctypes.c_int(self.device)))
                raw = buf.value
            return bytes(raw).split(b"\0", 1)[0].decode(errors="replace")
        except Exception as exc:  # noqa: BLE001 -- the name is only reported
            return f"? ({exc})"

    # -- queries
    def device_attribute(self, key: str) -> int:
        """``cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_<key>, device)``."""
        if self._cu is not None:
            attr = getattr(self._cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{key}")
            return int(self._check(f"cuDeviceGetAttribute({key})", self._cu.cuDeviceGetAttribute(attr, self.device)))
        import ctypes

        value = ctypes.c_int(0)
        self._c(f"cuDeviceGetAttribute({key})", self._lib.cuDeviceGetAttribute(
            ctypes.byref(value), ctypes.c_int(_DEV_ATTR[key]), ctypes.c_int(self.device)))
        return value.value

    def function_attribute(self, function: Any, key: str) -> int:
        """``cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_<key>, function)``."""
        if self._cu is not None:
            attr = getattr(self._cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{key}")
            return int(self._check(f"cuFuncGetAttribute({key})", self._cu.cuFuncGetAttribute(attr, function)))
        import ctypes

        value = ctypes.c_int(0)
        self._c(f"cuFuncGetAttribute({key})", self._lib.cuFuncGetAttribute(
            ctypes.byref(value), ctypes.c_int(_FUNC_ATTR[key]), function))
        return value.value

    def load(self, cubin: bytes, name: str, dynamic_shared_bytes: int) -> tuple[Any, Any]:
        """Load a cubin and set its function up for ``dynamic_shared_bytes`` as Triton 3.6 ``loadBinary`` does.

        Returns:
            (module, function) handles.
        """
        if self._cu is not None:
            cu = self._cu
            module = self._check("cuModuleLoadData", cu.cuModuleLoadData(cubin))
            function = self._check("cuModuleGetFunction", cu.cuModuleGetFunction(module, name.encode()))
        else:
            import ctypes

            module, function = ctypes.c_void_p(0), ctypes.c_void_p(0)
            self._c("cuModuleLoadData", self._lib.cuModuleLoadData(ctypes.byref(module), cubin))
            self._c("cuModuleGetFunction", self._lib.cuModuleGetFunction(ctypes.byref(function), module,
                                                                         name.encode()))
        if dynamic_shared_bytes > TRITON_SHARED_OPTIN_THRESHOLD_BYTES and \
                self.shared_optin_bytes > TRITON_SHARED_OPTIN_THRESHOLD_BYTES:
            static = self.function_attribute(function, "SHARED_SIZE_BYTES")
            if self._cu is not None:
                cu = self._cu
                self._check("cuFuncSetCacheConfig", cu.cuFuncSetCacheConfig(
                    function, cu.CUfunc_cache.CU_FUNC_CACHE_PREFER_SHARED))
                self._check("cuFuncSetAttribute", cu.cuFuncSetAttribute(
                    function, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    self.shared_optin_bytes - static))
            else:
                import ctypes

                self._c("cuFuncSetCacheConfig", self._lib.cuFuncSetCacheConfig(
                    function, ctypes.c_int(_CU_FUNC_CACHE_PREFER_SHARED)))
                self._c("cuFuncSetAttribute", self._lib.cuFuncSetAttribute(
                    function, ctypes.c_int(_FUNC_ATTR["MAX_DYNAMIC_SHARED_SIZE_BYTES"]),
                    ctypes.c_int(self.shared_optin_bytes - static)))
        return module, function

    def unload(self, module: Any) -> None:
        """``cuModuleUnload(module)``."""
        if self._cu is not None:
            self._check("cuModuleUnload", self._cu.cuModuleUnload(module))
        else:
            self._c("cuModuleUnload", self._lib.cuModuleUnload(module))

    def max_active_blocks(self, function: Any, threads_per_block: int, dynamic_shared_bytes: int) -> int:
        """``cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, dynamic shared bytes)``: blocks per SM."""
        if self._cu is not None:
            return int(self._check("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                   self._cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                       function, threads_per_block, dynamic_shared_bytes)))
        import ctypes

        blocks = ctypes.c_int(0)
        self._c("cuOccupancyMaxActiveBlocksPerMultiprocessor", self._lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(blocks), function, ctypes.c_int(threads_per_block), ctypes.c_size_t(dynamic_shared_bytes)))
        return blocks.value

    def describe(self) -> dict[str, Any]:
        """What the JSON records about the device."""
        return {"device": self.name, "compute_capability": list(self.compute_capability), "sm_count": self.sm_count,
                "shared_optin_bytes": self.shared_optin_bytes, "shared_per_sm_bytes": self.shared_per_sm_bytes,
                "api": self.api}


# ---------------------------------------------------------------------------------------------------------------
# compile, ask the driver, compare


def record_of(job: dict[str, Any], result: Any) -> dict[str, Any]:
    """The JSON record of one job from its static result: status ``ok`` / ``rejected`` (run_kernel refused it) /
    ``out_of_resources`` / ``error``, and the model's numbers."""
    rec: dict[str, Any] = {"index": job["index"], "example": job["example"], "config": job["config"]}
    if result.status == "ok":
        occ = result.occupancy
        rec.update(status="ok", kernel=result.kernel_name, regs=result.registers_per_thread,
                   local_bytes=result.local_mem_bytes_per_thread, shared_bytes=result.shared_mem_bytes,
                   threads=result.threads_per_block, num_stages=result.num_stages, compile_s=result.compile_s,
                   model_blocks=occ.blocks_per_sm if occ else None, model_limiter=occ.limiter if occ else None,
                   model_occupancy_pct=occ.occupancy_pct if occ else None,
                   model_max_threads=result.max_threads_per_block, cubin_path=result.cubin_path)
    elif result.stage == "capture" and result.error_type == "ValueError":
        rec.update(status="rejected", message=result.message.splitlines()[0] if result.message else "")
    elif result.stage == "resources" and result.error_type == "OutOfResources":
        rec.update(status="out_of_resources", message=result.message.splitlines()[0] if result.message else "",
                   shared_bytes=result.shared_mem_bytes, regs=result.registers_per_thread)
    else:
        rec.update(status="error", stage=result.stage, error_type=result.error_type, message=result.message[:2000])
    return rec


def ask_driver(rec: dict[str, Any], driver: Any) -> None:
    """Load ``rec``'s cubin, ask the driver, and add ``driver_*`` fields and the ``equal`` verdicts to ``rec``.

    For an ``out_of_resources`` record over shared memory, ``confirmed`` says whether the device's opt-in maximum is
    indeed below the shared memory the config needs.
    """
    if rec["status"] == "out_of_resources":
        if "shared memory" in rec.get("message", ""):
            rec["confirmed"] = rec["shared_bytes"] > driver.shared_optin_bytes
        return
    if rec["status"] != "ok":
        return
    try:
        cubin = Path(rec["cubin_path"]).read_bytes()
        module, function = driver.load(cubin, rec["kernel"], rec["shared_bytes"])
        try:
            rec["driver_blocks"] = driver.max_active_blocks(function, rec["threads"], rec["shared_bytes"])
            rec["driver_max_threads"] = driver.function_attribute(function, "MAX_THREADS_PER_BLOCK")
            rec["driver_regs"] = driver.function_attribute(function, "NUM_REGS")
            rec["driver_local_bytes"] = driver.function_attribute(function, "LOCAL_SIZE_BYTES")
            rec["driver_static_shared_bytes"] = driver.function_attribute(function, "SHARED_SIZE_BYTES")
        finally:
            driver.unload(module)
    except Exception as exc:  # noqa: BLE001 -- recorded; the test fails on any "error"
        rec.update(status="error", stage="driver", error_type=type(exc).__name__, message=str(exc)[:2000],
                   traceback=traceback.format_exc()[-2000:])
        return
    rec["blocks_equal"] = rec["model_blocks"] == rec["driver_blocks"]
    rec["max_threads_equal"] = rec["model_max_threads"] == rec["driver_max_threads"]
    rec["regs_equal"] = rec["regs"] == rec["driver_regs"]
    rec["equal"] = rec["blocks_equal"] and rec["max_threads_equal"]


def summarize(jobs: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts over the records: compared / equal (blocks and max threads), rejected, out_of_resources, errors,
    unfinished; per example; the mismatching job indices."""
    done = {r["index"] for r in records}
    compared = [r for r in records if r["status"] == "ok" and "equal" in r]
    examples = sorted({j["example"] for j in jobs})
    by_status = {s: sum(r["status"] == s for r in records) for s in ("ok", "rejected", "out_of_resources", "error")}
    return {
        "jobs": len(jobs),
        "compared": len(compared),
        "equal": sum(r["equal"] for r in compared),
        "blocks_equal": sum(r["blocks_equal"] for r in compared),
        "max_threads_equal": sum(r["max_threads_equal"] for r in compared),
        "regs_equal": sum(r["regs_equal"] for r in compared),
        "rejected_by_run_kernel": by_status["rejected"],
        "out_of_resources": by_status["out_of_resources"],
        "out_of_resources_confirmed": sum(bool(r.get("confirmed")) for r in records),
        "errors": by_status["error"],
        "unfinished": len(jobs) - len(done),
        "by_example": {e: {"jobs": sum(j["example"] == e for j in jobs),
                           "compared": sum(r["example"] == e for r in compared),
                           "equal": sum(r["example"] == e and r["equal"] for r in compared),
                           "rejected": sum(r["example"] == e and r["status"] == "rejected" for r in records),
                           "out_of_resources": sum(r["example"] == e and r["status"] == "out_of_resources"
                                                   for r in records)} for e in examples},
        "mismatches": sorted(r["index"] for r in compared if not r["equal"]),
        "error_indices": sorted(r["index"] for r in records if r["status"] == "error"),
    }


def write_json(path: Optional[str | Path], report: dict[str, Any]) -> None:
    """Write ``report`` to ``path`` atomically (nothing when ``path`` is empty)."""
    if not path:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str))
    tmp.replace(path)


def run_comparison(jobs: list[dict[str, Any]], driver: Any, *, arch: str, workers: Optional[int] = None,
                   deadline_s: float = 450.0, out_path: Optional[str | Path] = None,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Compile every job for ``arch`` in parallel and, as each finishes, ask ``driver`` about it.

    Args:
        jobs: from :func:`select_jobs`.
        driver: a :class:`CudaDriver` (or a stand-in with ``load``, ``unload``, ``max_active_blocks``,
            ``function_attribute``, ``shared_optin_bytes`` and ``describe``).
        arch: the compile target (the device's, ``sm_90``).
        workers: compile processes (default: CPU cores).
        deadline_s: stop handing out compiles after this many seconds (the rest count as unfinished).
        out_path: where to (re)write the JSON report as results arrive.
        log: progress lines.

    Returns:
        The report: device, versions, timing, ``summary`` (:func:`summarize`) and one record per finished job.
    """
    import triton

    from kernelpilot.profile import static

    started = time.monotonic()
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    ordered = compile_order(jobs)
    records: list[dict[str, Any]] = []
    report: dict[str, Any] = {
        "what": ("kernelpilot inspect's occupancy model (blocks/SM) and max threads per block vs the driver's "
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor and CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "
                 "every config of every example at its SHAPE"),
        **driver.describe(), "arch": arch, "triton": triton.__version__, "python": sys.version.split()[0],
        "workers": workers, "env": {k: v for k, v in os.environ.items() if k.startswith("KP_OCC_")},
    }
    last_write = 0.0
    with tempfile.TemporaryDirectory(prefix="kp-occ-") as tmp:
        tasks = static_tasks(ordered, arch, Path(tmp))
        stream = static.iter_tasks(tasks, max_workers=workers, in_process=False)
        try:
            for n, (i, result) in enumerate(stream, 1):
                rec = record_of(ordered[i], result)
                ask_driver(rec, driver)
                rec.pop("cubin_path", None)
                records.append(rec)
                elapsed = time.monotonic() - started
                if n % max(1, len(tasks) // 20) == 0 or n == len(tasks):
                    ok = [r for r in records if "equal" in r]
                    log(f"[{elapsed:5.0f} s] {n}/{len(tasks)} done; {sum(r['equal'] for r in ok)}/{len(ok)} equal")
                if out_path and (elapsed - last_write > 15 or n == len(tasks)):
                    last_write = elapsed
                    write_json(out_path, {**report, "seconds": round(elapsed, 1), "partial": True,
                                          "summary": summarize(jobs, records), "results": records})
                if elapsed > deadline_s and n < len(tasks):
                    log(f"deadline {deadline_s:.0f} s passed with {len(tasks) - n} configs not done; stopping")
                    break
        finally:
            stream.close()  # cancels the compiles not started
    records.sort(key=lambda r: r["index"])
    report.update(seconds=round(time.monotonic() - started, 1), partial=False, summary=summarize(jobs, records),
                  results=records)
    write_json(out_path, report)
    return report


# ---------------------------------------------------------------------------------------------------------------
# CPU tests: the job list, the compile path and the comparison against a stand-in driver


def test_jobs_cover_every_config_of_every_example():
    jobs = select_jobs()
    counts = {e: sum(j["example"] == e for j in jobs) for e in EXPECTED_SPACE}
    assert set(example_names()) == set(EXPECTED_SPACE) and counts == EXPECTED_SPACE
    assert len(jobs) == sum(EXPECTED_SPACE.values()) == 1536
    assert [j["index"] for j in jobs] == list(range(len(jobs)))
    for name in EXPECTED_SPACE:
        configs = [json.dumps(j["config"], sort_keys=True) for j in jobs if j["example"] == name]
        assert len(set(configs)) == len(configs)
        assert sum(j["is_default"] for j in jobs if j["example"] == name) == 1
    assert jobs_from_env({}) == jobs


def test_jobs_can_be_split_by_example_limit_and_shard():
    small = jobs_from_env({"KP_OCC_EXAMPLES": "vector_add,layer_norm,softmax"})
    big = jobs_from_env({"KP_OCC_EXAMPLES": "matmul"})
    assert len(small) == 24 + 35 + 315 and len(big) == 1162
    full = select_jobs()
    assert sorted(json.dumps([j["example"], j["config"]]) for j in small + big) == \
        sorted(json.dumps([j["example"], j["config"]]) for j in full)
    limited = jobs_from_env({"KP_OCC_LIMIT": "3"})
    assert {e: sum(j["example"] == e for j in limited) for e in EXPECTED_SPACE} == dict.fromkeys(EXPECTED_SPACE, 3)
    assert all(sum(j["is_default"] for j in limited if j["example"] == e) == 1 for e in EXPECTED_SPACE)
    assert limited == jobs_from_env({"KP_OCC_LIMIT": "3"})  # seeded
    halves = [jobs_from_env({"KP_OCC_SHARD": f"{i}/2"}) for i in (0, 1)]
    assert sorted(j["index"] for h in halves for j in h) == list(range(1536))
    with pytest.raises(ValueError):
        select_jobs(["no_such_example"])
    with pytest.raises(ValueError):
        select_jobs(shard=(2, 2))


def test_constraints_filter_the_space():
    tunables = {"BLOCK_M": [32, 64, 128], "num_stages": [2, 3]}
    space = space_of(tunables, ["BLOCK_M * num_stages <= 192", "num_stages <= max_stages_of_the_device"])
    assert space == [{"BLOCK_M": 32, "num_stages": 2}, {"BLOCK_M": 32, "num_stages": 3},
                     {"BLOCK_M": 64, "num_stages": 2}, {"BLOCK_M": 64, "num_stages": 3}]
    assert len(space_of(tunables)) == 6


def test_compile_order_starts_with_the_costliest_configs():
    ordered = compile_order(select_jobs())
    assert len(ordered) == 1536
    examples_in_order = [e for e, _ in itertools.groupby(j["example"] for j in ordered)]
    assert examples_in_order == ["vector_add", "layer_norm", "softmax", "matmul"]  # each in one run of jobs
    for name in ("softmax", "matmul"):
        costs = [compile_cost(j["config"]) for j in ordered if j["example"] == name]
        assert costs == sorted(costs, reverse=True)
    first_softmax = next(j["config"] for j in ordered if j["example"] == "softmax")
    # the slowest softmax compiles measured (one warp, four rows, BLOCK_N 4096 or 8192) come first
    assert first_softmax["num_warps"] == 1 and first_softmax["ROWS_PER_PROGRAM"] == 4
    assert first_softmax["BLOCK_N"] >= 4096


class FakeCudaModule:
    """A stand-in for ``cuda.bindings.driver`` that checks the argument order the real bindings take and answers
    ``(CUresult, value)`` tuples, as cuda-python does (values: an H100's)."""

    class CUresult(int):
        pass

    class CUdevice_attribute:  # noqa: N801 -- the bindings' name
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = "sm_count"
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = "cc_major"
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = "cc_minor"
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = "smem_sm"
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = "smem_optin"

    class CUfunction_attribute:  # noqa: N801
        CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = "max_threads"
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = "static_shared"
        CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = "local"
        CU_FUNC_ATTRIBUTE_NUM_REGS = "regs"
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = "max_dynamic_shared"

    class CUfunc_cache:  # noqa: N801
        CU_FUNC_CACHE_PREFER_SHARED = "prefer_shared"

    OK = CUresult(0)

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.modules: dict[str, bytes] = {}
        self.set_attributes: dict[str, Any] = {}

    def _log(self, *call: Any) -> None:
        self.calls.append(call)

    def cuInit(self, flags):  # noqa: N802 -- the driver's names
        assert flags == 0
        return (self.OK,)

    def cuDeviceGet(self, ordinal):  # noqa: N802
        return self.OK, ("dev", ordinal)

    def cuDevicePrimaryCtxRetain(self, dev):  # noqa: N802
        assert dev == ("dev", 0)
        return self.OK, "ctx"

    def cuCtxSetCurrent(self, ctx):  # noqa: N802
        assert ctx == "ctx"
        return (self.OK,)

    def cuDeviceGetName(self, length, dev):  # noqa: N802
        assert length >= 64 and dev == ("dev", 0)
        return self.OK, b"Fake H100\0\0\0"

    def cuDeviceGetAttribute(self, attrib, dev):  # noqa: N802
        assert dev == ("dev", 0)
        values = {"sm_count": 132, "cc_major": 9, "cc_minor": 0, "smem_sm": 233472, "smem_optin": 232448}
        return self.OK, values[attrib]

    def cuModuleLoadData(self, image):  # noqa: N802
        assert isinstance(image, bytes) and image[:4] == b"\x7fELF", "a cubin is an ELF image"
        self.modules[f"mod{len(self.modules)}"] = image
        return self.OK, f"mod{len(self.modules) - 1}"

    def cuModuleGetFunction(self, module, name):  # noqa: N802
        assert module in self.modules and isinstance(name, bytes) and name in self.modules[module]
        return self.OK, ("fn", module, name.decode())

    def cuModuleUnload(self, module):  # noqa: N802
        self.modules.pop(module)
        return (self.OK,)

    def cuFuncSetCacheConfig(self, fn, config):  # noqa: N802
        assert fn[0] == "fn" and config == "prefer_shared"
        self._log("cache", fn, config)
        return (self.OK,)

    def cuFuncSetAttribute(self, fn, attrib, value):  # noqa: N802
        assert fn[0] == "fn" and attrib == "max_dynamic_shared" and isinstance(value, int)
        self.set_attributes[fn[1]] = value
        return (self.OK,)

    def cuFuncGetAttribute(self, attrib, fn):  # noqa: N802
        assert fn[0] == "fn", "cuFuncGetAttribute takes (attribute, function)"
        if attrib in ("static_shared", "local"):
            return self.OK, 0
        return self.OK, -1  # answered by FakeDriver below

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn, block_size, dynamic_smem):  # noqa: N802
        assert fn[0] == "fn" and isinstance(block_size, int) and isinstance(dynamic_smem, int)
        return self.OK, -1  # answered by FakeDriver below


class FakeDriver(CudaDriver):
    """:class:`CudaDriver` over :class:`FakeCudaModule`, answering occupancy and registers from the cubin itself
    (``cuobjdump`` registers, the model's rules): the plumbing is what is tested on the CPU, not the numbers."""

    def __init__(self) -> None:
        super().__init__(FakeCudaModule())
        self.regs: dict[Any, int] = {}

    def load(self, cubin: bytes, name: str, dynamic_shared_bytes: int) -> tuple[Any, Any]:
        module, function = super().load(cubin, name, dynamic_shared_bytes)
        from kernelpilot.profile.static import _tool, parse_resource_usage

        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            import subprocess

            text = subprocess.run([_tool("cuobjdump"), "--dump-resource-usage", f.name], capture_output=True,
                                  text=True, check=True).stdout
        self.regs[function] = parse_resource_usage(text)[name]["REG"]
        return module, function

    def function_attribute(self, function: Any, key: str) -> int:
        from kernelpilot.profile.static import max_threads_per_block

        value = super().function_attribute(function, key)
        if key == "NUM_REGS":
            return self.regs[function]
        if key == "MAX_THREADS_PER_BLOCK":
            return max_threads_per_block(self.regs[function])
        return value

    def max_active_blocks(self, function: Any, threads_per_block: int, dynamic_shared_bytes: int) -> int:
        from kernelpilot.backends.binary.occupancy import theoretical_occupancy

        super().max_active_blocks(function, threads_per_block, dynamic_shared_bytes)
        return theoretical_occupancy(self.regs[function], dynamic_shared_bytes, threads_per_block).blocks_per_sm


def test_driver_wrapper_reads_the_device_as_cuda_python_answers():
    driver = CudaDriver(FakeCudaModule())
    assert driver.describe() == {"device": "Fake H100", "compute_capability": [9, 0], "sm_count": 132,
                                 "shared_optin_bytes": 232448, "shared_per_sm_bytes": 233472, "api": "given"}


def test_cpu_compile_and_compare_two_configs_per_example_with_a_stand_in_driver(tmp_path):
    # Two vector_add configs and the matmul configs that exercise > 48 KB of shared memory, a rejection by
    # run_kernel and an OutOfResources, compiled for sm_90 by the device test's own code path.
    jobs = select_jobs(["vector_add"], limit=2)
    tiled = {"GROUP_M": 1, "TMA": 0}
    matmul = [j for j in select_jobs(["matmul"]) if j["config"] in (
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, **tiled, "num_warps": 8, "num_stages": 3},  # 96 KB
        {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 32, **tiled, "num_warps": 2, "num_stages": 2},  # rejected
        {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, **tiled, "num_warps": 8, "num_stages": 5},  # OOR
    )]
    assert len(jobs) == 2 and len(matmul) == 3
    driver = FakeDriver()
    out = tmp_path / "occ.json"
    lines: list[str] = []
    report = run_comparison(jobs + matmul, driver, arch="sm_90", workers=2, out_path=out, log=lines.append)
    s = report["summary"]
    assert (s["jobs"], s["compared"], s["equal"], s["errors"], s["unfinished"]) == (5, 3, 3, 0, 0), report
    assert (s["rejected_by_run_kernel"], s["out_of_resources"], s["out_of_resources_confirmed"]) == (1, 1, 1)
    assert s["by_example"]["vector_add"]["compared"] == 2 and s["by_example"]["matmul"]["compared"] == 1
    on_disk = json.loads(out.read_text())
    assert on_disk["summary"] == s and not on_disk["partial"] and on_disk["device"] == "Fake H100"
    assert on_disk["arch"] == "sm_90" and lines
    for rec in on_disk["results"]:
        assert {"index", "example", "config", "status"} <= set(rec)
        if rec["status"] == "ok":
            for key in ("kernel", "regs", "shared_bytes", "threads", "model_blocks", "model_max_threads",
                        "driver_blocks", "driver_max_threads", "driver_regs", "equal", "blocks_equal"):
                assert rec[key] is not None, (key, rec)
            assert "cubin_path" not in rec
    big = next(r for r in on_disk["results"] if r["example"] == "matmul" and r["status"] == "ok")
    assert big["shared_bytes"] > TRITON_SHARED_OPTIN_THRESHOLD_BYTES
    assert set(driver._cu.set_attributes.values()) == {232448}  # opt-in maximum minus 0 static, as Triton sets it
    assert not driver._cu.modules  # every module unloaded


def test_summary_counts_mismatches_and_unfinished_jobs():
    jobs = [{"index": i, "example": "x", "config": {}} for i in range(4)]
    records = [
        {"index": 0, "example": "x", "status": "ok", "equal": True, "blocks_equal": True, "max_threads_equal": True,
         "regs_equal": True},
        {"index": 1, "example": "x", "status": "ok", "equal": False, "blocks_equal": False,
         "max_threads_equal": True, "regs_equal": True},
        {"index": 2, "example": "x", "status": "error"},
    ]
    s = summarize(jobs, records)
    assert (s["compared"], s["equal"], s["blocks_equal"], s["errors"], s["unfinished"]) == (2, 1, 1, 1, 1)
    assert s["mismatches"] == [1] and s["error_indices"] == [2]


# ---------------------------------------------------------------------------------------------------------------
# the device test


@pytest.mark.gpu
def test_occupancy_model_and_max_threads_equal_the_driver_on_every_config_of_every_example(capsys):
    from kernelpilot.backends.binary.occupancy import ARCH_LIMITS

    driver = CudaDriver()
    if tuple(driver.compute_capability) not in ARCH_LIMITS:
        pytest.skip(f"no occupancy limits for compute capability {driver.compute_capability}")
    jobs = jobs_from_env()
    arch = f"sm_{driver.compute_capability[0]}{driver.compute_capability[1]}"

    def log(line: str) -> None:
        with capsys.disabled():
            print(line, flush=True)

    log(f"\n{len(jobs)} configs of {sorted({j['example'] for j in jobs})} on {driver.name} ({arch}, {driver.api})")
    report = run_comparison(jobs, driver, arch=arch, workers=int(os.environ.get("KP_OCC_WORKERS", "0")) or None,
                            deadline_s=float(os.environ.get("KP_OCC_DEADLINE_S", "450")),
                            out_path=os.environ.get("KP_OCC_OUT"), log=log)
    s = report["summary"]
    line = (f"occupancy model == driver (blocks/SM and max threads/block) on {s['equal']} of {s['compared']} "
            f"compared configs; {s['jobs']} jobs: {s['rejected_by_run_kernel']} rejected by run_kernel, "
            f"{s['out_of_resources']} OutOfResources ({s['out_of_resources_confirmed']} confirmed by the device), "
            f"{s['errors']} errors, {s['unfinished']} unfinished; registers equal on {s['regs_equal']}; "
            f"{report['seconds']} s with {report['workers']} workers")
    log(line)
    for r in report["results"]:
        if r["status"] == "error" or (r["status"] == "ok" and not r.get("equal")):
            log(json.dumps({k: v for k, v in r.items() if k != "traceback"}))
    assert not s["unfinished"], f"{line}\nsplit the run: KP_OCC_EXAMPLES=vector_add,layer_norm,softmax then matmul"
    assert not s["errors"], line
    assert all(e["compared"] for e in s["by_example"].values()), line
    assert s["compared"] + s["rejected_by_run_kernel"] + s["out_of_resources"] == s["jobs"], line
    assert not s["mismatches"], line
    assert s["equal"] == s["compared"] > 0, line
    smem_oor = [r for r in report["results"] if r["status"] == "out_of_resources" and "confirmed" in r]
    assert all(r["confirmed"] for r in smem_oor), line
