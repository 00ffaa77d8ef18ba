"""The options of ``tune`` and ``optimize`` as one typed record each (issue 28): the command line builds a
:class:`~kernelpilot.options.TuneOptions` / :class:`~kernelpilot.options.OptimizeOptions` from its flags, the run
record stores its JSON, ``--resume`` validates that JSON back into the same model (an unknown field or a value of
the wrong type is an error naming the file), and a bad value is refused with the same error as before the models.

The round trips run real searches under the Triton interpreter (a two-evaluation tune, an optimize of v0 and one
version); the resumed sessions are caught where they would start working (``app.tune.tune``, ``app.resume.drive``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import EXAMPLES
from kernelpilot import api
from kernelpilot.cli import app
from kernelpilot.errors import OptionError, RunFolderError, SearchError
from kernelpilot.options import OptimizeOptions, TuneOptions, stored_options

runner = CliRunner()
KERNEL = EXAMPLES / "vector_add.py"

TUNE_FLAGS = ["--strategy", "exhaustive", "--budget-evals", "2", "--seed", "3", "--prune", "off", "--constraint",
              "BLOCK_SIZE >= 256", "--max-spills", "8", "--min-occupancy", "5", "--timeout-s", "90", "--ab-samples",
              "3", "--no-race", "--no-cache", "--shape", "N=2048"]
#: What those flags mean, written out field by field (the flags not given keep their defaults).
TUNE_EXPECTED = TuneOptions(strategy="exhaustive", budget_evals=2, seed=3, prune=False,
                            constraints=["BLOCK_SIZE >= 256"], max_spills=8, min_occupancy_pct=5.0, timeout_s=90.0,
                            ab_samples=3, race=False, use_cache=False, shape={"N": 2048})


def _capture(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, seen: list[Any], stop: bool = False) -> None:
    """Wrap ``module.name`` so every call's arguments land in ``seen`` (``stop``: return None without calling)."""
    real = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return None if stop else real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def _unfinish(record: Path, **changes: Any) -> None:
    """Make the finished run of ``record`` look killed (no ``finished_utc``), its stored options updated."""
    data = json.loads(record.read_text())
    data["finished_utc"] = None
    data["options"].update(changes)
    record.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> tuple[Path, list[Any]]:
    """``kernelpilot tune KERNEL TUNE_FLAGS --out DIR`` through the CLI, the TuneOptions it passed to api.tune."""
    root = tmp_path_factory.mktemp("tuneopts")
    seen: list[Any] = []
    with pytest.MonkeyPatch.context() as mp:
        _capture(mp, api, "tune", seen)
        res = runner.invoke(app, ["tune", str(KERNEL), *TUNE_FLAGS, "--out", str(root / "search"), "--json"],
                            env={"KERNELPILOT_CACHE": str(root / "cache")})
    assert res.exit_code == 0, res.stdout + res.stderr
    return root / "search", seen


def test_tune_flags_become_one_model_that_tune_run_json_stores_and_resume_reads_back_whole(tuned, monkeypatch):
    import kernelpilot.app.tune as app_tune

    out, seen = tuned
    (args, _kwargs), = seen
    from_flags = args[1]
    assert from_flags == TUNE_EXPECTED  # the flags, typed (prune "off" is False, 90 is 90.0 s)
    record = out / "tune-run.json"
    stored = json.loads(record.read_text())["options"]
    assert stored == TUNE_EXPECTED.model_dump(mode="json")  # every field, none dropped

    _unfinish(record)  # as if killed: --resume now reads the options back
    resumed: list[Any] = []
    _capture(monkeypatch, app_tune, "tune", resumed, stop=True)
    api.tune(resume=out)
    assert resumed[0][0][1] == TUNE_EXPECTED  # flags -> model -> run.json -> resume -> the same model
    api.tune(resume=out, budget_evals=5, timeout_s=30.0)  # the options --resume may change
    assert resumed[1][0][1] == TUNE_EXPECTED.model_copy(update={"budget_evals": 5, "timeout_s": 30.0})
    assert json.loads(record.read_text())["options"]["budget_evals"] == 5  # and the record says so


