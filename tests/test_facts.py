"""kernelpilot.facts (issue 28): the facts every layer asks for, each computed in one place."""

from __future__ import annotations

import ast
import datetime as dt
import re
import sys
from pathlib import Path

import pytest

from kernelpilot import facts

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "kernelpilot"


def test_utc_now_is_aware_utc_and_iso_has_the_offset():
    before = dt.datetime.now(dt.timezone.utc)
    now = facts.utc_now()
    assert now.utcoffset() == dt.timedelta(0) and before <= now
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", facts.utc_now_iso())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", facts.utc_now_iso("milliseconds"))


def test_kernelpilot_home_from_env_else_dot_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELPILOT_HOME", f"  {tmp_path}/kp  ")
    assert facts.kernelpilot_home() == tmp_path / "kp"
    monkeypatch.setenv("KERNELPILOT_HOME", "   ")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert facts.kernelpilot_home() == tmp_path / ".kernelpilot"


def test_home_users_follow_the_one_function(monkeypatch, tmp_path):
    from kernelpilot.experience.model import default_db_path
    from kernelpilot.hardware.specs import user_specs_dir
    from kernelpilot.store.model import default_store_path

    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path))
    for name in ("KERNELPILOT_CONFIG_STORE", "KERNELPILOT_EXPERIENCE"):
        monkeypatch.delenv(name, raising=False)
    assert default_store_path() == tmp_path / "configs.db"
    assert default_db_path() == tmp_path / "experience.db"
    assert user_specs_dir() == tmp_path / "specs"


def test_nvml_absent_is_an_answer(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    assert facts.nvml() is None
    assert facts.nvml_gpu_name(0) is None and facts.nvml_gpu_name("GPU-0") is None
    assert facts.nvml_device_count() is None
    assert facts.nvml_driver_version() is None


def test_facts_imports_nothing_from_kernelpilot():
    tree = ast.parse((PACKAGE / "facts.py").read_text(encoding="utf-8"))
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if n.split(".")[0] == "kernelpilot"]


def test_each_fact_is_computed_in_facts_only():
    """No other module computes now-in-UTC or reads ``$KERNELPILOT_HOME``, or imports pynvml: they call facts."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "facts.py":
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in ("timezone.utc", "utcnow(", "gmtime(", '"KERNELPILOT_HOME"', "import pynvml"):
            if pattern in text:
                offenders.append(f"{path.relative_to(PACKAGE)}: {pattern}")
    assert offenders == []
