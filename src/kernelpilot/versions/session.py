"""``kernelpilot session``: the seed workflows' loop for versions an author writes, one hypothesis at a time.

``start`` freezes the check (the reference and its tolerances are copied to ``check/reference.py``; v0's ``setup``
defines the inputs; the shape is fixed), writes ``README.md`` (task, cited specs, roofline, stop conditions) and
evaluates v0. ``try`` commits the hypothesis (and its expectations) *before* the new file runs, copies it in as
``vN/kernel.py`` with ``change.diff`` against its parent, evaluates it through the one Evaluator
(:func:`kernelpilot.versions.run_version.run_version`: the Evaluator's incumbent, floor and broken-v0 rules),
classifies the outcome, writes ``vN/memory.json``, adds the outcome to the experience log and commits. ``mask``/``unmask``/``restart`` change what counts without deleting anything, each as a commit; ``finish``
writes ``final_report.md`` and ``benchmark.md`` (the incumbent vs PyTorch eager and torch.compile).
"""

from __future__ import annotations

import difflib
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel

from kernelpilot.fmt import format_duration_ns, format_ratio
from kernelpilot.options import SessionOptions
from kernelpilot.progress import Steps
from kernelpilot.records.models import now_utc
from kernelpilot.records.seal import note_written
from kernelpilot.records.workspace import Workspace, write_json, write_text
from kernelpilot.versions.outcome import parse_expect
from kernelpilot.versions.records import MemoryRecord, SessionState, load_memories, load_state, save_state
from kernelpilot.versions.render import render_hypothesis_md, render_readme
from kernelpilot.versions.run_version import VersionRun, copy_version, run_version, target_met, version_kernel

if TYPE_CHECKING:
    from kernelpilot.engine.runner import Runner

__all__ = ["SessionStatus", "TryResult", "start", "try_version"]

Log = Callable[[str], None]

class TryResult(BaseModel):
    """What ``start`` (v0) and ``try`` return: the version's memory record, the incumbent, the stop condition."""

    run: Path
    memory: MemoryRecord
    incumbent: int | None
    target_ns: float | None
    target_met: bool
    experience_recorded: bool = False
    commit: str | None = None


class SessionStatus(BaseModel):
    """``session status``: every version (masked ones flagged), the incumbent, the target and what to try next;
    after ``finish``, ``report_html`` names the page it wrote (``RUN/report.html``; empty if it could not be drawn)."""

    run: Path
    state: SessionState
    versions: list[MemoryRecord]
    incumbent: int | None
    incumbent_ns: float | None
    target_ns: float | None
    target_met: bool
    card_suggests: list[str] = []
    experience_recommends: list[dict[str, Any]] = []
    table_md: str = ""
    report_html: str | None = None
    #: baseline name -> median (ns) from the session's benchmark.json (``session finish``); empty before it
    baselines_ns: dict[str, float] = {}

    def to_dataframe(self) -> Any:
        """The session as a pandas DataFrame: one row per version (masked ones flagged, invalid ones with their
        ``status`` and NaN times); columns in :data:`kernelpilot.records.frames.MEMORY_COLUMNS` (``duration_ns``,
        ``iqr_ns``, ``pct_of_roofline``, ``speedup_vs_v0``, ``speedup_vs_eager`` ...).

        Raises:
            MissingDependencyError: pandas is not installed (``pip install 'kernelpilot[dataframe]'``).
        """
        from kernelpilot.records.frames import memory_frame

        return memory_frame(self.versions, self.incumbent, self.baselines_ns)


def _history(root: Path, state: SessionState) -> Any:
    from kernelpilot.records.history import RunHistory

    return RunHistory(root) if state.git else None


def _commit(root: Path, state: SessionState, paths: list[Path], message: str) -> str | None:
    history = _history(root, state)
    return history.commit(paths, message) if history is not None else None


def _roofline(root: Path) -> Any:
    from kernelpilot.hardware.roofline import Roofline
    from kernelpilot.records.workspace import read_json

    path = root / "roofline.json"
    return read_json(path, Roofline) if path.is_file() else None