@pytest.mark.parametrize("change,field", [({"turbo": True}, "turbo"), ({"seed": "three"}, "seed"),
                                          ({"prune": "maybe"}, "prune")])
def test_resume_refuses_stored_tune_options_it_cannot_read_back(tmp_path, change, field):
    from kernelpilot.app.tune_run import TuneRun, start_folder

    out = tmp_path / "search"
    start_folder(out, TuneRun(kernel=str(KERNEL), source_sha256="0" * 64, started_utc="2026-11-26T00:00:00+00:00",
                              options={**TUNE_EXPECTED.model_dump(mode="json"), **change}))
    res = runner.invoke(app, ["tune", "--resume", str(out)])
    assert res.exit_code == 1, res.stdout + res.stderr
    assert "tune-run.json" in res.stderr and (f"`{field}`" in res.stderr or "--prune 'maybe'" in res.stderr)
    assert "hint: the record was" in res.stderr  # what to do, not a traceback
    assert not (out / "evaluations.jsonl").exists()


def test_the_models_defaults_are_the_engines():
    """The defaults written in the models are the ones the rest of kernelpilot names (one value, not two)."""
    from kernelpilot.app.optimize import DEFAULT_TIMEOUT_S
    from kernelpilot.engine.prune import DEFAULT_MAX_SPILLS

    assert TuneOptions().max_spills == DEFAULT_MAX_SPILLS
    assert OptimizeOptions().timeout_s == DEFAULT_TIMEOUT_S == 300.0


def test_tune_options_stored_before_the_model_read_back_the_same():
    """A tune-run.json written before the model (the keywords as a dict, paths made text) reads back whole."""
    old = json.loads(json.dumps(dict(
        strategy="guided", budget_evals=None, budget_s=60.0, shape={"N": 1024}, seed=1, ref=Path("/k/ref.py"),
        gpu="H100-SXM", prune="report", constraints=None, max_spills=16, min_occupancy_pct=None, timeout_s=120.0,
        devices=None, ab_samples=30, race=True, cache_root=None, replay=None, use_cache=True, start={"BLOCK": 64},
        ray_address=None), default=str))
    got = stored_options(TuneOptions, old, "tune-run.json")
    assert got.ref == "/k/ref.py" and got.prune == "report" and got.start == {"BLOCK": 64}
    assert got.model_dump(mode="json") == old


@pytest.mark.parametrize("flags,message,hint", [
    (["--budget-evals", "0"], "--budget-evals 0 is below 1", "give the most new evaluations (1 or more)"),
    (["--timeout-s", "-5"], "--timeout-s -5.0 is not a positive number", "e.g. --timeout-s 120"),
    (["--budget-s", "0"], "--budget-s 0.0 is not a positive number", "e.g. --budget-s 600"),
    (["--ab-samples", "-1"], "--ab-samples -1 is below 0", "give interleaved samples per side (0 or more)"),
    (["--max-spills", "-2"], "--max-spills -2 is below 0", "the most spilled registers a config may have"),
])
def test_tune_refuses_a_bad_value_with_the_error_it_gave_before(flags, message, hint, sentinel_kernel):
    res = runner.invoke(app, ["tune", str(sentinel_kernel), *flags])
    assert res.exit_code == 2, res.stdout + res.stderr  # a usage error
    assert f"error: {message}" in res.stderr and hint in res.stderr
    assert not sentinel_kernel.with_suffix(".ran").exists()  # refused before the kernel was loaded
    with pytest.raises(OptionError, match=message.split(" is ")[0]):  # the API's keyword form: the same check
        _api_tune(sentinel_kernel, flags)


def _api_tune(kernel: Path, flags: list[str]) -> None:
    """The keyword form of the API with the same value (ints where the option counts)."""
    name, value = flags[0].lstrip("-").replace("-", "_"), float(flags[1])
    api.tune(kernel, **{name: int(value) if name in ("budget_evals", "ab_samples", "max_spills") else value})


