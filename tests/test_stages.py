"""The one staged evaluation (issue 23): the stage table, each command's subset of it, and every command refusing a
cheat at the same stage with the same status (CPU, Triton interpreter; each command in its own worker process)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from kernelpilot import api
from kernelpilot.api.verification import STAGES as VERIFY_STAGES
from kernelpilot.errors import KernelFailed
from kernelpilot.records.evaluation import FAILURES, INTEGRITY_FAILURES, Status
from kernelpilot.search.isolated import IsolatedKernel
from kernelpilot.search.stages import (FAULTS, LOAD_STAGES, STAGE_NAMES, STAGES, SUBSETS, stage_of, statuses,
                                       subset)
from kernelpilot.search.worker import Worker, WorkerOptions

ROOT = Path(__file__).resolve().parents[1]
CHEATS = ROOT / "tests" / "adversarial" / "cheats"
VECTOR_ADD = ROOT / "src" / "kernelpilot" / "examples" / "vector_add.py"

#: The brief's order: config validation, first launch, timer guard, check, derived shapes, timing, re-check,
#: device activity, floor.
ORDER = ("config", "roles", "first_launch", "timer_guard", "check", "shapes", "timing", "recheck", "device_activity", "floor")
COMMANDS = ("check", "bench", "profile", "verify", "optimize", "tune", "audit", "session", "bundle_bench")


def _is_subsequence(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    it = iter(whole)
    return all(name in it for name in part)


def test_stage_names_are_unique_and_in_the_order_the_defences_run() -> None:
    assert len(set(STAGE_NAMES)) == len(STAGE_NAMES)
    assert STAGE_NAMES == ORDER
    # a stage gives statuses, or (roles) raises a typed declaration error that stops the command: its title says so
    assert all(s.title and callable(s.run) and (s.statuses or "raises" in s.title) for s in STAGES)


def test_every_command_is_a_subsequence_of_the_table() -> None:
    assert set(COMMANDS) == set(SUBSETS)
    for name, names in SUBSETS.items():
        assert len(set(names)) == len(names), name
        assert _is_subsequence(names, STAGE_NAMES), f"{name}: {names} is not in table order"
        assert tuple(s.name for s in subset(name)) == names


def test_subsets_nest_as_intended() -> None:
    sets = {name: set(names) for name, names in SUBSETS.items()}
    assert sets["check"] < sets["bench"] < sets["verify"] == set(STAGE_NAMES)
    assert sets["profile"] < sets["bench"]
    assert sets["bundle_bench"] < sets["bench"] and "check" in sets["bundle_bench"]
    assert sets["session"] == sets["verify"]
    assert sets["optimize"] == sets["tune"]
    # a search defers the derived shapes and the device activity to the audit before a config leads: together
    # they are every stage, so the search's incumbent has been through what verify runs
    assert sets["optimize"] | sets["audit"] == sets["verify"]
    assert {"shapes", "device_activity"} <= sets["audit"] and not {"shapes", "device_activity"} & sets["optimize"]
    # bench checks before it times (like verify); verify's stage names are read from the table
    assert SUBSETS["bench"].index("check") < SUBSETS["bench"].index("timing")
    assert VERIFY_STAGES == (*LOAD_STAGES, *SUBSETS["verify"], "none", "failure")


def test_statuses_come_from_the_status_vocabulary_and_each_integrity_failure_has_one_owner() -> None:
    vocabulary = set(get_args(Status))
    for stage in STAGES:
        assert set(stage.statuses) <= vocabulary, stage.name
    declared = {s for stage in STAGES for s in stage.statuses}
    # every failure is given by some stage, or by the parent (a hang, a dead worker), the pruner, or a replay whose
    # cache lacks the config (engine/evaluator.py)
    assert set(FAILURES) - declared == {"timeout", "worker_crash", "pruned", "not_in_cache"}
    for status in INTEGRITY_FAILURES:
        owner = stage_of(status)
        assert owner in STAGE_NAMES and status in STAGES[STAGE_NAMES.index(owner)].statuses
    assert stage_of("ok") == "none" and all(stage_of(f) == "failure" for f in FAULTS)
    assert (stage_of("timer_tampered"), stage_of("inputs_mutated"), stage_of("wrong_at_shape"),
            stage_of("stale_result"), stage_of("kernel_not_launched"), stage_of("impossible")) == (
        "timer_guard", "check", "shapes", "recheck", "device_activity", "floor")


def test_a_command_can_only_give_the_statuses_of_its_stages() -> None:
    assert statuses("audit") == {"timer_tampered", "wrong_at_shape", "aliased", "tolerance_refused",
                                 "off_timer_work", "kernel_not_launched", "compile_error", "runtime_error",
                                 "illegal_memory_access"}
    assert "impossible" not in statuses("bench") and "impossible" in statuses("optimize")
    assert "stale_result" not in statuses("check") and "stale_result" in statuses("bench")
    assert "wrong_at_shape" not in statuses("optimize")


def _bench_status(path: Path) -> str:
    try:
        api.bench(path)
    except KernelFailed as exc:
        return exc.failure
    return "ok"


def _search_evaluation(path: Path, config: dict) -> tuple[str, dict]:
    """One evaluation of a search (optimize/tune's worker, no activity: the audit's job)."""
    w = Worker(WorkerOptions(kernel=str(path), shape={}, interpreted=True, activity=False), "cpu")
    try:
        from kernelpilot.kernels.contract import load_kernel

        kf = load_kernel(path, interpreted=True)
        w.opts = w.opts.model_copy(update={"shape": dict(kf.cpu_shape or kf.shape)})
        ev = w.evaluate(config)
    finally:
        w.close()
    return ev.status, ev.phases_s


def test_every_command_refuses_an_input_mutating_kernel_at_the_check_with_the_same_status() -> None:
    cheat = CHEATS / "mutates_input.py"
    checked = api.check(cheat)
    status_check = "inputs_mutated" if checked.failed_stage == "inputs" else checked.failed_stage
    verified = api.verify(cheat)
    status_eval, phases = _search_evaluation(cheat, {"BLOCK_SIZE": 1024, "num_warps": 4})
    status_bench = _bench_status(cheat)
    assert not checked.passed
    assert status_check == status_bench == verified.status == status_eval == "inputs_mutated"
    assert verified.stage == stage_of(status_bench) == "check"
    # the search's evaluation stopped at the check: its seconds per stage name the stages it ran, no more
    assert list(phases) == ["config", "roles", "first_launch", "timer_guard", "check"]


def test_a_result_cached_by_pointer_passes_check_and_is_refused_at_timing_by_every_command_that_times() -> None:
    cheat = CHEATS / "cache_by_pointer.py"
    assert api.check(cheat).passed  # the check's subset does not time: a plain check cannot see it
    verified = api.verify(cheat)
    status_eval, phases = _search_evaluation(cheat, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4})
    # every timed launch after the first returns the first one's result: the launches kept in secret show it
    assert _bench_status(cheat) == verified.status == status_eval == "wrong_when_timed"
    assert verified.stage == "timing" and "kept in secret" in verified.message
    assert list(phases) == list(SUBSETS["optimize"][:SUBSETS["optimize"].index("timing") + 1])


def test_a_timer_patched_after_three_calls_is_seen_by_the_guard_after_the_stage_that_made_the_calls() -> None:
    cheat = CHEATS / "timer_patch_after_calls.py"
    with pytest.raises(KernelFailed) as caught:
        api.check(cheat)
    verified = api.verify(cheat)
    status_eval, phases = _search_evaluation(cheat, {"BLOCK_SIZE": 1024, "num_warps": 4})
    assert caught.value.failure == _bench_status(cheat) == verified.status == status_eval == "timer_tampered"
    assert verified.stage == "timer_guard"
    # the third call is the check's first seed's second run: the guard's check right after the check stage sees it
    assert list(phases) == ["config", "roles", "first_launch", "timer_guard", "check"]


def test_the_audit_and_bundle_subsets_run_in_the_worker_and_refuse_like_verify() -> None:
    baked = CHEATS / "baked_inv_n.py"
    assert api.verify(baked).stage == "shapes"
    with IsolatedKernel(baked, interpreted=True) as iso:
        from kernelpilot.kernels.contract import load_kernel

        kf = load_kernel(baked, interpreted=True)
        shape, config = dict(kf.cpu_shape or kf.shape), kf.default_config
        with pytest.raises(KernelFailed) as caught:
            iso.call("kernelpilot.search.stages:command_in_worker", "audit", shape, config)
        assert caught.value.failure == "wrong_at_shape" and "shapes stage" in caught.value.hint
        # the bundle's check of an entry has no derived shape: this one passes there, with seconds per stage
        phases = iso.call("kernelpilot.search.stages:command_in_worker", "bundle_bench", shape, config)
        assert list(phases) == list(SUBSETS["bundle_bench"])


def test_an_honest_kernel_passes_every_stage_and_records_the_seconds_of_each() -> None:
    verified = api.verify(VECTOR_ADD)
    assert verified.accepted and verified.stage == "none"
    assert list(verified.evaluation.phases_s) == list(STAGE_NAMES)
    assert all(v >= 0 for v in verified.evaluation.phases_s.values())
    assert verified.evaluation.compile_s is not None and verified.evaluation.duration_ns
    checked = api.check(VECTOR_ADD)
    assert checked.passed and len(checked.shapes_checked) == 3  # the two drawn shapes merged into the check's record


def test_bundle_bench_checks_each_entrys_jit_kernel_through_its_subset(tmp_path: Path) -> None:
    """The bundle's entries (exported for sm_90 without a GPU) are checked through the ``bundle_bench`` subset before
    any comparison: an honest kernel's pass, a cheat's are refused with the status every other command gives."""
    from kernelpilot.api.bundle import check_entries
    from kernelpilot.bundle.export import export_bundle

    export_bundle(VECTOR_ADD, tmp_path / "honest", arch="sm_90", shapes=[{"N": 4096}, {"N": 1000}])
    assert check_entries(tmp_path / "honest", VECTOR_ADD, interpreted=True) == 2
    cheat = CHEATS / "mutates_input.py"
    export_bundle(cheat, tmp_path / "cheat", arch="sm_90", shapes=[{"N": 3000}])
    with pytest.raises(KernelFailed) as caught:
        check_entries(tmp_path / "cheat", cheat, interpreted=True)
    assert caught.value.failure == "inputs_mutated" and "check stage" in caught.value.hint
    assert check_entries(tmp_path / "cheat", VECTOR_ADD, interpreted=True) == 0  # not the bundle's kernel file
