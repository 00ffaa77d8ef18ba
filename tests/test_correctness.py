"""Correctness catches wrong kernels, unwritten elements, tiny-magnitude outputs and NaN; passes right ones."""

from __future__ import annotations

import pytest
import torch

from conftest import TORCH_KERNEL
from kernelpilot.kernels.contract import load_kernel
from kernelpilot.measure.correctness import check_correctness, compare, tolerance_for

CFG = {"BLOCK": 64, "num_warps": 4}


def run(write_kernel, body, shape=None, **kw):
    kf = load_kernel(write_kernel(body, **kw), interpreted=True)
    return check_correctness(kf, shape or {"N": 300}, CFG, "cpu")


def test_correct_kernel_passes_on_three_fresh_seeds(write_kernel):
    r = run(write_kernel, "out.copy_(x + y)")
    assert r.passed and [s.seed for s in r.seeds] == [0, 1, 2, 1000, 1000]  # 1000: the two drawn shapes' fresh seed
    assert len(r.shapes_checked) == 3 and r.shapes_checked[0] == {"N": 300}  # the declared and two drawn shapes
    assert r.reference_dtype == "float64" and r.deterministic is True
    assert all(o.rel_l2_error < 1e-7 for s in r.seeds for o in s.outputs)


def test_wrong_kernel_fails(write_kernel):
    r = run(write_kernel, "out.copy_(x + 1.001 * y)")
    assert not r.passed
    assert "outside atol" in r.summary or "relative L2" in r.summary
    assert r.seeds[0].outputs[0].first_bad_index is not None


def test_unwritten_element_fails_through_nan_poison(write_kernel):
    r = run(write_kernel, "out[:-1].copy_((x + y)[:-1])")  # last element never written
    assert not r.passed
    o = r.seeds[0].outputs[0]
    assert o.n_nonfinite == 1 and "NaN/Inf" in o.reason


def test_nan_never_passes_even_when_reference_is_nan_elsewhere(write_kernel):
    r = run(write_kernel, "out.copy_(x + y); out[3] = float('nan')")
    assert not r.passed


def test_tiny_outputs_cannot_pass_by_being_under_atol(write_kernel):
    # outputs ~1e-7: an all-zero kernel is within the plain fp32 atol (1e-5) everywhere, yet must fail
    src = TORCH_KERNEL.replace("BODY", "out.zero_()").replace("return x + y", "return (x + y) * 1e-7")
    r = run(write_kernel, None, source=src)
    assert not r.passed
    assert r.seeds[0].outputs[0].scale < 1e-6
    ok = TORCH_KERNEL.replace("BODY", "out.copy_((x + y) * 1e-7)").replace("return x + y", "return (x + y) * 1e-7")
    assert run(write_kernel, None, source=ok, name="ok.py").passed


def test_kernel_exception_is_recorded_not_raised(write_kernel):
    r = run(write_kernel, "raise RuntimeError('boom')")
    assert not r.passed and "boom" in r.seeds[0].error and "kernel raised" in r.summary


def test_reference_forms_in_place_tuple_dict(write_kernel):
    for i, ref in enumerate(["out.copy_(x + y)", "return (x + y,)", "return {'out': x + y}"]):
        src = TORCH_KERNEL.replace("BODY", "out.copy_(x + y)").replace("return x + y", ref)
        assert run(write_kernel, None, source=src, name=f"r{i}.py").passed


def test_reference_sees_float64_inputs(write_kernel):
    src = TORCH_KERNEL.replace("BODY", "out.copy_(x + y)").replace(
        "return x + y", "assert x.dtype == torch.float64, x.dtype\n    return x + y")
    assert run(write_kernel, None, source=src).reference_dtype == "float64"


def test_nondeterminism_is_reported(write_kernel):
    src = TORCH_KERNEL.replace("BODY", "out.copy_(x + y + torch.rand(1).item() * 1e-6)")
    r = run(write_kernel, None, source=src)
    assert r.deterministic is False


def test_bf16_tolerance_and_override():
    def pair(dtype):
        t = tolerance_for(dtype)
        return t.atol, t.rtol

    assert pair(torch.bfloat16) == (1e-2, 1e-2)
    assert pair(torch.float32) == (1e-5, 1e-3)
    assert pair(torch.int32) == (0.0, 0.0)
    ref = torch.randn(1000, dtype=torch.float64)
    assert compare("o", ref.to(torch.bfloat16), ref, *pair(torch.bfloat16)).passed
    assert not compare("o", ref.to(torch.bfloat16), ref, *pair(torch.float32)).passed


