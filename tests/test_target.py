"""The device as one value (issue 28): :class:`kernelpilot.target.Target` decides kind and interpreter the way set-up
always did, round-trips to the string the records store, and the ``device == "cuda"`` tests it replaces only go
down (a ceiling, like tests/test_layers.py's list)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import torch

from kernelpilot.errors import OptionError
from kernelpilot.target import Target

REPO = Path(__file__).resolve().parent.parent

#: ``== / != "cuda"/"cpu"`` tests on a device-naming expression outside kernelpilot/target.py
#: (scripts/house_counts.py, "device string tests"): 53 before the Target; may only go down.
DEVICE_TESTS_CEILING = 5


def test_detect_without_a_gpu_is_the_interpreter_and_switches_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    target = Target.detect()
    assert (target.kind, target.interpreted, target.is_gpu, target.measured) == ("cpu", True, False, False)
    assert target.is_cpu and not target.is_replay
    assert os.environ.get("TRITON_INTERPRET") == "1"  # before triton is imported by anything after set-up
    assert target.torch_device == "cpu" and target.record == "cpu"


def test_detect_with_a_gpu_is_not_interpreted_and_leaves_the_interpreter_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    target = Target.detect()
    assert (target.kind, target.interpreted, target.is_gpu, target.measured) == ("cuda", False, True, True)
    assert "TRITON_INTERPRET" not in os.environ
    assert target.torch_device == "cuda" and target.record == "cuda"


def test_a_replay_runs_nothing_and_asks_torch_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> bool:
        raise AssertionError("a replay needs no device")

    monkeypatch.setattr(torch.cuda, "is_available", refuse)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    target = Target.detect(replay=True)
    assert (target.kind, target.interpreted, target.is_gpu, target.is_replay) == ("replay", False, False, True)
    assert target.measured  # the cache's times were measured on a GPU
    assert "TRITON_INTERPRET" not in os.environ
    assert target.record == "replay" and target.torch_device == "cpu"


@pytest.mark.parametrize("device, kind", [("cuda", "cuda"), ("cuda:0", "cuda"), ("cuda:3", "cuda"), ("cuda:7", "cuda"),
                                          ("cpu", "cpu")])
def test_a_worker_device_string_means_what_device_kind_said(device: str, kind: str) -> None:
    """The old rule (``facts.device_kind``, now gone: ``"cuda"`` for ``"cuda"`` and ``"cuda:<i>"``, else ``"cpu"``)
    for the torch kind, and interpreted exactly when the device is the CPU (``app.context.prepare``:
    ``interpreted = device == "cpu"``)."""
    target = Target.from_device(device)
    assert ("cuda" if target.is_gpu else "cpu") == kind
    assert target.interpreted is (device == "cpu")
    assert target.torch_device == kind  # tensors go where they went
    assert target.label == str(target) == device  # the worker's name in records is unchanged
    assert target.index == (int(device.split(":")[1]) if ":" in device else None)


def test_interpreted_may_be_given_for_a_worker_that_was_told() -> None:
    assert Target.from_device("cuda:1", interpreted=True).measured is False
    assert Target.from_device("cpu", interpreted=False).interpreted is False


@pytest.mark.parametrize("device", ["cuda:x", "cuda:", "mps", "cpu:0", "replay:1", ""])
def test_a_device_string_kernelpilot_does_not_run_on_is_refused(device: str) -> None:
    with pytest.raises(OptionError) as info:
        Target.from_device(device)
    assert repr(device) in info.value.message and "cuda:<index>" in info.value.hint


@pytest.mark.parametrize("target", [Target.cpu(), Target.gpu(), Target.detect(replay=True)])
def test_the_record_string_round_trips(target: Target) -> None:
    """run.json and the session state keep storing ``"device": "cuda" | "cpu" | "replay"``."""
    assert target.record in ("cuda", "cpu", "replay")
    assert json.loads(json.dumps({"device": target.record}))["device"] == target.kind
    assert Target.from_record(target.record) == target
    assert Target.model_validate_json(target.model_dump_json()) == target  # a worker's options carry it whole


def test_with_spec_keeps_the_device_and_adds_what_setup_learnt() -> None:
    limits = {"max_threads_per_block": 1024.0, "sm_count": 132.0}
    target = Target.gpu(2).with_spec("H100-SXM", None, limits)
    assert (target.kind, target.index, target.name, target.arch) == ("cuda", 2, "H100-SXM", None)
    assert target.limits == limits and target.limits is not limits
    assert target.label == "cuda:2" and target.torch_device == "cuda" and target.record == "cuda"
    assert Target.cpu().with_spec(None, None, None).limits is None
    assert Target.cpu().on_index(3) == Target.cpu() and Target.gpu().on_index(3).label == "cuda:3"


def test_prepare_makes_one_target_with_the_specs_limits_and_the_search_space_uses_them() -> None:
    """A campaign's set-up on this machine (no GPU): the interpreter, the record string ``"cpu"``, and the named
    spec's name and limits on the Target, which the search space was built from."""
    from conftest import EXAMPLES

    from kernelpilot.app.context import prepare
    from kernelpilot.hardware.specs import find_spec
    from kernelpilot.search.constraints import limits_from_spec

    ctx = prepare(EXAMPLES / "vector_add.py", gpu="H100-SXM")
    spec = find_spec("H100-SXM")
    assert (ctx.target.kind, ctx.target.interpreted) == ("cpu", True)
    assert (ctx.device, ctx.interpreted) == ("cpu", True)  # what run.json and tune.json store, unchanged
    assert ctx.target.name == ctx.gpu == spec.name
    assert ctx.target.limits == limits_from_spec(spec) and ctx.space.limits == ctx.target.limits