def _memories_by_index(root: Path, state: SessionState) -> dict[int, MemoryRecord]:
    return {m.version: m for m in load_memories(root, state)}


def _record_experience(state: SessionState, root: Path, mem: MemoryRecord) -> bool:
    """Add a tried version's outcome to the session's experience log (v0 is not a change); False when there is no
    log, recording is off, or it could not be written (the session goes on)."""
    if mem.version == 0 or state.experience_db is None:
        return False
    from kernelpilot.experience import ExperienceEntry
    from kernelpilot.experience.from_runs import record_entries

    speed = None
    if mem.measured and mem.vs_parent and mem.vs_parent.get("ratio"):
        speed = 1.0 / float(mem.vs_parent["ratio"])
    moved = {k: (mem.metrics_after[k] - v) / abs(v) for k, v in mem.metrics_before.items()
             if k in mem.metrics_after and v}
    entry = ExperienceEntry(kernel=state.kernel_name, kernel_type=state.kernel_type, backend=state.backend,
                            arch=state.arch, gpu=state.device_name, bottleneck=mem.bottleneck_before,
                            change=mem.hypothesis, tags=[],  # an interpreted version claims no speed: neutral
                            outcome="neutral" if mem.outcome == "unmeasured" else mem.outcome, speedup=speed,
                            metrics_moved=moved,
                            source=f"session:{root.resolve()}/v{mem.version}", measured=mem.measured,
                            recorded_utc=mem.recorded_utc)
    added, _ = record_entries([entry], state.experience_db)
    return added > 0


def _experience_path(given: str | Path | None) -> str | None:
    """The experience log's path (given, else the log's default), or None when the log is not installed."""
    try:
        from kernelpilot.experience import default_db_path
    except ImportError:
        return None
    return str(given or default_db_path())


def _target_met(state: SessionState, mems: dict[int, MemoryRecord],
                baselines_ns: dict[str, float] | None = None) -> bool:
    """The session's stop condition: the Evaluator's target rule on its incumbent
    (:func:`kernelpilot.versions.run_version.target_met`)."""
    return target_met(state, list(mems.values()), baselines_ns)


def start(kernel: str | Path, options: SessionOptions | None = None, *, out: str | Path,
          log: Log = lambda _m: None) -> TryResult:
    """Start a session on ``kernel`` in the new folder ``out`` and evaluate v0 (see the module docstring).
    ``options`` (None: the defaults) are stored in ``session.json`` whole; later commands read them back.

    Raises:
        ContractError / ScreenRefused: the kernel file (or ``ref``) breaks the contract or is refused by the screen.
        RunFolderError: ``out`` exists and is not empty, or cannot be written. SpecError: unknown ``gpu``.
        ToolMissingError: git requested but unavailable.
    """
    from kernelpilot.app.context import prepare
    from kernelpilot.experience.from_runs import guess_kernel_type
    from kernelpilot.measure.env import collect_env, render_env_md

    o = options if options is not None else SessionOptions()
    ctx = prepare(kernel, ref=o.ref, shape=o.shape, gpu=o.gpu, search=False)
    kf = ctx.kf
    ws = Workspace.create(Path(out))
    root = ws.root
    (root / "check").mkdir()
    shutil.copy2(kf.reference_path, root / "check" / "reference.py")
    note_written(root / "check" / "reference.py")  # the write journal (records/seal.py): committed below
    copy_version(kf.path, ws.version_dir(0))
    env = collect_env(probe_ncu=o.profile and ctx.target.is_gpu)
    write_json(root / "env.json", env)
    write_text(root / "env.md", render_env_md(env))
    cc = env.gpu.compute_capability if env.gpu else None
    arch = f"sm_{str(cc).replace('.', '')}" if cc else None
    # a series' files are often named v0.py, v1.py ...: the session is then named after their folder
    name = kf.path.parent.name if re.fullmatch(r"v\d+", kf.name) else kf.name
    state = SessionState(kernel_name=name, kernel_type=o.kernel_type or guess_kernel_type(name),
                         backend=(kf.backend.name if kf.backend is not None else "triton"), device=ctx.target.record,
                         device_name=env.gpu.name if env.gpu else None, arch=arch, shape=ctx.shape,
                         floor_ns=ctx.roofline.floor_ns if ctx.roofline else None,
                         target_ns=ctx.roofline.target_ns if ctx.roofline else None,
                         experience_db=None if o.no_experience else _experience_path(o.experience_db),
                         started_utc=now_utc(), git=o.git, options=o)
    if ctx.roofline is not None:
        write_json(root / "roofline.json", ctx.roofline)
    tol = (f"atol={kf.atol}, rtol={kf.rtol} (set by the reference file)" if kf.atol is not None or kf.rtol is not None
           else "kernelpilot's defaults for the output dtype (docs/measuring.md)")
    write_text(root / "README.md", render_readme(state, str(kf.path), str(kf.reference_path), ctx.roofline, ctx.work,
                                                 ctx.roofline_note, tol))
    write_text(ws.version_dir(0) / "hypothesis.md", render_hypothesis_md(0, None, "the starting kernel", [], ""))
    save_state(root, state)
    _commit(root, state, [root], "session: start — check frozen, environment, roofline, stop conditions, v0 file")
    log(f"session {root}: {kf.name} at {ctx.shape} on {state.device_name or 'the CPU (interpreter)'}")
    return _evaluate(root, state, 0, parent=None, hypothesis="the starting kernel", expects=[], change="",
                     profile=o.profile, timeout_s=o.timeout_s, log=log)


