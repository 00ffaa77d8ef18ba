"""Experience entries from the records ``optimize`` and ``tune`` already keep (:class:`~kernelpilot.records.
evaluation.Evaluation`): one entry per version of an optimize run that changed a tunable, one per tune run (its
first correct config against its best). The campaigns call these when a run ends; nothing here writes files.

Outcome of a version (ours, from the engine's own decision): accepted -> ``improved``; rejected with the bootstrap
interval of new/old time entirely above 1 -> ``regressed``; rejected otherwise -> ``neutral`` (or ``regressed``
when no decision was recorded and the version is over 10 % slower); a failed run (compile error, wrong result,
timeout, ...) -> ``invalid``; configs never run (``invalid_config``, ``pruned``) give no entry.
"""

from __future__ import annotations

from typing import Iterable, Optional

from kernelpilot.experience.model import BOTTLENECK_CLASSES, ExperienceEntry
from kernelpilot.experience.tags import derive_tags
from kernelpilot.records.evaluation import Evaluation, change_label

__all__ = ["BROKEN_FIRST", "NOT_RUN", "entry_from_evaluation", "entries_from_optimize", "entry_from_tune",
           "untrusted_run"]

#: Statuses of configs that never ran: no change was tried, so no entry.
NOT_RUN = frozenset({"invalid_config", "pruned"})
#: Without a recorded decision, a rejected version this much slower (new/old time) counts as regressed.
SLOWER_WITHOUT_DECISION = 1.10
#: Compile facts compared between parent and version for ``metrics_moved``.
STATIC_METRICS = ("registers_per_thread", "spills", "shared_bytes", "occupancy_pct")


def _outcome(ev: Evaluation) -> str:
    if ev.status != "ok":
        return "invalid"
    if ev.accepted:
        return "improved"
    detail = ev.decision_detail or {}
    if "ci_low" in detail:
        return "regressed" if float(detail["ci_low"]) > 1.0 else "neutral"
    s = ev.speedup_vs_parent
    return "regressed" if s is not None and 1.0 / s >= SLOWER_WITHOUT_DECISION else "neutral"


def _moved(ev: Evaluation, parent: Optional[Evaluation]) -> dict[str, float]:
    moved: dict[str, float] = {}
    if parent is None:
        return moved
    if ev.ok and parent.ok and parent.duration_ns:
        moved["duration_ns"] = round(ev.duration_ns / parent.duration_ns - 1.0, 6)  # type: ignore[operator]
    if ev.pct_of_roofline is not None and parent.pct_of_roofline:
        moved["pct_of_roofline"] = round(ev.pct_of_roofline / parent.pct_of_roofline - 1.0, 6)
    for name in STATIC_METRICS:
        new, old = ev.static.get(name), parent.static.get(name)
        if isinstance(new, (int, float)) and isinstance(old, (int, float)) and old and new != old:
            moved[name] = round(new / old - 1.0, 6)
    return moved


def _bottleneck(ev: Optional[Evaluation]) -> Optional[str]:
    if ev is None:
        return None
    b = ev.bound or ((ev.card or {}).get("class"))
    return b if b in BOTTLENECK_CLASSES else None


def entry_from_evaluation(ev: Evaluation, parent: Optional[Evaluation], *, kernel: str, kernel_type: str,
                          source: str, backend: str = "triton", arch: Optional[str] = None,
                          gpu: Optional[str] = None) -> Optional[ExperienceEntry]:
    """The entry for one version of an optimize run (an evaluation with a ``move``).

    Args:
        ev: the version's evaluation. parent: the evaluation it derives from (its card's class is the entry's
            bottleneck; its compile facts give ``metrics_moved``), or None.
        kernel, kernel_type, source, backend, arch, gpu: the entry's fields (``source`` e.g. ``optimize:RUN/v3``).

    Returns:
        The entry (its change computed from the parent's config and the version's: :func:`change_label`, every
        changed tunable listed), or
        None when the version changed nothing (no ``move``, the baseline), its parent is not given, or it never
        ran (:data:`NOT_RUN`). Raises nothing for a well-formed evaluation.
    """
    if ev.move is None or parent is None or ev.status in NOT_RUN:
        return None
    label = change_label(parent.config, ev.config)
    change = label + (f" ({ev.move.why})" if ev.move.why else "")
    speedup = ev.speedup_vs_parent if ev.ok else None
    return ExperienceEntry(kernel=kernel, kernel_type=kernel_type, backend=backend, arch=arch, gpu=gpu,
                           bottleneck=_bottleneck(parent), change=change,
                           tags=_move_tags(label),
                           outcome=_outcome(ev), speedup=speedup if speedup and speedup > 0 else None,
                           metrics_moved=_moved(ev, parent), source=source, measured=ev.measured)


def _move_tags(label: str) -> list[str]:
    """Tags of a change label only (``BLOCK_N 256→512``, computed from the configs), not of its explanation, so a
    version is tagged by what it changed."""
    return derive_tags(label)


#: Statuses of a run's first evaluation that say the kernel file itself is broken (its worker exited, crashed or hung):
#: every later failure repeats it and teaches nothing about a change (:mod:`kernelpilot.engine.guards`).
BROKEN_FIRST = frozenset({"worker_crash", "timeout"})


