"""Reading a bundle folder with the standard library only: the manifest as JSON, checked against the bundle's
identity (:func:`manifest_id`), every listed file checked against its sha256, and each entry's grid checked to cover
its outputs (:func:`check_coverage`). :mod:`kernelpilot.bundle.manifest` validates the same JSON against the schema (pydantic) for
``export`` and ``verify``; :mod:`kernelpilot.bundle.load` uses this module alone, so that loading a bundle imports
neither pydantic nor Triton (see :mod:`kernelpilot.bundle.driver` for the measured cost of those imports).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from kernelpilot.errors import KernelpilotError

__all__ = ["BundleCoverageError", "BundleError", "BundleShapeOutOfRange", "BundleTampered", "FORMAT", "FORMATS",
           "FORMAT_V2", "MANIFEST", "check_coverage", "file_sha256", "manifest_id", "read_files",
           "read_manifest_data"]

#: The single-config manifest format (declared shapes, one entry per exact shape): still written by ``export`` of a
#: kernel file or tune folder, and read.
FORMAT = "kernelpilot-bundle/1"
#: The workload manifest format (shape ranges from a dispatch table): ``kind`` ``triton`` (cubins) or ``cuda-so``
#: (the shared libraries of a ``.cu`` kernel); docs/bundles.md, "Workload bundles".
FORMAT_V2 = "kernelpilot-bundle/2"
#: Every manifest format this code reads.
FORMATS = (FORMAT, FORMAT_V2)
MANIFEST = "manifest.json"


class BundleError(KernelpilotError):
    """A bundle is unusable here: a file whose sha256 does not match, another arch, a PTX ISA newer than the driver,
    a shape outside the declared ones, a missing kernel or file, a manifest that breaks the schema. The message
    names both sides (expected vs found)."""


class BundleTampered(BundleError):
    """A bundle is not what it was when exported: its manifest no longer hashes to its ``bundle_id`` (an edited
    grid, scalar, config, file list...), the id differs from the one the caller pinned, or a file's sha256 differs
    from the manifest's. The message names the file and both hashes."""


class BundleShapeOutOfRange(BundleError, LookupError):
    """A call's shape lies outside every range of a workload bundle (or lacks a dispatch key): no bucket of the
    dispatch table it was exported from serves it. The message names the shape and every bucket's ranges."""


class BundleCoverageError(BundleError):
    """An entry's grid launches too few programs to write its output: ``grid`` x the tile one program writes
    (recorded at export from running the kernel's programs) does not reach the output's extent, so part of the
    output would never be written. The message names the entry, the output, the grid, the tile and the shape."""


def manifest_id(data: dict[str, Any]) -> str:
    """The bundle's identity: hex sha256 of the manifest's canonical JSON (keys sorted, no spaces, ASCII) without
    its ``bundle_id`` field. The manifest lists every binary's sha256, so the id covers the binaries too.

    Args:
        data: the manifest as parsed JSON (a dict; JSON numbers as Python parses them).

    Raises:
        BundleError: a value JSON cannot hold (NaN, infinity).
    """
    body = {k: v for k, v in data.items() if k != "bundle_id"}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except ValueError as exc:
        raise BundleError(f"the manifest holds a value JSON cannot write ({exc})", "export the bundle again") from exc
    return hashlib.sha256(text.encode()).hexdigest()


