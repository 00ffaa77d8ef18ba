"""Running one version of a session and writing its evidence: ``vN/correctness.json``, ``timing.json``,
``verdict.json`` (the card), ``metrics.json`` and ``profile.ncu-rep`` (when ncu could profile it), ``ab.json``
(the A/B decisions) and ``memory.json`` (:class:`~kernelpilot.versions.records.MemoryRecord`).

The version is evaluated in its own worker (:func:`kernelpilot.versions.measure.open_worker`) through the
``session`` subset of the one stage table (every stage: :data:`kernelpilot.search.stages.SUBSETS`, the same rows
``verify`` runs), checked against the session's frozen reference and against v0's inputs (``check_changed``),
A/B-timed against its parent and the incumbent, given a card
(Nsight Compute where it can read counters, else a light card), and classified
(:mod:`kernelpilot.versions.outcome`). Nothing here raises for a fault of the version's code: a file that fails to
load, crashes, hangs or is wrong is an ``invalid`` version with its status and message.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from kernelpilot.progress import Steps
from kernelpilot.records.models import now_utc
from kernelpilot.records.workspace import write_json
from kernelpilot.versions.measure import AB_SAMPLES_CPU, AB_SAMPLES_GPU, ab_files, open_worker, same_check_problem
from kernelpilot.versions.outcome import classify, flat_metrics, judge_expectations
from kernelpilot.versions.records import Expectation, MemoryRecord, SessionState

__all__ = ["VersionRun", "copy_version", "run_version", "version_kernel"]

#: Kernel files a version may be, in the order a version folder is searched (a ``.cu`` file's sidecar is ``.py``).
KERNEL_SUFFIXES = (".cu", ".py")


def version_kernel(root: Path, index: int) -> Path:
    """``ROOT/vN/kernel.cu`` when present, else ``ROOT/vN/kernel.py``."""
    vdir = Path(root) / f"v{index}"
    return next((vdir / f"kernel{s}" for s in KERNEL_SUFFIXES if (vdir / f"kernel{s}").is_file()), vdir / "kernel.py")


def copy_version(src: Path, vdir: Path) -> Path:
    """Copy a version's kernel file into ``vdir`` as ``kernel<suffix>``; for a ``.cu`` file also its sidecar
    (``STEM.py`` → ``kernel.py``) and every local ``#include`` it reaches, at the same relative paths. Returns the
    copied kernel.

    Raises:
        ContractError: a suffix no backend reads, or a ``.cu`` whose local include lies outside its folder (the
            copy could not find it: keep the includes beside the file or below it).
    """
    import shutil

    from kernelpilot.errors import ContractError

    src = Path(src).resolve()
    if src.suffix not in KERNEL_SUFFIXES:
        raise ContractError(f"{src}: a version must be a .py (Triton) or .cu (CUDA) file",
                            "pass the version's kernel file")
    vdir.mkdir(parents=True, exist_ok=True)
    dest = vdir / f"kernel{src.suffix}"
    shutil.copy2(src, dest)
    if src.suffix == ".cu":
        from kernelpilot.backends.cuda.signature import local_includes

        side = src.with_suffix(".py")
        if side.is_file():
            shutil.copy2(side, vdir / "kernel.py")
        for inc in local_includes(src):
            try:
                rel = Path(inc).resolve().relative_to(src.parent)
            except ValueError:
                raise ContractError(f"{src}: it includes {inc}, outside its folder; a session copies each version "
                                    "into its own folder and could not find it there",
                                    "keep the version's local includes beside it or below its folder") from None
            (vdir / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(inc, vdir / rel)
    return dest


class VersionRun:
    """What :func:`run_version` needs about the session (set up by :mod:`kernelpilot.versions.session`).

    Attributes:
        root: the session folder. state: session.json. roofline: the session's roofline (None: no floor).
        profile: try ncu (GPU only). timeout_s: seconds one request to the version's worker may take.
        log: progress callback.
    """

    def __init__(self, root: Path, state: SessionState, roofline: Any, *, profile: bool, timeout_s: float,
                 log: Any = lambda _m: None) -> None:
        self.root, self.state, self.roofline = Path(root), state, roofline
        self.profile, self.timeout_s, self.log = profile, timeout_s, log
        #: the version's numbered steps (:class:`kernelpilot.progress.Steps`), set by the session before it runs
        self.steps: Steps | None = None

    def step(self, what: str) -> None:
        """Log that the version's next step starts (numbered when :attr:`steps` is set)."""
        if self.steps is not None:
            self.steps.start(what)
        else:
            self.log(what)

    def planned_steps(self, parent: MemoryRecord | None, incumbent: MemoryRecord | None) -> int:
        """The steps :func:`run_version` takes for a version with this parent and incumbent, and the record after
        it: check and time, one A/B per valid parent or distinct incumbent, the card (measured runs only), the
        record."""
        ab = int(parent is not None and parent.outcome != "invalid") + int(
            incumbent is not None and incumbent.outcome != "invalid"
            and (parent is None or incumbent.version != parent.version))
        return 1 + ab + (0 if self.interpreted else 1) + 1

    @property
    def interpreted(self) -> bool:
        """True when the session runs under the Triton interpreter (no GPU: times are not measurements)."""
        return self.state.device != "cuda"

    def kernel(self, index: int) -> Path:
        """The version's kernel file: ``vN/kernel.cu`` (CUDA; ``vN/kernel.py`` is then its sidecar), else
        ``vN/kernel.py``."""
        return version_kernel(self.root, index)

    @property
    def reference(self) -> Path:
        """The frozen reference file (``check/reference.py``)."""
        return self.root / self.state.reference