def test_a_worker_pool_refuses_a_device_no_worker_runs_on_before_starting_one() -> None:
    """A worker makes its Target from its device string; a string it cannot read is refused in the parent, naming
    it (it once ran silently on the CPU)."""
    from kernelpilot.search.worker import WorkerOptions, WorkerPool

    opts = WorkerOptions(kernel="vector_add.py", shape={}, interpreted=True)
    with pytest.raises(OptionError) as info:
        WorkerPool(opts, ["cpu", "gpu0"])
    assert "'gpu0'" in info.value.message


def test_a_target_is_frozen() -> None:
    with pytest.raises(Exception):
        Target.cpu().kind = "cuda"  # type: ignore[misc]


def _house_counts():
    spec = importlib.util.spec_from_file_location("house_counts", REPO / "scripts" / "house_counts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_device_string_tests_only_go_down() -> None:
    found = _house_counts().count(REPO / "src" / "kernelpilot")["device_string_tests"]
    listing = "; ".join(d["where"] for d in found["list"] if not d["in_target_module"])
    assert found["count"] <= DEVICE_TESTS_CEILING, (
        f"{found['count']} device string tests, over the ceiling {DEVICE_TESTS_CEILING}: ask the Target "
        f"(kernelpilot.target) instead of comparing the string: {listing}")
    assert found["count"] == DEVICE_TESTS_CEILING, (
        f"down to {found['count']}: lower DEVICE_TESTS_CEILING in tests/test_target.py to it")


def test_the_counter_sees_a_device_test_and_not_a_torch_device(tmp_path: Path) -> None:
    root = tmp_path / "kernelpilot"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "m.py").write_text('def f(device, t, language):\n'
                               '    a = device == "cuda"\n'
                               '    b = "cpu" != ctx.dev\n'
                               '    c = t.device.type == "cuda"\n'
                               '    d = language == "cuda"\n'
                               '    # interpreted\n')
    (root / "target.py").write_text('def g(device):\n    return device == "cuda"  # interpreted\n')
    found = _house_counts().count(root)
    assert [d["where"] for d in found["device_string_tests"]["list"] if not d["in_target_module"]] == [
        "kernelpilot/m.py:2", "kernelpilot/m.py:3"]
    assert found["device_string_tests"]["in_target_module"] == 1
    assert found["interpreted_lines"] == 1 and found["interpreted_lines_in_target_module"] == 1