def test_shape_mismatch_fails():
    c = compare("o", torch.zeros(3), torch.zeros(4, dtype=torch.float64), 1e-5, 1e-3)
    assert not c.passed and "shape mismatch" in c.reason


@pytest.mark.parametrize("out_value,ref_value,passes", [
    (float("inf"), float("inf"), True), (float("nan"), float("nan"), True),
    (float("-inf"), float("inf"), False), (1.0, float("inf"), False), (float("nan"), float("inf"), False),
    (1.0, float("nan"), False), (float("inf"), 1.0, False), (float("nan"), 1.0, False)])
def test_non_finite_elements_pass_only_when_the_kernel_holds_the_same(out_value, ref_value, passes):
    """Where the reference is Inf the output must be the same Inf (a finite 1.0 there passed before the compare was
    rewritten: |1 - inf| <= rtol*inf), where it is NaN the output must be NaN; the rest is judged as usual."""
    ref = torch.linspace(1, 2, 3000, dtype=torch.float64).reshape(3, 1000)
    out = ref.to(torch.float32)
    ref[1, 7], out[1, 7] = ref_value, out_value
    c = compare("o", out, ref, 1e-5, 1e-3)
    assert c.passed is passes
    assert (c.n_mismatched, c.first_bad_index) == ((0, None) if passes else (1, [1, 7]))
    assert c.max_abs_error is not None and c.max_abs_error < 1e-6  # the finite elements still agree


@pytest.mark.parametrize("shape", [[5000], [4, 333], [1]])
def test_compare_counts_every_element_outside_tolerance(shape):
    """Counts, first index, norms and the worst segment agree with a direct float64 computation, padded 1-D
    segments included (5000 is not a multiple of 1024)."""
    g = torch.Generator().manual_seed(3)
    ref = torch.randn(shape, generator=g, dtype=torch.float64)
    out = ref.clone().to(torch.float32)
    flat = out.view(-1)
    bad = torch.arange(0, flat.numel(), 97)
    flat[bad] += 0.5
    c = compare("o", out, ref, 1e-5, 1e-3)
    err = out.double() - ref
    assert c.n_mismatched == bad.numel() and c.first_bad_index == [int(i) for i in torch.unravel_index(bad[0], ref.shape)]
    assert c.rel_l2_error == pytest.approx(float(err.norm() / ref.norm()), rel=1e-9)
    assert c.max_abs_error == pytest.approx(float(err.abs().max()), rel=1e-9)
    assert c.scale == pytest.approx(float(ref.pow(2).mean().sqrt()), rel=1e-9)


def test_bitwise_equal_sees_nan_payloads_signed_zeros_and_complex():
    from kernelpilot.measure.correctness import bitwise_equal

    a = torch.tensor([0.0, float("nan"), 1.0])
    assert bitwise_equal(a, a.clone())
    assert not bitwise_equal(a, torch.tensor([-0.0, float("nan"), 1.0]))  # equal as numbers, not as bits
    other_nan = a.clone()
    other_nan.view(torch.int32)[1] ^= 1  # another NaN payload: a written input, not the same one
    assert torch.isnan(other_nan[1]) and not bitwise_equal(a, other_nan)
    z = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex128)
    assert bitwise_equal(z, z.clone()) and not bitwise_equal(z, z.conj().resolve_conj())
    assert not bitwise_equal(a, a.double()) and bitwise_equal(torch.tensor([True]), torch.tensor([True]))


@pytest.mark.parametrize("name,dim", [("vector_add", "N"), ("softmax", "M")])
def test_triton_kernel_with_planted_bug_fails(name, dim, tmp_path):
    """A real Triton kernel (interpreted) told the problem is one element/row short leaves NaN behind."""
    from conftest import EXAMPLES
    from kernelpilot.kernels.contract import resolve_config, resolve_shape

    path = tmp_path / f"{name}_bad.py"
    path.write_text((EXAMPLES / f"{name}.py").read_text() + f"""

_orig_run_kernel = run_kernel

def run_kernel(*args, **kwargs):
    # planted bug: the kernel is launched one element/row short, so the last one is never written
    kwargs = {{k: v[:-1] if hasattr(v, "shape") else v for k, v in kwargs.items()}}
    kwargs["{dim}"] = kwargs["{dim}"] - 1
    return _orig_run_kernel(*args, **kwargs)
""")
    kf = load_kernel(path, interpreted=True)
    r = check_correctness(kf, resolve_shape(kf), resolve_config(kf), "cpu", seeds=(0,))
    assert not r.passed
    assert r.seeds[0].outputs[0].n_nonfinite > 0