def _invalid(index: int, parent: MemoryRecord | None, hypothesis: str, status: str, message: str,
             expects: list[Expectation], before: dict[str, float]) -> MemoryRecord:
    return MemoryRecord(version=index, parent=parent.version if parent else None, hypothesis=hypothesis,
                        expectations=[e.model_copy(update={"before": before.get(e.metric)}) for e in expects],
                        status=status, message=message[:2000], outcome="invalid", metrics_before=before,
                        bottleneck_before=parent.bottleneck_after if parent else None,
                        pitfalls=[f"{status}: {message.strip().splitlines()[0][:300]}" if message.strip() else status],
                        recorded_utc=now_utc())


def _decide(mine: list[float], theirs: list[float]) -> tuple[dict[str, Any], bool, bool]:
    """(the decision as a dict, mine faster beyond noise, theirs faster beyond noise)."""
    from kernelpilot.search.stats import decide

    faster = decide(mine, theirs)
    slower = decide(theirs, mine)
    detail = faster.model_dump()
    detail["reverse_replace"] = slower.replace
    detail["median_ns"] = statistics.median(mine)
    detail["other_median_ns"] = statistics.median(theirs)
    return detail, faster.replace, slower.replace


def _evidence(run: VersionRun, index: int, ev: Any, worker: Any) -> tuple[Any, Any]:
    """The version's card (ncu when possible, else light) and its ncu metrics (None without a profile)."""
    from kernelpilot.engine.evidence import LightEvidence, NcuEvidence

    if not ev.ok or not ev.measured:
        return ev, None
    vdir = run.root / f"v{index}"
    kernel_name = run.state.kernel_name
    light = LightEvidence(run.kernel(index), run.state.shape, run.roofline, run.state.device_name, kernel_name,
                          "no Nsight Compute profile (--no-profile)" if not run.profile else "ncu unavailable")
    got: dict[str, Any] = {}

    def on_metrics(_ev: Any, metrics: Any, names: list[str]) -> None:
        got["metrics"] = metrics
        write_json(vdir / "metrics.json", {"main_kernel": metrics.model_dump(), "all_kernels": names})

    if run.profile:
        ncu = NcuEvidence(run.kernel(index), run.reference, run.state.shape, lambda _e: vdir / "profile.ncu-rep",
                          light, on_metrics=on_metrics, log=run.log)
        ev = ncu.profile(ev)
    else:
        ev = light.evidence(ev)
    return ev, got.get("metrics")


def run_version(run: VersionRun, index: int, *, parent: MemoryRecord | None, incumbent: MemoryRecord | None,
                hypothesis: str = "", expects: list[Expectation] | None = None, change: str = "") -> MemoryRecord:
    """Evaluate ``vN/kernel.py`` and write its records (see the module docstring); returns its memory record (also
    written to ``vN/memory.json``). ``parent``/``incumbent``: their memory records (None for v0)."""
    from kernelpilot.errors import KernelpilotError

    expects = list(expects or [])
    before = dict(parent.metrics_after) if parent else {}
    vdir = run.root / f"v{index}"
    try:
        worker = open_worker(run.kernel(index), run.reference, run.state.shape, interpreted=run.interpreted,
                             floor_ns=run.state.floor_ns, sol_tolerance=run.roofline.sol_tolerance
                             if run.roofline is not None else 0.0, timeout_s=run.timeout_s)
    except KernelpilotError as exc:
        status = getattr(exc, "failure", None) or type(exc).__name__
        mem = _invalid(index, parent, hypothesis, status, f"{exc.message}\nhint: {exc.hint}", expects, before)
        write_json(vdir / "memory.json", mem.model_copy(update={"change": change}))
        return mem.model_copy(update={"change": change})
    try:
        mem = _measure(run, index, worker, parent, incumbent, hypothesis, expects, before)
    finally:
        worker.close()
    mem = mem.model_copy(update={"change": change})
    write_json(vdir / "memory.json", mem)
    return mem