def check_coverage(where: str, grid: Any, num_ctas: int, inputs: dict[str, Any], coverage: Any) -> None:
    """Refuse a grid that does not cover its outputs.

    The rule, recorded at export per entry (``coverage``, :mod:`kernelpilot.bundle.worker`): for each output tensor,
    the ``tile`` one program writes, per dimension of the tensor (the bounding box of the elements written by each
    program the exporter ran, the largest over them). The launch covers the output only if it has at least
    ``prod_d ceil(shape_d / tile_d)`` programs; it has ``grid_x * grid_y * grid_z * num_ctas``. The shape is the
    entry's declared input shape, which a call must match exactly (``select``), so it is the output the launch will
    write. Outputs the exporter could not check (``unchecked``, with the reason) and entries it could not observe
    (``observed`` false) pass: the rule never refuses what it could not establish for the honest launch.

    Args:
        where: names the entry in messages. grid: (x, y, z) programs. num_ctas: CTAs per program (cluster).
        inputs: the entry's declared inputs (tensor name -> ``{"shape", "stride", "dtype"}``).
        coverage: the entry's ``coverage`` record: ``{"observed": bool, "programs": [[x, y, z], ...],
            "outputs": [{"input": name, "tile": [int per dim]}], "unchecked": {name: why}}``.

    Raises:
        BundleError: no coverage record, or one that breaks its schema. BundleCoverageError: too few programs.
    """
    if not isinstance(coverage, dict) or not isinstance(coverage.get("outputs"), list):
        raise BundleError(f"{where}: no coverage record (the tile each program writes, recorded at export)",
                          "export the bundle again with this kernelpilot")
    if not coverage.get("observed"):
        return
    programs = int(grid[0]) * int(grid[1]) * int(grid[2]) * max(1, int(num_ctas))
    for out in coverage["outputs"]:
        try:
            name, tile = str(out["input"]), [int(t) for t in out["tile"]]
            shape = [int(d) for d in inputs[name]["shape"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"{where}: coverage record breaks the schema ({type(exc).__name__}: {exc})",
                              "export the bundle again") from exc
        if len(tile) != len(shape) or any(t < 1 for t in tile):
            raise BundleError(f"{where}: coverage tile {tile} does not fit output `{name}` of shape {shape}",
                              "export the bundle again")
        needed = 1
        for d, t in zip(shape, tile):
            needed *= -(-d // t)
        if programs < needed:
            raise BundleCoverageError(
                f"{where}: grid {list(grid)} launches {programs} programs, each writing at most a {tile} tile of "
                f"output `{name}` {shape}; covering it takes {needed}: part of the output would never be written",
                "the manifest's grid does not match the launch the kernel was exported with; export the bundle again")


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest_data(bundle: str | Path, expect_id: str | None = None) -> dict[str, Any]:
    """``BUNDLE/manifest.json`` as a dict whose ``format`` is one of :data:`FORMATS` and whose content hashes to its
    ``bundle_id`` (the schema is not checked here).

    The id is recomputed from the manifest (:func:`manifest_id`), never read as a claim: an edit of any field (a
    halved grid, a scalar, a file's hash) changes it. A manifest rewritten together with a fresh id hashes
    consistently; pinning the id (``expect_id``, e.g. the one ``export`` printed and a run recorded) refuses that
    too.

    Args:
        bundle: the folder. expect_id: the id the caller trusts (hex sha256), or None.

    Raises:
        BundleError: the folder or manifest is missing, not a JSON object, of another format, or without a
            ``bundle_id`` (exported before bundles had one). BundleTampered: the content does not hash to its
            ``bundle_id``, or the id is not ``expect_id`` (both hashes named).
    """
    path = Path(bundle) / MANIFEST
    if not Path(bundle).is_dir():
        raise BundleError(f"{bundle}: not a bundle folder", "make one with `kernelpilot export RUN|KERNEL --out DIR`")
    if not path.is_file():
        raise BundleError(f"{path}: missing (every bundle has a manifest.json)", "export the bundle again")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path}: not JSON ({exc})", "export the bundle again") from exc
    if not isinstance(data, dict):
        raise BundleError(f"{path}: not a JSON object", "export the bundle again")
    if data.get("format") not in FORMATS:
        raise BundleError(f"{path}: format {data.get('format')!r}, this kernelpilot reads {' and '.join(FORMATS)}",
                          "export the bundle with this kernelpilot")
    recorded = data.get("bundle_id")
    if not isinstance(recorded, str) or not recorded:
        raise BundleError(f"{path}: no bundle_id (exported before bundles had an identity, or it was removed)",
                          "export the bundle again")
    got = manifest_id(data)
    if got != recorded:
        raise BundleTampered(f"{path}: edited after export: its content hashes to {got}, its bundle_id says "
                             f"{recorded}", "do not edit manifest.json; export the bundle again")
    if expect_id is not None and expect_id != got:
        raise BundleTampered(f"{path}: bundle_id {got} is not the expected {expect_id} (another or a re-sealed "
                             f"bundle)", "load the bundle whose id you recorded, or export it again")
    return data


def read_files(bundle: str | Path, files: Iterable[tuple[str, str]], cubins: Iterable[tuple[str, str]]
               ) -> dict[str, bytes]:
    """Every listed file's bytes (path -> bytes), each checked against its sha256 once read (the bytes returned
    are the bytes hashed), and every entry's cubin checked to be listed.

    Args:
        bundle: the folder. files: (path relative to it, hex sha256) per listed file.
        cubins: (cubin path, kernel name) per entry.

    Raises:
        BundleError: a file is missing, or its sha256 differs (tampered or corrupt): the message names the file
            and both hashes; a cubin not listed in ``files``.
    """
    root = Path(bundle)
    data: dict[str, bytes] = {}
    for rel, sha in files:
        p = root / rel
        if not p.is_file():
            raise BundleError(f"{p}: listed in the manifest but missing", "export the bundle again")
        data[rel] = p.read_bytes()
        got = hashlib.sha256(data[rel]).hexdigest()
        if got != sha:
            raise BundleTampered(f"{p}: sha256 {got} does not match the manifest's {sha} (tampered or corrupt)",
                              "do not edit bundle files; export the bundle again")
    for cubin, kernel_name in cubins:
        if cubin not in data:
            raise BundleError(f"{root / cubin}: entry {kernel_name} names a cubin the manifest's files do not "
                              f"list (no hash to check it against)", "export the bundle again")
    return data