def untrusted_run(evaluations: Iterable[Evaluation]) -> Optional[str]:
    """Why a run's evaluations must not go into the experience log, or None: its first evaluation that ran broke
    (:data:`BROKEN_FIRST`), or one was under the speed-of-light floor (``impossible``: the declarations are in doubt,
    so no time of the run can be compared). Raises nothing."""
    ran = [e for e in evaluations if e.status not in NOT_RUN]
    if ran and ran[0].status in BROKEN_FIRST:
        return f"the first config broke ({ran[0].status})"
    if any(e.status == "impossible" for e in ran):
        return "a time under the speed-of-light floor"
    return None


def entries_from_optimize(evaluations: Iterable[Evaluation], *, run: str, kernel: str, kernel_type: str,
                          backend: str = "triton", arch: Optional[str] = None,
                          gpu: Optional[str] = None) -> list[ExperienceEntry]:
    """Entries for every version of an optimize run that tried a change (see :func:`entry_from_evaluation`), with
    sources ``optimize:<run>/v<index>``. ``evaluations`` are the run's versions (their ``index`` and ``parent``
    link them; configs skipped without a run, ``index`` None, may be mixed in and are passed over); none for an
    untrusted run (:func:`untrusted_run`). Raises nothing for well-formed evaluations."""
    evs = [e for e in evaluations if e.index is not None]
    if untrusted_run(evs) is not None:
        return []
    by_index = {e.index: e for e in evs if e.index is not None}
    out = []
    for ev in evs:
        entry = entry_from_evaluation(ev, by_index.get(ev.parent), kernel=kernel, kernel_type=kernel_type,
                                      source=f"optimize:{run}/v{ev.index}", backend=backend, arch=arch, gpu=gpu)
        if entry is not None:
            out.append(entry)
    return out


def entry_from_tune(evaluations: Iterable[Evaluation], *, run: str, kernel: str, kernel_type: str,
                    strategy: str = "", backend: str = "triton", arch: Optional[str] = None,
                    gpu: Optional[str] = None) -> Optional[ExperienceEntry]:
    """One entry for a tune run: its first correct config against its best one (the fastest accepted), source
    ``tune:<run>``; ``improved`` when they differ, ``neutral`` when the first stayed best. None when no config ran
    correctly, or when the run is untrusted (:func:`untrusted_run`). Raises nothing for well-formed evaluations."""
    evaluations = list(evaluations)
    if untrusted_run(evaluations) is not None:
        return None
    ok = [e for e in evaluations if e.ok]
    if not ok:
        return None
    first = ok[0]
    accepted = [e for e in ok if e.accepted] or [first]
    best = min(accepted, key=lambda e: e.duration_ns)  # type: ignore[arg-type, return-value]
    changed = [k for k in best.config if first.config.get(k) != best.config[k]]
    moves = ", ".join(f"{k} {first.config.get(k)}→{best.config[k]}" for k in changed) or "first config kept"
    speedup = first.duration_ns / best.duration_ns if best.duration_ns else None  # type: ignore[operator]
    return ExperienceEntry(kernel=kernel, kernel_type=kernel_type, backend=backend, arch=arch, gpu=gpu,
                           bottleneck=_bottleneck(first), change=f"tune{' ' + strategy if strategy else ''}: {moves}",
                           outcome="improved" if changed else "neutral", speedup=speedup,
                           metrics_moved=_moved(best, first) if changed else {}, source=f"tune:{run}",
                           measured=best.measured)


#: Kernel types recognised in a kernel's name (:func:`guess_kernel_type`), with their spelling in the log.
KERNEL_TYPE_WORDS = (("layernorm", "layer_norm"), ("layer_norm", "layer_norm"), ("rmsnorm", "rms_norm"),
                     ("rms_norm", "rms_norm"), ("softmax", "softmax"), ("matmul", "matmul"), ("gemm", "matmul"),
                     ("attention", "attention"), ("attn", "attention"), ("vector_add", "vector_add"),
                     ("reduction", "reduction"), ("conv", "conv"), ("rope", "rope"), ("swiglu", "swiglu"),
                     ("geglu", "geglu"))

#: Values of ``$KERNELPILOT_EXPERIENCE`` that switch the automatic recording of optimize/tune/session off.
OFF_VALUES = ("off", "none", "0", "no")


def guess_kernel_type(name: str) -> str:
    """The kernel type of a kernel named ``name`` (a file stem): the first of :data:`KERNEL_TYPE_WORDS` found in it
    (``fused_layernorm_fwd`` → ``layer_norm``), else ``other``. Raises nothing."""
    low = name.lower()
    return next((kind for word, kind in KERNEL_TYPE_WORDS if word in low), "other")


def recording_off() -> bool:
    """True when ``$KERNELPILOT_EXPERIENCE`` is one of :data:`OFF_VALUES` (nothing is recorded automatically)."""
    import os

    return os.environ.get("KERNELPILOT_EXPERIENCE", "").strip().lower() in OFF_VALUES


def record_entries(entries: Iterable[Optional[ExperienceEntry]], db: Optional[str] = None) -> tuple[int, Optional[str]]:
    """Add the outcomes of a run to the experience log (``db``, else :func:`default_db_path`): (entries added, None)
    or (0, why not) when recording is off or the log cannot be written — the log is advice, so a run never fails
    for it; callers log the reason."""
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.experience.db import ExperienceDB

    todo = [e for e in entries if e is not None]
    if recording_off():
        return 0, "recording is off ($KERNELPILOT_EXPERIENCE)"
    if not todo:
        return 0, None
    try:
        with ExperienceDB.open(db) as log:
            return log.add_many(todo), None
    except (KernelpilotError, OSError) as exc:
        return 0, f"experience log not written: {getattr(exc, 'message', exc)}"