def _measure(run: VersionRun, index: int, worker: Any, parent: MemoryRecord | None, incumbent: MemoryRecord | None,
             hypothesis: str, expects: list[Expectation], before: dict[str, float]) -> MemoryRecord:
    from kernelpilot.errors import KernelpilotError

    vdir = run.root / f"v{index}"
    try:
        problem = same_check_problem(worker, run.kernel(0)) if index > 0 else None
        config = worker.call("kernelpilot.versions.measure:_default_config_in_worker")
    except KernelpilotError as exc:
        return _invalid(index, parent, hypothesis, getattr(exc, "failure", None) or "runtime_error", exc.message,
                        expects, before)
    if problem:
        return _invalid(index, parent, hypothesis, "check_changed",
                        f"this version measures another problem than v0: {problem} (the check is frozen at v0: "
                        "same reference, shape, inputs, seeds and tolerances)", expects, before)
    run.step(f"checking and timing at {run.state.shape}")
    ev, correctness, timing = worker.version(config)
    for name, record in (("correctness", correctness), ("timing", timing)):
        if record is not None:
            write_json(vdir / f"{name}.json", record)
    if not ev.ok:
        return _invalid(index, parent, hypothesis, ev.status, ev.message, expects, before)
    if run.roofline is not None and ev.measured and ev.duration_ns:
        ev = ev.model_copy(update={"pct_of_roofline": run.roofline.pct_of_roofline(ev.duration_ns)})
    n = AB_SAMPLES_CPU if run.interpreted else AB_SAMPLES_GPU
    ab: dict[str, Any] = {"config": config}
    faster = slower = None
    slower_than_incumbent = False
    try:
        if parent is not None and parent.outcome != "invalid":
            run.step(f"A/B against v{parent.version} ({n} interleaved samples per side)")
            mine, theirs = ab_files(worker, run.kernel(parent.version), config, n)
            ab["vs_parent"], faster, slower = _decide(mine, theirs)
        if incumbent is not None and incumbent.outcome != "invalid" and (parent is None
                                                                          or incumbent.version != parent.version):
            run.step(f"A/B against the incumbent v{incumbent.version}")
            mine, theirs = ab_files(worker, run.kernel(incumbent.version), config, n)
            ab["vs_incumbent"], _, slower_than_incumbent = _decide(mine, theirs)
        elif "vs_parent" in ab and incumbent is not None:
            ab["vs_incumbent"], slower_than_incumbent = ab["vs_parent"], bool(slower)
    except KernelpilotError as exc:
        return _invalid(index, parent, hypothesis, getattr(exc, "failure", None) or "runtime_error",
                        f"A/B timing failed: {exc.message}", expects, before)
    write_json(vdir / "ab.json", ab)
    if ev.measured:
        run.step("bottleneck card (Nsight Compute)" if run.profile else "light bottleneck card")
    ev, metrics = _evidence(run, index, ev, worker)
    if ev.card:
        write_json(vdir / "verdict.json", ev.card)
    after = flat_metrics(ev, metrics)
    if ev.measured:
        judged = judge_expectations(expects, before, after, faster, slower)
    else:  # interpreted: the times say nothing; neither do the decisions drawn from them
        judged = [e.model_copy(update={"before": before.get(e.metric), "after": after.get(e.metric)})
                  for e in expects]
        for detail in (ab.get("vs_parent"), ab.get("vs_incumbent")):
            if detail is not None:
                detail.update({"replace": False, "reverse_replace": False, "measured": False})
    outcome = classify(True, faster, slower, slower_than_incumbent, judged, measured=ev.measured,
                       first=parent is None)
    pitfalls = [f"expected {e.metric} {e.direction}, it was {e.verdict}"
                + (f" ({e.change_rel:+.1%})" if e.change_rel is not None else "")
                for e in judged if e.verdict in ("contradicted", "unchanged")]
    if ev.profile_error:
        pitfalls.append(f"profile: {ev.profile_error[:300]}")
    return MemoryRecord(version=index, parent=parent.version if parent else None, hypothesis=hypothesis,
                        expectations=judged, status=ev.status, message=ev.message, outcome=outcome,
                        duration_ns=ev.duration_ns, iqr_ns=ev.iqr_ns, pct_of_roofline=ev.pct_of_roofline,
                        vs_parent=ab.get("vs_parent"), vs_incumbent=ab.get("vs_incumbent"),
                        metrics_before=before, metrics_after=after,
                        bottleneck_before=parent.bottleneck_after if parent else None, bottleneck_after=ev.bound,
                        pitfalls=pitfalls, measured=ev.measured, recorded_utc=now_utc())

