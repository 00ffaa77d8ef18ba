"""``session status``, ``mask``/``unmask``, ``restart`` and ``finish``: what counts in a session, changed without
deleting anything, each change a commit (:mod:`kernelpilot.versions.session` has start and try)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.progress import Phase
from kernelpilot.records.models import now_utc
from kernelpilot.records.workspace import write_json, write_text
from kernelpilot.versions.records import MemoryRecord, SessionState, load_memories, load_state, memory_path, save_state
from kernelpilot.versions.render import render_session_report, versions_table
from kernelpilot.versions.run_version import standing_incumbent
from kernelpilot.versions.session import Log, SessionStatus, _commit, _roofline, _target_met, _version_index

__all__ = ["finish", "mask", "restart", "status", "unmask"]


def status(run: str | Path, *, recommend: bool = True) -> SessionStatus:
    """The session's versions, incumbent, target, the incumbent card's suggested changes and (when the session has
    an experience log) what the log recommends for the incumbent's bottleneck.

    Raises:
        RunFolderError: not a session folder, or a corrupt record (named; ``benchmark.json`` included).
    """
    import json

    root = Path(run)
    state = load_state(root)
    mems = load_memories(root, state)
    by = {m.version: m for m in mems}
    best = by.get(state.incumbent) if state.incumbent is not None else None
    suggests: list[str] = []
    card_path = root / f"v{state.incumbent}" / "verdict.json"
    if best is not None and card_path.is_file():
        card = json.loads(card_path.read_text())
        suggests = [c.get("action", "") for c in card.get("suggested_changes", [])][:5]
    recs: list[dict[str, Any]] = []
    if recommend and state.experience_db and Path(state.experience_db).is_file():
        try:
            from kernelpilot.experience import ExperienceDB

            with ExperienceDB.open(state.experience_db) as db:
                recs = [r.model_dump() for r in db.recommend(
                    kernel_type=state.kernel_type, backend=state.backend, arch=state.arch,
                    bottleneck=best.bottleneck_after if best else None, limit=5)]
        except Exception as exc:  # noqa: BLE001 - the log is advice: a broken one is reported, not fatal
            recs = [{"error": f"experience log unreadable: {exc}"}]
    first = by.get(0)
    live = [m for m in mems if not m.masked]
    bench_file = root / "benchmark.json"
    baselines = {}
    if bench_file.is_file():
        from kernelpilot.records.workspace import read_json
        from kernelpilot.report.benchmark import BenchmarkResult

        baselines = read_json(bench_file, BenchmarkResult).baselines_ns
    return SessionStatus(run=root, state=state, versions=mems, incumbent=state.incumbent, baselines_ns=baselines,
                         incumbent_ns=best.duration_ns if best else None, target_ns=state.target_ns,
                         target_met=_target_met(state, by, baselines), card_suggests=suggests,
                         experience_recommends=recs,
                         table_md=versions_table(live, state.incumbent, first.duration_ns if first else None))


def _set_mask(root: Path, state: SessionState, index: int, masked: bool, why: str) -> MemoryRecord:
    from kernelpilot.records.workspace import read_json

    mem = read_json(memory_path(root, index), MemoryRecord)
    mem = mem.model_copy(update={"masked": masked, "mask_reason": why if masked else ""})
    write_json(memory_path(root, index), mem)
    if state.experience_db and Path(state.experience_db).is_file():
        try:
            from kernelpilot.experience import ExperienceDB

            with ExperienceDB.open(state.experience_db) as db:
                db.set_masked(f"session:{root.resolve()}/v{index}", masked)
        except Exception:  # noqa: BLE001 - the session's own record is what counts
            pass
    return mem


def mask(run: str | Path, version: str | int, *, why: str, masked: bool = True) -> SessionStatus:
    """Mask (or unmask) one version: skipped by status, recommend, the incumbent and the report; a commit.

    Raises:
        RunFolderError: not a session. OptionError: no such version, no reason given, or masking v0.
    """
    from kernelpilot.errors import OptionError

    root = Path(run)
    state = load_state(root)
    index = _version_index(version, state)
    if masked and index == 0:
        raise OptionError("v0 cannot be masked: it is what every version is compared with",
                          "restart from v0 instead (`kernelpilot session restart RUN --from v0`)")
    if masked and not why.strip():
        raise OptionError("say why the version is masked", '--why "measured on a throttled GPU"')
    _set_mask(root, state, index, masked, why.strip())
    state.incumbent = standing_incumbent(state, load_memories(root, state))
    save_state(root, state)
    _commit(root, state, [root], f"{'mask' if masked else 'unmask'}: v{index}" + (f" — {why.strip()[:100]}"
                                                                                   if masked else ""))
    return status(root, recommend=False)


def unmask(run: str | Path, version: str | int) -> SessionStatus:
    """Undo :func:`mask` (a commit)."""
    return mask(run, version, why="", masked=False)


def restart(run: str | Path, *, from_version: str | int) -> SessionStatus:
    """Partial restart: every version after ``from_version`` is masked, the incumbent becomes ``from_version``;
    nothing is deleted; a commit. Later ``try`` calls default to it as their parent.

    Raises:
        RunFolderError: not a session. OptionError: no such version, or it is masked or invalid.
    """
    from kernelpilot.errors import OptionError

    root = Path(run)
    state = load_state(root)
    index = _version_index(from_version, state)
    mems = {m.version: m for m in load_memories(root, state)}
    if mems[index].masked or mems[index].outcome == "invalid":
        raise OptionError(f"v{index} is {'masked' if mems[index].masked else 'invalid'}: no restart from it",
                          "restart from a valid, unmasked version")
    later = [i for i in state.versions if i > index and not mems[i].masked]
    for i in later:
        _set_mask(root, state, i, True, f"restart from v{index}")
    state.incumbent = index
    state.restarts.append({"from": index, "masked": later, "at_utc": now_utc()})
    save_state(root, state)
    _commit(root, state, [root], f"restart: from v{index}" + (f" (masked {', '.join('v' + str(i) for i in later)})"
                                                              if later else ""))
    return status(root, recommend=False)


def finish(run: str | Path, *, benchmark: bool = True, timeout_s: float | None = None,
           log: Log = lambda _m: None) -> SessionStatus:
    """``final_report.md``, ``report.html`` (charts and cards) and (``benchmark``) ``benchmark.md``/
    ``benchmark.json``: the incumbent vs PyTorch eager and torch.compile on the same inputs, in the incumbent's
    worker; ``finished_utc`` set; a commit. The status returned names the page (``report_html``). ``timeout_s``
    (s): None: the session's (stored by ``start``), else 300.

    Raises:
        RunFolderError: not a session.
    """
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.report.benchmark import BenchmarkResult, render_benchmark_md
    from kernelpilot.report.html import try_write_report_html
    from kernelpilot.versions.candidates import VersionRunner

    root = Path(run)
    state = load_state(root)
    bench_md = None
    if benchmark and state.incumbent is not None:
        timing = Phase(log, "baselines", f"v{state.incumbent} vs PyTorch eager and torch.compile")
        # the incumbent's own worker, as its evaluation had it (the session's floor and tolerance)
        limit_s = timeout_s if timeout_s is not None else state.options.timeout_s if state.options else 300.0
        runner = VersionRunner.for_session(root, state, _roofline(root), timeout_s=limit_s)
        try:
            try:
                worker = runner.open(state.incumbent)
                config = worker.call("kernelpilot.versions.measure:_default_config_in_worker")
                bench = BenchmarkResult.model_validate_json(
                    worker.call("kernelpilot.app.session:_baselines_in_worker", state.shape, config))
            finally:
                runner.close()
            write_json(root / "benchmark.json", bench)
            bench_md = render_benchmark_md(bench)
            write_text(root / "benchmark.md", bench_md)
        except KernelpilotError as exc:
            bench_md = f"## Benchmark\n\nnot measured: {exc.message.splitlines()[0][:300]}\n"
            log(f"benchmark not measured: {exc.message.splitlines()[0][:200]}")
        timing.end()
    state.finished_utc = now_utc()
    mems = load_memories(root, state)
    write_text(root / "final_report.md", render_session_report(state, mems, bench_md))
    save_state(root, state)
    html = try_write_report_html(root, log)
    _commit(root, state, [root], f"finish: final report, benchmark; incumbent v{state.incumbent}")
    return status(root, recommend=False).model_copy(update={"report_html": html})
