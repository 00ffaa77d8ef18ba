"""Every dtype through check, compare, poison, the per-launch refresh and the re-check (issue 23).

Triton kernels per dtype family run under the interpreter (conftest sets ``TRITON_INTERPRET=1``): fp8 quantization,
int32/int64 gather, a bool mask, uint8 arithmetic. The refresh tests hold the mechanism: every timed launch and the
re-check draw their values through one function, from ``setup`` at fresh seeds, never repeating a set.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

import kernelpilot.kernels.case as case_mod
from kernelpilot.backends.triton.fp8_probe import fp8_cast_mismatch
from kernelpilot.kernels.case import draw_values, make_case, poison_tensor, refreshed_names, scale_span
from kernelpilot.kernels.contract import load_kernel
from kernelpilot.measure.compare import compare, tolerance_for
from kernelpilot.measure.correctness import RECOMPUTED_NOTE, STALE_NOTE, check_correctness, recheck

FP8 = [d for d in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz") if hasattr(torch, d)]
INTS = [d for d in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64") if hasattr(torch, d)]

HEAD = '''
import torch
import triton
import triton.language as tl
TUNABLES = {"BLOCK": [64], "num_warps": [4]}
DEFAULT_CONFIG = {"BLOCK": 64, "num_warps": 4}
'''

QUANT = HEAD + '''
SHAPE = {"M": 8, "N": 64}

@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    amax = tl.max(tl.abs(x), axis=0)
    scale = amax / 448.0
    tl.store(q_ptr + row * N + cols, (x / scale).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)

def setup(M, N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = (torch.randn(M, N, generator=g) * 3).to(device)
    return {"inputs": {"x": x, "q": torch.empty(M, N, dtype=torch.float8_e4m3fn, device=device),
                       "s": torch.empty(M, device=device), "M": M, "N": N}, "outputs": ["q", "s"]}

def run_kernel(x, q, s, M, N, *, BLOCK, num_warps, **_):
    BODY

def reference(x, q, s, M, N, **_):
    scale = x.abs().amax(dim=1) / 448.0
    return x / scale[:, None], scale
'''
TRITON_QUANT = "_quant[(M,)](x, q, s, N, BLOCK=BLOCK, num_warps=num_warps)"
TORCH_QUANT = "sc = x.abs().amax(dim=1) / 448.0; s.copy_(sc); q.copy_((x / sc[:, None]).to(q.dtype))"

GATHER = HEAD + '''
SHAPE = {"V": 50, "D": 16, "N": 40}

@triton.jit
def _gather(t_ptr, i_ptr, o_ptr, D, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    idx = tl.load(i_ptr + row)
    tl.store(o_ptr + row * D + cols, tl.load(t_ptr + idx * D + cols, mask=mask), mask=mask)

def setup(V, D, N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    table = torch.randn(V, D, generator=g).to(device)
    idx = torch.randint(0, V, (N,), generator=g).to(device=device, dtype=torch.IDX)
    return {"inputs": {"table": table, "idx": idx, "out": torch.empty(N, D, device=device), "V": V, "D": D, "N": N},
            "outputs": ["out"], "partial": ["table"]}

def run_kernel(table, idx, out, V, D, N, *, BLOCK, num_warps, **_):
    BODY

def reference(table, idx, out, V, D, N, **_):
    return table[idx.long()]
'''

MASK = HEAD + '''
SHAPE = {"N": 300}

@triton.jit
def _mask(x_ptr, m_ptr, o_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inb = offs < N
    x = tl.load(x_ptr + offs, mask=inb)
    m = tl.load(m_ptr + offs, mask=inb) != 0
    tl.store(o_ptr + offs, m & (x > THRESH), mask=inb)

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    m = (torch.rand(N, generator=g) < 0.5).to(device)
    return {"inputs": {"x": x, "m": m, "o": torch.empty(N, dtype=torch.bool, device=device), "N": N},
            "outputs": ["o"]}

def run_kernel(x, m, o, N, *, BLOCK, num_warps, **_):
    _mask[(triton.cdiv(N, BLOCK),)](x, m, o, N, BLOCK=BLOCK, num_warps=num_warps)

def reference(x, m, o, N, **_):
    return m & (x > 0)
'''

UINT8 = HEAD + '''
SHAPE = {"N": 300}

@triton.jit
def _affine(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inb = offs < N
    x = tl.load(x_ptr + offs, mask=inb)
    tl.store(y_ptr + offs, (x * 3 + ADD).to(tl.uint8), mask=inb)

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randint(0, 256, (N,), generator=g, dtype=torch.uint8).to(device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "N": N}, "outputs": ["y"]}

def run_kernel(x, y, N, *, BLOCK, num_warps, **_):
    _affine[(triton.cdiv(N, BLOCK),)](x, y, N, BLOCK=BLOCK, num_warps=num_warps)

def reference(x, y, N, **_):
    return x * 3 + 7
'''

CFG = {"BLOCK": 64, "num_warps": 4}


def _load(tmp_path, text, name="k.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return load_kernel(path, interpreted=True)


def _check(tmp_path, text, shape, name="k.py"):
    return check_correctness(_load(tmp_path, text, name), shape, CFG, "cpu")


# ------------------------------------------------------------------------------------------------ check per dtype

def test_fp8_quantization_in_torch_passes_and_a_wrong_scale_fails(tmp_path):
    ok = _check(tmp_path, QUANT.replace("BODY", TORCH_QUANT), {"M": 8, "N": 64})
    assert ok.passed, ok.summary
    assert ok.tolerances["q"].rtol == 2.0 ** -3 and not ok.tolerances["q"].over_cap
    bad = _check(tmp_path, QUANT.replace("BODY", TORCH_QUANT.replace("/ sc[:, None]", "/ (1.3 * sc[:, None])")),
                 {"M": 8, "N": 64}, "bad.py")
    assert not bad.passed and "outside atol" in bad.summary


def test_fp8_triton_quantization_names_the_interpreters_rounding(tmp_path):
    r = _check(tmp_path, QUANT.replace("BODY", TRITON_QUANT), {"M": 8, "N": 64})
    found = fp8_cast_mismatch("float8_e4m3fn")
    if found:  # Triton 3.9's interpreter: a carry into the exponent lost; the summary must say so
        assert not r.passed
        assert "this case has float8_e4m3fn tensors" in r.summary and "rounding carry" in r.summary
    else:  # a Triton whose interpreter rounds right: the kernel passes on its own
        assert r.passed, r.summary


def test_fp8_probe_finds_the_interpreters_fp8_rounding_against_torch():
    # the probe compares with torch bit for bit: on values that need no rounding the interpreter is exact
    x = torch.tensor([1.0, -2.0, 0.5, 448.0, 0.0])
    for name in FP8:
        dtype = getattr(torch, name)
        xs = x[x.abs() <= torch.finfo(dtype).max]
        y = torch.empty(xs.numel(), dtype=dtype)
        from kernelpilot.backends.triton.fp8_probe import _kernel

        _kernel()[(1,)](xs, y, xs.numel(), BLOCK=8)
        assert torch.equal(y.float(), xs.to(dtype).float())
        note = fp8_cast_mismatch(name)
        assert note is None or (name in note and "gives" in note)


@pytest.mark.parametrize("idx", ["int32", "int64"])
def test_gather_by_integer_index_passes_and_an_off_by_one_fails(tmp_path, idx):
    body = "_gather[(N,)](table, idx, out, D, BLOCK=BLOCK, num_warps=num_warps)"
    src = GATHER.replace("torch.IDX", f"torch.{idx}")
    ok = _check(tmp_path, src.replace("BODY", body), {"V": 50, "D": 16, "N": 40})
    assert ok.passed, ok.summary
    wrong = "j = (idx + 1) % V; _gather[(N,)](table, j, out, D, BLOCK=BLOCK, num_warps=num_warps)"
    bad = _check(tmp_path, src.replace("BODY", wrong), {"V": 50, "D": 16, "N": 40}, "bad.py")
    assert not bad.passed


def test_bool_mask_output_is_exact(tmp_path):
    ok = _check(tmp_path, MASK.replace("THRESH", "0.0"), {"N": 300})
    assert ok.passed, ok.summary
    assert ok.tolerances["o"].atol == 0 and ok.tolerances["o"].rtol == 0
    bad = _check(tmp_path, MASK.replace("THRESH", "0.05"), {"N": 300}, "bad.py")  # a few elements near 0 differ
    assert not bad.passed and "must match exactly" in bad.summary


def test_uint8_arithmetic_is_exact(tmp_path):
    assert _check(tmp_path, UINT8.replace("ADD", "7"), {"N": 300}).passed
    bad = _check(tmp_path, UINT8.replace("ADD", "8"), {"N": 300}, "bad.py")
    assert not bad.passed and bad.seeds[0].outputs[0].n_mismatched == 300


# ------------------------------------------------------------------------------------------------ compare, poison

@pytest.mark.parametrize("name", FP8)
def test_fp8_compare_upcasts_uses_the_formats_unit_and_nan_never_passes(name):
    dtype = getattr(torch, name)
    ref = torch.randn(4, 64, dtype=torch.float64) * 10
    tol = tolerance_for(dtype)
    assert tol.rtol == torch.finfo(torch.float8_e4m3fn if "e4m3" in name else torch.float8_e5m2).eps
    assert compare("q", ref.to(dtype), ref, tol.atol, tol.rtol).passed  # correctly rounded: within one unit
    two_units = (ref * (1 + 2.5 * tol.rtol)).to(dtype)
    assert not compare("q", two_units, ref, tol.atol, tol.rtol).passed
    poisoned = ref.to(dtype)
    poison_tensor(poisoned)
    assert torch.isnan(poisoned.float()).all()
    c = compare("q", poisoned, ref, tol.atol, tol.rtol)
    assert not c.passed and c.n_nonfinite == ref.numel()


@pytest.mark.parametrize("name", INTS + ["bool"])
def test_integer_and_bool_compare_exactly_and_poison_shows(name):
    dtype = getattr(torch, name)
    ref = torch.randint(0, 2 if name == "bool" else 100, (3, 40)).to(dtype)
    tol = tolerance_for(dtype)
    assert (tol.atol, tol.rtol) == (0.0, 0.0)
    assert compare("o", ref.clone(), ref, 0.0, 0.0).passed
    assert compare("o", ref.clone(), ref.to(torch.float64), 0.0, 0.0).passed  # a float64 reference too
    off = ref.clone()
    off[1, 5] = (not bool(off[1, 5])) if name == "bool" else int(off[1, 5]) + 1
    c = compare("o", off, ref, 0.0, 0.0)
    assert not c.passed and c.n_mismatched == 1 and c.first_bad_index == [1, 5]
    p = ref.clone()
    poison_tensor(p)
    if name != "bool":
        info = torch.iinfo(dtype)
        assert p.view(-1)[0].item() == (info.max if info.min == 0 else info.min)  # never 0 for unsigned
    assert not compare("o", p, ref, 0.0, 0.0).passed


def test_int64_beyond_float64_precision_is_still_exact():
    ref = torch.tensor([2 ** 60 + 1, 7])
    assert not compare("o", torch.tensor([2 ** 60, 7]), ref, 0.0, 0.0).passed


def test_complex_compares_real_and_imaginary_parts():
    ref = torch.randn(3, 8, dtype=torch.complex128)
    tol = tolerance_for(torch.complex64)
    assert compare("z", ref.to(torch.complex64), ref, tol.atol, tol.rtol).passed
    assert not compare("z", ref.conj().resolve_conj().to(torch.complex64), ref, tol.atol, tol.rtol).passed


# ------------------------------------------------------------------------------------------------ refresh, recheck

STRUCT = '''
import torch
SHAPE = {"N": 64}
TUNABLES = {"BLOCK": [64], "num_warps": [4]}

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    half = torch.randn(N // 2, generator=g)
    cos = torch.cat([half, half]).to(device)                      # RoPE-like: equal halves
    counts = torch.randint(0, 5, (N,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]).to(device)  # CSR: monotone
    idx = torch.randint(0, N, (N,), generator=g, dtype=torch.int32).to(device)
    mask = (torch.rand(N, generator=g) < 0.3).to(device)
    q8 = (torch.randn(N, generator=g) * 200).clamp(-448, 448).to(torch.float8_e4m3fn)
    q8[0] = 448.0                                                  # the format's maximum: must not overflow
    code = torch.randint(0, 256, (N,), generator=g, dtype=torch.uint8).to(device)
    buf = torch.randn(N, generator=g).to(device)
    return {"inputs": {"cos": cos, "offsets": offsets, "idx": idx, "mask": mask, "q8": q8.to(device),
                       "code": code, "buf": buf, "out": torch.zeros(N, device=device), "N": N},
            "outputs": ["out", "buf"], "inplace": ["buf"]}

def run_kernel(cos, offsets, idx, mask, q8, code, buf, out, N, **_):
    out.copy_(cos[idx.long()] * mask + q8.float() + code.float() + offsets[:N].float())
    buf.mul_(2)

def reference(cos, offsets, idx, mask, q8, code, buf, out, N, **_):
    b = buf.clone(); b.mul_(2)
    return cos[idx.long()] * mask + q8.double() + code.double() + offsets[:N].double(), b
'''

INTS_ONLY = '''
import torch
SHAPE = {"N": 64}
TUNABLES = {"BLOCK": [64], "num_warps": [4]}

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randint(0, 1000, (N,), generator=g).to(device)
    return {"inputs": {"x": x, "out": torch.empty(N, dtype=torch.int64, device=device), "N": N}, "outputs": ["out"]}

def run_kernel(x, out, N, **_):
    out.copy_(x * 2)

def reference(x, out, N, **_):
    return x * 2
'''


def _snapshot(case):
    return {n: case.inputs[n].clone() for n in refreshed_names(case)}


def test_refresh_keeps_structure_pointers_and_draws_every_dtype_anew(tmp_path):
    kf = _load(tmp_path, STRUCT)
    case = make_case(kf, {"N": 64}, 0, "cpu")
    assert refreshed_names(case) == ["cos", "offsets", "idx", "mask", "q8", "code", "buf"]  # not out, any dtype
    ptrs = {n: case.inputs[n].data_ptr() for n in refreshed_names(case)}
    before = _snapshot(case)
    refresh = case.refresher()
    seen = []
    for _ in range(12):
        refresh()
        now = _snapshot(case)
        seen.append(now)
        assert {n: case.inputs[n].data_ptr() for n in now} == ptrs  # same storage: copy_, not new tensors
        c = now["cos"]
        assert torch.equal(c[:32], c[32:])  # equal halves survive
        assert bool((now["offsets"][1:] >= now["offsets"][:-1]).all())  # monotone offsets survive
        assert int(now["idx"].min()) >= 0 and int(now["idx"].max()) < 64  # valid indices
        assert now["mask"].dtype == torch.bool and now["q8"].dtype == torch.float8_e4m3fn
        assert bool(torch.isfinite(now["q8"].float()).all())  # fp8 at 448 scaled below 1: never NaN
    for n in ("cos", "q8", "buf"):  # floats differ from setup's first draw at every launch
        assert all(not torch.equal(s[n].float(), before[n].float()) for s in seen)
    for n in ("idx", "code", "offsets", "mask"):  # integer and bool inputs change too (setup at other seeds)
        assert any(not torch.equal(s[n], before[n]) for s in seen)
    pool = case._pool
    assert 1 <= len(pool.sets) <= case_mod.POOL_SETS and len(pool.factors_used) == 12
    assert not set(pool.seeds) & {0, 1, 2, 1000}  # never the check's seeds


def test_integer_only_inputs_are_new_at_every_launch(tmp_path):
    kf = _load(tmp_path, INTS_ONLY)
    case = make_case(kf, {"N": 64}, 0, "cpu")
    refresh = case.refresher()
    seen = [case.inputs["x"].clone()]
    for _ in range(6):
        refresh()
        assert all(not torch.equal(case.inputs["x"], s) for s in seen)  # a content cache never hits
        seen.append(case.inputs["x"].clone())


def test_timed_and_rechecked_values_come_from_one_function_and_never_repeat(tmp_path, monkeypatch):
    kf = _load(tmp_path, STRUCT)
    case = make_case(kf, {"N": 64}, 0, "cpu")
    calls = []

    def recording(c, index=0):
        source = draw_values(c, index)
        calls.append(_snapshot(c))
        return source

    monkeypatch.setattr(case_mod, "draw_values", recording)  # both Case.refresh and recheck look it up here
    refresh = case.refresher()
    for _ in range(10):
        refresh()
    check = recheck(kf, case, {"BLOCK": 64, "num_warps": 4}, "cpu")
    assert check.passed, check
    assert len(calls) == 11  # ten timed launches and the re-check, all through draw_values
    final = calls[-1]
    for timed in calls[:-1]:
        assert any(not torch.equal(final[n].float(), timed[n].float()) for n in ("cos", "buf"))
    for base in case._pool.sets:  # setup's own values never reach the kernel unscaled
        assert not torch.equal(final["cos"], base["cos"]) and not torch.equal(final["buf"], base["buf"])


def test_factors_lie_in_each_dtypes_span_below_one():
    assert scale_span(torch.float32) == 2.0 ** -5 and scale_span(torch.bfloat16) == 2.0 ** -4
    for name in FP8:
        assert scale_span(getattr(torch, name)) == 0.5


def test_pool_is_capped_by_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(case_mod, "POOL_BYTES", 1)
    kf = _load(tmp_path, STRUCT)
    case = make_case(kf, {"N": 64}, 0, "cpu")
    refresh = case.refresher()
    for _ in range(4):
        refresh()
    assert len(case._pool.sets) == 1  # one set at least, however large


def test_fp8_input_goes_through_refresh(tmp_path):
    src = QUANT.replace("BODY", TORCH_QUANT).replace('"x": x,', '"x": x, "w": x.to(torch.float8_e5m2),')
    kf = _load(tmp_path, src)
    case = make_case(kf, {"M": 8, "N": 64}, 0, "cpu")
    w = case.inputs["w"].clone()
    case.refresh(0)
    assert case.inputs["w"].dtype == torch.float8_e5m2 and not torch.equal(case.inputs["w"].float(), w.float())


CHEAT_SCALE = '''
import torch
SHAPE = {"N": 256}
TUNABLES = {"BLOCK": [64], "num_warps": [4]}
_first = {}
SKIPPED = []

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}

def run_kernel(x, out, N, **_):
    """Skip the work when x looks like the values first seen at this pointer scaled by at most 2.4 % ("timed")."""
    first = _first.setdefault(x.data_ptr(), x.clone())
    ratio = x / first
    if bool(((ratio - ratio[0]).abs() < 1e-3).all()) and 1.0 < float(ratio[0]) <= 1.025:
        SKIPPED.append(True)
        return
    SKIPPED.append(False)
    out.copy_(torch.sin(x))

def reference(x, out, N, **_):
    return torch.sin(x)
'''


def test_a_kernel_that_detects_the_timed_scale_gains_nothing(tmp_path):
    # the exploit of issue 23: remember setup's values at the pointer (the check runs on them first); timed
    # launches were those values times 1 + k·2⁻¹² (skip), the re-check times 1.03-1.08 (compute): 3.4x false
    kf = _load(tmp_path, CHEAT_SCALE)
    case = make_case(kf, {"N": 256}, 0, "cpu")
    kf.run_kernel(**case.inputs)  # the check's launch on setup's values
    refresh = case.refresher()
    for _ in range(20):
        refresh()
        kf.run_kernel(**case.inputs)
    assert not any(kf.module.SKIPPED)  # values from other seeds: never a scaled copy of setup's
    assert recheck(kf, case, {}, "cpu").passed


@pytest.mark.parametrize("name", FP8)
def test_bitwise_equal_reads_fp8_as_bytes(name):
    from kernelpilot.measure.correctness import bitwise_equal

    dtype = getattr(torch, name)
    a = torch.randn(33).to(dtype)
    poison_tensor(a)  # NaN equals the same NaN bit for bit
    assert bitwise_equal(a, a.clone())
    b = torch.randn(33).to(dtype)
    c = b.clone()
    c.view(torch.uint8)[5] ^= 1
    assert bitwise_equal(b, b.clone()) and not bitwise_equal(b, c)


CONTENT_CACHE = '''
import torch
SHAPE = {"N": 128}
TUNABLES = {"BLOCK": [64], "num_warps": [4]}
CACHE = {}
HITS = []

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    i = torch.randint(0, N, (N,), generator=g).to(device)
    return {"inputs": {"x": x, "i": i, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}

def _key(t):
    return t.numpy().tobytes()

def run_kernel(x, i, out, N, **_):
    """Cache by KEY: the exact content, or the order of its elements (a scale-free key: a positive factor keeps it
    exactly, where a rounded ratio can land on either side of a rounding boundary)."""
    key = (_key(x), _key(i)) if MODE == "exact" else (_key(x.argsort()), _key(i))
    hit = key in CACHE
    HITS.append(hit)
    if hit:
        return  # the output keeps what the last launch wrote
    out.copy_(torch.sin(x)[i])
    CACHE[key] = True

def reference(x, i, out, N, **_):
    return torch.sin(x)[i]
'''


def test_a_cache_keyed_on_exact_content_never_hits(tmp_path):
    kf = _load(tmp_path, CONTENT_CACHE.replace("MODE", '"exact"'))
    case = make_case(kf, {"N": 128}, 0, "cpu")
    refresh = case.refresher()
    for _ in range(20):
        refresh()
        kf.run_kernel(**case.inputs)
    assert not any(kf.module.HITS)  # every timed launch pays for the work
    assert recheck(kf, case, {}, "cpu").passed


def test_a_cache_keyed_on_scale_free_content_is_caught_by_the_recheck(tmp_path, monkeypatch):
    # one pool set: every launch after the first is that set rescaled, so the scale-free key hits and the kernel
    # skips; the re-check is the same kind of draw, so the kernel skips there too and leaves a stale output
    monkeypatch.setattr(case_mod, "POOL_SETS", 1)
    kf = _load(tmp_path, CONTENT_CACHE.replace("MODE", '"normalised"'))
    case = make_case(kf, {"N": 128}, 0, "cpu")
    refresh = case.refresher()
    for _ in range(5):
        refresh()
        kf.run_kernel(**case.inputs)
    assert kf.module.HITS == [False, True, True, True, True]
    # the factors are drawn unpredictably: one in a few hundred lands so near the last launch's that the stale
    # output is still within tolerance of the new reference (then it is a right answer, and passes); the next
    # draw does not
    for _ in range(3):
        bad = recheck(kf, case, {}, "cpu")
        if not bad.passed:
            break
    assert not bad.passed and bad.stage == "recheck" and "scaled by" in bad.error
    assert STALE_NOTE in bad.error  # the skipped launch left the previous result: stale, by name


DRIFTS = '''
import torch
SHAPE = {"N": 256}
TUNABLES = {"BLOCK": [64], "num_warps": [4]}

def setup(N, seed=0, device="cpu", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return {"inputs": {"x": torch.randn(N, generator=g).to(device), "out": torch.empty(N, device=device), "N": N},
            "outputs": ["out"]}

def run_kernel(x, out, N, **_):
    y = x * 3
    y[x.abs().argmax()] += 1.0   # wrong at one element, computed anew every call
    out.copy_(y)

def reference(x, out, N, **_):
    return x * 3
'''


def test_a_recheck_miss_that_was_computed_anew_is_not_called_stale(tmp_path):
    """A kernel that writes every output anew but gets an element wrong fails the re-check as a wrong result at
    values the seeds did not draw, not as a stale (cached) one: the failing elements are compared with the
    previous result (found on an H200: a KernelBench solution's one-element precision miss read 'stale_result')."""
    kf = _load(tmp_path, DRIFTS)
    case = make_case(kf, {"N": 256}, 0, "cpu")
    kf.run_kernel(**case.inputs)
    bad = recheck(kf, case, {}, "cpu")
    assert not bad.passed and RECOMPUTED_NOTE in bad.error and STALE_NOTE not in bad.error


CACHED_SETUP = '''
import torch
SHAPE = {"N": 64}
TUNABLES = {"BLOCK": [64], "num_warps": [4]}
_MADE = {}

def setup(N, seed=0, device="cpu", **_):
    """Builds its tensors once and hands back the same objects at every seed (a cached setup)."""
    if N not in _MADE:
        x = torch.linspace(1.0, 2.0, N, device=device).requires_grad_(True)
        _MADE[N] = {"x": x, "out": torch.empty(N, device=device), "N": N}
    return {"inputs": dict(_MADE[N]), "outputs": ["out"]}

def run_kernel(x, out, N, **_):
    out.copy_(x.detach() * 2)

def reference(x, out, N, **_):
    return x * 2
'''


def test_a_setup_that_returns_the_cases_own_tensors_does_not_shrink_them(tmp_path):
    kf = _load(tmp_path, CACHED_SETUP)
    case = make_case(kf, {"N": 64}, 0, "cpu")
    x0 = case.inputs["x"].detach().clone()
    refresh = case.refresher()
    for _ in range(200):  # scaling the case's own tensor in place would compound: 0.97 ** 200 ~ 0.002
        refresh()
    ratio = case.inputs["x"].detach() / x0
    assert float(ratio.min()) > 0.96 and float(ratio.max()) < 0.985  # one factor, from a copy of setup's values
