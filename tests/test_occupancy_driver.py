"""GPU test (issue 3, item 4): the occupancy model equals the CUDA driver on every sampled example config.

For every example in ``src/kernelpilot/examples`` and a set of configs (``DEFAULT_CONFIG`` plus a seeded,
deterministic sample of ``TUNABLES``; 44 in all), the kernel is launched once through ``run_kernel`` at a
small but real shape. The ``CompiledKernel`` Triton launched is captured by wrapping
``triton.runtime.jit.JITFunction.run`` (which returns it; Triton 3.6 ``runtime/jit.py``), and its

- ``n_regs`` (registers/thread, from ``cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS)`` at load),
- ``metadata.shared`` (bytes of shared memory per block, passed at launch as *dynamic* shared memory),
- ``metadata.num_warps`` (threads/block = 32 x that),
- ``function`` (the ``CUfunction`` handle as an int)

(Triton 3.6 ``compiler/compiler.py``, ``CompiledKernel._init_handles``) go to
:func:`kernelpilot.profile.occupancy.theoretical_occupancy` and, with the same dynamic size, to the driver's
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` (cuda-python ``cuda.bindings.driver``; the older
``cuda.cuda`` module; else ``libcuda.so.1`` through ctypes). Triton raises the function's
``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` itself when it needs more than 48 KB (Triton 3.6
``backends/nvidia/driver.c``, ``loadBinary``), so the driver sees the launch Triton makes.

Configs whose launch fails with Triton's ``OutOfResources`` or whose ``run_kernel`` raises ``ValueError`` are
skipped and counted. Compilation dominates the time, so the configs are spread over worker processes (this
file run as a script with ``--worker``), each writing its results as it goes. With ``OUT`` set the results go
to ``$OUT/occupancy_driver.json``.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = ROOT / "src" / "kernelpilot" / "examples"

#: Small but real shapes: the kernel variants (single tile or looped) of SHAPE still occur, in milliseconds.
SHAPES: dict[str, dict[str, Any]] = {
    "vector_add": {"N": 1 << 20, "dtype": "float32"},
    "softmax": {"M": 64, "N": 8192, "dtype": "float32"},
    "layer_norm": {"M": 64, "N": 4096, "dtype": "bfloat16"},
    "matmul": {"M": 512, "N": 512, "K": 512, "dtype": "bfloat16"},
}
#: Configs sampled per example besides DEFAULT_CONFIG (4 + 40 = 44 jobs; matmul's space has the most
#: configs that are skipped, OutOfResources or too many accumulator registers, so it gets the most).
SAMPLES = {"vector_add": 6, "softmax": 10, "layer_norm": 8, "matmul": 16}
#: Seed of the sample (a str seed is hashed with SHA-512 by ``random``: the same on every machine).
SAMPLE_SEED = "kernelpilot-issue3-occupancy"
#: Whole-test budget for the workers, seconds (env KP_OCC_TIMEOUT_S overrides).
WORKERS_TIMEOUT_S = float(os.environ.get("KP_OCC_TIMEOUT_S", "200"))
#: Worker processes (env KP_OCC_WORKERS overrides); each holds a CUDA context and compiles its configs.
WORKERS = int(os.environ.get("KP_OCC_WORKERS", str(max(1, min(8, (os.cpu_count() or 2) // 2)))))

# CUfunction_attribute values of the CUDA driver API (cuda.h), for the ctypes path.
_FUNC_ATTRIBUTES = {"max_threads_per_block": 0, "static_shared_bytes": 1, "local_bytes_per_thread": 3,
                    "num_regs": 4, "max_dynamic_shared_bytes": 8, "preferred_carveout_pct": 9}


def build_jobs() -> list[dict[str, Any]]:
    """Every job: {index, example, config}: each example's DEFAULT_CONFIG, then its seeded sample.

    The kernel files are read with ``ast`` (no import, so this runs anywhere): ``TUNABLES`` and
    ``DEFAULT_CONFIG`` are literal dicts in all examples.
    """
    import ast

    rng = random.Random(SAMPLE_SEED)
    jobs: list[dict[str, Any]] = []
    for name in SHAPES:
        tree = ast.parse((EXAMPLES_DIR / f"{name}.py").read_text())
        consts = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                  for t in node.targets if isinstance(t, ast.Name) and t.id in ("TUNABLES", "DEFAULT_CONFIG")}
        tunables = consts["TUNABLES"]
        default = {**{k: v[0] for k, v in tunables.items()}, **consts.get("DEFAULT_CONFIG", {})}
        space = [dict(zip(tunables, values)) for values in itertools.product(*tunables.values())]
        others = [c for c in space if c != default]
        for config in [default, *rng.sample(others, min(SAMPLES[name], len(others)))]:
            jobs.append({"index": len(jobs), "example": name, "config": config})
    return jobs


class DriverOccupancy:
    """The CUDA driver's occupancy calculator and function attributes, through the first API available.

    Order: ``cuda.bindings.driver`` (cuda-python >= 12.x), ``cuda.cuda`` (older cuda-python), ctypes on
    ``libcuda.so.1``. Attributes: ``api`` names the one used.
    """

    def __init__(self) -> None:
        self._cu: Any = None
        self._lib: Any = None
        try:
            from cuda.bindings import driver as cu  # type: ignore[import-not-found]
            self.api = "cuda.bindings.driver"
        except ImportError:
            try:
                from cuda import cuda as cu  # type: ignore[import-not-found,no-redef]
                self.api = "cuda.cuda"
            except ImportError:
                cu = None
        if cu is not None:
            self._cu = cu
            self._ok(cu.cuInit(0), "cuInit")
        else:
            import ctypes
            self._lib = ctypes.CDLL("libcuda.so.1")
            self.api = "ctypes:libcuda.so.1"
            self._call_c("cuInit", ctypes.c_uint(0))

    def _ok(self, result: Any, what: str) -> Any:
        """Unpack a cuda-python result tuple (err, *values); raise on an error code."""
        err, *values = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            raise RuntimeError(f"{what} failed: {err!r}")
        return values[0] if values else None

    def _call_c(self, name: str, *args: Any) -> None:
        rc = getattr(self._lib, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} failed: CUresult {rc}")

    def max_active_blocks(self, function: int, threads_per_block: int, dynamic_smem_bytes: int) -> int:
        """``cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, dynamic shared bytes)``."""
        if self._cu is not None:
            cu = self._cu
            return int(self._ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                cu.CUfunction(function), threads_per_block, dynamic_smem_bytes),
                "cuOccupancyMaxActiveBlocksPerMultiprocessor"))
        import ctypes
        blocks = ctypes.c_int(0)
        self._call_c("cuOccupancyMaxActiveBlocksPerMultiprocessor", ctypes.byref(blocks), ctypes.c_void_p(function),
                     ctypes.c_int(threads_per_block), ctypes.c_size_t(dynamic_smem_bytes))
        return blocks.value

    def attributes(self, function: int) -> dict[str, int]:
        """The function attributes in ``_FUNC_ATTRIBUTES`` (``cuFuncGetAttribute``), by our names."""
        out: dict[str, int] = {}
        for key, code in _FUNC_ATTRIBUTES.items():
            if self._cu is not None:
                cu = self._cu
                out[key] = int(self._ok(cu.cuFuncGetAttribute(cu.CUfunction_attribute(code), cu.CUfunction(function)),
                                        f"cuFuncGetAttribute({key})"))
            else:
                import ctypes
                value = ctypes.c_int(0)
                self._call_c("cuFuncGetAttribute", ctypes.byref(value), ctypes.c_int(code), ctypes.c_void_p(function))
                out[key] = value.value
        return out


def _write(path: Path, results: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(path)


def worker(jobs_file: Path, results_file: Path) -> int:
    """Run the jobs in ``jobs_file`` on the GPU; rewrite ``results_file`` after each (partial results survive)."""
    sys.path.insert(0, str(ROOT / "src"))
    os.environ.pop("TRITON_INTERPRET", None)
    import torch
    from triton.runtime.jit import JITFunction

    from kernelpilot.kernels.contract import load_kernel, make_case, run_kernel
    from kernelpilot.profile.occupancy import theoretical_occupancy

    captured: list[Any] = []
    original_run = JITFunction.run

    def capturing_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        kernel = original_run(self, *args, **kwargs)
        captured.append(kernel)
        return kernel

    JITFunction.run = capturing_run  # returns the CompiledKernel it launched (Triton 3.6 runtime/jit.py)

    jobs = json.loads(jobs_file.read_text())
    torch.cuda.init()
    cc = torch.cuda.get_device_capability()
    driver = DriverOccupancy()
    loaded: dict[str, Any] = {}
    results: list[dict[str, Any]] = []
    for job in jobs:
        name, config = job["example"], job["config"]
        rec: dict[str, Any] = {**job, "shape": SHAPES[name], "api": driver.api}
        start = time.monotonic()
        try:
            if name not in loaded:
                kf = load_kernel(EXAMPLES_DIR / f"{name}.py", interpreted=False)
                loaded[name] = (kf, make_case(kf, SHAPES[name], 0, "cuda"))
            kf, case = loaded[name]
            captured.clear()
            run_kernel(kf, case.inputs, config)
            torch.cuda.synchronize()
            if not captured:
                raise RuntimeError("run_kernel launched no JITFunction")
            kernel = captured[-1]
            if hasattr(kernel, "result"):  # an asynchronous compile's future
                kernel = kernel.result()
            if getattr(kernel, "function", None) is None:
                kernel._init_handles()
            threads = int(kernel.metadata.num_warps) * 32
            shared = int(kernel.metadata.shared)
            function = int(kernel.function)
            model = theoretical_occupancy(int(kernel.n_regs), shared, threads, cc=cc)
            driver_blocks = driver.max_active_blocks(function, threads, shared)
            attrs = driver.attributes(function)
            rec.update(
                status="ok", kernel=kernel.name, n_regs=int(kernel.n_regs), n_spills=int(kernel.n_spills),
                shared_bytes=shared, threads=threads, num_warps=int(kernel.metadata.num_warps),
                num_stages=getattr(kernel.metadata, "num_stages", None),
                model_blocks=model.blocks_per_sm, model_limiter=model.limiter, model_occupancy_pct=model.occupancy_pct,
                driver_blocks=driver_blocks, match=model.blocks_per_sm == driver_blocks, driver_attributes=attrs)
            if attrs.get("static_shared_bytes"):
                # diagnosis only: what the model says if static shared memory counted too
                try:
                    alt = theoretical_occupancy(int(kernel.n_regs), shared + attrs["static_shared_bytes"], threads,
                                                cc=cc)
                    rec["model_blocks_with_static_shared"] = alt.blocks_per_sm
                except ValueError as exc:
                    rec["model_blocks_with_static_shared"] = str(exc)
        except ValueError as exc:  # run_kernel's own rejection (e.g. matmul's accumulator limit)
            rec.update(status="rejected", message=f"ValueError: {exc}")
        except Exception as exc:  # noqa: BLE001 -- recorded per config; the test fails on any "error"
            if type(exc).__name__ == "OutOfResources":
                rec.update(status="out_of_resources", message=str(exc))
            else:
                rec.update(status="error", message=f"{type(exc).__name__}: {exc}",
                           traceback=traceback.format_exc()[-3000:])
        rec["seconds"] = round(time.monotonic() - start, 2)
        results.append(rec)
        _write(results_file, results)
        print(f"[{job['index']:3d}] {name} {config} -> {rec['status']}"
              + (f" model {rec['model_blocks']} driver {rec['driver_blocks']}" if rec["status"] == "ok" else "")
              + f" ({rec['seconds']} s)", flush=True)
    return 0


def run_workers(jobs: list[dict[str, Any]], folder: Path, n_workers: int, timeout_s: float,
                ) -> tuple[list[dict[str, Any]], list[str]]:
    """Split ``jobs`` round-robin over ``n_workers`` processes; collect their results and log tails."""
    chunks = [jobs[i::n_workers] for i in range(n_workers)]
    procs = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for i, chunk in enumerate(c for c in chunks if c):
        jobs_file, results_file, log_file = (folder / f"w{i}.jobs.json", folder / f"w{i}.results.json",
                                             folder / f"w{i}.log")
        jobs_file.write_text(json.dumps(chunk))
        log = open(log_file, "w")  # noqa: SIM115 -- open while the worker runs; closed in the wait loop
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", str(jobs_file),
                                 str(results_file)], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        procs.append((proc, log, results_file, log_file))
    deadline = time.monotonic() + timeout_s
    results: list[dict[str, Any]] = []
    logs: list[str] = []
    for proc, log, results_file, log_file in procs:
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if results_file.is_file():
            results += json.loads(results_file.read_text())
        logs.append(f"--- {log_file.name} (rc {proc.returncode})\n" + "\n".join(log_file.read_text().splitlines()[-15:]))
    return sorted(results, key=lambda r: r["index"]), logs


def summarize(jobs: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts by status and example, the mismatches, and the jobs that never finished."""
    done = {r["index"] for r in results}
    compared = [r for r in results if r["status"] == "ok"]
    return {
        "jobs": len(jobs),
        "compared": len(compared),
        "matched": sum(1 for r in compared if r["match"]),
        "by_status": {s: sum(1 for r in results if r["status"] == s)
                      for s in ("ok", "rejected", "out_of_resources", "error")},
        "compared_by_example": {n: sum(1 for r in compared if r["example"] == n) for n in SHAPES},
        "mismatches": [r["index"] for r in compared if not r["match"]],
        "unfinished": [j["index"] for j in jobs if j["index"] not in done],
    }


