"""The CLI is thin over :mod:`kernelpilot.api` (issue 10, "Layout").

For every command registered on the Typer app (walked, so a new command without an entry here fails): the matching
``api`` function is replaced by a stub that records its call and returns a small valid result (or raises a
KernelpilotError); the command is invoked with typer's CliRunner and must call that one stub exactly once, call no
other ``api`` function, start no process and never import the kernel file (a sentinel file that writes a marker
when imported). Every command takes ``--json``; a KernelpilotError exits 1 with one ``{"error","message","hint"}``
object. Also: ``optimize``/``report`` print at most 25 version rows of a long run.
"""

from __future__ import annotations

import json
import multiprocessing.process
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import typer
from typer.testing import CliRunner

from conftest import EXAMPLES, FIXTURES, ROOT
from kernelpilot import api
from kernelpilot.app.workload_run import BucketRun, ShapeRow, WorkloadResult
from kernelpilot.cli import app
from kernelpilot.errors import SpecError

runner = CliRunner()
SEARCH_DATA = ROOT / "tests" / "data" / "search"

#: A kernel file that leaves a marker beside itself when anything imports it (in this process or a worker).
SENTINEL = "import pathlib\npathlib.Path(__file__).with_suffix('.ran').write_text('imported')\n"


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every leaf command of a click group, as its path of names (``("cache", "list")``)."""
    found: list[tuple[str, ...]] = []
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer may bring its own click)
            found += _commands(cmd, prefix + (name,))
        else:
            found.append(prefix + (name,))
    return found


def _api_functions() -> list[str]:
    """The names in ``api.__all__`` that are functions (the classes are result types)."""
    return [n for n in api.__all__ if callable(getattr(api, n)) and not isinstance(getattr(api, n), type)]


def _evaluation(index: int, *, accepted: bool, duration_ns: float = 1000.0) -> Any:
    from kernelpilot.records.evaluation import Evaluation

    return Evaluation(config={"BLOCK": 64 + index}, status="ok", duration_ns=duration_ns, iqr_ns=10.0,
                      accepted=accepted, index=index, decision="first correct" if index == 0 else "")


def _run_info(best: int | None = 0) -> Any:
    from kernelpilot.records.models import RunInfo

    return RunInfo(kernel="k.py", kernel_name="k", reference="k.py", source_sha256="0" * 64, shape={"N": 8}, tunables={"BLOCK": [64]},
                   compute_unit="fp32", mode="interpreter", device_name="CPU", gpu_spec=None, iterations=-1,
                   profile=False, started_utc="2026-01-01T00:00:00+00:00", best_version=best, stop_reason="budget")


def _timing() -> Any:
    from kernelpilot.measure.timing import TimingResult

    return TimingResult(timer="interpreter wall clock", is_measurement=False, samples_ns=[1000.0], n_samples=1,
                        median_ns=1000.0, iqr_ns=0.0, q1_ns=1000.0, q3_ns=1000.0, l2_bytes=0, min_ns=1000.0, mean_ns=1000.0, n_warmup=1, warmup_ms=1.0,
                        warmup_stable=True, flush_bytes=0)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, Any]:
    """A small valid result of every api function, built before any guard is on (a few are real: the saved ncu
    report, the roofline of an example, the specs, the committed caches)."""
    from kernelpilot.app.optimize import OptimizeResult
    from kernelpilot.app.tune import TuneResult
    from kernelpilot.measure.correctness import CorrectnessResult, SeedCheck
    from kernelpilot.measure.env import EnvInfo, NcuInfo
    from kernelpilot.profile.static import StaticFailure, StaticReport, StaticSpace

    folder = tmp_path_factory.mktemp("run")
    run, ev = _run_info(), _evaluation(0, accepted=True)
    static_ok = StaticReport(kernel_name="k", kernel_file="k.py", config={"BLOCK": 64}, shape={"N": 8}, arch="sm_90",
                             compute_capability=(9, 0), triton_version="3", num_warps=4, num_stages=2,
                             threads_per_block=128, registers_per_thread=32, shared_mem_bytes=0)
    failure = StaticFailure(kernel_file="k.py", config={"BLOCK": 64}, arch="sm_90", stage="compile",
                            error_type="CompilationError", message="bad")
    return {
        "env": EnvInfo(date_utc="2026-01-01", hostname="h", python="3.11", platform="linux", kernelpilot="0",
                       torch="2", torch_cuda=None, triton=None, driver=None, mode="interpreter", gpu=None,
                       ncu=NcuInfo(path=None, version=None, counters_readable=None)),
        "check": CorrectnessResult(passed=True, summary="1/1 seeds passed", shape={"N": 8}, config={}, device="cpu",
                                   reference_dtype="float64", deterministic=True,
                                   seeds=[SeedCheck(seed=0, passed=True)]),
        "verify": api.VerifyResult(kernel="k.py", accepted=True, stage="accepted", status="ok", message="",
                                   evaluation=ev),
        "bench": api.BenchResult(kernel="k.py", shape={"N": 8}, config={}, timing=_timing(), floor_ns=None,
                                 pct_of_roofline=None, impossible=False),
        "profile": api.profile(report=FIXTURES / "ncu" / "h200_add_fp32_memory_bound.ncu-rep"),
        "roofline": api.roofline(EXAMPLES / "matmul.py", gpu="H100-SXM"),
        "optimize": OptimizeResult(out=folder, run=run, versions=[ev]),
        "report": api.ReportResult(run=run, versions=[ev], final_report=str(folder / "final_report.md")),
        "inspect": static_ok,
        "import_inductor": api.InductorImport(
            kernel="k.py", out="k_inductor.py", out_sha256="0" * 64, mode="default", shape={"N": 8}, torch_version="2",
            triton_version="3", device_name="GPU", kernel_sha256="0" * 64, kernels=["triton_poi_fused_0"],
            tunables={"XBLOCK_0": [512, 1024]}, default_config={"XBLOCK_0": 1024}, constraints=[],
            default_sources={"triton_poi_fused_0": "autotuner"}, n_configs=2, handed_over={"y": True}),
        "inspect_space": StaticSpace(kernel_file="k.py", arch="sm_90", shape={"N": 8}, n_configs_total=2,
                                     n_inspected=2, sampled=False, sample_seed=0, n_ok=1, n_failed=1, max_workers=1,
                                     wall_s=0.1, results=[static_ok, failure]),
        "pipeline": {"kernel_file": "k.py", "n_configs": 1, "reports": [failure]},
        "tune": TuneResult(kernel="k.py", shape={"N": 8}, device="cpu", gpu=None, strategy="guided", seed=0,
                           space_size=1, space_total=1, constraints=[], best=ev, history=[], evaluations=[ev], n_new=1,
                           n_cached=0, failures={}, prune=None, stopped="space exhausted", wall_s=0.1, device_s=0.1,
                           floor_ns=None, cache_file=None, worker_restarts=0, measured=False, triton_config=None),
        "tune_workload": WorkloadResult(kernel="k.py", keys=["N"], rule="pow2", buckets=[
            BucketRun(name="N=8..15", ranges={"N": [8, 15]}, shapes=[{"N": 8}], representative={"N": 8},
                      tune_folder="buckets/0", config={"BLOCK": 64}, decision="fastest")],
            rows=[ShapeRow(shape={"N": 8}, weight=1.0, bucket="N=8..15", table_ns=10.0, single_ns=10.0,
                           default_ns=12.0)], candidates=[{"BLOCK": 64}], table_ns=10.0, single_ns=10.0,
            default_ns=12.0, single_config={"BLOCK": 64}, default_config={"BLOCK": 32}, single_loss_pct=0.0,
            default_loss_pct=20.0, measured=False, files={"dispatch": "dispatch.json"}, store="not written"),
        "workload_ranges": {"shapes": 1, "total_weight": 1.0, "source": "ranges", "file": "w.json",
                            "workload": [{"shape": {"N": 8}, "weight": 1.0}]},
        "workload_capture": {"shapes": 1, "total_weight": 2.0, "source": "capture:aten::add", "op": "aten::add",
                             "mapping": {"N": ["0.0"]}, "calls": 2, "patterns": {}, "unmapped": [],
                             "workload": [{"shape": {"N": 8}, "weight": 2.0}]},
        "workload_buckets": {"keys": ["N"], "rule": "exact", "buckets": [
            {"name": "N=8", "ranges": {"N": [8, 8]}, "weight": 1.0, "shapes": [{"N": 8}],
             "representative": {"N": 8}}]},
        "cache_list": api.cache_list(SEARCH_DATA),
        "cache_show": api.cache_show(str(SEARCH_DATA / "softmax-h100.jsonl")),
        "cache_clear": {"deleted": []},
        "specs_list": api.specs_list(),
        "specs_show": api.specs_show("H100-SXM"),
        "specs_cite": api.specs_cite("dram_bandwidth_gbps", "H100-SXM"),
        "specs_measure": {"gpu": "H100-SXM", "file": "m.md", "measurements": [
            {"metric": "measured_copy_bandwidth_gbps", "value": 3000.0, "unit": "GB/s", "iqr": 1.0,
             "samples": [3000.0]}]},
        "mcp_serve": {"server": "kernelpilot", "transport": "stdio", "tools": ["env", "check"], "calls": 2},
        **_experience_results(),
        **_session_results(folder),
        **_bundle_results(),
        **_configs_results(),
        "kernelbench_run": _kernelbench_result(),
        "skill_show": {"name": "kernelpilot", "description": "d", "text": "---\nname: kernelpilot\n---\n",
                       "sha256": "0" * 64, "bytes": 27, "targets": {"claude": ".claude/skills/kernelpilot/SKILL.md"}},
        "skill_install": {"agent": "codex", "path": "p/SKILL.md", "action": "written", "sha256": "0" * 64,
                          "bytes": 27, "previous_sha256": None},
    }


def _kernelbench_result() -> Any:
    """A small valid ``kernelbench run`` result (one correct row, nothing timed)."""
    from kernelpilot.app.kernelbench_run import KernelBenchRow, fast_p_table

    files = {k: {"path": f"{k}.py", "sha256": "0" * 64} for k in ("problem", "solution")}
    rows = [KernelBenchRow(level=1, problem_id=19, problem="19_ReLU", sample_id=0, files=files, status="correct",
                           correct=True)]
    return api.KernelBenchResult(problems="P", solutions="S", level=1, device="cpu", measured=False, n_problems=1,
                                 n_correct=1, fast_p=fast_p_table(rows), rows=rows,
                                 unpaired_solutions={"S/x.py": "no problem"}, files={"json": "o/kernelbench.json"})


def _configs_results() -> dict[str, Any]:
    """Small valid results of the ``configs`` api functions (a real entry, no store)."""
    from kernelpilot.store import StoredConfig, StoreKey

    e = StoredConfig(key=StoreKey(kernel_hash="ab" * 32, arch="sm_90", toolchain={"triton": "3.5.0"},
                                  dtype="bfloat16", shape_range={"M": [512, 1023]}),
                     config={"BLOCK": 64}, duration_ns=1000.0).as_record()
    key = {k: e[k] for k in ("kernel_hash", "arch", "toolchain", "dtype", "strides")}
    taken = {"store": "c.db", "added": 1, "improved": 0, "kept": 0, "conflicts": 0, "total": 1}
    return {"configs_list": {"store": "c.db", "count": 1, "entries": [e]},
            "configs_lookup": {"store": "c.db", **key, "shape": {"M": 600}, "found": True, "config": {"BLOCK": 64},
                               "entry": e, "reason": "hit"},
            "configs_export": {"store": "c.db", "file": "c.jsonl", "written": 1},
            "configs_import": {**taken, "file": "c.jsonl", "read": 1},
            "configs_merge": {**taken, "other": "o.db"},
            "configs_conflicts": {"store": "c.db", "count": 1,
                                  "conflicts": [{"key": {**key, "shape_range": e["shape_range"]}, "entries": [e]}]}}


def _bundle_results() -> dict[str, Any]:
    """Small valid results of the bundle api functions (real records, no bundle)."""
    from kernelpilot.bundle.bench import BundleBench, BundleBenchEntry
    from kernelpilot.bundle.manifest import BundleEntry, BundleFile, BundleManifest, BundleVerify

    entry = BundleEntry(kernel_name="k", cubin="k.cubin", config={"BLOCK": 64}, shape={"N": 8}, inputs={"N": 8},
                        constexprs={"BLOCK": 64}, args=[], grid=[1, 1, 1], num_warps=4, num_stages=2,
                        shared_mem_bytes=0, n_regs=16, n_spills=0, spills=False, ptx_version="8.7",
                        ptx_target="sm_90a")
    manifest = BundleManifest(kernel="k.py", kernel_function="k", run_kernel_params=["N"], source_sha256="0" * 64,
                              arch="sm_90", compute_capability=(9, 0), min_driver_cuda="12.0", entries=[entry],
                              files=[BundleFile(path="k.cubin", sha256="0" * 64, bytes=1)])
    bench = BundleBench(bundle="b", kernel="k.py", load_s=0.01, first_call_s=0.02, ok=True, entries=[
        BundleBenchEntry(shape={"N": 8}, config={"BLOCK": 64}, identical=True, differing_outputs=[],
                         jit_median_ns=1000.0, bundle_median_ns=1000.0, ratio=1.0)])
    return {"export": manifest, "bundle_bench": bench,
            "bundle_verify": BundleVerify(bundle="b", ok=True, kernel="k.py", arch="sm_90", min_driver_cuda="12.0",
                                          n_entries=1, n_files=1, entries=[])}


def _session_results(folder: Path) -> dict[str, Any]:
    """Small valid results of the ``session`` api functions (real records, no session run)."""
    from kernelpilot.versions import MemoryRecord, SessionState, SessionStatus, TryResult

    mem = MemoryRecord(version=0, outcome="baseline", duration_ns=1000.0, measured=False)
    state = SessionState(kernel_name="k", device="cpu", shape={"N": 8}, versions=[0], incumbent=0)
    tried = TryResult(run=folder, memory=mem, incumbent=0, target_ns=None, target_met=False)
    status = SessionStatus(run=folder, state=state, versions=[mem], incumbent=0, incumbent_ns=1000.0, target_ns=None,
                           target_met=False, table_md="| v0 |")
    return {"session_start": tried, "session_try": tried, "session_status": status, "session_mask": status,
            "session_unmask": status, "session_restart": status, "session_finish": status}


def _experience_results() -> dict[str, Any]:
    """Small valid results of the ``experience`` api functions (real records, no file)."""
    from kernelpilot.experience import ExperienceEntry, Recommendation, guide_for

    e = ExperienceEntry(kernel="k", kernel_type="softmax", change="num_warps 4 -> 8", outcome="improved",
                        speedup=1.2, source="session:r/v1", measured=True).as_record()
    rec = Recommendation(tag="num_warps", change="num_warps 4 -> 8", n_tried=1, n_improved=1, n_failed=0,
                         similarity=1.0, score=0.1, examples=["session:r/v1"]).model_dump(mode="json")
    stats = {"db": "x.db", "path": "x.db", "total": 1, "masked": 0, "measured": 1, "unmeasured": 0, "sources": 1,
             "by_outcome": {"improved": 1}, "by_kernel_type": {"softmax": 1}, "by_backend": {"triton": 1},
             "by_bottleneck": {"none": 1}, "by_tag": {"num_warps": 1}}
    return {"experience_add": {"db": "x.db", "added": True, "entry": e},
            "experience_recommend": {"db": "x.db", "query": {}, "recommendations": [rec]},
            "experience_search": {"db": "x.db", "text": "t", "entries": [e]},
            "experience_list": {"db": "x.db", "filters": {}, "entries": [e]},
            "experience_stats": stats,
            "experience_merge": {"db": "x.db", "other": "o.db", "added": 1, "total": 2},
            "experience_export": {"db": "x.db", "file": "x.jsonl", "written": 1},
            "experience_import": {"db": "x.db", "file": "x.jsonl", "read": 1, "added": 1},
            "experience_mask": {"db": "x.db", "source": "session:r/v1", "masked": True, "entries": 1},
            "experience_guide": {"bottleneck": "memory", "backend": "triton",
                                 "entries": [g.model_dump() for g in guide_for("memory")]}}


#: command path -> variants: (api function, arguments after the command; ``{K}`` is the sentinel kernel file,
#: ``{D}`` a folder, and what the api call must receive (positional arguments, keyword subset)).
Variant = tuple[str, list[str], Callable[[Path, Path], tuple[tuple[Any, ...], dict[str, Any]]]]
VARIANTS: dict[tuple[str, ...], list[Variant]] = {
    ("env",): [("env", ["--no-probe"], lambda k, d: ((), {"probe_ncu": False}))],
    ("check",): [("check", ["{K}", "--shape", "N=64", "--config", "BLOCK=128", "--seeds", "2"],
                  lambda k, d: ((k,), {"shape": {"N": 64}, "config": {"BLOCK": 128}, "n_seeds": 2}))],
    ("bench",): [("bench", ["{K}", "--baselines", "--gpu", "H100-SXM"],
                  lambda k, d: ((k,), {"baselines": True, "gpu": "H100-SXM"}))],
    ("profile",): [("profile", ["{K}", "--light", "--timeout-s", "5"],
                    lambda k, d: ((k,), {"light": True, "timeout_s": 5.0}))],
    ("roofline",): [("roofline", ["{K}", "--gpu", "H200"], lambda k, d: ((k,), {"gpu": "H200"}))],
    ("optimize",): [("optimize", ["{K}", "--iterations", "2", "--out", "{D}", "--baseline-ns", "eager=5"],
                     lambda k, d: ((k,), {"iterations": 2, "out": d, "baselines_ns": {"eager": 5.0}})),
                    ("optimize", ["--resume", "{D}", "--timeout-s", "9"],
                     lambda k, d: ((None,), {"resume": d, "timeout_s": 9.0, "out": None})),
                    ("tune_workload", ["{K}", "--workload-range", "N=8:16", "--out", "{D}"],
                     lambda k, d: ((k,), {"ranges": ["N=8:16"], "out": d, "strategy": "auto"}))],
    ("verify",): [("verify", ["{K}", "--strict"], lambda k, d: ((k,), {"strict": True}))],
    ("report",): [("report", ["{D}"], lambda k, d: ((d,), {}))],
    ("inspect",): [("inspect", ["{K}", "--config", "BLOCK=64", "--arch", "sm_80"],
                    lambda k, d: ((k,), {"config": {"BLOCK": 64}, "arch": "sm_80"})),
                   ("inspect_space", ["{K}", "--all-configs", "--limit", "3"],
                    lambda k, d: ((k,), {"limit": 3}))],
    ("pipeline",): [("pipeline", ["{K}", "--arch", "sm_90"], lambda k, d: ((k,), {"arch": "sm_90", "config": {}}))],
    ("tune",): [("tune", ["{K}", "--prune", "off", "--no-race", "--budget-evals", "3"],
                 lambda k, d: ((k,), {"prune": False, "race": False, "budget_evals": 3})),
                ("tune", ["--resume", "{D}", "--budget-evals", "4"],
                 lambda k, d: ((None,), {"resume": d, "budget_evals": 4})),
                ("tune", ["{K}", "--ray", "head:6379", "--budget-evals", "3"],
                 lambda k, d: ((k,), {"ray_address": "head:6379", "budget_evals": 3})),
                ("tune_workload", ["{K}", "--workload-range", "N=8:16", "--top-k", "1", "--out", "{D}"],
                 lambda k, d: ((k,), {"ranges": ["N=8:16"], "top_k": 1, "out": d})),
                ("tune_workload", ["{K}", "--workload-range", "N=8:16", "--ray", "head:6379", "--out", "{D}"],
                 lambda k, d: ((k,), {"ranges": ["N=8:16"], "ray_address": "head:6379", "out": d}))],

    ("workload", "ranges"): [("workload_ranges", ["{K}", "N=8:16", "--out", "{D}"],
                              lambda k, d: ((k, ["N=8:16"]), {"out": d}))],
    ("workload", "capture"): [("workload_capture", ["{K}", "{D}", "--op", "aten::add"],
                               lambda k, d: ((k, d), {"op": "aten::add"}))],
    ("workload", "buckets"): [("workload_buckets", ["{K}", "{D}", "--rule", "exact"],
                               lambda k, d: ((k, d), {"rule": "exact"}))],
    ("cache", "list"): [("cache_list", ["--root", "{D}"], lambda k, d: ((d,), {}))],
    ("cache", "show"): [("cache_show", ["softmax", "--root", "{D}"], lambda k, d: (("softmax",), {"root": d}))],
    ("cache", "clear"): [("cache_clear", ["softmax", "--root", "{D}"], lambda k, d: (("softmax",), {"root": d}))],
    ("specs", "list"): [("specs_list", [], lambda k, d: ((), {}))],
    ("specs", "show"): [("specs_show", ["H100-SXM", "--sources"], lambda k, d: (("H100-SXM",), {}))],
    ("specs", "cite"): [("specs_cite", ["dram_bandwidth_gbps", "--gpu", "H100-SXM"],
                         lambda k, d: (("dram_bandwidth_gbps", "H100-SXM"), {}))],
    ("specs", "measure"): [("specs_measure", ["--gemm-n", "512"], lambda k, d: ((), {"gemm_n": 512}))],
    ("session", "start"): [("session_start", ["{K}", "--out", "{D}/run", "--no-profile"],
                            lambda k, d: ((k,), {"out": d / "run", "profile": False}))],
    ("session", "try"): [("session_try", ["{D}", "{K}", "--hypothesis", "h", "--expect", "duration:down"],
                          lambda k, d: ((d, k), {"hypothesis": "h", "expect": ["duration:down"]}))],
    ("session", "status"): [("session_status", ["{D}"], lambda k, d: ((d,), {}))],
    ("session", "mask"): [("session_mask", ["{D}", "v1", "--why", "w"], lambda k, d: ((d, "v1"), {"why": "w"}))],
    ("session", "unmask"): [("session_unmask", ["{D}", "v1"], lambda k, d: ((d, "v1"), {}))],
    ("session", "restart"): [("session_restart", ["{D}", "--from", "v1"],
                              lambda k, d: ((d,), {"from_version": "v1"}))],
    ("session", "finish"): [("session_finish", ["{D}", "--no-benchmark"], lambda k, d: ((d,), {"benchmark": False}))],
    ("experience", "add"): [("experience_add", ["--kernel", "k", "--change", "num_warps 4 -> 8", "--outcome",
                                                "improved", "--db", "{D}/x.db"],
                             lambda k, d: ((), {"db": d / "x.db"}))],
    ("experience", "recommend"): [("experience_recommend", ["--kernel-type", "softmax", "--limit", "3"],
                                   lambda k, d: ((), {"kernel_type": "softmax", "limit": 3}))],
    ("experience", "search"): [("experience_search", ["vectorize", "loads"],
                                lambda k, d: (("vectorize loads",), {}))],
    ("experience", "list"): [("experience_list", ["--tag", "fusion"], lambda k, d: ((), {"tag": "fusion"}))],
    ("experience", "stats"): [("experience_stats", ["--db", "{D}/x.db"], lambda k, d: ((), {"db": d / "x.db"}))],
    ("experience", "merge"): [("experience_merge", ["{D}/o.db"], lambda k, d: ((d / "o.db",), {}))],
    ("experience", "export"): [("experience_export", ["{D}/x.jsonl"], lambda k, d: ((d / "x.jsonl",), {}))],
    ("experience", "import"): [("experience_import", ["{D}/x.jsonl"], lambda k, d: ((d / "x.jsonl",), {}))],
    ("experience", "mask"): [("experience_mask", ["session:r/v1"], lambda k, d: (("session:r/v1",), {"unmask": False}))],
    ("inductor",): [("import_inductor", ["{K}", "--out", "{D}/k.py", "--mode", "max-autotune", "--shape", "N=8"],
                     lambda k, d: ((k,), {"out": d / "k.py", "mode": "max-autotune", "shape": {"N": 8}}))],
    ("export",): [("export", ["{K}", "--out", "{D}/b", "--arch", "sm_90", "--config", "BLOCK=64", "--shapes",
                              "N=8,dtype=float32", "--shapes", "N=16"],
                   lambda k, d: ((k,), {"out": d / "b", "arch": "sm_90", "config": {"BLOCK": 64},
                                        "shapes": [{"N": 8, "dtype": "float32"}, {"N": 16}]}))],
    ("configs", "list"): [("configs_list", ["--store", "{D}/c.db", "--arch", "sm_90"],
                           lambda k, d: ((), {"store": d / "c.db", "arch": "sm_90"}))],
    ("configs", "lookup"): [("configs_lookup", ["{K}", "--shape", "M=600,dtype=bfloat16", "--shape", '{"N": 8}',
                                                "--arch", "sm_80", "--toolchain", "triton=3.5.0", "--strides", "p10"],
                             lambda k, d: ((str(k), {"M": 600, "dtype": "bfloat16", "N": 8}),
                                           {"arch": "sm_80", "toolchain": {"triton": "3.5.0"}, "strides": "p10"}))],
    ("configs", "export"): [("configs_export", ["{D}/c.jsonl"], lambda k, d: ((d / "c.jsonl",), {}))],
    ("configs", "import"): [("configs_import", ["{D}/c.jsonl", "--store", "{D}/c.db"],
                             lambda k, d: ((d / "c.jsonl",), {"store": d / "c.db"}))],
    ("configs", "merge"): [("configs_merge", ["{D}/o.db"], lambda k, d: ((d / "o.db",), {}))],
    ("configs", "conflicts"): [("configs_conflicts", [], lambda k, d: ((), {}))],
    ("bundle", "verify"): [("bundle_verify", ["{D}"], lambda k, d: ((d,), {}))],
    ("bundle", "bench"): [("bundle_bench", ["{D}", "{K}"], lambda k, d: ((d, k), {}))],
    ("experience", "guide"): [("experience_guide", ["--bottleneck", "memory"], lambda k, d: (("memory", "triton"), {}))],
    ("skill", "show"): [("skill_show", [], lambda k, d: ((), {}))],
    ("skill", "install"): [("skill_install", ["--for", "codex", "--dir", "{D}", "--force"],
                            lambda k, d: (("codex",), {"dir": d, "force": True}))],
    ("mcp",): [("mcp_serve", [], lambda k, d: ((), {}))],
    ("kernelbench", "run"): [("kernelbench_run", ["{D}/P", "{D}/S", "--out", "{D}/o", "--level", "2", "--timeout-s", "9"],
                              lambda k, d: ((d / "P", d / "S"), {"out": d / "o", "level": 2, "timeout_s": 9.0}))],
}

CASES = [(path, v) for path, variants in VARIANTS.items() for v in variants]


def test_every_registered_command_has_a_case_and_every_api_function_a_command():
    registered = set(_commands(typer.main.get_command(app)))
    assert registered == set(VARIANTS), f"commands without a case: {registered - set(VARIANTS)}"
    called = {v[0] for _, v in CASES}
    assert called == set(_api_functions()) - {"bundled_example"}, set(_api_functions()) ^ called


class _Guard:
    """Stubs every api function and forbids new processes; records what was called."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, results: dict[str, Any], raise_error: bool = False) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.processes: list[str] = []
        for name in _api_functions():
            monkeypatch.setattr(api, name, self._stub(name, results.get(name), raise_error))

        def no_popen(obj: Any, args: Any, *a: Any, **k: Any) -> None:
            self.processes.append(f"subprocess {args!r}")
            raise OSError("the CLI test forbids new processes")

        def no_start(obj: Any) -> None:
            self.processes.append("multiprocessing")
            raise OSError("the CLI test forbids new processes")

        monkeypatch.setattr(subprocess.Popen, "__init__", no_popen)
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", no_start)

    def _stub(self, name: str, result: Any, raise_error: bool) -> Callable[..., Any]:
        def stub(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            if raise_error:
                raise SpecError(f"stub {name} failed", f"hint for {name}")
            return result
        return stub


def _argv(path: tuple[str, ...], args: list[str], kernel: Path, folder: Path) -> list[str]:
    return [*path, *(a.replace("{K}", str(kernel)).replace("{D}", str(folder)) for a in args)]


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    kernel = tmp_path / "sentinel_kernel.py"
    kernel.write_text(SENTINEL)
    return kernel


def _options_given(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options the command set in the options model it passed (TuneOptions / OptimizeOptions /
    SessionOptions), by name."""
    from kernelpilot.options import OptimizeOptions, SessionOptions, TuneOptions

    for value in [*args, *kwargs.values()]:
        if isinstance(value, (TuneOptions, OptimizeOptions, SessionOptions)):
            return {k: getattr(value, k) for k in value.model_fields_set}
    return {}


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "human"])
@pytest.mark.parametrize("path,variant", CASES, ids=[f"{' '.join(p)}:{v[0]}" for p, v in CASES])
def test_command_calls_its_api_function_once_and_runs_nothing_else(path, variant, as_json, results, sentinel,
                                                                    tmp_path, monkeypatch):
    name, args, expected = variant
    folder = tmp_path / "folder"
    guard = _Guard(monkeypatch, results)
    res = runner.invoke(app, _argv(path, args, sentinel, folder) + (["--json"] if as_json else []))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert [c[0] for c in guard.calls] == [name], guard.calls
    assert res.exit_code == 0, res.output
    assert not guard.processes and not sentinel.with_suffix(".ran").exists()
    want_args, want_kwargs = expected(sentinel, folder)
    _, got_args, got_kwargs = guard.calls[0]
    got_kwargs = {**_options_given(got_args, got_kwargs), **got_kwargs}
    assert [Path(a) if isinstance(a, Path) else a for a in got_args[:len(want_args)]] == list(want_args)
    assert {k: got_kwargs.get(k) for k in want_kwargs} == want_kwargs
    if as_json:
        data = json.loads(res.stdout)  # one JSON object, nothing else on stdout
        assert isinstance(data, dict) and "error" not in data
    else:
        assert res.stdout.strip() and not res.stdout.lstrip().startswith("{")


@pytest.mark.parametrize("path,variant", CASES, ids=[f"{' '.join(p)}:{v[0]}" for p, v in CASES])
def test_a_kernelpilot_error_exits_one_with_the_error_object(path, variant, results, sentinel, tmp_path, monkeypatch):
    name, args, _ = variant
    guard = _Guard(monkeypatch, results, raise_error=True)
    argv = _argv(path, args, sentinel, tmp_path / "folder")
    res = runner.invoke(app, [*argv, "--json"])
    assert res.exit_code == 1 and [c[0] for c in guard.calls] == [name]
    assert json.loads(res.stdout) == {"error": "SpecError", "message": f"stub {name} failed",
                                      "hint": f"hint for {name}"}
    res = runner.invoke(app, argv)
    assert res.exit_code == 1 and f"stub {name} failed" in res.stderr and f"hint for {name}" in res.stderr
    assert not guard.processes and not sentinel.with_suffix(".ran").exists()


def test_a_failed_result_exits_one_after_printing_it(results, sentinel, monkeypatch):
    failed = results["check"].model_copy(update={"passed": False, "summary": "0/1 seeds passed"})
    guard = _Guard(monkeypatch, {**results, "check": failed})
    res = runner.invoke(app, ["check", str(sentinel), "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["passed"] is False and len(guard.calls) == 1


def test_bad_option_syntax_is_a_usage_error_before_any_api_call(results, sentinel, monkeypatch):
    guard = _Guard(monkeypatch, results)
    res = runner.invoke(app, ["check", str(sentinel), "--shape", "N64", "--json"])
    assert res.exit_code == 2 and guard.calls == []


def _long_run(n_versions: int, accepted: set[int]) -> list[Any]:
    return [_evaluation(i, accepted=i in accepted, duration_ns=1000.0 - i) for i in range(n_versions)]


def _version_rows(text: str) -> list[int]:
    import re

    return [int(m.group(1)) for m in re.finditer(r"^\| v(\d+) \|", text, flags=re.M)]


@pytest.mark.parametrize("command", ["optimize", "report"])
def test_a_long_run_prints_25_rows_every_accepted_and_the_last(command, results, sentinel, tmp_path, monkeypatch):
    from kernelpilot.app.optimize import OptimizeResult
    from kernelpilot.report.final import render_final_report

    accepted = {0, 3, 40, 700, 1001}
    versions = _long_run(1152, accepted)
    run = _run_info(best=1001)
    folder = tmp_path / "run"
    result = (OptimizeResult(out=folder, run=run, versions=versions) if command == "optimize" else
              api.ReportResult(run=run, versions=versions, final_report=str(folder / "final_report.md")))
    _Guard(monkeypatch, {**results, command: result})
    res = runner.invoke(app, [command, str(sentinel if command == "optimize" else folder)])
    assert res.exit_code == 0, res.output
    rows = _version_rows(res.stdout)
    assert len(rows) == 25 and rows == sorted(rows)
    assert accepted <= set(rows) and set(range(1152 - 20, 1152)) <= set(rows)
    assert "1127 of 1152 versions not shown" in res.stdout and str(folder / "final_report.md") in res.stdout
    # the report file lists v0, every incumbent, the 10 fastest and the last, and counts the rest (issue 25)
    text = render_final_report(run, versions, None)
    listed = _version_rows(text)
    assert accepted <= set(listed) and 1151 in listed and len(listed) <= len(accepted) + 10 + 1
    assert f"{1152 - len(listed)} more versions not listed" in text


def test_a_short_run_prints_every_row(results, sentinel, tmp_path, monkeypatch):
    from kernelpilot.app.optimize import OptimizeResult

    versions = _long_run(25, {0, 7})
    _Guard(monkeypatch, {**results, "optimize": OptimizeResult(out=tmp_path, run=_run_info(), versions=versions)})
    res = runner.invoke(app, ["optimize", str(sentinel)])
    assert _version_rows(res.stdout) == list(range(25)) and "not shown" not in res.stdout


def test_too_many_accepted_versions_still_leave_room_for_the_last():
    from kernelpilot.cli.render import MAX_VERSION_ROWS, MIN_LAST_ROWS, shown_versions

    versions = _long_run(300, set(range(0, 300, 5)))  # 60 accepted
    rows = [v.index for v in shown_versions(versions)]
    assert len(rows) == MAX_VERSION_ROWS and rows[-MIN_LAST_ROWS:] == list(range(295, 300))
    assert rows[0] == 300 - 5 * (MAX_VERSION_ROWS - MIN_LAST_ROWS)  # the latest accepted versions


def test_the_module_entry_point_runs_a_command():
    proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "specs", "list", "--json"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**__import__("os").environ,
                                                                "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stderr
    assert any(s["name"] == "H100-SXM" for s in json.loads(proc.stdout)["specs"])
