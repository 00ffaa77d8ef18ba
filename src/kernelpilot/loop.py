"""``kernelpilot optimize``: the evidence loop, end to end.

check → time → profile → verdict → next change → (repeat) → report, one version folder per config tried, one git
commit per accepted version. The next change comes from a search strategy (:mod:`kernelpilot.search.strategies`):
``guided`` by default — the incumbent's bottleneck card ranks one-variable moves — or any other strategy by name.
Every version is checked and timed in an isolated worker process (:mod:`kernelpilot.search.worker`), so a
compile error, a wrong result, NaN, an illegal memory access, a hang or a crash is a failed version with a typed
``failure`` and the loop goes on. A version replaces the incumbent only when it is correct, faster beyond noise —
interleaved A/B samples of the candidate and the incumbent (:func:`kernelpilot.measure.timing.time_interleaved`)
judged by a one-sided Mann–Whitney test and a bootstrap CI of the ratio of medians
(:func:`kernelpilot.search.stats.decide`), the same rule as ``kernelpilot tune`` — and not faster than the
speed-of-light floor (:meth:`kernelpilot.hardware.roofline.Roofline.is_impossible`, also the rule of ``tune``). The
loop stops after ``iterations`` changes, when the incumbent reaches the target (90 % of the roofline), or when the
strategy has nothing left to propose.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from pydantic import BaseModel

from kernelpilot.errors import KernelpilotError, SpecError, ToolMissingError
from kernelpilot.hardware.roofline import Roofline, compute_roofline, render_roofline_md
from kernelpilot.hardware.specs import find_spec, match_device
from kernelpilot.kernels.contract import KernelFile, load_kernel, make_case, resolve_config, resolve_shape, use_interpreter
from kernelpilot.kernels.workload import Workload, workload
from kernelpilot.measure.correctness import CorrectnessResult
from kernelpilot.measure.env import collect_env, render_env_md
from kernelpilot.measure.timing import TimingResult, faster_beyond_noise
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
from kernelpilot.search.model import BudgetExhausted, Evaluation
from kernelpilot.search.stats import Decision, decide
from kernelpilot.search.worker import Worker, WorkerOptions, default_devices

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

    Raises:
        SpecError: ``gpu`` was named and no spec file matches it (the error names the closest entries and how to
            add a spec); an unknown *detected* device only gives a note.
    """
    case = make_case(kf, shape, 0, device)
    work = workload(kf, case)
    if gpu:
        spec = find_spec(gpu)  # the user named it: an unknown name is an error, not a silent "no floor"
    elif device != "cuda":
        return None, work, "no GPU and no --gpu NAME: FLOPs and bytes only, no speed-of-light floor"
    else:
        try:
            spec = match_device(torch.cuda.get_device_name(0))
        except SpecError as exc:
            return None, work, f"no spec for this GPU: {exc.message} ({exc.hint})"
    if work.bytes_moved <= 0:
        return None, work, "bytes moved is 0: no roofline"
    return compute_roofline(work.flops, work.bytes_moved, kf.compute_unit, spec), work, ""


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


class _Stop(BudgetExhausted):
    """The loop's own end (iterations done, target met, v0 incorrect): ends the strategy like a spent budget."""


