"""A toy third back end: "kernels" written in plain PyTorch (``.py`` files of kernelpilot's contract whose module
says ``BACKEND = "torch"`` and imports no Triton). It exists to show and test that a back end is one folder here
plus one line of :data:`kernelpilot.backends.registry.BACKENDS`: every command runs on it under the CPU, and
static inspection says there is no binary of its own to read.
"""

from kernelpilot.backends.torchref.backend import TorchRefBackend

__all__ = ["TorchRefBackend"]
