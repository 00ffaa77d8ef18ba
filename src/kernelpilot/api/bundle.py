"""The bundle half of kernelpilot's Python API: ``export``, ``bundle_verify`` and ``bundle_bench`` (docs/bundles.md).

Re-exported by :mod:`kernelpilot.api`; the implementations (:mod:`kernelpilot.bundle`) are imported when called.
Loading a bundle in an application is :func:`kernelpilot.bundle.load` (no CLI command: it returns a callable).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpilot.errors import OptionError
from kernelpilot.options import check_arch, positive

if TYPE_CHECKING:
    from kernelpilot.bundle.bench import BundleBench
    from kernelpilot.bundle.manifest import BundleManifest, BundleVerify

__all__ = ["bundle_bench", "bundle_verify", "check_entries", "export"]


def export(source: str | Path, *, out: str | Path, config: dict[str, Any] | None = None, arch: str | None = None,
           shapes: list[dict[str, Any]] | None = None, timeout_s: float | None = 300.0,
           dispatch: str | Path | None = None) -> Any:
    """Write a bundle (``kernelpilot export``): for a kernel file's config (DEFAULT_CONFIG with ``config`` over it)
    or a ``tune --out`` folder's best config, one cubin per declared shape for ``arch``, plus ``manifest.json``
    (:func:`kernelpilot.bundle.export.export_bundle`).

    A workload bundle instead when ``source`` is a run folder holding ``dispatch.json`` (``tune --workload --out``),
    a ``dispatch.json``, or ``dispatch`` is given (``source`` then the kernel file): every bucket's config for the
    shape ranges of the table, Triton (cubins per specialization) or ``.cu`` (shared libraries)
    (:func:`kernelpilot.bundle.export.export_workload`, docs/bundles.md "Workload bundles").

    Args:
        source: kernel ``.py``/``.cu`` file, tune folder or workload run folder. out: the new bundle folder.
        config: tunables to override (single-config bundles only).
        arch: ``sm_90``/``sm_90a``, or None/``auto`` for this GPU (no GPU: an error, except for a workload bundle,
            which then targets the table's arch).
        shapes: declared shapes, each an override of SHAPE (None: the source's shape). timeout_s: per entry.
        dispatch: a ``dispatch.json`` to bundle for the kernel file ``source``.

    Returns:
        The :class:`kernelpilot.bundle.manifest.BundleManifest` written, or for a workload bundle its
        :class:`kernelpilot.bundle.manifest2.RangeManifest` / ``CudaManifest``.

    Raises:
        OptionError: an arch no spec knows, a ``timeout_s`` not positive. ToolMissingError: ``auto`` without a GPU.
        ContractError: bad source, config or shape. BundleError: ``out`` not empty, an entry that cannot be bundled,
            a kernel file that is not the one the dispatch table was tuned for. DispatchError: an unreadable or
            edited ``dispatch.json``. RecordError: the records of the source folder (a tune folder, an optimize
            run, a workload folder) fail ``report``'s validation (:func:`kernelpilot.app.report_cmd.check_records`):
            a best that is no measured evaluation, a record changed since its commit.
    """
    from kernelpilot.app.report_cmd import check_records
    from kernelpilot.bundle.export import export_bundle

    if arch not in (None, "auto"):
        check_arch(arch.rstrip("a") if arch.endswith("a") else arch)
    positive("--timeout-s", timeout_s, "300")
    if shapes is not None and not all(isinstance(s, dict) for s in shapes):
        raise OptionError(f"shapes must be dicts of SHAPE overrides, got {shapes!r}", "e.g. --shapes N=4096")
    for held in {Path(source), *(Path(f).parent for f in (source, dispatch) if f and Path(f).is_file())}:
        check_records(held)  # what a record says is checked before it is shipped: report's validation
    return export_bundle(source, out, arch=arch, config=config or None, shapes=shapes or None,
                         timeout_s=timeout_s or 300.0, dispatch=dispatch)


def bundle_verify(bundle: str | Path, expect_id: str | None = None) -> "BundleVerify":
    """Check a bundle without a GPU (``kernelpilot bundle verify``): the manifest's identity (its ``bundle_id``, and
    ``expect_id`` when given: the id recorded when it was exported), schema, every file's sha256, one arch for every
    entry, the grid's coverage of each output; workload bundles too (:func:`kernelpilot.bundle.verify.verify_bundle`).

    Raises:
        BundleError: what failed, naming the file (and both hashes for a tampered one).
    """
    from kernelpilot.bundle.verify import verify_bundle

    return verify_bundle(bundle, expect_id=expect_id)


def bundle_bench(bundle: str | Path, kernel: str | Path) -> "BundleBench":
    """On a GPU (``kernelpilot bundle bench``): every entry's JIT kernel first through the ``bundle_bench`` subset of
    the stage table in an isolated worker (config, first launch, timer guard, check:
    :mod:`kernelpilot.search.stages`), then every entry's outputs against the JIT kernel's at the same config
    (bit-identical), both timed (ns), and the bundle's load time (s) (:func:`kernelpilot.bundle.bench.bench_bundle`).

    Raises:
        ToolMissingError: no GPU or no CUDA driver. BundleError: the bundle cannot load here, or is a workload
            bundle (``kernelpilot-bundle/2``). ContractError: the kernel file is not the bundle's. KernelFailed: the
            JIT kernel was refused at an entry (its status).
    """
    from kernelpilot.app.context import detect_target
    from kernelpilot.bundle.bench import bench_bundle
    from kernelpilot.bundle.reader import FORMAT_V2, BundleError, read_manifest_data

    if read_manifest_data(bundle).get("format") == FORMAT_V2:
        raise BundleError(f"{bundle}: a workload bundle ({FORMAT_V2}); bundle bench compares single-config bundles",
                          "check a workload bundle on a GPU with scripts/device-bundle26.sh (never-measured shapes "
                          "against the reference)")
    if detect_target().is_gpu:
        check_entries(bundle, kernel)
    return bench_bundle(bundle, kernel)


def check_entries(bundle: str | Path, kernel: str | Path, *, interpreted: bool = False) -> int:
    """Run the JIT kernel of every distinct (shape, config) of the bundle's manifest through the ``bundle_bench``
    subset of the stage table in one isolated worker; returns how many were checked (0 when ``kernel`` is not the
    file the bundle was built from: :func:`kernelpilot.bundle.bench.bench_bundle` says so). ``interpreted``: under
    the Triton interpreter (tests without a GPU).

    Raises:
        BundleError: the manifest cannot be read. KernelFailed: a stage refused an entry (its status).
    """
    import json

    from kernelpilot.bundle.manifest import read_manifest
    from kernelpilot.search.isolated import IsolatedKernel

    manifest = read_manifest(bundle)
    if Path(kernel).name != manifest.kernel:
        return 0
    todo = {json.dumps([e.shape, e.config], sort_keys=True, default=str): e for e in manifest.entries}
    with IsolatedKernel(kernel, interpreted=interpreted) as iso:
        for entry in todo.values():
            iso.call("kernelpilot.search.stages:command_in_worker", "bundle_bench", entry.shape, entry.config)
    return len(todo)