def _evaluate(root: Path, state: SessionState, index: int, *, parent: MemoryRecord | None, hypothesis: str,
              expects: list[Any], change: str, profile: bool, timeout_s: float, log: Log,
              runner: Runner | None = None) -> TryResult:
    """Evaluate version ``index`` through the Evaluator (:func:`kernelpilot.versions.run_version.run_version`); the
    session's part of its record — ``session.json`` (its incumbent is the Evaluator's), the experience log, the
    commit — is written as soon as ``memory.json`` is, also when the floor or a broken v0 then stops the session.

    Raises:
        ImpossibleTime / BrokenFirstConfig: see :func:`~kernelpilot.versions.run_version.run_version`.
    """
    mems = _memories_by_index(root, state)
    incumbent = mems.get(state.incumbent) if state.incumbent is not None else None
    run = VersionRun(root, state, _roofline(root), profile=profile and state.target.is_gpu, timeout_s=timeout_s,
                     log=log)
    steps = run.steps = Steps(log, f"v{index}", run.planned_steps(parent, incumbent))
    recorded: dict[str, bool] = {}

    def finalize(mem: MemoryRecord) -> str | None:
        state.incumbent = mem.incumbent_after
        if index not in state.versions:
            state.versions.append(index)
        save_state(root, state)
        recorded["experience"] = _record_experience(state, root, mem)
        speed = (f", {format_ratio(1 / mem.vs_parent['ratio'], decimals=3)} vs v{mem.parent}"
                 if mem.vs_parent and mem.vs_parent.get("ratio") and mem.measured else "")
        commit = _commit(root, state, [root], f"v{index}: {mem.outcome}"
                         + (f" ({mem.status})" if mem.outcome == "invalid" else "") + f" — {hypothesis[:80]}{speed}")
        steps.finish(f"{mem.outcome}" + (f" ({mem.status}: {mem.message.splitlines()[0][:160]})"
                                         if mem.outcome == "invalid" and mem.message else "")
                     + (f", {format_duration_ns(mem.duration_ns)}" if mem.duration_ns else "")
                     + f"; incumbent v{state.incumbent}")
        return commit

    mem, commit = run_version(run, index, memories=list(mems.values()), parent=parent, hypothesis=hypothesis,
                              expects=expects, change=change, finalize=finalize, runner=runner)
    mems[index] = mem
    return TryResult(run=root, memory=mem, incumbent=state.incumbent, target_ns=state.target_ns,
                     target_met=_target_met(state, mems), experience_recorded=recorded.get("experience", False),
                     commit=commit)


