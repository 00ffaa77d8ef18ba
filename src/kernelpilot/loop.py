"""``kernelpilot optimize``: the evidence loop, end to end.

check → time → profile → verdict → next change → (repeat) → report, one version folder per config tried, one git
commit per accepted version. A version replaces the incumbent only when it is correct, faster beyond noise —
interleaved A/B samples of the candidate and its parent (:func:`kernelpilot.measure.timing.time_interleaved`)
judged by a one-sided Mann–Whitney test and a bootstrap CI of the ratio of medians
(:func:`kernelpilot.search.stats.decide`), the same rule as ``kernelpilot tune`` — and not faster than the
speed-of-light floor (an impossible time is rejected and reported). The loop stops after ``iterations`` changes, when the
incumbent reaches the target (90 % of the roofline), or when no untried neighbour is left.
"""

from __future__ import annotations

import datetime as _dt
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from pydantic import BaseModel

from kernelpilot.errors import KernelpilotError, SpecError, ToolMissingError
from kernelpilot.hardware.roofline import Roofline, compute_roofline, render_roofline_md
from kernelpilot.hardware.specs import find_spec, match_device
from kernelpilot.kernels.contract import (KernelFile, load_kernel, make_case, resolve_config, resolve_shape, run_kernel,
                                          use_interpreter)
from kernelpilot.kernels.workload import Workload, workload
from kernelpilot.measure.correctness import check_correctness
from kernelpilot.measure.env import collect_env, render_env_md
from kernelpilot.measure.timing import TimingResult, faster_beyond_noise, time_callable, time_interleaved
from kernelpilot.profile.card import BottleneckCard, card_from_metrics
from kernelpilot.profile.light import light_profile
from kernelpilot.profile.metrics import KernelMetrics, main_kernel, read_report
from kernelpilot.profile.ncu_run import profile_kernel
from kernelpilot.profile.verdict import Verdict, judge
from kernelpilot.records.history import RunHistory
from kernelpilot.records.models import RunInfo, VersionOutcome
from kernelpilot.records.workspace import Workspace, write_json, write_text
from kernelpilot.report.benchmark import render_benchmark_md, run_benchmark
from kernelpilot.report.final import render_final_report
from kernelpilot.report.hypothesis import render_hypothesis
from kernelpilot.search.guided import Move, config_key, propose_moves
from kernelpilot.search.stats import Decision, decide

Log = Callable[[str], None]


def detect_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``; without a GPU it switches the Triton interpreter on
    (``TRITON_INTERPRET=1``) right away, before triton is imported (see :func:`use_interpreter`)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        use_interpreter(True)
    return device


