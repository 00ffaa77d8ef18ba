"""The CUDA C++ backend (``.cu`` files exposing ``extern "C" void solve(...)``): signature parsing, nvcc builds with
a content cache, ctypes launches, and static inspection of the built binary (docs/cuda.md)."""

from kernelpilot.backends.cuda.backend import CudaBackend

__all__ = ["CudaBackend"]
