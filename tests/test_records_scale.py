"""Records that scale (issue 25): a version folder, number and commit per *measured* config; configs answered
without a run (invalid, pruned) are rows of one table, ``skipped.jsonl``, read back by ``--resume`` in evaluation
order, accepted by ``report`` and refused when forged; the final report lists the top versions and counts the rest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kernelpilot.app.recorder import RunFolderRecorder
from kernelpilot.app.resume import evaluation_order
from kernelpilot.app.validate import validate_run
from kernelpilot.engine.evaluator import Evaluator, PrunerBase
from kernelpilot.engine.runner import RunnerBase
from kernelpilot.records.evaluation import Evaluation
from kernelpilot.records.history import RunHistory, committed_blobs
from kernelpilot.records.models import SKIPPED_FILE, RunInfo, read_skipped
from kernelpilot.records.workspace import Workspace, write_json
from kernelpilot.report.final import TOP_N, render_final_report
from kernelpilot.search.space import SearchSpace

#: 8 x 8 x 4 = 256 configs, a constraint making half of them invalid, a pruner removing most of the rest
SPACE = SearchSpace({"A": list(range(8)), "B": list(range(8)), "C": [1, 2, 3, 4]}, ["C <= 2"])
TOTAL = 8 * 8 * 4


class Runner(RunnerBase):
    """A runner with a fixed true time per config (``A + B + C`` µs, 5 % noise) that counts its runs."""

    parallel = 1

    def __init__(self) -> None:
        self.rng, self.runs = np.random.default_rng(0), 0

    def evaluate(self, config, race_against_ns=None):
        self.runs += 1
        t = 1000.0 * (1 + config["A"] + config["B"] + config["C"])
        s = list(t * (1 + 0.05 * self.rng.standard_normal(12)))
        return Evaluation(config=config, status="ok", duration_ns=float(np.median(s)), samples_ns=s, wall_s=0.5)

    def map(self, configs, race_against_ns=None):
        return iter([self.evaluate(c) for c in configs])

    def ab_samples(self, a, b, n):
        return None

    def close(self):
        pass


class Pruner(PrunerBase):
    """Static pruning: every config with ``A + B`` odd or ``A > 5`` can never win."""

    def reason(self, config):
        if (config["A"] + config["B"]) % 2 or config["A"] > 5:
            return f"shared memory {49152 * (config['A'] + 1)} B over the per-block limit 232448 B"
        return None


def _info(root: Path) -> RunInfo:
    return RunInfo(kernel="k.py", kernel_name="k", reference="k.py", source_sha256="0" * 64, shape={},
                   tunables=SPACE.tunables, compute_unit="", mode="replay", device_name="test", gpu_spec=None,
                   profile=False, started_utc="2026-11-26T00:00:00Z")


def _run(root: Path, configs: list[dict], prior: list[Evaluation] = ()) -> tuple[Evaluator, RunFolderRecorder]:
    ws = Workspace.create(root) if not root.exists() else Workspace.open(root)
    history = RunHistory(ws.root)
    if not (root / "run.json").exists():
        write_json(root / "run.json", _info(root))
        history.commit([root / "run.json"], "run: set-up")
    rec = RunFolderRecorder(ws, kf_sha256="0" * 64, shape={}, strategy="exhaustive", roofline=None, history=history)
    ev = Evaluator(SPACE, Runner(), pruner=Pruner(), recorder=rec, ab_samples=0, race=False, strategy="exhaustive")
    ev.preload(list(prior))
    for c in configs:
        ev(c)
    return ev, rec


def _all_configs() -> list[dict]:
    return [{"A": a, "B": b, "C": c} for a in range(8) for b in range(8) for c in (1, 2, 3, 4)]


def _finish(root: Path, ev: Evaluator, rec: RunFolderRecorder) -> RunInfo:
    info = _info(root).model_copy(update={"finished_utc": "2026-11-26T01:00:00Z", "stop_reason": "space spent",
                                          "best_version": ev.incumbent.index})
    write_json(root / "run.json", info)
    rec.finish(ev.order)
    return info


def test_a_run_over_a_large_pruned_space_writes_one_folder_per_measured_config(tmp_path):
    root = tmp_path / "run"
    ev, rec = _run(root, _all_configs())
    measured = [e for e in ev.order if e.index is not None]
    skipped = [e for e in ev.order if e.index is None]
    invalid = sum(1 for c in _all_configs() if c["C"] > 2)
    pruned = sum(1 for c in _all_configs() if c["C"] <= 2 and Pruner().reason(c))
    assert len(measured) == ev.runner.runs == TOTAL - invalid - pruned == 48
    assert len(skipped) == invalid + pruned
    # versions numbered consecutively over measured configs only; one folder each, with its hypothesis
    assert [e.index for e in measured] == list(range(len(measured))) and ev.versions == measured
    assert Workspace.open(root).version_indices() == list(range(len(measured)))
    assert all((root / f"v{i}" / "hypothesis.md").is_file() for i in range(len(measured)))
    # every answer has its place in the evaluation order; skipped ones are rows of one table with their reason
    assert [e.seq for e in ev.order] == list(range(TOTAL))
    rows, bad = read_skipped((root / SKIPPED_FILE).read_text())
    assert not bad and [r.seq for r in rows] == [e.seq for e in skipped]
    assert {r.status for r in rows} == {"invalid_config", "pruned"}
    assert all(r.reason for r in rows)
    # one commit per version (plus the set-up and the final record); the table committed with them
    rec_info = _finish(root, ev, rec)
    subjects = [s for _sha, s in rec.history.log()]
    assert sum(1 for s in subjects if s.startswith("v")) == len(measured)
    assert "skipped without a run" in subjects[0] and f"{len(skipped)} configs" in subjects[0]
    head = committed_blobs(rec.history.repo)
    assert SKIPPED_FILE in head
    found = validate_run(root)
    assert found.problems == [] and len(found.versions) == len(measured) and len(found.skipped) == len(skipped)
    # the final report lists the top versions and summarizes the rest: not a line per config
    text = render_final_report(rec_info, ev.order, None)
    table = [line for line in text.splitlines() if line.startswith("| v")]
    assert len(table) < len(measured) and len(table) <= TOP_N + sum(1 for e in measured if e.accepted) + 2
    assert "more versions not listed" in text and "## Skipped without a run" in text
    assert "is not on record" not in text  # a listed version's change is computed from its parent, listed or not
    assert f"pruned × {pruned}" in text and f"invalid_config × {invalid}" in text


def test_resume_rebuilds_the_evaluation_order_with_the_skipped_rows(tmp_path):
    root = tmp_path / "run"
    configs = _all_configs()[:80]
    first, _ = _run(root, configs)
    kept = [e for e in first.order if e.index is not None]
    reread = [Evaluation.model_validate_json((root / f"v{e.index}" / "outcome.json").read_text()) for e in kept]
    order = evaluation_order(Workspace.open(root), reread)
    assert [(e.key, e.status, e.index, e.seq) for e in order] == [(e.key, e.status, e.index, e.seq)
                                                                   for e in first.order]
    # the second session, preloaded, answers the first session's configs from memory and numbers on
    runs_before = sum(1 for e in first.order if e.index is not None)
    second, _ = _run(root, _all_configs(), prior=order)
    assert second.runner.runs == 48 - runs_before
    assert [e.index for e in second.versions] == list(range(48))
    assert [e.seq for e in second.order] == list(range(TOTAL))
    rows, _ = read_skipped((root / SKIPPED_FILE).read_text())
    assert [r.seq for r in rows] == [e.seq for e in second.order if e.index is None]


def test_report_refuses_a_forged_skipped_table(tmp_path):
    root = tmp_path / "run"
    ev, rec = _run(root, _all_configs()[:40])
    _finish(root, ev, rec)
    assert validate_run(root).problems == []
    table = root / SKIPPED_FILE
    honest = table.read_text()
    # a measured version's config hidden as "pruned" (a row with a fresh seq appended)
    v0 = ev.versions[0]
    forged = json.dumps({"seq": TOTAL + 5, "config": v0.config, "status": "pruned", "reason": "x"}) + "\n"
    table.write_text(honest + forged)
    problems = validate_run(root).problems
    assert any(p.file == SKIPPED_FILE and "as version v0" in p.problem for p in problems)
    assert any(p.file == SKIPPED_FILE and "changed since it was committed" in p.problem for p in problems)
    # a row claiming a skipped config ran fine
    row = json.loads(honest.splitlines()[0])
    table.write_text(json.dumps({**row, "status": "ok"}) + "\n" + "\n".join(honest.splitlines()[1:]) + "\n")
    assert any("never ran" in p.problem for p in validate_run(root).problems)


def _searched(n: int) -> list[Evaluation]:
    """``n`` evaluations of a long search: a new incumbent every 100, one compile error and one timeout every 50
    and 70, the rest correct and slower (most raced out)."""
    out, best = [], 1e6
    for i in range(n):
        failed = "compile_error" if i % 50 == 7 else "timeout" if i % 70 == 9 else None
        faster = i % 100 == 0
        t = best * 0.99 if faster else best * (1.5 + (i % 13) / 10)
        best = min(best, t)
        out.append(Evaluation(config={"A": i}, index=i, status=failed or "ok", accepted=faster and not failed,
                              duration_ns=None if failed else t, samples_ns=[] if failed else [t] * 8,
                              message=f"{failed} at config {i}" if failed else "" if faster or not i % 3 else
                              "raced out after 8 samples"))
    return out


def test_a_long_search_is_listed_by_its_incumbents_fastest_and_failures_and_counted_for_the_rest(tmp_path: Path):
    """A tune's tune.md and report.html list the evaluations that matter and count the rest by outcome: a search of
    5,667 configs on an H200 drew a 7.7 MB page (and a 1 MB tune.md) when they listed every evaluation."""
    from kernelpilot.app.tune import TuneResult, write_tune_records
    from kernelpilot.report.html_data import read_folder

    evs = _searched(2000)
    incumbents = [e for e in evs if e.accepted]
    result = TuneResult(kernel="k.py", shape={"N": 1}, device="cuda", gpu="H200", strategy="exhaustive", seed=0,
                        space_size=2000, space_total=2000, constraints=[], best=incumbents[-1], history=[],
                        evaluations=evs, n_new=2000, n_cached=0, failures={}, prune=None, stopped="strategy finished",
                        wall_s=1.0, device_s=1.0, floor_ns=None, cache_file=None, worker_restarts=0, measured=True,
                        triton_config=None)
    write_tune_records(result, tmp_path / "run")
    md = (tmp_path / "run" / "tune.md").read_text()
    table = md.split("## Evaluations", 1)[1].splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    fastest = sorted((e for e in evs if e.ok and not e.raced_out), key=lambda e: e.objective)[:TOP_N]
    expected = {0, len(evs) - 1, 7, 9} | {e.index for e in incumbents} | {e.index for e in fastest}
    assert sorted(int(r.split("|")[1]) - 1 for r in rows) == sorted(expected)
    rest = [e for e in evs if e.index not in expected]
    raced = sum(1 for e in rest if e.raced_out)
    failed = sum(1 for e in rest if not e.ok)
    assert f"{len(rest)} more evaluations not listed: " in md
    assert f"{len(rest) - failed} rejected (raced out {raced})" in md and f"{failed} failed (" in md
    page = read_folder(tmp_path / "run")
    assert page.listed == {f"#{i + 1}" for i in expected} and len(page.entries) == len(evs)
    assert any(f"{len(rest)} more evaluations not listed" in line for line in page.summary)
    unlisted = [e for e in page.entries if e.label not in page.listed]
    assert unlisted and all(not e.decision and e.card is None for e in unlisted)  # points of the charts only
    assert page.best == f"#{incumbents[-1].index + 1}"


def test_skipped_configs_are_counted_by_reason_and_report_json_lists_what_the_report_lists(tmp_path: Path):
    """A search's pruned configs are counted by reason with an example in tune.md and on the page, not listed one
    row each (the 10,800-config space pruned 1,800), and ``report --json`` prints the listed evaluations with a
    count of the rest (it printed 19.6 MB for 9,000 evaluations); ``--all`` prints every one."""
    from typer.testing import CliRunner

    from kernelpilot.app.report_cmd import ReportResult
    from kernelpilot.app.tune import TuneResult, write_tune_records
    from kernelpilot.cli import app
    from kernelpilot.report.html_data import read_folder

    evs = _searched(600)
    pruned = [Evaluation(config={"A": 10_000 + i}, status="pruned", seq=600 + i,
                         message=f"spills: {40 + i} spilled registers > 16 (--max-spills)") for i in range(300)]
    evs = [*evs, *pruned]
    result = TuneResult(kernel="k.py", shape={"N": 1}, device="cuda", gpu="H200", strategy="exhaustive", seed=0,
                        space_size=900, space_total=900, constraints=[], best=[e for e in evs if e.accepted][-1],
                        history=[], evaluations=evs, n_new=600, n_cached=0, failures={"pruned": 300}, prune=None,
                        stopped="strategy finished", wall_s=1.0, device_s=1.0, floor_ns=None, cache_file=None,
                        worker_restarts=0, measured=True, triton_config=None)
    write_tune_records(result, tmp_path / "run")
    md = (tmp_path / "run" / "tune.md").read_text()
    rows = [line for line in md.split("## Evaluations", 1)[1].split("## Skipped configs")[0].splitlines()
            if line.startswith("| ") and "---" not in line][1:]
    assert rows and not any("| pruned |" in r for r in rows)
    skipped_part = md.split("## Skipped configs", 1)[1]
    assert "300 configs were answered without a run" in skipped_part and "pruned × 300" in skipped_part
    page = read_folder(tmp_path / "run")
    assert not any(f"#{601 + i}" in page.listed for i in range(300))
    assert any("pruned × 300" in line for line in page.summary)

    full = ReportResult(kind="tune", versions=evs, versions_total=len(evs))
    short = full.listed()
    assert short.versions_total == 900 and all(e.index is not None for e in short.versions)
    assert len(short.versions) < 60 and any("pruned × 300" in line for line in short.not_listed)
    assert any("more evaluations not listed" in line for line in short.not_listed)
    assert len(short.model_dump_json()) * 10 < len(full.model_dump_json())
    tuned = result.listed()  # tune --json: the same listing of the search's own result
    assert [e.key for e in tuned.evaluations] == [e.key for e in short.versions]
    assert tuned.evaluations_total == 900 and any("pruned × 300" in line for line in tuned.not_listed)

    # the CLI: --json prints the listed ones, --json --all every one (a real folder of `tune --out`)
    out = tmp_path / "search"
    (out).mkdir()
    from kernelpilot.app.tune_run import TuneRecorder, TuneRun

    (out / "tune-run.json").write_text(TuneRun(kernel="k.py", source_sha256="0" * 64, started_utc="x").model_dump_json())
    recorder = TuneRecorder(out)
    for ev in evs:
        (recorder.after(ev, None) if ev.index is not None else recorder.skipped(ev))
    listed = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    every = json.loads(CliRunner().invoke(app, ["report", str(out), "--json", "--all"]).stdout)
    assert listed["versions_total"] == every["versions_total"] == len(every["versions"]) == 900
    assert len(listed["versions"]) == len(short.versions) and listed["not_listed"] == short.not_listed


def test_a_move_from_a_version_other_than_the_incumbent_names_it_in_the_progress_line(tmp_path: Path):
    """``v9: num_warps 4→2 — checking`` twice in one run read as the same config proposed again; a move made from
    another version than the incumbent names it (``from v4``)."""
    ws = Workspace.create(tmp_path / "run")
    said: list[str] = []
    rec = RunFolderRecorder(ws, kf_sha256="0" * 64, shape={}, strategy="auto", roofline=None, history=None,
                            log=said.append)
    v4 = Evaluation(config={"A": 2, "B": 4, "C": 1}, index=4, status="ok", duration_ns=2.0, accepted=True)
    v5 = Evaluation(config={"A": 3, "B": 4, "C": 1}, index=5, status="ok", duration_ns=1.0, accepted=True)
    rec.before(6, {"A": 3, "B": 2, "C": 1}, v5, None, v5)
    rec.before(7, {"A": 2, "B": 2, "C": 1}, v4, None, v5)
    assert said[0].startswith("v6: B 4→2 — checking") and said[1].startswith("v7: B 4→2 from v4 — checking")


def test_the_final_best_profile_written_after_the_search_is_committed_and_the_run_validates(tmp_path):
    """``auto`` profiles its final best with ncu after the search (app/session.py ``_final``): ncu writes
    ``vN/profile.ncu-rep`` and kernelpilot ``vN/profile.ncu.log`` at the recorder's request (``report_path``),
    after the version's own commit. Journaled by ``note_profile``, both go into the final commit and the folder
    validates; left unjournaled (every GPU ``auto`` run before session 13), the final commit refuses them and
    ``report`` names them "never committed"."""
    for journal in (True, False):
        root = tmp_path / f"run-{journal}"
        ev, rec = _run(root, _all_configs()[:6])
        best = ev.incumbent
        report = rec.report_path(best)
        report.write_bytes(b"NVIDIA Nsight Compute report (stand-in bytes)")  # what ncu writes
        report.with_name("profile.ncu.log").write_text("ncu --set full ...\n\n==PROF== Disconnected\n")
        if journal:
            rec.note_profile(best)
        _finish(root, ev, rec)
        committed = committed_blobs(RunHistory(root).repo)
        names = {f"v{best.index}/profile.ncu-rep", f"v{best.index}/profile.ncu.log"}
        problems = [p.file for p in validate_run(root).problems]
        if journal:
            assert names <= set(committed) and not problems, problems
        else:
            assert not names & set(committed) and names <= set(problems), problems