class Optimizer:
    """One optimize run. Use :func:`optimize`; the class keeps the run's state between versions.

    The strategy (``guided`` by default) proposes configs and calls :meth:`step`; each step is one version:
    check and time in an isolated worker process (:class:`kernelpilot.search.worker.Worker`: a compile error, a
    wrong result, NaN, an illegal memory access, a hang or a crash becomes a failed version with a typed
    ``failure`` and the run goes on with a fresh worker), then ncu (or a light card) and the A/B decision.
    """

    def __init__(self, kf: KernelFile, ws: Workspace, shape: dict[str, Any], device: str, *, profile: bool,
                 git: bool, log: Log, strategy: str = "guided") -> None:
        self.kf, self.ws, self.shape, self.device = kf, ws, shape, device
        self.profile = profile and device == "cuda"
        self.profile_note = "" if self.profile else ("profiling off (--no-profile)" if device == "cuda" else
                                                     "no GPU: ncu profile and verdict skipped (interpreter run)")
        self.history = RunHistory(ws.root) if git else None
        self.log = log
        self.strategy = strategy
        self.roofline: Roofline | None = None  # measured ceilings preferred: % of roofline, target and floor
        self.worker: Worker | None = None
        self.evaluated: list[_Evaluated] = []
        self.tried: set[str] = set()
        self.answers: dict[str, Evaluation] = {}
        self.iterations = 0
        #: interleaved samples per side for each accept/reject decision (fewer under the interpreter: slow, and
        #: its times are not measurements anyway)
        self.ab_samples = 30 if device == "cuda" else 8

    def start_worker(self, timeout_s: float) -> None:
        """Start the isolated worker that checks and times every version (bound to the first visible GPU, or to the
        interpreter on the CPU); its speed-of-light floor is the roofline's (measured ceilings preferred)."""
        interpreted = self.device != "cuda"
        opts = WorkerOptions(kernel=str(self.kf.path),
                             ref=str(self.kf.reference_path) if self.kf.reference_path != self.kf.path else None,
                             shape=self.shape, interpreted=interpreted,
                             floor_ns=self.roofline.floor_ns if self.roofline is not None else None,
                             sol_tolerance=self.roofline.sol_tolerance if self.roofline is not None else 0.0,
                             min_samples=20, max_samples=500, rep_ms=300.0)  # time_cuda's defaults
        self.worker = Worker(opts, default_devices(interpreted)[0], timeout_s=timeout_s)

    def close(self) -> None:
        """Stop the worker process."""
        if self.worker is not None:
            self.worker.close()

    # -- one version ---------------------------------------------------------------------------------
    def evaluate(self, index: int, config: dict[str, Any], parent: _Evaluated | None, move: Move | None,
                 incumbent: _Evaluated | None = None) -> _Evaluated:
        """Run check → time → profile → card → decision for one config and record everything in ``v{index}/``.

        ``parent`` is the version the config derives from (the hypothesis and the move refer to it);
        ``incumbent`` the one it must beat (default: ``parent``).
        """
        assert self.worker is not None, "start_worker() first"
        incumbent = incumbent or parent
        vdir = self.ws.version_dir(index)
        self.tried.add(config_key(config))
        write_json(vdir / "config.json", {"config": config, "move": move.model_dump() if move else None,
                                          "parent": parent.outcome.index if parent else None,
                                          "incumbent": incumbent.outcome.index if incumbent else None,
                                          "strategy": self.strategy,
                                          "source_sha256": self.kf.source_sha256, "shape": self.shape})
        write_text(vdir / "hypothesis.md", render_hypothesis(index, config, move, parent, self.roofline))
        base = dict(index=index, config=config, parent=parent.outcome.index if parent else None, move=move)
        self.log(f"v{index}: {'baseline' if move is None else move.label} — checking")
        answer, correctness, timing_rec = self.worker.version(config)
        if correctness is not None:
            write_json(vdir / "correctness.json", CorrectnessResult.model_validate(correctness))
        if answer.status not in ("ok", "impossible") or timing_rec is None:
            correct = bool(correctness and correctness.get("passed"))
            reason = (f"incorrect: {answer.message}" if answer.status in ("wrong_result", "nan")
                      else f"{answer.status}: {answer.message}")
            self.log(f"v{index}: {answer.status} — {answer.message[:200]}")
            return self._finish(vdir, _Evaluated(VersionOutcome(**base, status="failed", correct=correct,
                                                                reason=reason, failure=answer.status)))
        timing = TimingResult.model_validate(timing_rec)
        write_json(vdir / "timing.json", timing)
        ev = _Evaluated(VersionOutcome(**base, status="rejected", correct=True, reason="",
                                       median_ns=timing.median_ns, iqr_ns=timing.iqr_ns,
                                       is_measurement=timing.is_measurement), timing=timing)
        if self.roofline is not None and timing.is_measurement:
            ev.outcome.pct_of_roofline = self.roofline.pct_of_roofline(timing.median_ns)
        if answer.status == "impossible":  # under the speed-of-light floor: never profiled, never ranked
            ev.outcome.failure = "impossible"
            ev.outcome.reason = f"impossible: {answer.message}"
            return self._finish(vdir, ev)
        self._profile(vdir, config, ev)
        if ev.card is None:
            self._light_card(vdir, ev)
        self._decide(ev, incumbent)
        return self._finish(vdir, ev)

    def ab_decision(self, candidate: dict[str, Any], incumbent: dict[str, Any]) -> Decision | None:
        """Interleaved A/B samples of two configs on the same inputs in the worker, judged by
        :func:`kernelpilot.search.stats.decide`; None when the worker failed while sampling."""
        assert self.worker is not None
        samples = self.worker.ab_samples(candidate, incumbent, self.ab_samples)
        return decide(*samples) if samples else None

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
        except ValueError as exc:  # e.g. a time under the floor
            ev.outcome.profile_error = f"{ev.outcome.profile_error or ''}; no light card: {exc}".lstrip("; ")
            return
        write_json(vdir / "verdict.json", ev.card)
        ev.outcome.bound = ev.card.class_
        ev.outcome.verdict_summary = ev.card.summary

    def _decide(self, ev: _Evaluated, incumbent: _Evaluated | None) -> None:
        o, t = ev.outcome, ev.timing
        assert t is not None
        v0 = self.evaluated[0] if self.evaluated else None
        if v0 is not None and v0.timing is not None:
            o.speedup_vs_v0 = v0.timing.median_ns / t.median_ns
        if incumbent is None:
            o.status, o.reason, o.speedup_vs_v0 = "baseline", "v0: the starting config", 1.0
            return
        assert incumbent.timing is not None
        _, speedup, why = faster_beyond_noise(t, incumbent.timing)
        o.speedup_vs_parent = speedup
        decision = self.ab_decision(ev.outcome.config, incumbent.outcome.config)
        if decision is None:
            o.status, o.reason = "rejected", f"not accepted: {why}; A/B: the worker failed while sampling"
        else:
            o.status = "accepted" if decision.replace else "rejected"
            o.reason = ("accepted: " if decision.replace else "not accepted: ") + f"{why}; A/B: {decision.reason}"
        if ev.metrics is not None and incumbent.metrics is not None and o.move is not None:
            o.observed = _observed(o.move.expected_metric, incumbent.metrics, ev.metrics)

    def _finish(self, vdir: Path, ev: _Evaluated) -> _Evaluated:
        o = ev.outcome
        if self.history is not None and o.status in ("baseline", "accepted"):
            what = "baseline" if o.status == "baseline" else o.move.label  # type: ignore[arg-type]
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

    def step(self, config: dict[str, Any]) -> Evaluation:
        """The strategy's ``evaluate``: one new version for ``config`` (or the answer already given for it).

        Raises:
            BudgetExhausted: (a :class:`_Stop`) when v0 is not correct, the incumbent met the target, or
                ``iterations`` versions after v0 were made.
        """
        key = config_key(config)
        if key in self.answers:
            return self.answers[key]
        index = len(self.evaluated)
        inc = self.incumbent()
        if index > 0:
            if inc is None:
                raise _Stop("v0 is not correct: fix the kernel (see v0/correctness.json) before optimizing")
            if inc.outcome.pct_of_roofline is not None and self.roofline is not None and \
                    inc.outcome.pct_of_roofline >= self.roofline.target_fraction * 100:
                raise _Stop(f"target met: v{inc.outcome.index} runs at {inc.outcome.pct_of_roofline:.1f} % of the "
                            f"roofline (target {self.roofline.target_fraction * 100:.0f} %)")
            if index > self.iterations:
                raise _Stop(f"iterations done ({self.iterations})")
        parent, move = self._derivation(config, inc)
        ev = self.evaluate(index, config, parent, move, inc)
        answer = _as_evaluation(ev)
        self.answers[key] = answer
        return answer

    def _derivation(self, config: dict[str, Any], inc: _Evaluated | None) -> tuple[_Evaluated | None, Move | None]:
        """The version ``config`` derives from and the move that makes it: the incumbent's card move when the
        strategy took one, else a one-variable step from the nearest version, else a jump of several tunables."""
        if inc is None:
            return None, None
        if self.strategy == "guided":
            card_moves = propose_moves(inc.outcome.config, self.kf.tunables, self.tried, card=inc.card)
            move = next((m for m in card_moves if m.apply(inc.outcome.config) == config), None)
            if move is not None:
                return inc, move
        near = sorted((ev for ev in self.evaluated),
                      key=lambda ev: (_n_changed(ev.outcome.config, config), ev is not inc,
                                      ev.outcome.median_ns if ev.outcome.median_ns is not None else float("inf")))
        base = near[0] if near else inc
        return base, strategy_move(base.outcome.config, config, self.kf.tunables, self.strategy)

    def run(self, start: dict[str, Any], iterations: int, *, seed: int = 0) -> str:
        """Evaluate v0 at ``start`` then up to ``iterations`` versions proposed by the strategy. Returns the stop
        reason."""
        from kernelpilot.search.space import SearchSpace
        from kernelpilot.search.strategies import get_strategy

        self.iterations = iterations
        space = SearchSpace.from_kernel(self.kf)
        try:
            get_strategy(self.strategy).search(space, self.step, seed=seed, start=start)
        except BudgetExhausted as exc:
            return str(exc)
        if self.incumbent() is None:
            return "v0 is not correct: fix the kernel (see v0/correctness.json) before optimizing"
        return f"strategy {self.strategy!r} finished: no untried config left that it would propose"


