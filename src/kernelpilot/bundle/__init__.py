"""Native code bundles: a tuned kernel as cubins plus a manifest, loaded and launched without compiling
(docs/bundles.md).

- :func:`export_bundle` (``kernelpilot export``): compile the chosen config(s) for one arch, write the folder;
- :func:`verify_bundle` (``kernelpilot bundle verify``, no GPU): schema, hashes, arch list;
- :func:`load`: the kernel as a callable with ``run_kernel``'s signature, launched through the CUDA driver.

Importing this package imports neither Triton nor torch.
"""

from kernelpilot.bundle.export import export_bundle
from kernelpilot.bundle.load import BundleKernel, load
from kernelpilot.bundle.manifest import BundleError, BundleManifest, BundleVerify, verify_bundle

__all__ = ["BundleError", "BundleKernel", "BundleManifest", "BundleVerify", "export_bundle", "load", "verify_bundle"]
