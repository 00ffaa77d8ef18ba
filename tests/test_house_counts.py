"""scripts/house_counts.py (issue 28) counts a synthetic package exactly: Any parameters by kind, capability
probes (not module reads), import edges by kind, the knot, and the pairs against the target order."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "house_counts.py"


@pytest.fixture(scope="module")
def house():
    spec = importlib.util.spec_from_file_location("house_counts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture()
def package(tmp_path: Path) -> Path:
    root = tmp_path / "kernelpilot"
    _write(root, "__init__.py", "")
    _write(root, "errors.py", "class KernelpilotError(Exception):\n    pass\n")
    _write(root, "engine/__init__.py", "")
    _write(root, "engine/evaluator.py", """\
        from __future__ import annotations

        import os
        from typing import TYPE_CHECKING, Any, Optional

        from kernelpilot.errors import KernelpilotError

        if TYPE_CHECKING:
            from kernelpilot.app.tune import Tuned


        class Runner:
            def audit(self) -> None:
                pass


        def evaluate(runner, x: Any, y: Optional[Any], z: dict[str, Any], w: int, module=None) -> None:
            check = getattr(runner, "audit", None)
            sep = getattr(os, "sep", None)
            shape = hasattr(module, "SHAPE")
            other = getattr(runner, "not_ours", None)
            return check, sep, shape, other
        """)
    _write(root, "app/__init__.py", "")
    _write(root, "app/tune.py", """\
        import importlib

        from kernelpilot.engine import evaluator


        class Tuned:
            pass


        def later(v: "Any | None"):
            from kernelpilot.errors import KernelpilotError
            return importlib.import_module("kernelpilot.engine.evaluator"), KernelpilotError
        """)
    return root


def test_any_parameters_by_kind(house, package):
    got = house.count(package)["any_parameters"]
    assert (got["bare"], got["optional"], got["container"]) == (1, 2, 1)
    assert {(p["parameter"], p["kind"]) for p in got["list"]} == {
        ("x", "bare"), ("y", "optional"), ("z", "container"), ("v", "optional")}


def test_probes_skip_modules_and_foreign_names(house, package):
    got = house.count(package)["capability_probes"]
    assert got["count"] == 1
    (probe,) = got["list"]
    assert probe["where"] == "kernelpilot/engine/evaluator.py:18"
    assert (probe["target"], probe["attribute"]) == ("runner", "audit")
    # getattr(os, ...) reads a module, hasattr(module, "SHAPE") a kernel file: neither is listed at all;
    # getattr(runner, "not_ours") names nothing a kernelpilot class defines: listed apart.
    assert [p["attribute"] for p in got["other_list"]] == ["not_ours"]


def test_import_kinds_knot_and_order(house, package):
    got = house.count(package)["imports"]
    assert got["node_edges"] == {
        "app -> engine": ["importlib", "module"],
        "app -> errors": ["function"],
        "engine -> app": ["type_checking"],
        "engine -> errors": ["module"],
    }
    assert got["knot"] == [["app", "engine"]]
    assert got["knot_runtime_only"] == []          # the only way back up is under TYPE_CHECKING
    assert got["module_pairs_against_order"] == [
        {"importer": "kernelpilot.engine.evaluator", "imported": "kernelpilot.app.tune", "kinds": ["type_checking"]}]


def test_json_output(house, package, capsys):
    assert house.main(["--root", str(package), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["capability_probes"]["count"] == 1
