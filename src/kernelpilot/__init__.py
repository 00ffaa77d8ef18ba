"""kernelpilot: evidence-driven GPU kernel optimization.

The loop: check (correctness) → time → profile (Nsight Compute) → verdict → next change → repeat → report.
The public Python API lives in :mod:`kernelpilot.api`; the CLI (``kernelpilot``) is a thin layer over it.
"""

__version__ = "0.1.0"
