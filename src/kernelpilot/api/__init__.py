"""kernelpilot's Python API: one function per CLI command, typed, returning pydantic models (or plain dicts of
them, where the command's JSON output is such a dict).

The CLI (:mod:`kernelpilot.cli`) only parses arguments, calls one of these and prints what it returns. The static
commands (``inspect``, ``pipeline``), the search commands (``tune``, ``cache``) and the specs commands live in
:mod:`kernelpilot.api.static`, :mod:`kernelpilot.api.search` and :mod:`kernelpilot.api.specs` (the experience log's
in :mod:`kernelpilot.api.experience`, the config store's in :mod:`kernelpilot.api.configs`, the bundle commands in :mod:`kernelpilot.api.bundle`) and are re-exported here, so ``from kernelpilot import api; api.tune(...)``
works for every command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

import kernelpilot
from kernelpilot.errors import ProfileError, ToolMissingError
from kernelpilot.hardware.roofline import Roofline
from kernelpilot.kernels.contract import KernelFile, load_kernel, resolve_config, resolve_shape
from kernelpilot.kernels.workload import Workload
from kernelpilot.api.search import cache_clear, cache_list, cache_show, tune, tune_workload
from kernelpilot.api.specs import specs_cite, specs_list, specs_measure, specs_show
from kernelpilot.api.static import inspect, inspect_space, pipeline
from kernelpilot.api.bundle import bundle_bench, bundle_verify, export
from kernelpilot.api.verification import VerifyResult, verify
from kernelpilot.api.inductor import InductorImport, import_inductor
from kernelpilot.api.experience import (experience_add, experience_export, experience_guide, experience_import,
                                        experience_list, experience_mask, experience_merge, experience_recommend,
                                        experience_search, experience_stats)
from kernelpilot.api.configs import (configs_conflicts, configs_export, configs_import, configs_list,
                                     configs_lookup, configs_merge)
from kernelpilot.api.workload import workload_buckets, workload_capture, workload_ranges
from kernelpilot.api.skill import skill_install, skill_show
from kernelpilot.api.kernelbench import KernelBenchResult, kernelbench_frame, kernelbench_run
from kernelpilot.api.session import (session_finish, session_mask, session_restart, session_start, session_status,
                                     session_try, session_unmask)
from kernelpilot.app.optimize import OptimizeResult
from kernelpilot.app.report_cmd import ReportResult
from kernelpilot.app.optimize import optimize as _optimize
from kernelpilot.app.context import detect_target
from kernelpilot.loop import roofline_for
from kernelpilot.options import OptimizeOptions, TuneOptions, at_least, check_kernel_path, check_shape_values, positive
from kernelpilot.measure.correctness import CorrectnessResult
from kernelpilot.measure.env import EnvInfo, collect_env
from kernelpilot.measure.timing import TimingResult
from kernelpilot.profile.card import BottleneckCard, card_from_metrics
from kernelpilot.profile.metrics import KernelMetrics, main_kernel, read_report, require_verdict_metrics
from kernelpilot.profile.ncu_run import profile_kernel
from kernelpilot.profile.verdict import Verdict, judge
from kernelpilot.report.benchmark import BenchmarkResult, run_benchmark
from kernelpilot.search.isolated import DEFAULT_TIMEOUT_S, IsolatedKernel
from kernelpilot.target import Target

if TYPE_CHECKING:
    from kernelpilot.search.worker_child import WorkerOptions

__all__ = ["bundled_example", "env", "check", "verify", "VerifyResult", "bench", "profile", "roofline", "optimize", "report",
           "inspect", "inspect_space", "pipeline", "tune", "tune_workload", "workload_ranges", "workload_capture", "workload_buckets",
           "cache_list", "cache_show", "cache_clear",
           "specs_list", "specs_show", "specs_cite", "specs_measure",
           "BenchResult", "ProfileResult", "RooflineResult", "ReportResult", "OptimizeResult"]
__all__ += ["experience_add", "experience_recommend", "experience_search", "experience_list", "experience_stats",
            "experience_merge", "experience_export", "experience_import", "experience_mask", "experience_guide"]
__all__ += ["export", "bundle_verify", "bundle_bench"]
__all__ += ["configs_list", "configs_lookup", "configs_export", "configs_import", "configs_merge", "configs_conflicts"]
__all__ += ["import_inductor", "InductorImport"]
__all__ += ["skill_show", "skill_install"]
__all__ += ["session_start", "session_try", "session_status", "session_mask", "session_unmask", "session_restart",
            "session_finish"]
__all__ += ["mcp_serve"]
__all__ += ["OptimizeOptions", "TuneOptions"]  # the options of optimize and tune (kernelpilot.options)
__all__ += ["kernelbench_run", "KernelBenchResult"]  # kernelbench_frame: a reader, not a command


def bundled_example(name: str = "softmax") -> Path:
    """Path of a bundled example kernel (``softmax``, ``vector_add``, ``layer_norm``, ``matmul``)."""
    return Path(kernelpilot.__file__).resolve().parent / "examples" / f"{name}.py"


def env(*, probe_ncu: bool = True) -> EnvInfo:
    """Provenance of this machine (see :func:`kernelpilot.measure.env.collect_env`)."""
    return collect_env(probe_ncu=probe_ncu)


def check(kernel: str | Path, *, shape: dict[str, Any] | None = None, config: dict[str, Any] | None = None,
          ref: str | Path | None = None, n_seeds: int = 3, timeout_s: float = DEFAULT_TIMEOUT_S,
          strict: bool = False) -> CorrectnessResult:
    """Correctness of one config on ``n_seeds`` fresh input sets and the derived shapes, run in an isolated worker
    process; ``strict`` refuses loosened tolerances and skipped derived shapes.

    Raises:
        OptionError: ``n_seeds`` < 1, ``timeout_s`` not positive, a ``shape`` value of the wrong type.
        ContractError: the kernel file, shape or config breaks the contract (a folder given as the kernel file).
        KernelFailed: the kernel code exited, crashed, hung (over ``timeout_s`` seconds) or raised outside a seed.
    """
    _check_common(kernel, ref, timeout_s)
    at_least("--seeds", n_seeds, 1, "the number of fresh input sets to check")
    with IsolatedKernel(kernel, ref, interpreted=None, timeout_s=timeout_s) as iso:
        return CorrectnessResult.model_validate_json(
            iso.call("kernelpilot.api:_check_in_worker", shape, config, n_seeds, strict))


def _check_common(kernel: str | Path | None, ref: str | Path | None, timeout_s: float | None) -> None:
    """The checks every command that runs the kernel makes first: the kernel and reference paths are files (not
    folders), the time limit is positive.

    Raises:
        ContractError: a folder given as the kernel or reference file. OptionError: ``timeout_s`` not positive.
    """
    check_kernel_path(kernel)
    check_kernel_path(ref, "reference file")
    positive("--timeout-s", timeout_s, "300")


def _shape(kf: KernelFile, shape: dict[str, Any] | None) -> dict[str, Any]:
    """:func:`resolve_shape` after checking the overrides' types against the file's SHAPE (and CPU_SHAPE).

    Raises:
        OptionError: a value of the wrong type (``N=abc``). ContractError: a name SHAPE does not have.
    """
    check_shape_values(shape, {**kf.shape, **(kf.cpu_shape or {})}, str(kf.path))
    return resolve_shape(kf, shape)


def _check_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target, shape: dict[str, Any] | None,
                     config: dict[str, Any] | None, n_seeds: int, strict: bool = False) -> str:
    """Worker side of :func:`check`: the ``check`` subset of the stage table (:mod:`kernelpilot.search.stages`);
    the CorrectnessResult as JSON (a failed check is an answer, not an error).

    Raises:
        KernelFailed: a stage before the check refused the kernel (the timer guard: ``timer_tampered``).
    """
    from kernelpilot.search.stages import refusal, run_command

    wopts = opts.model_copy(update={"shape": _shape(kf, shape), "strict": strict})
    failure, ctx = run_command("check", kf, wopts, target, resolve_config(kf, config), seeds=tuple(range(n_seeds)))
    if "correctness" not in ctx.results:
        raise refusal(ctx, failure)
    return ctx.results["correctness"].model_dump_json()


class BenchResult(BaseModel):
    """``kernelpilot bench``: the kernel's timing, where it stands on the roofline, and optional baselines;
    ``stages_run`` / ``stages_skipped`` (stage -> why): the stages of the ``bench`` subset that checked it and those
    that did not (``device_activity`` needs a GPU)."""

    kernel: str
    shape: dict[str, Any]
    config: dict[str, Any]
    timing: TimingResult
    floor_ns: float | None
    pct_of_roofline: float | None
    impossible: bool
    baselines: BenchmarkResult | None = None
    stages_run: list[str] = []
    stages_skipped: dict[str, str] = {}

    def to_dataframe(self) -> Any:
        """The timing as a pandas DataFrame: the baselines' frame
        (:meth:`kernelpilot.report.benchmark.BenchmarkResult.to_dataframe`) when they were timed, else one row for
        the kernel (``duration_ns``, ``iqr_ns``, ``n_samples`` ...).

        Raises:
            MissingDependencyError: pandas is not installed (``pip install 'kernelpilot[dataframe]'``).
        """
        from kernelpilot.records.frames import benchmark_frame

        if self.baselines is not None:
            return self.baselines.to_dataframe()
        return benchmark_frame([(f"{Path(self.kernel).stem} {self.config}", self.timing, None, None)])


def bench(kernel: str | Path, *, shape: dict[str, Any] | None = None, config: dict[str, Any] | None = None,
          ref: str | Path | None = None, baselines: bool = False, gpu: str | None = None,
          timeout_s: float = DEFAULT_TIMEOUT_S, fresh_baselines: bool = False) -> BenchResult:
    """Check, then time one config (CUDA events, L2 flushed; interpreted and labelled without a GPU), in an isolated
    worker: the ``bench`` subset of the stage table (:mod:`kernelpilot.search.stages`: correctness over the seeds
    and derived shapes before timing, the re-check and, on a GPU, the device activity after).

    With ``baselines`` also times PyTorch eager and torch.compile on the same inputs, in the same worker; the
    torch.compile timing comes from the baseline cache when it is usable (:mod:`kernelpilot.measure.baseline_cache`)
    unless ``fresh_baselines``. This process never imports torch: the worker finds the device.

    Raises:
        OptionError: ``timeout_s`` not positive, a ``shape`` value of the wrong type.
        ContractError / SpecError: bad kernel file, shape, config or ``gpu``.
        KernelFailed: the kernel code exited, crashed, hung (over ``timeout_s`` seconds) or raised, or a stage
            refused it (its status: ``inputs_mutated``, ``stale_result`` ...; the hint names the stage).
    """
    _check_common(kernel, ref, timeout_s)
    with IsolatedKernel(kernel, ref, interpreted=None, timeout_s=timeout_s) as iso:
        return BenchResult.model_validate_json(
            iso.call("kernelpilot.api:_bench_in_worker", shape, config, baselines, gpu, fresh_baselines))


def _bench_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target, shape: dict[str, Any] | None,
                     config: dict[str, Any] | None, baselines: bool, gpu: str | None,
                     fresh_baselines: bool = False) -> str:
    """Worker side of :func:`bench`: the ``bench`` subset of the stage table (checked, then timed, re-checked and,
    on a GPU, its device activity judged; :mod:`kernelpilot.search.stages`); the BenchResult as JSON.

    Raises:
        KernelFailed: a stage refused the kernel (its status; a result that cannot be defended is an error, never a
            time). SpecError: an unknown ``gpu`` (before any timing).
    """
    from kernelpilot.search.stages import refusal, run_command

    shp, cfg = _shape(kf, shape), resolve_config(kf, config)
    from kernelpilot.measure.correctness import observed_roles_at

    roles = observed_roles_at(kf, shp, target.torch_device)  # RoleMismatch: a declaration to fix, before any timing
    roof, _, _ = roofline_for(kf, shp, target, gpu, roles)  # an unknown --gpu fails before any timing
    failure, ctx = run_command("bench", kf, opts.model_copy(update={"shape": shp}), target, cfg)
    if failure is not None:
        raise refusal(ctx, failure)
    timing = ctx.results["timing"]
    measured = timing.is_measurement and roof is not None
    return BenchResult(kernel=str(kf.path), shape=shp, config=cfg, timing=timing,
                       floor_ns=roof.floor_ns if roof else None,
                       pct_of_roofline=roof.pct_of_roofline(timing.median_ns) if measured else None,
                       impossible=bool(measured and roof.is_impossible(timing.median_ns)),
                       baselines=run_benchmark(kf, shp, cfg, target, kernel_timing=timing,
                                               use_cache=not fresh_baselines) if baselines else None,
                       stages_run=[n for n in ctx.phases if n not in ctx.skipped], stages_skipped=dict(ctx.skipped)
                       ).model_dump_json()


class ProfileResult(BaseModel):
    """``kernelpilot profile``: the report read, every kernel in it, the main kernel, its verdict and its
    bottleneck card (schema: profile/schema/bottleneck_card.v1.json). A light profile (ncu missing or counters
    refused) has no report, kernels, main or verdict: its card says which evidence it had."""

    report: str | None
    kernels: list[KernelMetrics]
    main: KernelMetrics | None
    verdict: Verdict | None
    card: BottleneckCard


def profile(kernel: str | Path | None = None, *, report: str | Path | None = None, out: str | Path | None = None,
            shape: dict[str, Any] | None = None, config: dict[str, Any] | None = None,
            ref: str | Path | None = None, light: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S) -> ProfileResult:
    """Profile a kernel with ncu (GPU), or read an existing ``report`` (no GPU needed); then judge it.

    When ncu is missing or may not read counters, falls back to the light profile (timing + roofline + compile
    metadata, :mod:`kernelpilot.profile.light`) behind the same result; ``light=True`` asks for that profile
    directly (no ncu run; the card says which evidence it had). The kernel code runs in an isolated worker
    (resolving shape and config, the light card's timing) or in ncu's own child process, never here.

    Raises:
        ToolMissingError: profiling requested without a GPU.
        ReportError / ProfileError: the report cannot be read, or ncu failed for another reason.
        ContractError: the kernel file, shape or config breaks the contract.
        KernelFailed: the kernel code exited, crashed, hung (over ``timeout_s`` seconds) or raised in the worker.
    """
    if report is None:
        _check_common(kernel, ref, timeout_s)
        if kernel is None:
            raise ToolMissingError("nothing to profile", "give a KERNEL file or --report FILE.ncu-rep")
        if not detect_target().is_gpu:
            raise ToolMissingError("profiling needs a CUDA GPU; none is visible",
                                   "run on a GPU machine, or read a saved report with --report FILE.ncu-rep")
        with IsolatedKernel(kernel, ref, interpreted=False, timeout_s=timeout_s) as iso:
            path, name, shp, cfg = iso.call("kernelpilot.api:_resolve_in_worker", shape, config)
            if light:
                return _light(iso, shp, cfg, "light profile requested (--light): no ncu run")
            dest = Path(out) if out else Path(f"{name}.ncu-rep")
            try:
                report = profile_kernel(Path(path), shp, cfg, dest, ref=Path(ref) if ref else None)
            except (ToolMissingError, ProfileError) as exc:
                if isinstance(exc, ProfileError) and "ERR_NVGPUCTRPERM" not in exc.message:
                    raise
                return _light(iso, shp, cfg, exc.message)
    kernels = read_report(report)
    main = require_verdict_metrics(main_kernel(kernels), report)
    verdict = judge(main)
    card = card_from_metrics(main, verdict)
    from kernelpilot.backends.registry import language_of

    if kernel is not None and language_of(kernel) == "cuda":  # suggested changes in CUDA words
        from kernelpilot.profile.card_suggest import for_backend

        card = BottleneckCard.model_validate(for_backend(card.model_dump(by_alias=True), "cuda"))
    return ProfileResult(report=str(report), kernels=kernels, main=main, verdict=verdict, card=card)


def _resolve_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target, shape: dict[str, Any] | None,
                       config: dict[str, Any] | None) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """Worker side of :func:`profile`: (kernel path, kernel name, resolved shape, resolved config)."""
    return str(kf.path), kf.name, _shape(kf, shape), resolve_config(kf, config)


def _light(iso: IsolatedKernel, shape: dict[str, Any], config: dict[str, Any], reason: str) -> ProfileResult:
    """The light profile (no ncu), its timing taken in the isolated worker ``iso``."""
    return ProfileResult.model_validate_json(iso.call("kernelpilot.api:_light_in_worker", shape, config, reason))


def _light_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target, shape: dict[str, Any], config: dict[str, Any],
                     reason: str) -> str:
    """Worker side of :func:`_light`: the ``profile`` subset of the stage table (a checked timing;
    :mod:`kernelpilot.search.stages`), placed on the roofline with the compile metadata (JSON).

    Raises:
        KernelFailed: a stage refused the kernel (its status).
    """
    import torch

    from kernelpilot.measure.correctness import observed_roles_at
    from kernelpilot.profile.light import light_profile
    from kernelpilot.search.stages import refusal, run_command

    failure, ctx = run_command("profile", kf, opts.model_copy(update={"shape": shape}), target, config)
    if failure is not None:
        raise refusal(ctx, failure)
    roof, _, _ = roofline_for(kf, shape, Target.gpu(), None, observed_roles_at(kf, shape, "cuda"))  # kept by the roles stage
    card, _ = light_profile(kf.path, config, shape, timing_ns=ctx.results["timing"].median_ns, roofline=roof,
                            device_name=torch.cuda.get_device_name(0), kernel_name=kf.name, reason=reason)
    return ProfileResult(report=None, kernels=[], main=None, verdict=None, card=card).model_dump_json()


class RooflineResult(BaseModel):
    """``kernelpilot roofline``: the workload and, with a spec, the cited roofline."""

    kernel: str
    shape: dict[str, Any]
    workload: Workload
    roofline: Roofline | None
    note: str = ""


def roofline(kernel: str | Path, *, gpu: str | None = None, shape: dict[str, Any] | None = None) -> RooflineResult:
    """FLOPs, bytes, arithmetic intensity and (with ``gpu`` or a GPU present) floor and target. No GPU needed.

    The shape is ``SHAPE`` (the GPU shape) unless overridden, also on a CPU machine: inputs are built on the CPU
    only to count bytes. On a GPU the bytes are the ones observed by running the reference in a worker (each
    tensor's parts read and written, :mod:`kernelpilot.kernels.roles`), as every command that times the kernel
    counts them; without a GPU, the declared roles (the reference at the GPU shape on a CPU can take minutes), and
    ``workload.bytes_source`` says which.

    Raises:
        RoleMismatch: (GPU) a declared role contradicts the observation.
    """
    check_kernel_path(kernel)
    target = detect_target()
    # a .cu file loads the same with or without a GPU (nothing runs: inputs are built on the CPU to count bytes)
    kf = load_kernel(kernel, None, interpreted=(target.interpreted and Path(kernel).suffix.lower() == ".py"))
    shp = dict(kf.shape)
    shp.update(_shape(kf, shape) if shape else {})
    roles = None
    if target.is_gpu:  # the roles observed in a worker (the reference on the GPU); without one, the declared roles
        from kernelpilot.kernels.roles import RoleReport

        with IsolatedKernel(kernel, None, interpreted=False) as iso:
            data = iso.call("kernelpilot.search.stage_steps:observe_roles_in_worker", shp)
        roles = RoleReport.model_validate(data) if data else None
    roof, work, note = roofline_for(kf, shp, target, gpu, roles)
    return RooflineResult(kernel=str(kf.path), shape=shp, workload=work, roofline=roof, note=note)


def optimize(kernel: str | Path | None = None, options: OptimizeOptions | None = None, *,
             out: str | Path | None = None, resume: str | Path | None = None, log: Any = None,
             **keywords: Any) -> OptimizeResult:
    """The evidence loop (``kernelpilot optimize``): check, time, profile, judge, one change, repeat; every version
    recorded in the run folder and committed when decided (:func:`kernelpilot.app.optimize.optimize`). With
    ``resume``, continue that killed or interrupted run instead (:func:`kernelpilot.app.resume.resume`: its stored
    options are read back whole; only ``timeout_s``, ``budget_s``, ``iterations`` and ``cache_root`` may be given
    again).

    Args:
        kernel: the kernel file (None: the bundled softmax example, :func:`bundled_example`).
        options: the run's :class:`kernelpilot.options.OptimizeOptions` (``iterations``, ``budget_s`` (seconds),
            ``shape``, ``config``, ``ref``, ``gpu``, ``profile``, ``git``, ``benchmark``, ``strategy``, ``seed``,
            ``timeout_s`` (seconds per version), ``replay``, ``cache_root``, ``constraints``, ``baselines_ns`` (ns);
            each documented there). keywords: instead, its fields as keywords (a None value means "not given");
            the two together are an error.
        out: the run folder, new or empty (None: ``runs/<kernel file stem>-<local time YYYYmmdd-HHMMSS>``).
        resume: a run folder to continue (then ``kernel`` and ``out`` must be None, and no option but those four
            set). log: called with one line per step.

    Returns:
        :class:`OptimizeResult` (``run.best_version`` None when no version was correct).

    Raises:
        OptionError: a bad option value (out of range, unknown, of the wrong type), or options given with
            ``resume`` that the run already fixed.
        ContractError: the kernel file breaks the contract. RunFolderError: ``out`` is not empty, or the run to
            resume is not a run folder, lost records or holds options that are not an OptimizeOptions.
        SearchError: unknown strategy, a cache of another kernel.
        SpecError: unknown ``gpu``. ToolMissingError: git requested but unavailable.
        Interrupted: SIGINT or SIGTERM stopped the run (the hint gives the command that resumes it).
    """
    import datetime as _dt

    from kernelpilot.errors import OptionError
    from kernelpilot.options import build_options

    if options is not None and keywords:
        raise OptionError(f"api.optimize got options and keywords ({', '.join(sorted(keywords))})",
                          "give one OptimizeOptions, or the options as keywords")
    if options is None:
        options = build_options(OptimizeOptions, **keywords)
    given = {k: getattr(options, k) for k in options.model_fields_set}
    given_log: dict[str, Any] = {"log": log} if log is not None else {}
    if resume is not None:
        from kernelpilot.app.resume import resume as _resume

        again = ("timeout_s", "budget_s", "iterations", "cache_root")
        fixed = sorted(k for k, v in given.items() if k not in again and v not in ({}, [], False))
        if kernel is not None or out is not None or fixed:
            extra = [*(["KERNEL"] if kernel is not None else []), *(["--out"] if out is not None else []), *fixed]
            raise OptionError(f"--resume continues a run with the kernel and options it started with; also given: "
                              f"{', '.join(extra)}",
                              "give only --resume RUN (and, to change them, --timeout-s, --budget-s, --iterations)")
        return _resume(resume, **{k: v for k, v in given.items() if k in again}, **given_log)
    path = Path(kernel) if kernel is not None else bundled_example("softmax")
    folder = out if out is not None else Path("runs") / f"{path.stem}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    return _optimize(path, options, out=folder, **given_log)


def report(run_folder: str | Path) -> ReportResult:
    """Validate a run folder (``optimize``) or a ``tune --out`` folder — every record against its schema, against
    each other and against the run's git history — and rebuild its report (``kernelpilot report``;
    :func:`kernelpilot.app.report_cmd.report`).

    Returns:
        A :class:`ReportResult` (``finished`` False, with a ``note`` on how to resume, for a killed run).

    Raises:
        RunFolderError: not a run or tune folder. RecordError: a record is invalid, contradicts another, or changed
            since its commit (every file named, with what to do).
    """
    from kernelpilot.app.report_cmd import report as _report

    return _report(run_folder)


def mcp_serve() -> dict[str, Any]:
    """Serve the agent tools over MCP on stdin/stdout until the client closes stdin (``kernelpilot mcp``;
    :func:`kernelpilot.agents.mcp_server.serve`, handed this module so it needs no import of it).

    Returns:
        ``{"server", "transport": "stdio", "tools": [names], "calls": tool calls served}``.

    Raises:
        MissingDependencyError: the ``mcp`` SDK is not installed (``pip install 'kernelpilot[mcp]'``).
    """
    import sys

    from kernelpilot.agents.mcp_server import serve

    return serve(sys.modules[__name__])
