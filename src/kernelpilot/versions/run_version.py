"""Running one version of a session: the session is one more configuration of the one
:class:`~kernelpilot.engine.evaluator.Evaluator`.

:func:`run_version` builds it: the candidates are version files (:mod:`kernelpilot.versions.candidates`: the
config ``{"version": N}``, a :class:`~kernelpilot.versions.candidates.VersionRunner` that evaluates ``vN``'s file
in its own worker through the ``session`` subset of the stage table and takes A/B samples of two files), the
versions already recorded are preloaded (the incumbent is the session's), and a
:class:`~kernelpilot.versions.recorder.SessionRecorder` writes the version folder (``correctness.json``,
``timing.json``, ``ab.json``, ``verdict.json``, ``metrics.json``, ``memory.json``) and hands the record to the
session to commit. So the incumbent changes by the Evaluator's one rule (the first correct version; later only one
faster than the incumbent beyond noise on interleaved A/B samples: :func:`kernelpilot.search.stats.decide`; never
on the interpreter's times), the floor stops the session (:class:`~kernelpilot.engine.guards.ImpossibleTime`) and a
v0 that kills its worker or hangs stops it too (:class:`~kernelpilot.engine.guards.BrokenFirstConfig`), and the
target is the Evaluator's :class:`~kernelpilot.engine.evaluator.TargetMet` (:func:`target_met`). Nothing here
raises for any other fault of the version's code: a file that fails to load, crashes, or is wrong is an ``invalid``
version with its status and message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from kernelpilot.progress import Steps
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.versions.candidates import (SampledOnce, VersionRunner, version_config,
                                             version_kernel, version_space)
from kernelpilot.versions.measure import AB_SAMPLES_CPU, AB_SAMPLES_GPU
from kernelpilot.versions.records import Expectation, MemoryRecord, SessionState

if TYPE_CHECKING:
    from kernelpilot.engine.runner import Runner
    from kernelpilot.hardware.roofline import Roofline

__all__ = ["VersionRun", "copy_version", "remembered", "run_version", "standing_incumbent", "target_met",
           "version_kernel"]


def copy_version(src: Path, vdir: Path) -> Path:
    """Copy a version's kernel file into ``vdir`` as ``kernel<suffix>`` with every file that belongs to it, where its
    back end puts it (:func:`kernelpilot.backends.registry.kernel_files`: for a ``.cu`` file its sidecar as
    ``kernel.py`` and its local ``#include``s at their relative paths). Nothing is copied when it is refused. Returns
    the copied kernel.

    Raises:
        ContractError: no back end reads the file, or a companion lies outside the kernel's folder (the copy could
            not find it: keep the includes beside the file or below it).
    """
    import shutil

    from kernelpilot.backends.registry import kernel_files
    from kernelpilot.errors import ContractError
    from kernelpilot.records.seal import note_written

    src = Path(src).resolve()
    name = f"kernel{src.suffix}"
    try:
        files = kernel_files(src, name)
    except ContractError as exc:
        raise ContractError(f"a version must be a kernel file a back end reads: {exc.message}",
                            "pass the version's kernel file") from None
    for path, rel in files.items():
        if rel.is_absolute() or ".." in rel.parts:
            raise ContractError(f"{src}: it includes {path}, outside its folder; a session copies each version "
                                "into its own folder and could not find it there",
                                "keep the version's local includes beside it or below its folder")
    for path, rel in files.items():
        dest = vdir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
        note_written(dest)  # the write journal: a session commit stages only what kernelpilot wrote
    return vdir / name


class VersionRun:
    """What :func:`run_version` needs about the session (set up by :mod:`kernelpilot.versions.session`).

    Attributes:
        root: the session folder. state: session.json. roofline: the session's roofline (None: no floor).
        profile: try ncu (GPU only). timeout_s: seconds one request to the version's worker may take.
        log: progress callback.
    """

    def __init__(self, root: Path, state: SessionState, roofline: Roofline | None, *, profile: bool,
                 timeout_s: float, log: Callable[[str], None] = lambda _m: None) -> None:
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
        return not self.state.target.is_gpu

    def kernel(self, index: int) -> Path:
        """The version's kernel file: ``vN/kernel.cu`` (CUDA; ``vN/kernel.py`` is then its sidecar), else
        ``vN/kernel.py``."""
        return version_kernel(self.root, index)

    @property
    def reference(self) -> Path:
        """The frozen reference file (``check/reference.py``)."""
        return self.root / self.state.reference


def remembered(mem: MemoryRecord, incumbent: int | None) -> Evaluation:
    """A recorded version as the Evaluator's :class:`~kernelpilot.records.evaluation.Evaluation` (preloaded before
    the next one runs): ``ok`` with its median when it was valid, ``accepted`` only when it is the session's
    ``incumbent`` (so the Evaluator's incumbent is the session's, after masks and restarts too), ``cached`` (it
    costs nothing now). Raises nothing."""
    ok = mem.outcome != "invalid" and mem.duration_ns is not None
    return Evaluation(config=version_config(mem.version), status="ok" if ok else "runtime_error",
                      duration_ns=mem.duration_ns if ok else None, iqr_ns=mem.iqr_ns, measured=mem.measured,
                      pct_of_roofline=mem.pct_of_roofline, accepted=(mem.version == incumbent) if ok else None,
                      index=mem.version, message=mem.message, cached=True)


def standing_incumbent(state: SessionState, memories: Sequence[MemoryRecord]) -> int | None:
    """The incumbent once versions are masked or unmasked: the Evaluator's own rule for a preloaded history
    (:meth:`~kernelpilot.engine.evaluator.Evaluator.preload`: the last accepted evaluation leads) over the unmasked
    versions, where a version was accepted when it led as it was judged (``incumbent_after`` is itself: the first
    valid version, then each one faster than the incumbent beyond noise) or a restart started from it. Each of
    those beat the one before it by the A/B rule, so no A/B is re-run and no median decides alone. None when no
    unmasked valid version ever led."""
    from kernelpilot.engine.evaluator import Evaluator

    led = {m.version for m in memories if m.incumbent_after == m.version}
    led |= {int(r["from"]) for r in state.restarts if "from" in r}
    from kernelpilot.search.runner_base import RunnerBase

    # a preload only: no version runs, so the runner is one with nothing but the protocol's defaults
    evaluator = Evaluator(version_space([m.version for m in memories] or [0]), RunnerBase())  # type: ignore[arg-type]
    evaluator.preload([remembered(m, m.version if m.version in led else None) for m in memories if not m.masked])
    return int(evaluator.incumbent.config["version"]) if evaluator.incumbent is not None else None


def target_met(state: SessionState, memories: Sequence[MemoryRecord], baselines_ns: dict[str, float] | None = None,
               ) -> bool:
    """Whether the session's stop condition holds: the Evaluator's
    :class:`~kernelpilot.engine.evaluator.TargetMet` rule on the session's incumbent — measured, at or above
    ``floor_ns / target_ns`` of the roofline (the session's ``target_ns``), and no measured baseline
    (``baselines_ns``, from ``finish``'s benchmark) more than its margin faster. False without a roofline."""
    from kernelpilot.engine.evaluator import TargetMet

    best = next((m for m in memories if m.version == state.incumbent), None)
    if not (state.target_ns and state.floor_ns) or best is None or not best.measured:
        return False
    # the same arithmetic as Roofline.pct_of_roofline (floor / time * 100), so a median of exactly target_ns meets it
    rule = TargetMet(state.floor_ns / state.target_ns * 100.0, dict(baselines_ns or {}))
    lead = SimpleNamespace(incumbent=remembered(best, state.incumbent))  # what TargetMet reads of an Evaluator
    return rule.check(lead) is not None  # type: ignore[arg-type]


def run_version(run: VersionRun, index: int, *, memories: Sequence[MemoryRecord], parent: MemoryRecord | None,
                hypothesis: str = "", expects: list[Expectation] | None = None, change: str = "",
                finalize: Callable[[MemoryRecord], str | None] = lambda _m: None,
                runner: Runner | None = None) -> tuple[MemoryRecord, str | None]:
    """Evaluate ``vN``'s file through the Evaluator (see the module docstring) and record it.

    Args:
        run: the session's :class:`VersionRun`. index: N.
        memories: every version recorded so far (preloaded; the incumbent is ``run.state.incumbent``).
        parent: the parent's memory record (None for v0). hypothesis / expects / change: the version's.
        finalize: the session's part of the record, called with the memory record once ``vN/memory.json`` is
            written (state, experience log, commit); returns the commit.
        runner: what measures the versions (default: a :class:`~kernelpilot.versions.candidates.VersionRunner`
            over the session's files; tests pass a scripted :class:`~kernelpilot.engine.runner.Runner` over
            ``{"version": N}`` configs). A runner passed in is not closed here.

    Returns:
        (the version's memory record, the commit that recorded it or None).

    Raises:
        ImpossibleTime: the version's median is under the speed-of-light floor (recorded and committed first).
        BrokenFirstConfig: v0 killed its worker or hung (recorded and committed first).
    """
    from kernelpilot.engine.evaluator import Evaluator
    from kernelpilot.versions.recorder import SessionRecorder

    state = run.state
    own = runner is None
    runner = runner if runner is not None else VersionRunner.for_session(run.root, state, run.roofline,
                                                                         timeout_s=run.timeout_s, step=run.step)
    recorder = SessionRecorder(run, parent=parent, hypothesis=hypothesis, expects=list(expects or []),
                               change=change, finalize=finalize)
    evaluator = Evaluator(version_space([*state.versions, index]), SampledOnce(runner), recorder=recorder,
                          roofline=run.roofline, ab_samples=AB_SAMPLES_CPU if run.interpreted else AB_SAMPLES_GPU,
                          race=False, strategy="session", unmeasured_leads=False)
    recorder.evaluator = evaluator
    evaluator.preload([remembered(m, state.incumbent) for m in memories])
    try:
        evaluator(version_config(index))
    finally:
        if own:
            runner.close()
    assert recorder.memory is not None
    return recorder.memory, recorder.commit