def _n_changed(a: dict[str, Any], b: dict[str, Any]) -> int:
    return sum(a.get(k) != v for k, v in b.items())


def strategy_move(base: dict[str, Any], config: dict[str, Any], tunables: dict[str, list[Any]], strategy: str) -> Move:
    """The change from ``base`` to ``config`` as a :class:`Move` when it is not one of the card's moves.

    One changed tunable gives a one-variable move (``direction`` up/down by the tunable's value order); several give a
    jump whose ``tunable`` joins the names with ``+`` and whose old/new are tuples. Its hypothesis is exploration:
    the effect is unknown until measured.
    """
    changed = [k for k in config if base.get(k) != config[k]]
    if len(changed) == 1:
        name = changed[0]
        values = tunables.get(name, [])
        up = values.index(config[name]) > values.index(base[name]) if base.get(name) in values and config[name] in values else True
        return Move(tunable=name, old=base.get(name), new=config[name], direction="up" if up else "down",
                    rule=f"strategy:{strategy}", why=f"the {strategy} strategy proposed this step (not a card move)",
                    expected_metric="duration", expected="unknown: exploration, measured to find out")
    return Move(tunable="+".join(changed), old=tuple(base.get(k) for k in changed),
                new=tuple(config[k] for k in changed), direction="jump", rule=f"strategy:{strategy}",
                why=f"the {strategy} strategy proposed a config {len(changed)} tunables away",
                expected_metric="duration", expected="unknown: exploration, measured to find out")


