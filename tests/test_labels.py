"""A version's change label is computed from its config and its recorded parent's, never taken from the move a
strategy declared: on every version of a guided run that restarted (the strategy stepped from a config other than
the incumbent), hypothesis.md, final_report.md, the report page, the frames and the experience log all say what
really differs."""

from __future__ import annotations

import json

import pytest

from kernelpilot import api
from kernelpilot.experience.from_runs import entries_from_optimize
from kernelpilot.records.evaluation import (Evaluation, Move, change_label, change_sentence, config_changes,
                                            version_change)
from kernelpilot.records.frames import evaluation_frame
from kernelpilot.records.models import outcome_from_json
from kernelpilot.report.final import shown_versions
from kernelpilot.report.html_data import read_folder

# three tunables, 48 configs: the guided walk exhausts the incumbent's neighbourhood and restarts
THREE_TUNABLES = '''
import torch
SHAPE = {"N": 1000}
CPU_SHAPE = {"N": 300}
TUNABLES = {"BLOCK": [32, 64, 128, 256], "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3]}
DEFAULT_CONFIG = {"BLOCK": 64, "num_warps": 4, "num_stages": 2}

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    y = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}

def run_kernel(x, y, out, N, *, BLOCK, num_warps, num_stages, **_):
    out.copy_(x + y)

def reference(x, y, out, N, **_):
    return x + y
'''


def test_labels_count_every_changed_tunable():
    base = {"BLOCK": 64, "num_warps": 4, "num_stages": 2}
    assert change_sentence(base, {**base, "BLOCK": 128}) == "One variable: BLOCK 64→128"
    three = {"BLOCK": 128, "num_warps": 8, "num_stages": 3}
    assert change_sentence(base, three) == "3 variables: BLOCK 64→128, num_warps 4→8, num_stages 2→3"
    assert change_label(base, three) == "BLOCK 64→128, num_warps 4→8, num_stages 2→3"
    assert change_sentence(base, dict(base)).startswith("No variable changed")
    assert change_label(None, base) == "baseline"
    assert config_changes({"A": 1}, {"B": 2}) == [("B", None, 2), ("A", 1, None)]


def test_a_declared_move_does_not_name_the_change():
    """An outcome whose move claims one tunable while the configs differ in two is labelled by the configs."""
    parent = Evaluation(config={"BLOCK": 64, "num_warps": 4}, status="ok", duration_ns=10.0, index=0)
    lying = Move(tunable="BLOCK", old=64, new=128, direction="up", rule="r", why="w", expected_metric="m",
                 expected="e")
    ev = Evaluation(config={"BLOCK": 128, "num_warps": 8}, status="ok", duration_ns=9.0, index=1, parent=0, move=lying)
    versions = {0: parent, 1: ev}
    assert version_change(ev, versions, counted=True) == "2 variables: BLOCK 64→128, num_warps 4→8"
    assert version_change(ev, {1: ev}) == "change from v0 (v0 is not on record)"
    assert list(evaluation_frame([parent, ev])["change"]) == ["", "BLOCK 64→128, num_warps 4→8"]
    [entry] = entries_from_optimize([parent, ev], run="r", kernel="k", kernel_type="other")
    assert entry.change.startswith("BLOCK 64→128, num_warps 4→8 (w)")
    assert {"block-up", "num_warps-up"} <= set(entry.tags)


def test_guided_run_with_restarts_labels_equal_the_config_difference(write_kernel, tmp_path):
    pytest.importorskip("pandas")
    out = tmp_path / "run"
    result = api.optimize(write_kernel(source=THREE_TUNABLES), out=out, iterations=30, benchmark=False,
                          strategy="guided")
    versions = result.versions
    assert len(versions) == 31
    by_index = {v.index: v for v in versions}
    restarted = 0
    report = (out / "final_report.md").read_text()
    listed = shown_versions(versions)
    assert 0 < len(listed) < len(versions) and f"{len(versions) - len(listed)} more versions not listed" in report
    page = {e.label: e for e in read_folder(out).entries}
    frame = evaluation_frame(versions).set_index("index")
    for v in versions[1:]:
        parent = by_index[v.parent]
        changed = [(k, parent.config[k], v.config[k]) for k in v.config if parent.config[k] != v.config[k]]
        assert changed and config_changes(parent.config, v.config) == changed
        short = ", ".join(f"{k} {a}→{b}" for k, a, b in changed)
        counted = ("One variable" if len(changed) == 1 else f"{len(changed)} variables") + ": " + short
        hypothesis = (out / f"v{v.index}" / "hypothesis.md").read_text()
        assert f"{counted}; everything else as v{v.parent}." in hypothesis
        if v in listed:  # the final report lists v0, the incumbents, the fastest; the rest are counted
            assert f"| v{v.index} | {short} |" in report
        else:
            assert f"| v{v.index} |" not in report
        assert page[f"v{v.index}"].change == short and frame.loc[v.index, "change"] == short
        # the recorded move is the configs' difference too (the strategy's move from the config it was made from)
        assert v.move is not None and v.move.apply(parent.config) == v.config
        saved = outcome_from_json(json.loads((out / f"v{v.index}" / "outcome.json").read_text()))
        assert saved.parent == v.parent
        declared = json.loads((out / f"v{v.index}" / "config.json").read_text())
        restarted += declared["incumbent"] != v.parent
    assert restarted >= 3  # the walk stepped from configs other than the incumbent: the case that was mislabelled
    entries = entries_from_optimize(versions, run="run", kernel="k", kernel_type="other")
    for entry in entries:
        v = by_index[int(entry.source.rsplit("/v", 1)[1])]
        assert entry.change.startswith(change_label(by_index[v.parent].config, v.config) + " (")
