"""The Triton-interpreter workarounds (kernelpilot.backends.triton.interpreter), on tiny kernels of our own.

Each workaround is shown two ways: in a fresh interpreter process WITHOUT the patches the kernel raises or gives a
wrong answer, and WITH them (also a fresh process, so this test session's Triton stays as it was) the answer is
the exact one compiled Triton gives. The processes run the same kernel source, written to a temp file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

KERNELS = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def scale(x_ptr, y_ptr, s, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x * s.to(tl.float32), mask=m)


@triton.jit
def bf16_times_scalar(x_ptr, y_ptr, s, N, BLOCK: tl.constexpr):
    # compiled Triton: a float argument is an fp32 scalar, so bf16 * s is computed in fp32
    offs = tl.arange(0, BLOCK)
    m = offs < N
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


@triton.jit
def rsqrt_tanh(x_ptr, r_ptr, t_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    tl.store(r_ptr + offs, libdevice.rsqrt(x), mask=m)
    tl.store(t_ptr + offs, libdevice.tanh(x - 2.0), mask=m)


@triton.jit
def bf16_ops(a_ptr, b_ptr, prod_ptr, sum_ptr, min_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    tl.store(prod_ptr + offs, a * b, mask=m)
    tl.store(sum_ptr + offs, a + b, mask=m)
    tl.store(min_ptr + offs, tl.where(a < b, a, b), mask=m)


@triton.jit
def bf16_reduce(x_ptr, s_ptr, mx_ptr, mn_ptr, am_ptr, cs_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(s_ptr, tl.sum(x, 0))
    tl.store(mx_ptr, tl.max(x, 0))
    tl.store(mn_ptr, tl.min(x, 0))
    tl.store(am_ptr, tl.argmax(x, 0))
    tl.store(cs_ptr + tl.arange(0, N), tl.cumsum(x, 0))


@triton.jit
def to_bf16(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m).to(tl.bfloat16), mask=m)


@triton.jit
def dot16(a_ptr, b_ptr, c_ptr):
    i = tl.arange(0, 16)
    a = tl.load(a_ptr + i[:, None] * 16 + i[None, :])
    b = tl.load(b_ptr + i[:, None] * 16 + i[None, :])
    tl.store(c_ptr + i[:, None] * 16 + i[None, :], tl.dot(a, b))
'''

DRIVER = r'''
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])
import torch, triton
applied = []
if sys.argv[2] == "patched":
    from kernelpilot.backends.triton.interpreter import install_workarounds
    applied = install_workarounds()
import kp_tiny_kernels as k

g = torch.Generator().manual_seed(0)
N = 64
out = {"applied": applied}

def run(name, fn):
    try:
        out[name] = fn()
    except Exception as exc:
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}

x = torch.randn(N, generator=g) * 3
def scale():
    y = torch.empty(N)
    k.scale[(1,)](x, y, 0.1, N, BLOCK=N)
    return {"bits": y.view(torch.int32).tolist(), "want": (x * torch.tensor(0.1, dtype=torch.float32)).view(torch.int32).tolist()}
run("scale", scale)

def bf16_scalar():
    xb = x.to(torch.bfloat16)
    y = torch.empty(N, dtype=torch.float32)
    k.bf16_times_scalar[(1,)](xb, y, 0.1, N, BLOCK=N)
    want = xb.float() * torch.tensor(0.1, dtype=torch.float32)
    return {"bits": y.view(torch.int32).tolist(), "want": want.view(torch.int32).tolist()}
run("bf16_scalar", bf16_scalar)

xp = x.abs() + 0.5
def libdev():
    r, t = torch.empty(N), torch.empty(N)
    k.rsqrt_tanh[(1,)](xp, r, t, N, BLOCK=N)
    return {"r": r.tolist(), "t": t.tolist(), "x": xp.tolist()}
run("libdevice", libdev)

a = (torch.randn(N, generator=g) * 4).to(torch.bfloat16)
b = (torch.randn(N, generator=g) * 4).to(torch.bfloat16)
def bf16():
    p, s, mn = (torch.empty(N, dtype=torch.bfloat16) for _ in range(3))
    k.bf16_ops[(1,)](a, b, p, s, mn, N, BLOCK=N)
    bits = lambda t: t.view(torch.int16).tolist()
    return {"prod": bits(p), "sum": bits(s), "min": bits(mn),
            "want_prod": bits((a.float() * b.float()).to(torch.bfloat16)),
            "want_sum": bits((a.float() + b.float()).to(torch.bfloat16)), "want_min": bits(torch.minimum(a, b))}
run("bf16", bf16)

def reduce():
    xs = torch.tensor([-3.0, 1.5, 2.0, -0.5, 4.0, 1.0, -6.0, 0.25]).to(torch.bfloat16)
    s, mx, mn, cs = (torch.empty(n, dtype=torch.bfloat16) for n in (1, 1, 1, 8))
    am = torch.empty(1, dtype=torch.int32)
    k.bf16_reduce[(1,)](xs, s, mx, mn, am, cs, N=8)
    return {"got": [s.item(), mx.item(), mn.item(), am.item(), cs.tolist()],
            "want": [-0.75, 4.0, -6.0, 4, xs.float().cumsum(0).tolist()]}
run("reduce", reduce)

def cast():
    y = torch.empty(N, dtype=torch.bfloat16)
    k.to_bf16[(1,)](x, y, N, BLOCK=N)
    return {"bits": y.view(torch.int16).tolist(), "want": x.to(torch.bfloat16).view(torch.int16).tolist()}
run("cast", cast)

A = torch.randn(16, 16, generator=g).to(torch.bfloat16)
B = torch.randn(16, 16, generator=g).to(torch.bfloat16)
def dot():
    C = torch.empty(16, 16)
    k.dot16[(1,)](A, B, C)
    return {"c": C.tolist(), "want": (A.double() @ B.double()).tolist()}
run("dot", dot)
print("RESULT" + json.dumps(out))
'''


def _run(tmp_path: Path, mode: str) -> dict:
    (tmp_path / "kp_tiny_kernels.py").write_text(KERNELS)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path), mode], capture_output=True, text=True,
                          env=env, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(line[len("RESULT"):])


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(unpatched, patched) results of every tiny kernel, each from a fresh interpreter process."""
    return (_run(tmp_path_factory.mktemp("raw"), "raw"), _run(tmp_path_factory.mktemp("patched"), "patched"))