def _as_evaluation(ev: _Evaluated) -> Evaluation:
    """A version as the :class:`Evaluation` a strategy reads: status, time, accepted, and the card (guided's evidence)."""
    o = ev.outcome
    status = o.failure or ("ok" if o.median_ns is not None else "runtime_error")
    card = json.loads(ev.card.model_dump_json(by_alias=True)) if ev.card is not None else None
    return Evaluation(config=o.config, status=status, duration_ns=o.median_ns, iqr_ns=o.iqr_ns,  # type: ignore[arg-type]
                      samples_ns=ev.timing.samples_ns if ev.timing is not None else [], message=o.reason,
                      measured=o.is_measurement, card=card,
                      accepted=o.status in ("baseline", "accepted") if o.status != "failed" else None,
                      decision=o.reason)


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
             profile: bool = True, git: bool = True, benchmark: bool = True, strategy: str = "guided", seed: int = 0,
             timeout_s: float = 300.0, log: Log = lambda s: None) -> OptimizeResult:
    """Run the evidence loop on a kernel file and write the run folder.

    Args:
        kernel: the kernel file. out: the run folder (must not exist or be empty).
        iterations: changes to try after the baseline v0 (so up to ``iterations + 1`` version folders).
        strategy: what proposes the next config (``guided``: the bottleneck card's one-variable moves; or
            ``exhaustive``, ``random``, ``local``, ``bayes``); seed: its seed.
        timeout_s: seconds one version's check and timing may take in the worker before it is a ``timeout``.
        shape / config: overrides of SHAPE (or CPU_SHAPE without a GPU) and DEFAULT_CONFIG.
        ref: a separate reference file. gpu: spec name for the roofline (default: the current GPU).
        profile: run ncu on every correct version (GPU only). git: keep a git history in the run folder.
        benchmark: write benchmark.md (best vs PyTorch eager vs torch.compile).
        log: called with one line per step (the CLI prints them).

    Returns:
        :class:`OptimizeResult`.

    Raises:
        ContractError: the kernel file breaks the contract. RunFolderError: ``out`` is not empty.
        ToolMissingError: git requested but unavailable. SearchError: unknown strategy. SpecError: unknown ``gpu``.
    """
    from kernelpilot.search.strategies import get_strategy

    device = detect_device()
    kf = load_kernel(kernel, ref, interpreted=(device == "cpu"))
    run_shape = resolve_shape(kf, shape)
    start = resolve_config(kf, config)
    get_strategy(strategy)  # an unknown name fails before the run folder exists
    if gpu:
        find_spec(gpu)
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
    opt = Optimizer(kf, ws, run_shape, device, profile=profile, git=git, log=log, strategy=strategy)
    if profile and device == "cuda" and env.ncu.counters_readable is False:
        opt.profile, opt.profile_note = False, f"profiling disabled: {env.ncu.counters_detail}"
        log(opt.profile_note)
    opt.roofline = roof
    info = RunInfo(kernel=str(kf.path), kernel_name=kf.name, reference=str(kf.reference_path),
                   source_sha256=kf.source_sha256, shape=run_shape, tunables=kf.tunables, compute_unit=kf.compute_unit,
                   mode="cuda" if device == "cuda" else "interpreter",
                   device_name=env.gpu.name if env.gpu else "CPU (Triton interpreter)",
                   gpu_spec=roof.gpu if roof else None, iterations=iterations, profile=opt.profile,
                   started_utc=now_utc(), strategy=strategy, seed=seed, floor_ns=roof.floor_ns if roof else None,
                   target_ns=roof.target_ns if roof else None)
    write_json(ws.root / "run.json", info)
    if opt.history is not None:
        opt.history.commit([ws.root / n for n in ("kernel.py", "ref.py", "env.json", "env.md", "roofline.md",
                                                   "roofline.json", "run.json")], "run: kernel, environment, roofline")
    opt.start_worker(timeout_s)
    try:
        info.stop_reason = opt.run(start, iterations, seed=seed)
    finally:
        opt.close()
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
