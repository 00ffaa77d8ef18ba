"""Every verdict lists the stages that ran and those skipped, with why: on the CPU ``verify`` cannot judge device
activity (needs a GPU) nor the speed-of-light floor (an interpreted time is not a measurement), so it says
"accepted by the stages that ran", never "every check passed"."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import EXAMPLES
from kernelpilot import api
from kernelpilot.api.verification import accepted_message
from kernelpilot.cli import app
from kernelpilot.search.stages import LOAD_STAGES, STAGE_NAMES, StageContext, run_stages
from kernelpilot.target import Target

VECTOR_ADD = EXAMPLES / "vector_add.py"


def test_verify_on_the_cpu_names_the_skipped_stages_in_the_result_and_the_json():
    verified = api.verify(VECTOR_ADD)
    assert verified.accepted and verified.stage == "none"
    assert "needs a GPU" in verified.stages_skipped["device_activity"]
    assert "interpreted" in verified.stages_skipped["floor"]
    assert verified.stages_run == [*LOAD_STAGES, *(n for n in STAGE_NAMES if n not in ("device_activity", "floor"))]
    assert "every check passed" not in verified.message
    assert verified.message.startswith("accepted by the stages that ran; skipped: device_activity (needs a GPU")
    assert verified.evaluation.stages_skipped == verified.stages_skipped  # the Evaluation records them too
    result = CliRunner().invoke(app, ["verify", str(VECTOR_ADD), "--json"])
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and data["accepted"] and "device_activity" in data["stages_skipped"]
    assert "every check passed" not in result.stdout


def test_verify_text_says_accepted_by_the_stages_that_ran():
    result = CliRunner().invoke(app, ["verify", str(VECTOR_ADD)])
    text = " ".join(result.stdout.split())  # rich wraps long lines
    assert result.exit_code == 0 and "ACCEPTED (partly checked)" in text
    assert "skipped: device_activity — needs a GPU" in text and "skipped: floor — interpreted" in text
    assert "every check passed" not in text


def test_bench_json_lists_the_stage_it_could_not_run():
    result = CliRunner().invoke(app, ["bench", str(VECTOR_ADD), "--json"])
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and "needs a GPU" in data["stages_skipped"]["device_activity"]
    assert "device_activity" not in data["stages_run"] and "recheck" in data["stages_run"]


def test_every_check_passed_only_when_nothing_was_skipped():
    assert accepted_message({}) == "every check passed"
    assert accepted_message({"floor": "interpreted, not a measurement"}) == \
        "accepted by the stages that ran; skipped: floor (interpreted, not a measurement)"


def test_a_raced_out_config_records_the_stages_after_the_race_as_skipped():
    """A stage that ends the subset early (racing) leaves the later stages skipped, with the reason."""
    from kernelpilot.search import stages

    ctx = StageContext(kf=None, opts=None, target=Target.cpu(), config={})

    def race(c):
        c.done = "raced out after 5 samples"

    original = stages.STAGES
    try:
        stages.STAGES = tuple(s if s.name != "config" else stages.Stage("config", (), race, "") for s in original)
        assert run_stages("optimize", ctx) is None
    finally:
        stages.STAGES = original
    later = stages.SUBSETS["optimize"][1:]
    assert ctx.skipped == {n: "not run: raced out after 5 samples" for n in later} and list(ctx.phases) == ["config"]
