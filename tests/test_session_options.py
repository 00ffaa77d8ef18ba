"""The options of ``kernelpilot session start`` as one typed record (issue 28): the command line builds a
:class:`~kernelpilot.options.SessionOptions` from its flags, :func:`kernelpilot.api.session_start` passes it,
``session.json`` stores it whole, and every later command of the session reads it back whole — ``try`` and
``finish`` run with its ``profile`` and ``timeout_s`` unless given again — while a stored field the model does not
know, of the wrong type or out of range is refused with a :class:`~kernelpilot.errors.RunFolderError` naming the file
and the field (and ``validate_session`` lists it as a problem instead of crashing).

One real session start (v0 of the softmax series under the Triton interpreter) per module; the ``try`` is caught
where it would start measuring (``versions.session._evaluate``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import EXAMPLES
from kernelpilot import api
from kernelpilot.cli import app
from kernelpilot.errors import OptionError, RunFolderError
from kernelpilot.options import SessionOptions
from kernelpilot.versions.records import SESSION_FILE, load_state

runner = CliRunner()
SERIES = EXAMPLES / "series" / "softmax"

START_FLAGS = ["--no-profile", "--timeout-s", "77", "--no-git", "--kernel-type", "softmax", "--no-experience",
               "--shape", "M=8", "--shape", "N=256"]
#: What those flags mean, field by field (the flags not given keep their defaults).
START_EXPECTED = SessionOptions(profile=False, timeout_s=77.0, git=False, kernel_type="softmax", no_experience=True,
                                shape={"M": 8, "N": 256})


@pytest.fixture(scope="module")
def started(tmp_path_factory) -> tuple[Path, list[Any]]:
    """``kernelpilot session start v0.py START_FLAGS --out RUN`` through the CLI; the options it passed to the api."""
    root = tmp_path_factory.mktemp("sessionopts")
    seen: list[Any] = []
    real = api.session_start

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "session_start", wrapper)
        res = runner.invoke(app, ["session", "start", str(SERIES / "v0.py"), *START_FLAGS, "--out",
                                  str(root / "run"), "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    return root / "run", seen


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    return copy


def _tamper(run: Path, **changes: Any) -> None:
    data = json.loads((run / SESSION_FILE).read_text())
    data["options"].update(changes)
    (run / SESSION_FILE).write_text(json.dumps(data))


def test_start_flags_become_one_model_that_session_json_stores_and_every_command_reads_back_whole(started):
    run, seen = started
    (args, kwargs), = seen
    assert args[1] == START_EXPECTED and kwargs["out"] == run  # the flags, typed (77 is 77.0 s)
    stored = json.loads((run / SESSION_FILE).read_text())["options"]
    assert stored == START_EXPECTED.model_dump(mode="json")  # every field, none dropped
    state = load_state(run)
    assert state.options == START_EXPECTED and state.git is False and state.kernel_type == "softmax"
    assert state.shape["M"] == 8 and state.experience_db is None
    assert api.session_status(run).incumbent == 0  # status reads the same record


def test_try_runs_with_the_stored_profile_and_timeout_unless_given_again(started, tmp_path, monkeypatch):
    import kernelpilot.versions.session as session

    run = _copy(started[0], tmp_path)
    asked: list[dict[str, Any]] = []
    monkeypatch.setattr(session, "_evaluate", lambda *a, **kw: asked.append(kw))
    api.session_try(run, SERIES / "v1.py", hypothesis="online softmax")
    assert (asked[-1]["profile"], asked[-1]["timeout_s"]) == (False, 77.0)  # the session's, from start
    shutil.rmtree(run / "v1")
    api.session_try(run, SERIES / "v1.py", hypothesis="online softmax", profile=True, timeout_s=12.0)
    assert (asked[-1]["profile"], asked[-1]["timeout_s"]) == (True, 12.0)  # given again: the new values


@pytest.mark.parametrize(("change", "field"), [({"budget_s": 60}, "budget_s"), ({"timeout_s": "soon"}, "timeout_s"),
                                               ({"timeout_s": -1}, "--timeout-s"), ({"git": "yes please"}, "git")],
                         ids=["unknown-field", "wrong-type", "out-of-range", "not-a-bool"])
def test_a_tampered_stored_option_is_refused_with_a_typed_error_naming_the_file(started, tmp_path, change, field):
    from kernelpilot.app.validate import validate_session

    run = _copy(started[0], tmp_path)
    _tamper(run, **change)
    for command in (load_state, api.session_status):
        with pytest.raises(RunFolderError) as err:
            command(run)
        assert SESSION_FILE in err.value.message and field in err.value.message
    with pytest.raises(RunFolderError, match=SESSION_FILE):  # finish validates the folder first: a RecordError
        api.session_finish(run, benchmark=False)
    problems = validate_session(run).problems  # the validator lists it (and the edit against git) instead of crashing
    assert any(p.file == SESSION_FILE and "SessionState" in p.problem for p in problems)


def test_a_session_from_before_the_options_were_recorded_reads_with_the_defaults(started, tmp_path, monkeypatch):
    import kernelpilot.versions.session as session

    run = _copy(started[0], tmp_path)
    data = json.loads((run / SESSION_FILE).read_text())
    del data["options"]
    (run / SESSION_FILE).write_text(json.dumps(data))
    assert load_state(run).options is None
    asked: list[dict[str, Any]] = []
    monkeypatch.setattr(session, "_evaluate", lambda *a, **kw: asked.append(kw))
    session.try_version(run, SERIES / "v1.py", hypothesis="online softmax")
    assert (asked[-1]["profile"], asked[-1]["timeout_s"]) == (True, 300.0)  # the defaults before the record


def test_the_api_takes_one_model_or_keywords_and_refuses_a_bad_value_before_any_work(tmp_path):
    with pytest.raises(OptionError, match="options and keywords"):
        api.session_start(SERIES / "v0.py", SessionOptions(), out=tmp_path / "a", git=False)
    with pytest.raises(OptionError, match="timeout-s"):
        api.session_start(SERIES / "v0.py", out=tmp_path / "b", timeout_s=0)
    with pytest.raises(OptionError, match="budget_s is not an option of SessionOptions"):
        api.session_start(SERIES / "v0.py", out=tmp_path / "c", budget_s=5)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
