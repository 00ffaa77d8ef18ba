"""``kernelpilot optimize --resume RUN``: continue a run that was killed or interrupted.

What is kept, what is redone:

* every version whose ``outcome.json`` is present and valid (with its index, and a ``config.json`` of the same
  config) is kept, in order; the first version without one — the version in flight when the run stopped — and
  anything after it is removed and redone (those folders were never committed; a committed one that is not complete
  is an error naming it, with the ``git checkout`` that restores it);
* files of kept versions written after their last commit (the last commit id, a final profile) are committed first
  (with run.json; reports such as ``final_report.md`` wait for the final commit);
  a stale ``.git/index.lock`` left by a kill during a commit is removed;
* the budget counts what was spent: run.json's ``search_spent_s`` (updated with every version's commit, and when a
  signal stopped the run) is where the search's clock starts again, and the versions kept count against
  ``--iterations``;
* the configs answered without a run (``skipped.jsonl``) are read back and put between the versions by their
  ``seq`` (:func:`evaluation_order`): the evaluator's memory is rebuilt in the order the search made it; rows after
  the version in flight (none, normally) are dropped;
* the strategy starts again from the beginning with the kept versions and skipped rows as its answers:
  deterministic given its answers, it walks the same path back to where the run stopped, then goes on.

The run's own options come from run.json: its ``options``, the run's :class:`~kernelpilot.options.OptimizeOptions`
validated back whole (a field it does not know, or a value of the wrong type, is an error naming run.json; a run
recorded before they were has the same options in its fields), and the kernel — its original path when its bytes
still hash to the recorded ``source_sha256``, else the copy in the run folder —, shape, budget; ``--timeout-s``,
``--budget-s`` and ``--iterations`` may be given again to change them. A finished run is not run again: its records
are returned as they are.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

from kernelpilot.app.session import Log, OptimizeResult, Session, drive, now_utc
from kernelpilot.errors import KernelpilotError, RunFolderError
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.records.models import (SKIPPED_FILE, RunInfo, VersionConfig, outcome_from_json, read_skipped,
                                        restored)
from kernelpilot.records.workspace import Workspace, read_json, read_record, write_json, write_text

__all__ = ["complete_versions", "evaluation_order", "resume"]


def _sha(kernel: Path, ref: Path | None) -> str | None:
    """The contract's source hash of ``kernel`` (+ ``ref``), None when a file is missing."""
    try:
        digest = hashlib.sha256(kernel.read_bytes())
        if ref is not None and ref != kernel:
            digest.update(ref.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def _kernel_files(ws: Workspace, info: RunInfo) -> tuple[Path, Path | None]:
    """The kernel (and reference) file to resume with: the original paths when they still hold the bytes the run
    started with, else the copies in the run folder.

    Raises:
        RunFolderError: neither matches run.json's ``source_sha256``.
    """
    kernel, ref = Path(info.kernel), Path(info.reference)
    ref_or_none = ref if ref != kernel else None
    if _sha(kernel, ref_or_none) == info.source_sha256:
        return kernel, ref_or_none
    copy, copy_ref = ws.root / "kernel.py", (ws.root / "ref.py" if ref_or_none is not None else None)
    if _sha(copy, copy_ref) == info.source_sha256:
        return copy, copy_ref
    raise RunFolderError(f"{ws.root}: neither {kernel} nor the run's copy kernel.py is the source the run started with "
                         f"(sha256 {info.source_sha256[:12]})",
                         "restore kernel.py from the run's git history (`git -C RUN checkout -- kernel.py`), or start "
                         "a new run with the changed kernel")


def _tracked(history: Any, rel: str) -> list[str]:
    """Files under ``rel`` that git tracks (none without git)."""
    if history is None:
        return []
    return [line for line in history.repo.git.ls_files("--", rel).splitlines() if line]


def complete_versions(ws: Workspace, history: Any = None) -> tuple[list[Evaluation], list[int]]:
    """The versions to keep and the ones removed to be redone (see the module docstring).

    Returns:
        (kept evaluations in version order, indices of the folders removed).

    Raises:
        RunFolderError: a version folder to redo holds files committed to git (the records were changed or lost
            after their commit: the message names the version and how to restore it).
    """
    kept: list[Evaluation] = []
    indices = ws.version_indices()
    for i in indices:
        if i != len(kept):
            break
        vdir = ws.root / f"v{i}"
        try:
            ev = read_record(vdir / "outcome.json", lambda text: outcome_from_json(json.loads(text)))
            cfg = read_json(vdir / "config.json", VersionConfig)
        except RunFolderError:
            break
        if ev.index != i or ev.config != cfg.config:
            break
        kept.append(restored(vdir, ev))
    redo = [i for i in indices if i >= len(kept)]
    for i in redo:
        tracked = _tracked(history, f"v{i}")
        if tracked:
            raise RunFolderError(f"{ws.root}/v{i} is committed to the run's git history but its records are incomplete "
                                 f"or corrupt ({', '.join(tracked[:4])} ...)",
                                 f"restore it with `git -C {ws.root} checkout -- v{i}`, then resume again "
                                 f"(`kernelpilot report {ws.root}` names what is wrong)")
    for i in redo:
        shutil.rmtree(ws.root / f"v{i}")
    return kept, redo


def evaluation_order(ws: Workspace, kept: list[Evaluation]) -> list[Evaluation]:
    """The kept versions and the skipped rows of ``skipped.jsonl`` in evaluation order (``seq`` 0, 1, ... without a
    gap); ``skipped.jsonl`` is rewritten with the rows kept (those before the first missing ``seq``: the version in
    flight), rows appended after the last commit included, like the kept versions. A run whose versions carry no
    ``seq`` (recorded before the table existed) gets ``kept`` as it is.

    Raises:
        RunFolderError: a row of ``skipped.jsonl`` is not valid, or a kept version comes after a missing ``seq``
            (a row of the table was lost: the evaluation order cannot be rebuilt).
    """
    path = ws.root / SKIPPED_FILE
    if any(ev.seq is None for ev in kept):
        return kept
    rows, bad = read_skipped(path.read_text(errors="replace")) if path.is_file() else ([], [])
    if bad:
        raise RunFolderError(f"{path}: {bad[0]}", f"restore it with `git -C {ws.root} checkout -- {SKIPPED_FILE}`, "
                             "then resume again")
    by_seq: dict[int, Evaluation] = {}
    for ev in [*kept, *(row.evaluation() for row in rows)]:
        if ev.seq in by_seq:
            raise RunFolderError(f"{ws.root}: two answers with seq {ev.seq} ({by_seq[ev.seq].key} and {ev.key})",
                                 f"restore the run with `git -C {ws.root} checkout -- .`, then resume again")
        by_seq[ev.seq] = ev  # type: ignore[index]
    order: list[Evaluation] = []
    while len(order) in by_seq:
        order.append(by_seq[len(order)])
    lost = [ev for ev in kept if ev.seq is not None and ev.seq >= len(order)]
    if lost:
        raise RunFolderError(f"{ws.root}: v{lost[0].index} has seq {lost[0].seq}, but no answer has seq "
                             f"{len(order)} (a row of {SKIPPED_FILE} is missing)",
                             f"restore it with `git -C {ws.root} checkout -- {SKIPPED_FILE}`, then resume again")
    kept_rows = [row for row in rows if row.seq < len(order)]
    if path.is_file():  # rewritten (the same bytes when no row is dropped): this process commits what it keeps
        write_text(path, "".join(row.line() for row in sorted(kept_rows, key=lambda r: r.seq)))
    return order


def _metrics_of(ws: Workspace, kept: list[Evaluation]) -> dict[str, Any]:
    """config key -> ncu metrics of the kept versions that were profiled (``metrics.json``)."""
    from kernelpilot.profile.kernel_metrics import KernelMetrics

    out: dict[str, Any] = {}
    for ev in kept:
        path = ws.root / f"v{ev.index}" / "metrics.json"
        if path.is_file():
            try:
                out[ev.key] = KernelMetrics.model_validate(json.loads(path.read_text())["main_kernel"])
            except (ValueError, KeyError, TypeError):
                pass
    return out


def _finished(ws: Workspace, info: RunInfo, log: Log) -> OptimizeResult:
    """The records of a finished run, as :func:`kernelpilot.app.optimize.optimize` returned them."""
    log(f"{ws.root} finished at {info.finished_utc}: nothing to resume (`kernelpilot report {ws.root}` validates it)")
    versions = [restored(ws.root / f"v{i}", read_record(ws.root / f"v{i}" / "outcome.json",
                                                        lambda t: outcome_from_json(json.loads(t))))
                for i in ws.version_indices()]
    return OptimizeResult(out=ws.root, run=info, versions=versions)


def _run_options(ws: Workspace, info: RunInfo) -> Any:
    """The run's :class:`~kernelpilot.options.OptimizeOptions`: run.json's ``options`` validated back whole; for a
    run recorded before they were, the same options read from run.json's fields (``config_overrides``,
    ``gpu_requested``, ``constraints``, ``replay``, strategy, seed, budgets, flags).

    Raises:
        RunFolderError: the stored options are not an OptimizeOptions (a field it does not know, a value of the
            wrong type or out of range).
    """
    from kernelpilot.options import OptimizeOptions, build_options, stored_options

    if info.options is not None:
        return stored_options(OptimizeOptions, info.options, ws.root / "run.json")
    try:
        return build_options(OptimizeOptions, iterations=info.iterations, budget_s=info.budget_s,
                             config=info.config_overrides or None, gpu=info.gpu_requested, profile=info.profile,
                             git=info.git, benchmark=info.benchmark, strategy=info.strategy, seed=info.seed,
                             timeout_s=info.timeout_s, replay=info.replay, constraints=info.constraints or None,
                             baselines_ns=info.baselines_ns or None)
    except KernelpilotError as exc:
        raise RunFolderError(f"{ws.root / 'run.json'}: a recorded option is out of range ({exc.message})",
                             "the record was edited by hand; restore it or start a new run") from None


def resume(run: str | Path, *, timeout_s: float | None = None, budget_s: float | None = None,
           iterations: int | None = None, cache_root: str | Path | None = None,
           log: Log = lambda _m: None) -> OptimizeResult:
    """Continue the run in ``run`` (see the module docstring).

    Args:
        run: the run folder (``--out`` of the run). timeout_s / budget_s / iterations: new values of those
            options (None: the run's own). cache_root: folder searched for a replayed cache's prefix.
        log: progress callback.

    Returns:
        The :class:`OptimizeResult` of the whole run (kept and new versions).

    Raises:
        RunFolderError: not a run folder; run.json corrupt; the kernel changed; a committed version is incomplete;
            the run was measured on another device (:func:`kernelpilot.app.context.check_same_device`).
        OptionError: a new option value out of range. Interrupted: stopped again by a signal (resume again).
        ContractError / SpecError / SearchError: as :func:`kernelpilot.app.optimize.optimize`.
    """
    from kernelpilot.app.context import check_same_device, prepare
    from kernelpilot.engine.runner import ReplayRunner
    from kernelpilot.options import OptimizeOptions, build_options
    from kernelpilot.measure.env import EnvInfo
    from kernelpilot.records.history import RunHistory
    from kernelpilot.search.strategies import get_strategy

    t0 = time.monotonic()
    changes = build_options(OptimizeOptions, timeout_s=timeout_s, budget_s=budget_s, iterations=iterations,
                            cache_root=cache_root).model_dump(exclude_unset=True)  # the new values, range-checked
    ws = Workspace.open(Path(run))
    info = read_json(ws.root / "run.json", RunInfo)
    if info.finished_utc:
        return _finished(ws, info, log)
    options = build_options(OptimizeOptions, _run_options(ws, info).model_dump(), **changes)
    history = RunHistory(ws.root) if info.git else None
    if history is not None:
        lock = ws.root / ".git" / "index.lock"
        if lock.is_file():  # left by a kill during a commit; this run has no other writer
            log(f"removing {lock} left by the interrupted commit")
            lock.unlink()
    kernel, ref = _kernel_files(ws, info)
    replayer = ReplayRunner(options.replay, root=options.cache_root) if options.replay else None
    ctx = prepare(kernel, ref=ref, shape=info.shape, config=options.config, gpu=options.gpu,
                  constraints=options.constraints, replay=replayer)
    check_same_device(ws.root, info.measured_on, ctx, "optimize")
    kept, redone = complete_versions(ws, history)
    prior = evaluation_order(ws, kept)
    info.timeout_s = timeout_s if timeout_s is not None else (info.timeout_s or 300.0)
    info.budget_s = budget_s if budget_s is not None else info.budget_s
    info.iterations = iterations if iterations is not None else info.iterations
    info.options = options.model_dump(mode="json") if info.options is not None else None
    info.resumed_utc = [*info.resumed_utc, now_utc()]
    why = info.interrupted or "killed"
    info.interrupted = None
    write_json(ws.root / "run.json", info)
    if history is not None:
        records = [ws.root / f"v{ev.index}" for ev in kept] + [ws.root / "run.json", ws.root / "baselines.json",
                                                               ws.root / SKIPPED_FILE]
        history.commit(records, f"resume: {len(kept)} versions kept" +
                       (f", v{redone[0]} redone" if redone else "") + f" (the last session stopped: {why})")
    log(f"resuming {ws.root}: {len(kept)} versions kept" + (f", v{redone[0]} redone" if redone else "")
        + (f", {len(prior) - len(kept)} skipped configs read back" if len(prior) > len(kept) else "")
        + f"; {info.search_spent_s:.1f} s of the {info.budget_s or 0:.0f} s search budget spent")
    env_path = ws.root / "env.json"
    env = EnvInfo.model_validate_json(env_path.read_text()) if env_path.is_file() else None
    bench = None
    if (ws.root / "baselines.json").is_file():
        from kernelpilot.report.benchmark import BenchmarkResult

        bench = read_json(ws.root / "baselines.json", BenchmarkResult)
    session = Session(ctx=ctx, ws=ws, info=info, history=history, strategy=get_strategy(info.strategy),
                      replayer=replayer, timeout_s=info.timeout_s, profile=info.profile, benchmark=info.benchmark,
                      log=log, t0=t0, prior=prior, bench=bench, metrics_of=_metrics_of(ws, kept), env=env)
    return drive(session)