def now_utc() -> str:
    """The current UTC time, ISO 8601, seconds."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def roofline_for(kf: KernelFile, shape: dict[str, Any], device: str, gpu: str | None) -> tuple[Roofline | None, Workload, str]:
    """The roofline at ``shape`` on ``gpu`` (a spec name) or on the current device.

    Returns (roofline or None, the workload, a note saying why there is no roofline when None).
    """
    case = make_case(kf, shape, 0, device)
    work = workload(kf, case)
    try:
        if gpu:
            spec = find_spec(gpu)
        elif device == "cuda":
            spec = match_device(torch.cuda.get_device_name(0))
        else:
            return None, work, "no GPU and no --gpu NAME: FLOPs and bytes only, no speed-of-light floor"
    except SpecError as exc:
        return None, work, f"no spec for this GPU: {exc.message}"
    if work.bytes_moved <= 0:
        return None, work, "bytes moved is 0: no roofline"
    return compute_roofline(work.flops, work.bytes_moved, kf.compute_unit, spec), work, ""


def datasheet_roofline(roof: Roofline | None, compute_unit: str) -> Roofline | None:
    """The same roofline on datasheet peaks only (measured ceilings dropped).

    A time under the measured-ceiling floor can be real (a kernel may beat torch's copy or cuBLAS by a little);
    a time under the datasheet floor cannot, so that is the floor used to reject impossible timings.
    """
    if roof is None:
        return None
    spec = find_spec(roof.gpu)
    return compute_roofline(roof.flops, roof.bytes_moved, compute_unit, spec.model_copy(update={"measured": {}}))


def render_roofline_section(roof: Roofline | None, work: Workload, shape: dict[str, Any], note: str) -> str:
    """roofline.md: the cited roofline, or the workload alone with the reason there is no floor."""
    head = (f"Shape: {shape}\n\nFLOPs: {work.flops:.6g} ({work.flops_source})\n\n"
            f"Bytes: {work.bytes_moved:.6g} ({work.bytes_source})\n\n")
    if roof is None:
        ai = work.flops / work.bytes_moved if work.bytes_moved else float("nan")
        return f"# Roofline\n\n{head}Arithmetic intensity: {ai:.3g} FLOP/byte\n\n{note}\n"
    return f"{render_roofline_md(roof)}\n\n## Workload\n\n{head}"


@dataclass
class _Evaluated:
    outcome: VersionOutcome
    timing: TimingResult | None = None
    metrics: KernelMetrics | None = None
    verdict: Verdict | None = None
    card: BottleneckCard | None = None


class OptimizeResult(BaseModel):
    """What :func:`optimize` returns: the run folder, its records, and the best version."""

    out: Path
    run: RunInfo
    versions: list[VersionOutcome] = []

    @property
    def best(self) -> VersionOutcome | None:
        """The best accepted version (or v0), None when nothing was correct."""
        return next((v for v in self.versions if v.index == self.run.best_version), None)


class Optimizer:
    """One optimize run. Use :func:`optimize`; the class keeps the run's state between versions."""

    def __init__(self, kf: KernelFile, ws: Workspace, shape: dict[str, Any], device: str, *, profile: bool,
                 git: bool, log: Log) -> None:
        self.kf, self.ws, self.shape, self.device = kf, ws, shape, device
        self.profile = profile and device == "cuda"
        self.profile_note = "" if self.profile else ("profiling off (--no-profile)" if device == "cuda" else
                                                     "no GPU: ncu profile and verdict skipped (interpreter run)")
        self.history = RunHistory(ws.root) if git else None
        self.log = log
        self.roofline: Roofline | None = None  # measured ceilings preferred: % of roofline and the target
        self.limit_roofline: Roofline | None = None  # datasheet peaks only: the floor no correct run can beat
        self.evaluated: list[_Evaluated] = []
        self.tried: set[str] = set()
        #: interleaved samples per side for each accept/reject decision (fewer under the interpreter: slow, and
        #: its times are not measurements anyway)
        self.ab_samples = 30 if device == "cuda" else 8

    # -- one version ---------------------------------------------------------------------------------
    def evaluate(self, index: int, config: dict[str, Any], parent: _Evaluated | None, move: Move | None) -> _Evaluated:
        """Run check → time → profile → verdict for one config and record everything in ``v{index}/``."""
        vdir = self.ws.version_dir(index)
        self.tried.add(config_key(config))
        write_json(vdir / "config.json", {"config": config, "move": move.model_dump() if move else None,
                                          "parent": parent.outcome.index if parent else None,
                                          "source_sha256": self.kf.source_sha256, "shape": self.shape})
        write_text(vdir / "hypothesis.md", render_hypothesis(index, config, move, parent, self.roofline))
        base = dict(index=index, config=config, parent=parent.outcome.index if parent else None, move=move)
        self.log(f"v{index}: {'baseline' if move is None else f'{move.tunable} {move.old} → {move.new}'} — checking")
        correctness = check_correctness(self.kf, self.shape, config, self.device)
        write_json(vdir / "correctness.json", correctness)
        if not correctness.passed:
            self.log(f"v{index}: incorrect — {correctness.summary}")
            return self._finish(vdir, _Evaluated(VersionOutcome(**base, status="failed", correct=False,
                                                                reason=f"incorrect: {correctness.summary}")))
        try:
            timing = self.time(config)
        except Exception as exc:  # the kernel passed once but fails under repetition: record, do not crash
            return self._finish(vdir, _Evaluated(VersionOutcome(**base, status="failed", correct=True,
                                                                reason=f"timing failed: {type(exc).__name__}: {exc}")))
        write_json(vdir / "timing.json", timing)
        ev = _Evaluated(VersionOutcome(**base, status="rejected", correct=True, reason="",
                                       median_ns=timing.median_ns, iqr_ns=timing.iqr_ns,
                                       is_measurement=timing.is_measurement), timing=timing)
        self._profile(vdir, config, ev)
        if ev.card is None:
            self._light_card(vdir, ev)
        self._decide(ev, parent)
        return self._finish(vdir, ev)

    def ab_decision(self, candidate: dict[str, Any], incumbent: dict[str, Any]) -> Decision:
        """Interleaved A/B samples of two configs on the same inputs, judged by :func:`kernelpilot.search.stats.decide`."""
        case = make_case(self.kf, self.shape, 0, self.device)
        a, b = time_interleaved(lambda: run_kernel(self.kf, case.inputs, candidate),
                                lambda: run_kernel(self.kf, case.inputs, incumbent), self.ab_samples, self.device)
        return decide(a, b)

    def time(self, config: dict[str, Any]) -> TimingResult:
        """Time ``run_kernel`` at the run's shape on fresh inputs (seed 0)."""
        case = make_case(self.kf, self.shape, 0, self.device)
        return time_callable(lambda: run_kernel(self.kf, case.inputs, config), self.device)

    def _profile(self, vdir: Path, config: dict[str, Any], ev: _Evaluated) -> None:
        if not self.profile:
            ev.outcome.profile_error = self.profile_note
            return
        try:
            report = profile_kernel(self.kf.path, self.shape, config, vdir / "profile.ncu-rep",
                                    ref=self.kf.reference_path if self.kf.reference_path != self.kf.path else None)
            kernels = read_report(report)
            ev.metrics = main_kernel(kernels)
            ev.verdict = judge(ev.metrics)
        except ToolMissingError as exc:
            self.profile, self.profile_note = False, f"profiling disabled: {exc.message}"
            ev.outcome.profile_error = self.profile_note
            self.log(f"  {self.profile_note}")
            return
        except KernelpilotError as exc:
            ev.outcome.profile_error = str(exc)
            self.log(f"  profile failed: {exc.message}")
            if "ERR_NVGPUCTRPERM" in exc.message:
                self.profile, self.profile_note = False, "profiling disabled: counters not permitted"
            return
        write_json(vdir / "metrics.json", {"main_kernel": ev.metrics.model_dump(),
                                           "all_kernels": [k.kernel_name for k in kernels]})
        ev.card = card_from_metrics(ev.metrics, ev.verdict)
        write_json(vdir / "verdict.json", ev.card)
        ev.outcome.bound = ev.card.class_
        ev.outcome.verdict_summary = ev.card.summary

    def _light_card(self, vdir: Path, ev: _Evaluated) -> None:
        """Without ncu on a GPU: a light card from the measured time, the roofline and the compile metadata."""
        if self.device != "cuda" or ev.timing is None or not ev.timing.is_measurement:
            return
        try:
            ev.card, _ = light_profile(self.kf.path, ev.outcome.config, self.shape, timing_ns=ev.timing.median_ns,
                                       roofline=self.roofline, device_name=torch.cuda.get_device_name(0),
                                       kernel_name=self.kf.name, reason=self.profile_note or "no ncu profile")
        except ValueError as exc:  # e.g. a time under the floor: the decision step reports it
            ev.outcome.profile_error = f"{ev.outcome.profile_error or ''}; no light card: {exc}".lstrip("; ")
            return
        write_json(vdir / "verdict.json", ev.card)
        ev.outcome.bound = ev.card.class_
        ev.outcome.verdict_summary = ev.card.summary

    def _decide(self, ev: _Evaluated, parent: _Evaluated | None) -> None:
        o, t = ev.outcome, ev.timing
        assert t is not None
        if self.roofline is not None and t.is_measurement:
            o.pct_of_roofline = self.roofline.pct_of_roofline(t.median_ns)
            limit = self.limit_roofline or self.roofline
            if limit.is_impossible(t.median_ns):
                o.status = "rejected"
                o.reason = (f"impossible: median {t.median_ns:.0f} ns is under the datasheet speed-of-light floor "
                            f"{limit.floor_ns:.0f} ns — the timing, the FLOP/byte counts or the spec is wrong")
                return
        v0 = self.evaluated[0] if self.evaluated else None
        if v0 is not None and v0.timing is not None:
            o.speedup_vs_v0 = v0.timing.median_ns / t.median_ns
        if parent is None:
            o.status, o.reason, o.speedup_vs_v0 = "baseline", "v0: the starting config", 1.0
            return
        assert parent.timing is not None
        _, speedup, why = faster_beyond_noise(t, parent.timing)
        o.speedup_vs_parent = speedup
        decision = self.ab_decision(ev.outcome.config, parent.outcome.config)
        o.status = "accepted" if decision.replace else "rejected"
        o.reason = ("accepted: " if decision.replace else "not accepted: ") + f"{why}; A/B: {decision.reason}"
        if ev.metrics is not None and parent.metrics is not None and o.move is not None:
            o.observed = _observed(o.move.expected_metric, parent.metrics, ev.metrics)

    def _finish(self, vdir: Path, ev: _Evaluated) -> _Evaluated:
        o = ev.outcome
        if self.history is not None and o.status in ("baseline", "accepted"):
            what = "baseline" if o.status == "baseline" else f"{o.move.tunable} {o.move.old}→{o.move.new}"  # type: ignore[union-attr]
            speed = f", {o.speedup_vs_parent:.3f}x vs v{o.parent}" if o.speedup_vs_parent else ""
            write_json(vdir / "outcome.json", o)
            o.commit = self.history.commit([vdir], f"v{o.index}: {o.status} — {what}{speed}")
        write_json(vdir / "outcome.json", o)
        self.evaluated.append(ev)
        self.log(f"v{o.index}: {o.status} — {o.reason}")
        return ev

    # -- the loop ------------------------------------------------------------------------------------
    def incumbent(self) -> _Evaluated | None:
        """The best correct version so far: the last accepted one (or the baseline)."""
        best = None
        for ev in self.evaluated:
            if ev.outcome.status in ("baseline", "accepted"):
                best = ev
        return best

    def run(self, start: dict[str, Any], iterations: int) -> str:
        """Evaluate v0 at ``start`` then up to ``iterations`` moves. Returns the stop reason."""
        self.evaluate(0, start, None, None)
        if self.incumbent() is None:
            return "v0 is not correct: fix the kernel (see v0/correctness.json) before optimizing"
        for index in range(1, iterations + 1):
            inc = self.incumbent()
            assert inc is not None
            if inc.outcome.pct_of_roofline is not None and self.roofline is not None and \
                    inc.outcome.pct_of_roofline >= self.roofline.target_fraction * 100:
                return (f"target met: v{inc.outcome.index} runs at {inc.outcome.pct_of_roofline:.1f} % of the "
                        f"roofline (target {self.roofline.target_fraction * 100:.0f} %)")
            moves = propose_moves(inc.outcome.config, self.kf.tunables, self.tried, card=inc.card)
            if not moves:
                return f"no untried one-step neighbour of v{inc.outcome.index} left"
            move = moves[0]
            self.evaluate(index, move.apply(inc.outcome.config), inc, move)
        return f"iterations done ({iterations})"


def _observed(metric: str, before: KernelMetrics, after: KernelMetrics) -> str:
    """How the metric a hypothesis named moved between two profiles (a field name or the ncu metric behind it)."""
    field = metric if metric in KernelMetrics.model_fields else next(
        (f for f, src in after.sources.items() if src == metric), None)
    if field is not None:
        b, a = getattr(before, field, None), getattr(after, field, None)
        if isinstance(b, (int, float)) and isinstance(a, (int, float)):
            return f"{field}: {b:.3g} → {a:.3g}"
    b, a = before.duration_ns, after.duration_ns
    return f"ncu duration: {b:.0f} → {a:.0f} ns" if b and a else ""


def optimize(kernel: str | Path, *, out: str | Path, iterations: int = 6, shape: dict[str, Any] | None = None,
             config: dict[str, Any] | None = None, ref: str | Path | None = None, gpu: str | None = None,
             profile: bool = True, git: bool = True, benchmark: bool = True, log: Log = lambda s: None) -> OptimizeResult:
    """Run the evidence loop on a kernel file and write the run folder.

    Args:
        kernel: the kernel file. out: the run folder (must not exist or be empty).
        iterations: changes to try after the baseline v0 (so up to ``iterations + 1`` version folders).
        shape / config: overrides of SHAPE (or CPU_SHAPE without a GPU) and DEFAULT_CONFIG.
        ref: a separate reference file. gpu: spec name for the roofline (default: the current GPU).
        profile: run ncu on every correct version (GPU only). git: keep a git history in the run folder.
        benchmark: write benchmark.md (best vs PyTorch eager vs torch.compile).
        log: called with one line per step (the CLI prints them).

    Returns:
        :class:`OptimizeResult`.

    Raises:
        ContractError: the kernel file breaks the contract. RunFolderError: ``out`` is not empty.
        ToolMissingError: git requested but unavailable.
    """
    device = detect_device()
    kf = load_kernel(kernel, ref, interpreted=(device == "cpu"))
    run_shape = resolve_shape(kf, shape)
    start = resolve_config(kf, config)
    ws = Workspace.create(Path(out))
    shutil.copy2(kf.path, ws.root / "kernel.py")
    if kf.reference_path != kf.path:
        shutil.copy2(kf.reference_path, ws.root / "ref.py")
    log(f"run folder {ws.root} — {kf.name} at {run_shape} on {device}"
        + (" (Triton interpreter: timings are not measurements)" if device == "cpu" else ""))
    env = collect_env(probe_ncu=profile and device == "cuda")
    write_json(ws.root / "env.json", env)
    write_text(ws.root / "env.md", render_env_md(env))
    roof, work, note = roofline_for(kf, run_shape, device, gpu)
    write_text(ws.root / "roofline.md", render_roofline_section(roof, work, run_shape, note))
    if roof is not None:
        write_json(ws.root / "roofline.json", roof)
    opt = Optimizer(kf, ws, run_shape, device, profile=profile, git=git, log=log)
    if profile and device == "cuda" and env.ncu.counters_readable is False:
        opt.profile, opt.profile_note = False, f"profiling disabled: {env.ncu.counters_detail}"
        log(opt.profile_note)
    opt.roofline = roof
    opt.limit_roofline = datasheet_roofline(roof, kf.compute_unit)
    info = RunInfo(kernel=str(kf.path), kernel_name=kf.name, reference=str(kf.reference_path),
                   source_sha256=kf.source_sha256, shape=run_shape, tunables=kf.tunables, compute_unit=kf.compute_unit,
                   mode="cuda" if device == "cuda" else "interpreter",
                   device_name=env.gpu.name if env.gpu else "CPU (Triton interpreter)",
                   gpu_spec=roof.gpu if roof else None, iterations=iterations, profile=opt.profile,
                   started_utc=now_utc(), floor_ns=roof.floor_ns if roof else None,
                   target_ns=roof.target_ns if roof else None)
    write_json(ws.root / "run.json", info)
    if opt.history is not None:
        opt.history.commit([ws.root / n for n in ("kernel.py", "ref.py", "env.json", "env.md", "roofline.md",
                                                   "roofline.json", "run.json")], "run: kernel, environment, roofline")
    info.stop_reason = opt.run(start, iterations)
    inc = opt.incumbent()
    info.best_version = inc.outcome.index if inc else None
    info.finished_utc = now_utc()
    write_json(ws.root / "run.json", info)
    log(f"stopped: {info.stop_reason}")
    versions = [ev.outcome for ev in opt.evaluated]
    if benchmark and inc is not None:
        log("benchmark: best vs PyTorch eager vs torch.compile")
        bench = run_benchmark(kf, run_shape, inc.outcome.config, device)
        write_json(ws.root / "benchmark.json", bench)
        write_text(ws.root / "benchmark.md", render_benchmark_md(bench, info))
    write_text(ws.root / "final_report.md", render_final_report(info, versions, roof))
    if opt.history is not None:
        rejected = [f"v{v.index}" for v in versions if v.status in ("rejected", "failed")]
        # everything left: reports, rejected/failed versions, and the commit ids written into accepted outcomes
        opt.history.commit([ws.root], "record: final report, benchmark" +
                           (f"; rejected/failed versions {', '.join(rejected)} kept" if rejected else ""))
    return OptimizeResult(out=ws.root, run=info, versions=versions)