def test_an_unknown_prune_word_and_an_unknown_option_are_refused(sentinel_kernel):
    res = runner.invoke(app, ["tune", str(sentinel_kernel), "--prune", "fast"])
    assert res.exit_code == 1 and "error: --prune 'fast' is not one of drop, report, off" in res.stderr
    with pytest.raises(SearchError, match="not one of drop, report, off"):
        api.tune(sentinel_kernel, prune="fast")
    with pytest.raises(OptionError, match="turbo is not an option of TuneOptions"):
        api.tune(sentinel_kernel, turbo=True)
    with pytest.raises(OptionError, match="options and keywords"):
        api.tune(sentinel_kernel, TuneOptions(), seed=2)
    assert not sentinel_kernel.with_suffix(".ran").exists()


@pytest.mark.parametrize("flags,message", [(["--iterations", "-1"], "--iterations -1 is below 0"),
                                           (["--timeout-s", "0"], "--timeout-s 0.0 is not a positive number"),
                                           (["--budget-s", "-3"], "--budget-s -3.0 is not a positive number")])
def test_optimize_refuses_a_bad_value_with_the_error_it_gave_before(flags, message, sentinel_kernel, tmp_path):
    for resume in ([], ["--resume", str(tmp_path)]):  # also when resuming: checked before the folder is read
        args = ["optimize", *([] if resume else [str(sentinel_kernel)]), *resume, *flags]
        res = runner.invoke(app, args)
        assert res.exit_code == 2, res.stdout + res.stderr
        assert f"error: {message}" in res.stderr
    assert not sentinel_kernel.with_suffix(".ran").exists()


OPTIMIZE_FLAGS = ["--iterations", "1", "--no-benchmark", "--no-profile", "--strategy", "exhaustive", "--seed", "2",
                  "--timeout-s", "90", "--budget-s", "40", "--constraint", "BLOCK_SIZE <= 1024", "--config",
                  "num_warps=2", "--shape", "N=2048"]
OPTIMIZE_EXPECTED = OptimizeOptions(iterations=1, benchmark=False, profile=False, strategy="exhaustive", seed=2,
                                    timeout_s=90.0, budget_s=40.0, constraints=["BLOCK_SIZE <= 1024"],
                                    config={"num_warps": 2}, shape={"N": 2048})


def test_optimize_flags_become_one_model_that_run_json_stores_and_resume_reads_back_whole(tmp_path, monkeypatch):
    import kernelpilot.app.resume as app_resume

    out = tmp_path / "run"
    seen: list[Any] = []
    with monkeypatch.context() as mp:
        _capture(mp, api, "optimize", seen)
        res = runner.invoke(app, ["optimize", str(KERNEL), *OPTIMIZE_FLAGS, "--out", str(out), "--json"],
                            env={"KERNELPILOT_CACHE": str(tmp_path / "cache")})
    assert res.exit_code == 0, res.stdout + res.stderr
    assert seen[0][0][1] == OPTIMIZE_EXPECTED
    record = out / "run.json"
    info = json.loads(record.read_text())
    assert info["options"] == OPTIMIZE_EXPECTED.model_dump(mode="json")
    assert info["constraints"] == ["BLOCK_SIZE <= 1024"] and info["config_overrides"] == {"num_warps": 2}

    sessions: list[Any] = []
    _capture(monkeypatch, app_resume, "drive", sessions, stop=True)
    for changes, want in (({}, OPTIMIZE_EXPECTED), ({"timeout_s": 45.0, "iterations": 3},
                                                    OPTIMIZE_EXPECTED.model_copy(update={"timeout_s": 45.0,
                                                                                         "iterations": 3}))):
        _unfinish(record)
        api.optimize(resume=out, **changes)
        session = sessions[-1][0][0]
        assert OptimizeOptions.model_validate(session.info.options) == want  # flags -> run.json -> resume
        assert session.timeout_s == want.timeout_s and session.info.iterations == want.iterations

    _unfinish(record, turbo=True)
    with pytest.raises(RunFolderError, match="run.json: the stored option `turbo`") as exc:
        api.optimize(resume=out)
    assert "another version of kernelpilot or edited" in exc.value.hint


@pytest.fixture
def sentinel_kernel(tmp_path: Path) -> Path:
    """A kernel file that leaves a marker beside itself when imported: a refused option never loads it."""
    kernel = tmp_path / "sentinel_kernel.py"
    kernel.write_text("import pathlib\npathlib.Path(__file__).with_suffix('.ran').write_text('imported')\n")
    return kernel
