"""Kernel languages behind one seam: :func:`backend_for` picks the :class:`Backend` that loads, launches and
compiles a file for a target GPU (:meth:`Backend.compile_for`, reading what :class:`BinaryReading` asks for).

The back ends: Triton (``.py``), KernelBench solutions (``.py`` with ``class ModelNew``), CUDA C++ (``.cu``:
docs/cuda.md) and a toy plain-PyTorch one used in tests; :mod:`kernelpilot.backends.registry` lists them in the
order it asks them. :mod:`kernelpilot.backends.binary` holds the readers of a compiled binary they share.
"""

from kernelpilot.backends.base import Backend, BinaryReading, Support
from kernelpilot.backends.registry import backend_for

__all__ = ["Backend", "BinaryReading", "Support", "backend_for"]
