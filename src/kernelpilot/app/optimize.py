"""``kernelpilot optimize``: the engine + the run-folder recorder + the guided strategy, end to end.

check → time → profile → verdict → next change → (repeat) → report. Every config the strategy proposes is one version
folder (its hypothesis written before it runs), evaluated by :class:`kernelpilot.engine.evaluator.Evaluator` — the
same pipeline as ``kernelpilot tune``: isolated workers (a compile error, wrong result, NaN, illegal memory access,
hang or crash is a failed version with a typed status and the run goes on), static pruning compiled ahead in
parallel, racing, the one A/B decision rule and the speed-of-light floor. Nsight Compute runs only where its card is
used: on v0 (the starting diagnosis the guided strategy's first moves come from) and on the final best; the incumbents
in between get light cards (timing + roofline + compile metadata), as when ncu is missing or may not read counters. PyTorch eager and torch.compile are timed once, before the search: the run does not stop at the
roofline target while one of them is still faster than the incumbent.

Every version is committed to the run's git history as soon as it is decided, and a killed or interrupted run
continues with ``kernelpilot optimize --resume RUN`` (:mod:`kernelpilot.app.resume`); the search and the final
report are one :class:`~kernelpilot.app.session.Session` (:mod:`kernelpilot.app.session`).

Defaults (:data:`DEFAULT_BUDGET_S`): the guided strategy with a wall-clock budget for the search, so that
``kernelpilot optimize KERNEL`` with no option reaches the best of the kernel's space on the bundled examples (the
bound was chosen from replays of exhaustive H100 caches and checked live; see docs/device-runs/).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from kernelpilot.app.session import (NCU_PROFILES_IN_SEARCH, FirstIncorrect, Log, OptimizeResult, Session, drive,
                                     now_utc, search_first)
from kernelpilot.options import OptimizeOptions
from kernelpilot.records.models import RunInfo
from kernelpilot.records.seal import note_written
from kernelpilot.report.hypothesis import DECISION_RULE

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_BUDGET_S_INTERPRETED", "DEFAULT_TIMEOUT_S", "FirstIncorrect",
           "NCU_PROFILES_IN_SEARCH", "OptimizeResult", "now_utc", "optimize"]

#: Default wall-clock budget of the search on a GPU, seconds: the guided strategy reached the exhaustive best of the
#: examples' spaces within 3 % in at most 30 evaluations in replays of the H100 caches (docs/device-runs), at a few
#: seconds per evaluation; the whole run (set-up, baselines, search, reports) stays under 5 minutes.
DEFAULT_BUDGET_S = 200.0
#: Under the Triton interpreter (no GPU) the times are not measurements: a short demonstration run.
DEFAULT_BUDGET_S_INTERPRETED = 45.0
#: Default seconds one version's check and timing may take in its worker before it is a ``timeout``.
DEFAULT_TIMEOUT_S: float = OptimizeOptions.model_fields["timeout_s"].default  # 300 s, written once: the model


def optimize(kernel: str | Path, options: OptimizeOptions | None = None, *, out: str | Path,
             log: Log = lambda s: None, **keywords: Any) -> OptimizeResult:
    """Run the evidence loop on a kernel file and write the run folder (see the module docstring).

    Args:
        kernel: the kernel file. out: the run folder (must not exist or be empty).
        options: every option of the run (:class:`kernelpilot.options.OptimizeOptions`, each documented there:
            iterations, budget_s (default :data:`DEFAULT_BUDGET_S` on a GPU and in a replay,
            :data:`DEFAULT_BUDGET_S_INTERPRETED` under the interpreter; a replay counts the device seconds each
            replayed evaluation cost when it was measured, so it stops where the live run would have), shape, config,
            ref, gpu, profile, git, benchmark, strategy, seed, timeout_s (default :data:`DEFAULT_TIMEOUT_S`), replay
            (its lines are checked first: a forged or inconsistent line refuses the file, by name; every decision is
            made again on the stored samples, and the run's device says who vouches for them), cache_root,
            constraints, baselines_ns); run.json stores them as ``options``. None: built from ``keywords`` (the
            keyword form: ``optimize(k, out=d, iterations=2)``), else the defaults.
        log: called with one line per step (the CLI prints them).
        keywords: the fields of :class:`~kernelpilot.options.OptimizeOptions` (only without ``options``).

    Returns:
        :class:`OptimizeResult`.

    Raises:
        OptionError: ``iterations`` negative, ``budget_s`` or ``timeout_s`` not positive, a bad shape value, an
            unknown option or one of the wrong type, ``options`` and ``keywords`` both given.
        ContractError: the kernel file breaks the contract. RunFolderError: ``out`` is not empty or cannot be made.
        ToolMissingError: git requested but unavailable. SearchError: unknown strategy, or a cache of another kernel.
        CacheEntryRefused: a line of the replayed cache is forged or inconsistent (a ``SearchError``).
        SpecError: unknown ``gpu``. Interrupted: SIGINT/SIGTERM stopped the run (resume it with ``--resume``).
    """
    from kernelpilot.errors import OptionError
    from kernelpilot.options import build_options

    if options is None:
        options = build_options(OptimizeOptions, **keywords)
    elif keywords:
        raise OptionError(f"optimize() got options and keywords ({', '.join(sorted(keywords))})",
                          "put them into the OptimizeOptions")
    return _optimize(kernel, options, out=out, log=log)


def _optimize(kernel: str | Path, o: OptimizeOptions, *, out: str | Path, log: Log) -> OptimizeResult:
    """:func:`optimize` with its options built (the ranges were checked when ``o`` was built)."""
    from kernelpilot.app.context import prepare
    from kernelpilot.engine.runner import ReplayRunner
    from kernelpilot.hardware.roofline import render_roofline_md
    from kernelpilot.measure.env import collect_env, render_env_md
    from kernelpilot.records.history import RunHistory
    from kernelpilot.records.workspace import Workspace, write_json, write_text
    from kernelpilot.search.strategies import get_strategy

    t0 = time.monotonic()
    strat = get_strategy(o.strategy)  # an unknown name fails before the run folder exists
    replayer = ReplayRunner(o.replay, root=o.cache_root) if o.replay is not None else None
    ctx = prepare(kernel, ref=o.ref, shape=o.shape, config=o.config, gpu=o.gpu, constraints=o.constraints,
                  replay=replayer, spare_worker=True, timeout_s=o.timeout_s or 300.0)
    profile, benchmark, git, budget_s, timeout_s = o.profile, o.benchmark, o.git, o.budget_s, o.timeout_s
    try:
        kf, roof, cuda = ctx.kf, ctx.roofline, ctx.target.is_gpu
        if budget_s is None:
            budget_s = DEFAULT_BUDGET_S_INTERPRETED if ctx.target.interpreted else DEFAULT_BUDGET_S
        ws = Workspace.create(Path(out))
        shutil.copy2(kf.path, ws.root / "kernel.py")
        note_written(ws.root / "kernel.py")  # the write journal (records/seal.py): committed with the set-up
        if kf.reference_path != kf.path:
            shutil.copy2(kf.reference_path, ws.root / "ref.py")
            note_written(ws.root / "ref.py")
        log(f"run folder {ws.root} — {kf.name} at {ctx.shape} on {ctx.target.record}"
            + (" (Triton interpreter: timings are not measurements)" if ctx.target.interpreted else "")
            + (f"; search budget {budget_s:.0f} s" if budget_s else ""))
        if replayer is not None:  # what the replayed lines are worth, said where the run is described
            log(f"replaying {replayer.path}: {replayer.trust}; every decision is made again on the stored samples")
        probe_now = not search_first(strat)  # a search-first strategy: its final profile answers (_note_counters)
        t_env = time.monotonic()
        env = collect_env(probe_ncu=profile and cuda and probe_now)
        setup_s = {**ctx.setup_s, "env": round(time.monotonic() - t_env, 6)}
        write_json(ws.root / "env.json", env)
        write_text(ws.root / "env.md", render_env_md(env))
        head = (f"Shape: {ctx.shape}\n\nFLOPs: {ctx.work.flops:.6g} ({ctx.work.flops_source})\n\n"
                f"Bytes: {ctx.work.bytes_moved:.6g} ({ctx.work.bytes_source})\n\n")
        write_text(ws.root / "roofline.md", f"{render_roofline_md(roof)}\n\n## Workload\n\n{head}" if roof is not None
                   else f"# Roofline\n\n{head}{ctx.roofline_note}\n")
        if roof is not None:
            write_json(ws.root / "roofline.json", roof)
        history = RunHistory(ws.root) if git else None
        info = RunInfo(kernel=str(kf.path), kernel_name=kf.name, reference=str(kf.reference_path),
                       source_sha256=kf.source_sha256, shape=ctx.shape, tunables=kf.tunables,
                       compute_unit=kf.compute_unit,
                       mode="cuda" if cuda else ("replay" if replayer else "interpreter"),
                       device_name=(env.gpu.name if env.gpu else ("CPU (Triton interpreter)" if ctx.target.interpreted
                                                                    else f"replay of {ctx.gpu} (cache "
                                                                         f"{replayer.trust if replayer else ''})")),
                       gpu_spec=roof.gpu if roof else None, measured_on=ctx.measured_on, iterations=o.iterations,
                       profile=profile and cuda, started_utc=now_utc(), strategy=o.strategy, seed=o.seed,
                       decision_rule=DECISION_RULE,
                       budget_s=budget_s,
                       floor_ns=roof.floor_ns if roof else None, target_ns=roof.target_ns if roof else None,
                       timeout_s=timeout_s, constraints=list(o.constraints or []),
                       config_overrides=dict(o.config or {}), gpu_requested=o.gpu, benchmark=benchmark, git=git,
                       replay=o.replay, baselines_ns=dict(o.baselines_ns or {}) if not cuda else {},
                       options=o.model_dump(mode="json"), setup_s=setup_s)
        t_rec = time.monotonic()
        write_json(ws.root / "run.json", info)
        if history is not None:
            history.commit([ws.root / n for n in ("kernel.py", "ref.py", "env.json", "env.md", "roofline.md",
                                                   "roofline.json", "run.json")], "run: kernel, environment, roofline")
        info.setup_s["records"] = round(time.monotonic() - t_rec, 6)  # in run.json from the next write on
        return drive(Session(ctx=ctx, ws=ws, info=info, history=history, strategy=strat, replayer=replayer,
                             timeout_s=timeout_s, profile=profile, benchmark=benchmark, log=log, t0=t0, env=env))
    finally:
        ctx.discard_spare()  # a run that failed before its first worker took it
