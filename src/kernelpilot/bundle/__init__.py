"""Native code bundles: a tuned kernel as cubins plus a manifest, loaded and launched without compiling
(docs/bundles.md).

- :func:`export_bundle` (``kernelpilot export``): compile the chosen config(s) for one arch, write the folder;
- :func:`verify_bundle` (``kernelpilot bundle verify``, no GPU): identity, schema, hashes, arch list, grid coverage;
- workload bundles (``kernelpilot-bundle/2``) of a dispatch table: shape ranges, ``.cu`` kernels too
  (:mod:`kernelpilot.bundle.workload`, :mod:`kernelpilot.bundle.cudaso`, :mod:`kernelpilot.bundle.ranges`);
- :func:`load`: the kernel as a callable with ``run_kernel``'s signature, launched through the CUDA driver (after
  the same identity, hash and coverage checks).

Importing this package imports the standard library only: :func:`load` and its module are light (no Triton, torch
or pydantic), and the names of export and verify load their modules on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from kernelpilot.bundle.load import BundleKernel, load
from kernelpilot.bundle.reader import BundleCoverageError, BundleError, BundleShapeOutOfRange, BundleTampered

__all__ = ["BundleCoverageError", "BundleError", "BundleKernel", "BundleManifest", "BundleShapeOutOfRange",
           "BundleTampered", "BundleVerify", "export_bundle", "load", "verify_bundle"]

_WHERE = {"export_bundle": "export", "BundleManifest": "manifest", "BundleVerify": "manifest", "verify_bundle": "verify"}


def __getattr__(name: str) -> Any:
    """Import the module holding ``name`` on first use (PEP 562)."""
    if name not in _WHERE:
        raise AttributeError(f"module 'kernelpilot.bundle' has no attribute {name!r}")
    return getattr(importlib.import_module(f"kernelpilot.bundle.{_WHERE[name]}"), name)
