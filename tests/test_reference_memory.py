"""The float64 reference of a problem too large for the GPU beside the worker's tensors is computed in host memory,
never reported as the kernel's failure (found on an H200: KernelBench level-1 problems of 1.6e9 floats failed
``runtime_error`` because the reference process ran out of GPU memory)."""

from __future__ import annotations

import pytest
import torch

from kernelpilot.measure.reference_run import _is_oom, reference_outputs_local


def test_out_of_memory_is_told_apart_from_other_failures():
    assert _is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB"))
    assert _is_oom(RuntimeError("CUDA error: out of memory"))
    assert not _is_oom(RuntimeError("expected scalar type Double but found Float"))


def test_on_the_cpu_a_failing_float64_reference_still_falls_back_to_native():
    """Off the GPU nothing changes: an op without a float64 kernel is run natively and the note says why."""
    def reference(x, y):
        if x.dtype == torch.float64:
            raise RuntimeError("no float64 kernel")
        y.copy_(x * 2)

    x = torch.arange(6, dtype=torch.float32)
    refs, precision = reference_outputs_local(reference, {"x": x, "y": torch.empty(6)}, ["y"])
    assert precision.startswith("native (float64 failed") and torch.equal(refs["y"], x * 2)


@pytest.mark.gpu
def test_a_gpu_out_of_memory_in_float64_is_answered_in_float64_from_host_memory():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")

    def reference(x, y):
        if x.is_cuda and x.dtype == torch.float64:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        y.copy_(torch.softmax(x, -1))

    x = torch.randn(4, 64, device="cuda")
    refs, precision = reference_outputs_local(reference, {"x": x, "y": torch.empty_like(x)}, ["y"])
    assert precision.startswith("float64 (on the CPU") and refs["y"].dtype == torch.float64
    assert torch.allclose(refs["y"].to("cuda"), torch.softmax(x.double(), -1))
