"""The package-level layer contract (issue 28): no kernelpilot module imports a module of a higher layer, except
the pairs listed here, and the list may only shrink.

The layers and the import graph are ``scripts/house_counts.py``'s (``TARGET_ORDER``, bottom first; every kind of
import counted: at module level, inside functions, under ``TYPE_CHECKING``, and ``importlib`` targets). A pair
that appears and is not listed fails (a new upward import: move the code down, or pass what it needs in); a listed
pair that no longer appears fails too (remove it from the list: the list records what is left to fix).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: Module pairs (importer, imported) that import against the layer order today (20; 36 when the list was made, before the readers moved under backends/); may only shrink.
ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset({
    ("kernelpilot.api", "kernelpilot.agents.mcp_server"),
    ("kernelpilot.app.schemas", "kernelpilot.versions.records"),
    ("kernelpilot.app.validate", "kernelpilot.versions.records"),
    ("kernelpilot.kernels.contract", "kernelpilot.backends.registry"),
    ("kernelpilot.kernels.contract", "kernelpilot.backends.triton"),
    ("kernelpilot.kernels.contract", "kernelpilot.measure.screen"),
    ("kernelpilot.options", "kernelpilot.backends.binary.arch"),
    ("kernelpilot.options", "kernelpilot.backends.binary.occupancy"),
    ("kernelpilot.options", "kernelpilot.hardware.specs"),
    ("kernelpilot.profile.pipeline", "kernelpilot.search.guided"),
    ("kernelpilot.profile.static", "kernelpilot.search.isolated"),
    ("kernelpilot.profile.static", "kernelpilot.search.space"),
    ("kernelpilot.records.frames", "kernelpilot.versions.records"),
    ("kernelpilot.report.html_data", "kernelpilot.app.tune_run"),
    ("kernelpilot.report.html_data", "kernelpilot.versions.records"),
    ("kernelpilot.report.tune_md", "kernelpilot.app.tune"),
    ("kernelpilot.search.tune", "kernelpilot.app.tune"),
    ("kernelpilot.search.tune", "kernelpilot.engine.evaluator"),
    ("kernelpilot.search.tune", "kernelpilot.engine.prune"),
    ("kernelpilot.search.tune", "kernelpilot.report.tune_md"),
})


def _house_counts():
    spec = importlib.util.spec_from_file_location("house_counts", REPO / "scripts" / "house_counts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _upward() -> set[tuple[str, str]]:
    result = _house_counts().count(REPO / "src" / "kernelpilot")
    return {(p["importer"], p["imported"]) for p in result["imports"]["module_pairs_against_order"]}


def test_no_new_upward_import_and_the_allowlist_only_shrinks() -> None:
    found = _upward()
    new = sorted(found - ALLOWED_UPWARD)
    assert not new, ("imports against the layer order (scripts/house_counts.py TARGET_ORDER): "
                     + "; ".join(f"{a} -> {b}" for a, b in new))
    gone = sorted(ALLOWED_UPWARD - found)
    assert not gone, "fixed, remove from ALLOWED_UPWARD: " + "; ".join(f"{a} -> {b}" for a, b in gone)


def test_every_node_has_a_layer() -> None:
    """A new top-level package or module is placed in the order before it can be imported from anywhere."""
    result = _house_counts().count(REPO / "src" / "kernelpilot")
    assert not result["imports"]["unplaced_nodes"], result["imports"]["unplaced_nodes"]