def try_version(run: str | Path, kernel: str | Path, *, hypothesis: str, expect: list[str] | None = None,
                parent: str | int | None = None, profile: bool | None = None, timeout_s: float | None = None,
                log: Log = lambda _m: None, runner: Runner | None = None) -> TryResult:
    """Evaluate the next version (see the module docstring). ``parent``: ``v2`` or ``2`` (default: the incumbent).
    ``profile`` / ``timeout_s`` (s): None: the session's (:attr:`SessionState.options`, stored by ``start``).
    ``runner``: what measures the versions (default: each version file in its own worker; see
    :func:`kernelpilot.versions.run_version.run_version`).

    Raises:
        RunFolderError: ``run`` is not a session (or it is finished). OptionError: no hypothesis, a bad ``--expect``,
            an unknown or masked parent. ContractError: ``kernel`` is not a file.
    """
    from kernelpilot.errors import ContractError, OptionError, RunFolderError

    if not hypothesis or not hypothesis.strip():
        raise OptionError("a version needs its one hypothesis", '--hypothesis "one block per row: coalesced loads"')
    expects = parse_expect(expect)
    root = Path(run)
    state = load_state(root)
    if state.finished_utc:
        raise RunFolderError(f"{root}: the session was finished at {state.finished_utc}",
                             "start a new session from the incumbent's file (vN/kernel.py)")
    path = Path(kernel)
    if not path.is_file():
        raise ContractError(f"kernel file not found: {path}", "pass the path of the new version's .py file")
    mems = _memories_by_index(root, state)
    p = _version_index(parent, state) if parent is not None else state.incumbent
    if p is None or p not in mems:
        raise OptionError(f"no parent version {parent if parent is not None else '(no incumbent yet)'}",
                          "pass --parent vN with a version of this session (`kernelpilot session status RUN`)")
    if mems[p].masked:
        raise OptionError(f"v{p} is masked", f"unmask it (`kernelpilot session unmask {root} v{p}`) or pick another")
    if mems[p].outcome == "invalid":  # nothing to A/B against: the outcome could not be judged
        raise OptionError(f"v{p} is invalid ({mems[p].status}): a version is judged against its parent",
                          "pass --parent with a valid version (`kernelpilot session status RUN`)")
    index = max(state.versions) + 1
    vdir = root / f"v{index}"
    mine, theirs = copy_version(path, vdir), version_kernel(root, p)
    old = theirs.read_text().splitlines(keepends=True)
    new = mine.read_text().splitlines(keepends=True)
    diff = list(difflib.unified_diff(old, new, f"v{p}/{theirs.name}", f"v{index}/{mine.name}"))
    write_text(vdir / "change.diff", "".join(diff))
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    change = f"+{added} -{removed} lines vs v{p} (change.diff)"
    write_text(vdir / "hypothesis.md", render_hypothesis_md(index, p, hypothesis, expects, change))
    _commit(root, state, [vdir], f"v{index}: hypothesis — {hypothesis.strip()[:100]}")
    log(f"v{index}: {hypothesis.strip()[:120]} (parent v{p}, {change})")
    stored = state.options if state.options is not None else SessionOptions()
    return _evaluate(root, state, index, parent=mems[p], hypothesis=hypothesis.strip(), expects=expects,
                     change=change, profile=stored.profile if profile is None else profile,
                     timeout_s=stored.timeout_s if timeout_s is None else timeout_s, log=log, runner=runner)


def _version_index(value: str | int, state: SessionState) -> int:
    from kernelpilot.errors import OptionError

    text = str(value).strip().lower().removeprefix("v")
    if not text.isdigit() or int(text) not in state.versions:
        raise OptionError(f"no version {value!r} in this session (versions: "
                          f"{', '.join('v' + str(i) for i in state.versions) or 'none'})",
                          "name a version as vN, e.g. v2")
    return int(text)
