"""Kernel languages behind one seam: :func:`backend_for` picks the :class:`Backend` that loads and launches a file.

Triton (``.py``) is the only backend so far; a CUDA C++ backend (``.cu``) is planned and refused with a reason.
"""

from kernelpilot.backends.base import Backend, Support
from kernelpilot.backends.registry import backend_for

__all__ = ["Backend", "Support", "backend_for"]
