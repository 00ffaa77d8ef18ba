"""``kernelpilot bundle verify`` for both manifest formats: ``kernelpilot-bundle/1`` (declared shapes,
:func:`kernelpilot.bundle.manifest.verify_bundle`) and ``kernelpilot-bundle/2`` (workload bundles,
:func:`kernelpilot.bundle.manifest2.verify_v2`). No GPU needed.
"""

from __future__ import annotations

from pathlib import Path

from kernelpilot.bundle import manifest
from kernelpilot.bundle.manifest import BundleVerify
from kernelpilot.bundle.reader import FORMAT_V2, read_manifest_data

__all__ = ["verify_bundle"]


def verify_bundle(bundle: str | Path, expect_id: str | None = None) -> BundleVerify:
    """Check a bundle of either format without a GPU: its identity (and ``expect_id`` when given), schema, every
    file's sha256, the arch of every binary, and the grid's coverage of the outputs (a workload bundle: by its rules
    at every sampled shape and both corners of every bucket's ranges, and no two buckets sharing a shape).

    Returns:
        :class:`BundleVerify` (``ok`` True; ``kind``: ``exact-shape``, ``triton`` or ``cuda-so``).

    Raises:
        BundleError: the schema, a missing file, another arch, overlapping buckets. BundleTampered: an edited
            manifest or file (named, both hashes). BundleCoverageError: a grid that cannot cover an output.
    """
    data = read_manifest_data(bundle, expect_id)
    if data.get("format") != FORMAT_V2:
        return manifest.verify_bundle(bundle, expect_id)
    from kernelpilot.bundle.manifest2 import verify_v2

    v = verify_v2(bundle, data)
    return BundleVerify(bundle=str(bundle), ok=True, bundle_id=str(data["bundle_id"]), kernel=v["kernel"],
                        arch=v["arch"], min_driver_cuda=v["min_driver_cuda"], n_entries=v["n_entries"],
                        n_files=v["n_files"], entries=v["entries"], kind=v["kind"])