def test_build_jobs_is_deterministic_and_covers_every_example():
    jobs = build_jobs()
    assert jobs == build_jobs()
    assert {j["example"] for j in jobs} == set(SHAPES)
    assert len(jobs) == len(SHAPES) + sum(SAMPLES.values())


def test_occupancy_model_matches_driver_on_every_example_config(tmp_path, capsys):
    import torch
    import triton

    jobs = build_jobs()
    started = time.monotonic()
    results, logs = run_workers(jobs, tmp_path, max(1, min(WORKERS, len(jobs))), WORKERS_TIMEOUT_S)
    summary = summarize(jobs, results)
    props = torch.cuda.get_device_properties(0)
    report = {
        "what": "kernelpilot.profile.occupancy.theoretical_occupancy vs cuOccupancyMaxActiveBlocksPerMultiprocessor",
        "device": props.name, "compute_capability": list(torch.cuda.get_device_capability()),
        "sm_count": props.multi_processor_count, "torch": torch.__version__, "triton": triton.__version__,
        "shapes": SHAPES, "sample_seed": SAMPLE_SEED, "workers": WORKERS, "seconds": round(time.monotonic() - started, 1),
        "summary": summary, "results": results,
    }
    if os.environ.get("OUT"):
        Path(os.environ["OUT"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["OUT"]) / "occupancy_driver.json").write_text(json.dumps(report, indent=1))
    line = (f"occupancy model == driver on {summary['matched']} of {summary['compared']} configs "
            f"({summary['jobs']} jobs: {summary['by_status']}; unfinished {len(summary['unfinished'])}; "
            f"{report['seconds']} s)")
    with capsys.disabled():
        print("\n" + line)
        for r in results:
            if (r["status"] == "ok" and not r["match"]) or r["status"] == "error":
                print(json.dumps({k: v for k, v in r.items() if k != "traceback"}))
    detail = line + "\n" + "\n".join(logs)
    errors = [f"{r['example']} {r['config']}: {r.get('message')}" for r in results if r["status"] == "error"]
    assert not summary["unfinished"], f"jobs never finished: {summary['unfinished']}\n{detail}"
    assert not errors, "\n".join(errors) + "\n" + detail
    assert all(summary["compared_by_example"].values()), detail
    assert not summary["mismatches"], detail
    assert summary["matched"] == summary["compared"] > 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        sys.exit(worker(Path(sys.argv[2]), Path(sys.argv[3])))
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        for job in build_jobs():
            print(job["index"], job["example"], json.dumps(job["config"]))
        sys.exit(0)
    sys.exit("usage: test_occupancy_driver.py --worker JOBS.json RESULTS.json | --list")
