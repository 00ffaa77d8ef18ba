"""A third back end is one folder under backends/ and one registry line (issue 28): the toy plain-PyTorch back end
(``kernelpilot.backends.torchref``) runs check, bench, tune and inspect under the CPU through the CLI, and nothing
outside ``backends/`` names it.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EXAMPLES, ROOT
from kernelpilot.backends.registry import BACKENDS, backend_for
from kernelpilot.cli import app

PACKAGE = ROOT / "src" / "kernelpilot"
runner = CliRunner()


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    """Caches, stores and logs of these runs in the test's folder, not in the user's ~/.kernelpilot."""
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "kp-home"))

#: The toy kernel: out = x + y, CHUNK elements at a time, with torch ops only.
TOY = '''
import torch

BACKEND = "torch"
SHAPE = {"N": 4096}
TUNABLES = {"CHUNK": [256, 1024, 4096]}
DEFAULT_CONFIG = {"CHUNK": 1024}


def setup(N, seed=0, device="cuda", **_):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=gen).to(device)
    y = torch.randn(N, generator=gen).to(device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty(N, device=device), "N": N}, "outputs": ["out"]}


def run_kernel(x, y, out, N, *, CHUNK, **_):
    for start in range(0, N, CHUNK):
        torch.add(x[start:start + CHUNK], y[start:start + CHUNK], out=out[start:start + CHUNK])


def reference(x, y, out, N, **_):
    return x + y
'''


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    path = tmp_path / "chunked_add.py"
    path.write_text(textwrap.dedent(TOY))
    return path


def run_json(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def _mentions(pattern: str) -> dict[str, list[str]]:
    """Source files under src/kernelpilot outside backends/torchref/ whose lines match ``pattern``: path -> lines."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("backends/torchref/"):
            continue
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if re.search(pattern, line)]
        if lines:
            found[rel] = lines
    return found


def test_the_toy_back_end_is_one_folder_and_one_registry_line() -> None:
    found = _mentions(r"torchref|TorchRef")
    outside_backends = [rel for rel in found if not rel.startswith("backends/")]
    assert outside_backends == [], f"files outside backends/ name the toy back end: {outside_backends}"
    assert list(found) == ["backends/registry.py"] and len(found["backends/registry.py"]) == 1, found
    assert found["backends/registry.py"][0].startswith('("torch", (".py",), "kernelpilot.backends.torchref:')


def test_every_registry_name_is_its_back_ends_own() -> None:
    import importlib

    for name, _, target in BACKENDS:
        module, _, cls = target.partition(":")
        assert getattr(importlib.import_module(module), cls).name == name, target


def test_the_registry_asks_each_back_end_and_a_declaration_alone_is_not_enough(toy: Path) -> None:
    assert backend_for(toy).name == "torch"
    assert backend_for(EXAMPLES / "vector_add.py").name == "triton"
    # declaring "torch" while importing Triton leaves the file to the Triton back end (observed, not declared)
    posing = toy.with_name("posing.py")
    posing.write_text("import triton\n" + textwrap.dedent(TOY))
    assert backend_for(posing).name == "triton"
    undeclared = toy.with_name("undeclared.py")
    undeclared.write_text(textwrap.dedent(TOY).replace('BACKEND = "torch"', ""))
    assert backend_for(undeclared).name == "triton"


def test_check_passes_the_toy_and_fails_a_wrong_one(toy: Path) -> None:
    code, data = run_json("check", str(toy))
    assert code == 0 and data["passed"] is True and data["device"] == "cpu"
    wrong = toy.with_name("wrong.py")
    wrong.write_text(textwrap.dedent(TOY).replace("torch.add(", "torch.sub("))
    code, data = run_json("check", str(wrong))
    assert data["passed"] is False


def test_bench_times_the_toy_on_the_cpu_after_checking_it(toy: Path) -> None:
    code, data = run_json("bench", str(toy))
    assert code == 0, data
    assert data["timing"]["is_measurement"] is False and data["timing"]["median_ns"] > 0
    assert "check" in data["stages_run"] and "timing" in data["stages_run"]


def test_tune_measures_every_config_no_binary_prunes_none(toy: Path, tmp_path: Path) -> None:
    code, data = run_json("tune", str(toy), "--strategy", "exhaustive", "--out", str(tmp_path / "run"))
    assert code == 0, data
    statuses = {json.dumps(e["config"], sort_keys=True): e["status"] for e in data["evaluations"]}
    assert statuses == {json.dumps({"CHUNK": c}): "ok" for c in (256, 1024, 4096)}
    assert data["prune"]["n_pruned"] == 0
    assert data["best"]["config"]["CHUNK"] in (256, 1024, 4096)


def test_inspect_says_the_toy_has_no_binary(toy: Path) -> None:
    code, data = run_json("inspect", str(toy))
    assert code == 1 and "no binary of its own" in data["message"], data
    code, data = run_json("inspect", str(toy), "--all-configs")
    assert code == 0, data
    assert (data["n_inspected"], data["n_ok"]) == (3, 0)
    assert {r["stage"] for r in data["results"]} == {"no_binary"}


def test_no_back_end_imports_profile_and_static_inspection_tests_no_suffix() -> None:
    import ast

    upward = []
    for path in sorted((PACKAGE / "backends").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            upward += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if n.startswith("kernelpilot.profile")]
    assert upward == []
    for rel in ("profile/static.py", "profile/static_isolated.py", "api/static.py"):
        assert '".cu"' not in (PACKAGE / rel).read_text(encoding="utf-8"), rel


def test_no_file_outside_backends_branches_on_a_cu_suffix() -> None:
    """Which files belong to a kernel (a ``.cu`` file's sidecar and headers) and whether a file is a kernel at all are
    the back ends' answers (``Backend.kernel_files``, the registry), not suffix tests elsewhere."""
    found = {rel: lines for rel, lines in _mentions(r"""["']\.cu["']""").items() if not rel.startswith("backends/")}
    assert found == {}, found


def test_a_version_of_the_toy_is_its_one_file_and_is_found_again(toy: Path, tmp_path: Path) -> None:
    from kernelpilot.backends.registry import kernel_files, main_kernel
    from kernelpilot.versions.run_version import copy_version, version_kernel

    assert kernel_files(toy, "kernel.py") == {toy.resolve(): Path("kernel.py")}
    dest = copy_version(toy, tmp_path / "run" / "v1")
    assert sorted(p.name for p in dest.parent.iterdir()) == ["kernel.py"]
    assert version_kernel(tmp_path / "run", 1) == dest
    assert main_kernel([tmp_path / "run" / "v1" / "none.py"]) is None  # a file that is not there is no kernel