def test_all_three_patches_apply_on_the_installed_triton(both):
    assert both[1]["applied"] == ["float_scalar_args", "libdevice", "bf16_values"]


def test_float_scalar_argument_is_an_fp32_scalar(both):
    raw, fixed = both
    assert "has no attribute 'to'" in raw["scale"]["error"]
    assert fixed["scale"]["bits"] == fixed["scale"]["want"]  # bit-exact x * fp32(0.1)
    # bf16 * float argument: compiled Triton promotes to fp32 (the argument is an fp32 scalar, not a weak literal)
    assert fixed["bf16_scalar"]["bits"] == fixed["bf16_scalar"]["want"]


def test_libdevice_rsqrt_and_tanh_compute_values(both):
    raw, fixed = both
    assert "error" in raw["libdevice"]  # the stubs return None
    got = fixed["libdevice"]
    x = np.array(got["x"], dtype=np.float32)
    r, t = np.array(got["r"], np.float32), np.array(got["t"], np.float32)
    want_r = (1 / np.sqrt(x.astype(np.float64))).astype(np.float32)
    want_t = np.tanh(x.astype(np.float64) - 2.0).astype(np.float32)
    ulp_r = np.abs(r.view(np.int32) - want_r.view(np.int32))
    assert ulp_r.max() <= 1  # correctly rounded up to one ulp; libdevice's rsqrtf bound is 2 ulp
    assert np.abs(t - want_t).max() <= 4 * np.spacing(np.float32(1))


def test_bf16_arithmetic_is_on_values_and_rounds_to_nearest_even(both):
    raw, fixed = both
    r, f = raw["bf16"], fixed["bf16"]
    assert r["prod"] != r["want_prod"]  # raw bits multiplied as integers
    assert r["min"] != r["want_min"]  # raw bits compared as unsigned integers: negatives order wrongly
    for key in ("prod", "sum", "min"):
        assert f[key] == f["want_" + key], key  # bit-exact correctly rounded bf16


def test_bf16_reductions_and_scans_are_on_values(both):
    raw, fixed = both
    assert "error" in raw["reduce"] or raw["reduce"]["got"] != raw["reduce"]["want"]
    assert fixed["reduce"]["got"] == fixed["reduce"]["want"]  # every value here is exact in bf16


def test_fp32_to_bf16_cast_rounds_to_nearest_even(both):
    raw, fixed = both
    assert raw["cast"]["bits"] != raw["cast"]["want"]  # the interpreter truncates
    assert fixed["cast"]["bits"] == fixed["cast"]["want"]  # torch (and compiled Triton) round to nearest even


def test_bf16_dot_multiplies_values(both):
    raw, fixed = both
    want = np.array(fixed["dot"]["want"])
    assert "error" in raw["dot"] or np.abs(np.array(raw["dot"]["c"]) - want).max() > 1.0
    assert np.abs(np.array(fixed["dot"]["c"]) - want).max() <= 1e-5 * np.abs(want).max() + 1e-6


def test_install_is_idempotent_and_a_differing_triton_is_skipped_with_a_reason():
    from kernelpilot.backends.triton import interpreter as kp_interp

    first = kp_interp.install_workarounds()
    from triton.runtime import interpreter as interp
    cvt = interp._implicit_cvt
    assert kp_interp.install_workarounds() == first
    assert interp._implicit_cvt is cvt  # not wrapped twice
    # feature detection on internals that differ: a reason, no patch, no exception
    reason = kp_interp._patch_float_scalars(SimpleNamespace(GridExecutor=None))
    assert "no _implicit_cvt" in reason
    assert "uint16" in kp_interp._patch_bf16(SimpleNamespace(
        InterpreterBuilder=interp.InterpreterBuilder, TensorHandle=interp.TensorHandle,
        _get_np_dtype=lambda dtype: np.dtype(np.float32)))


LIMITED = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.libdevice import rsqrt


@triton.jit
def helper(x):
    return libdevice.erfinv(x)


@triton.jit
def kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = helper(x) + rsqrt(x)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [y], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y)
'''


def test_limitations_name_the_construct(tmp_path):
    import importlib.util

    from kernelpilot.backends.triton.interpreter import install_workarounds, interpreter_limitations, interpreter_note

    install_workarounds()
    path = tmp_path / "kp_limited.py"
    path.write_text(textwrap.dedent(LIMITED))
    spec = importlib.util.spec_from_file_location("kp_limited", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kp_limited"] = module
    spec.loader.exec_module(module)
    found = interpreter_limitations(module)
    assert "the Triton interpreter cannot run libdevice.erfinv (in helper): run on a GPU" in found
    assert any("tl.inline_asm_elementwise" in m and "(in kernel)" in m for m in found)
    assert not any("rsqrt" in m for m in found)  # covered by the libdevice workaround
    # without the libdevice workaround (internals differ), rsqrt is reported too
    assert any("libdevice.rsqrt" in m for m in interpreter_limitations(module, applied=[]))
    assert "libdevice.erfinv" in interpreter_note(module)
