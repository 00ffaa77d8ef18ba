"""Workloads (issue 26): the JSON file, ranges, buckets, stride patterns, and capture from a real torch program."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from kernelpilot.errors import KernelpilotError
from kernelpilot.workload import (Bucket, WorkloadError, bucket_for, bucket_neighbours, bucket_workload,
                                  build_workload, capture_workload, class_range, load_workload, parse_mapping,
                                  parse_mapping_text,
                                  parse_ranges, range_points, stride_pattern, tensor_pattern, workload_from_ranges)
from kernelpilot.workload.infer import infer_mapping

BASE = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16"}


def write(tmp_path, data) -> str:
    p = tmp_path / "w.json"
    p.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return str(p)


# -- the file ------------------------------------------------------------------------------------------------------

def test_missing_keys_come_from_shape_and_order_follows_it(tmp_path):
    w = load_workload(write(tmp_path, [{"shape": {"K": 64, "M": 512}, "weight": 3}, {"shape": {"N": 8}}]), BASE)
    assert w.entries[0].shape == {"M": 512, "N": 4096, "K": 64, "dtype": "bfloat16"}
    assert list(w.entries[0].shape) == ["M", "N", "K", "dtype"]
    assert w.entries[1].shape == {"M": 4096, "N": 8, "K": 4096, "dtype": "bfloat16"}
    assert w.entries[1].weight == 1.0  # weight left out: 1
    assert w.total_weight == 4.0


def test_unknown_key_is_refused_by_name_with_the_known_ones(tmp_path):
    with pytest.raises(WorkloadError) as err:
        load_workload(write(tmp_path, [{"shape": {"M": 1}}, {"shape": {"Q": 512}, "weight": 1}]), BASE)
    assert isinstance(err.value, KernelpilotError)
    assert "'Q'" in err.value.message and "entry 2" in err.value.message
    assert "M, N, K, dtype" in err.value.message and err.value.hint


def test_duplicates_merge_by_summing_weights_in_first_seen_order(tmp_path):
    data = [{"shape": {"M": 512}, "weight": 3}, {"shape": {"M": 64}, "weight": 1},
            {"shape": {"M": 512, "N": 4096}, "weight": 2.5}]  # the same full shape as the first
    w = load_workload(write(tmp_path, data), BASE)
    assert [(e.shape["M"], e.weight) for e in w.entries] == [(512, 5.5), (64, 1.0)]
    assert w.weight_of({"M": 512, "N": 4096, "K": 4096, "dtype": "bfloat16"}) == 5.5


@pytest.mark.parametrize("weight", [0, -1, float("inf"), "3"])
def test_weight_must_be_a_positive_number(tmp_path, weight):
    text = json.dumps([{"shape": {"M": 1}, "weight": weight}]).replace("Infinity", "1e999")
    with pytest.raises(WorkloadError, match="weight"):
        load_workload(write(tmp_path, text), BASE)


def test_malformed_files_are_refused_with_place(tmp_path):
    with pytest.raises(WorkloadError, match=r"w.json:1:\d+: not JSON"):
        load_workload(write(tmp_path, "[{"), BASE)
    with pytest.raises(WorkloadError, match="not a list"):
        load_workload(write(tmp_path, {"shape": {"M": 1}}), BASE)
    with pytest.raises(WorkloadError, match="no entry"):
        load_workload(write(tmp_path, []), BASE)
    with pytest.raises(WorkloadError, match="wieght"):  # a misspelt field is not silently weight 1
        load_workload(write(tmp_path, [{"shape": {"M": 1}, "wieght": 9}]), BASE)
    with pytest.raises(WorkloadError, match="cannot read"):
        load_workload(tmp_path / "missing.json", BASE)


def test_value_types_follow_shape(tmp_path):
    with pytest.raises(WorkloadError, match="not a whole number"):
        load_workload(write(tmp_path, [{"shape": {"M": "512"}}]), BASE)
    with pytest.raises(WorkloadError, match="not a whole number"):
        load_workload(write(tmp_path, [{"shape": {"M": 512.5}}]), BASE)
    with pytest.raises(WorkloadError, match="not a word"):
        load_workload(write(tmp_path, [{"shape": {"dtype": 16}}]), BASE)
    flags = {"N": 8, "causal": True, "eps": 1e-5}
    w = build_workload([{"shape": {"causal": False, "eps": 1}}], flags)
    assert w.entries[0].shape == {"N": 8, "causal": False, "eps": 1.0}
    with pytest.raises(WorkloadError, match="true or false"):
        build_workload([{"shape": {"causal": 1}}], flags)
    unset = build_workload([{"shape": {"N": 3}}], {"N": 1, "bias": None})  # an option left unset in SHAPE
    assert unset.entries[0].shape == {"N": 3, "bias": None}
    with pytest.raises(WorkloadError, match="not a number, a word"):
        build_workload([{"shape": {"N": 3}}], {"N": 1, "sizes": [1, 2]})


def test_dump_reads_back_equal(tmp_path):
    w = build_workload([{"shape": {"M": 7}, "weight": 2}, {"shape": {"M": 9}}], BASE, source="x")
    again = load_workload(w.dump(tmp_path / "out.json"), BASE)
    assert again.entries == w.entries


# -- ranges --------------------------------------------------------------------------------------------------------

def test_range_rules():
    assert range_points(1, 16) == [1, 2, 3, 4, 6, 8, 12, 16]
    assert range_points(1, 16, "pow2") == [1, 2, 4, 8, 16]
    assert range_points(100, 300, "pow2") == [100, 128, 256, 300]  # the ends are shapes too
    assert range_points(100, 300) == [100, 128, 192, 256, 300]
    assert range_points(5, 5) == [5]
    assert range_points(3, 6, "all") == [3, 4, 5, 6]
    pts = range_points(1, 16384)
    assert len(pts) == 15 + 13 and pts[-2:] == [12288, 16384]  # 2^0..2^14, and 3*2^(k-1) for k = 1..13

    def pow2(n):
        return n & (n - 1) == 0
    assert all(pow2(p) or (p % 3 == 0 and pow2(p // 3)) for p in pts)


def test_parse_ranges_and_generate():
    assert parse_ranges("M=1:16384, N=4096") == {"M": (1, 16384), "N": (4096, 4096)}
    assert parse_ranges(["M=1:8", "K=2:4"]) == {"M": (1, 8), "K": (2, 4)}
    for bad in ("M", "M=8:1", "M=a:b", "M=-1:4", "M=1:2,M=3:4", "1M=2"):
        with pytest.raises(WorkloadError):
            parse_ranges(bad)
    w = workload_from_ranges("M=1:8,K=16:32", BASE, points="pow2")
    assert [(e.shape["M"], e.shape["K"]) for e in w.entries] == [
        (m, k) for m in (1, 2, 4, 8) for k in (16, 32)]
    assert all(e.weight == 1.0 and e.shape["N"] == 4096 for e in w.entries)
    assert w.source == "ranges:M=1:8,K=16:32:pow2"
    with pytest.raises(WorkloadError, match="'Q'"):
        workload_from_ranges({"Q": (1, 2)}, BASE)
    with pytest.raises(WorkloadError, match="not a whole number"):
        workload_from_ranges({"dtype": (1, 2)}, BASE)
    with pytest.raises(WorkloadError, match="most"):
        workload_from_ranges("M=1:4096,N=1:4096,K=1:4096", BASE, points="all")


# -- buckets -------------------------------------------------------------------------------------------------------

def test_class_boundaries():
    assert class_range(1) == (1, 1) and class_range(2) == (2, 3) and class_range(3) == (2, 3)
    assert class_range(511) == (256, 511) and class_range(512) == (512, 1023) and class_range(1023) == (512, 1023)
    assert class_range(0) == (0, 0) and class_range(700, "exact") == (700, 700)
    with pytest.raises(WorkloadError):
        class_range(True)


def test_buckets_boundaries_members_and_weights():
    w = build_workload([{"shape": {"M": m}, "weight": m} for m in (511, 512, 700, 1023, 1024, 1)], BASE)
    buckets = bucket_workload(w, ["M"])
    assert [b.name for b in buckets] == [
        "M=1,N=4096,K=4096,dtype=bfloat16", "M=256..511,N=4096,K=4096,dtype=bfloat16",
        "M=512..1023,N=4096,K=4096,dtype=bfloat16", "M=1024..2047,N=4096,K=4096,dtype=bfloat16"]
    mid = buckets[2]
    assert [s["M"] for s in mid.shapes()] == [512, 700, 1023] and mid.weight == 512 + 700 + 1023
    assert mid.ranges == {"M": (512, 1023), "N": (4096, 4096), "K": (4096, 4096)}
    assert mid.fixed == {"dtype": "bfloat16"}
    assert mid.representative()["M"] == 1023  # the heaviest member
    assert mid.contains({"M": 900, "N": 4096, "K": 4096, "dtype": "bfloat16"})  # never measured, inside
    assert not mid.contains({"M": 1024, "N": 4096, "K": 4096, "dtype": "bfloat16"})
    assert not mid.contains({"M": 900, "N": 4096, "K": 4096, "dtype": "float16"})
    assert bucket_for(buckets, {"M": 300, "N": 4096, "K": 4096, "dtype": "bfloat16"}) is buckets[1]
    assert bucket_for(buckets, {"M": 5000, "N": 4096, "K": 4096, "dtype": "bfloat16"}) is None
    assert mid.store_range() == {"M": [512, 1023], "N": [4096, 4096], "K": [4096, 4096], "dtype": "bfloat16"}


def test_other_keys_split_buckets_exactly():
    w = build_workload([{"shape": {"M": 600, "N": 64}}, {"shape": {"M": 700, "N": 128}},
                        {"shape": {"M": 800, "N": 64, "dtype": "float16"}}], BASE)
    names = [b.name for b in bucket_workload(w, ["M"])]
    assert names == ["M=512..1023,N=64,K=4096,dtype=bfloat16", "M=512..1023,N=64,K=4096,dtype=float16",
                     "M=512..1023,N=128,K=4096,dtype=bfloat16"]


def test_bucketing_is_deterministic_whatever_the_order():
    shapes = [{"shape": {"M": m, "N": n}, "weight": 1} for m in (1, 3, 17, 300, 4096) for n in (64, 100)]
    first = bucket_workload(build_workload(shapes, BASE), ["M", "N"])
    rng = random.Random(7)
    for _ in range(5):
        rng.shuffle(shapes)
        again = bucket_workload(build_workload(shapes, BASE), ["M", "N"])
        assert [(b.name, b.shapes()) for b in again] == [(b.name, b.shapes()) for b in first]


def test_neighbours_are_nearest_along_each_key():
    w = build_workload([{"shape": {"M": m, "N": n}} for m in (1, 16, 32, 1024) for n in (64,)]
                       + [{"shape": {"M": 32, "N": 256}}], BASE)
    buckets = bucket_workload(w, ["M", "N"])
    by = {b.name.split(",K")[0]: b for b in buckets}
    # by distance in power-of-two classes: M below (1 class), N above (2), M above (5)
    assert [b.name.split(",K")[0] for b in bucket_neighbours(buckets, by["M=32..63,N=64..127"])] == [
        "M=16..31,N=64..127", "M=32..63,N=256..511", "M=1024..2047,N=64..127"]
    assert [b.name.split(",K")[0] for b in bucket_neighbours(buckets, by["M=1,N=64..127"])] == ["M=16..31,N=64..127"]
    with pytest.raises(WorkloadError, match="'Q'"):
        bucket_workload(w, ["Q"])
    with pytest.raises(WorkloadError, match="whole number"):
        bucket_workload(w, ["dtype"])
    assert isinstance(buckets[0], Bucket)


# -- stride patterns -----------------------------------------------------------------------------------------------

def test_stride_patterns():
    assert tensor_pattern([4, 6], [6, 1]) == "c"
    assert tensor_pattern([4, 1, 6], [6, 99, 1]) == "c"  # size-1 strides never matter
    assert tensor_pattern([6, 4], [1, 6]) == "p10"
    assert tensor_pattern([4, 3], [6, 1]) == "p01g"
    assert tensor_pattern([4, 6], [1, 0]) == "p0b1"
    assert stride_pattern([[4, 6], [6]], [[6, 1], [1]]) == "contiguous"
    assert stride_pattern([[4, 6], [6, 4]], [[6, 1], [1, 6]]) == "c,p10"


# -- capture -------------------------------------------------------------------------------------------------------

def _program():
    import torch

    a_small, a_big = torch.randn(3, 8), torch.randn(40, 8)
    b = torch.randn(8, 16)
    for _ in range(3):
        a_small @ b
    torch.mm(a_big, b)
    x = torch.randn(2, 5, 32, dtype=torch.bfloat16, requires_grad=True)
    y = torch.nn.functional.layer_norm(x, (32,))  # no weight: optional arguments absent
    y.float().sum().backward()
    torch.mm(torch.randn(8, 4).t(), b)  # a transposed A
    (torch.randn(5, 8, requires_grad=True) @ b).sum().backward()  # its gradient is an mm (5x16 @ 16x8): not a call


def test_capture_counts_shapes_of_the_reference_calls():
    mm = {"M": "0.0", "K": ["0.1", "1.0"], "N": "1.1"}
    cap = capture_workload(_program, "aten::mm", mm, BASE)
    got = {(e.shape["M"], e.shape["K"], e.shape["N"]): e.weight for e in cap.workload.entries}
    assert got == {(3, 8, 16): 3.0, (40, 8, 16): 1.0, (4, 8, 16): 1.0, (5, 8, 16): 1.0}
    assert cap.calls == 6 and cap.backward_skipped == 1 and cap.op == "aten::mm"
    assert cap.unmapped == ["dtype"] and all(e.shape["dtype"] == "bfloat16" for e in cap.workload.entries)
    pats = {json.loads(k)["M"]: v for k, v in cap.patterns.items()}
    assert pats[3] == {"contiguous": 3} and pats[4] == {"p10,c": 1}


def test_capture_folds_batch_dims_reads_dtype_and_skips_backward():
    import torch

    def prog():
        for shape in ((2, 5, 32), (10, 32), (2, 5, 32)):
            x = torch.randn(*shape, requires_grad=True)
            torch.nn.functional.layer_norm(x, (32,)).sum().backward()

    ln = {"M": "0.:-1", "N": ["0.-1", "1.-1", "2.:"], "dtype": "0.dtype"}
    cap = capture_workload(prog, torch.ops.aten.layer_norm, ln, {"M": 8192, "N": 4096, "dtype": "bfloat16"})
    assert [(e.shape, e.weight) for e in cap.workload.entries] == [
        ({"M": 10, "N": 32, "dtype": "float32"}, 3.0)]
    assert cap.calls == 3 and cap.unmapped == []


def test_capture_refuses_what_does_not_fit():
    import torch

    def prog():
        torch.mm(torch.randn(3, 8), torch.randn(8, 2))

    with pytest.raises(WorkloadError, match="no call of aten::bmm.*aten::mm"):
        capture_workload(prog, "aten::bmm", {"M": "0.0"}, BASE)
    with pytest.raises(WorkloadError, match="different values"):
        capture_workload(prog, "aten::mm", {"K": ["0.1", "1.1"]}, BASE)  # 8 vs 2: the mapping is wrong
    with pytest.raises(WorkloadError, match="called with 2 arguments"):
        capture_workload(prog, "aten::mm", {"K": ["0.1", "2.0"]}, BASE)  # a spec past the last argument
    with pytest.raises(WorkloadError, match="2 dimensions"):
        capture_workload(prog, "aten::mm", {"M": "0.2"}, BASE)
    with pytest.raises(WorkloadError, match="'Q'"):
        parse_mapping({"Q": "0.0"}, BASE)
    with pytest.raises(WorkloadError, match="ARG.SEL"):
        parse_mapping({"M": "x.0"}, BASE)
    assert parse_mapping_text("M=0.:-1, K=0.1|1.0,dtype=0.dtype", BASE) == {
        "M": ["0.:-1"], "K": ["0.1", "1.0"], "dtype": ["0.dtype"]}
    for bad in ("M", "M=0.0,M=1.0", "Q=0.0", "M=0", ""):
        with pytest.raises(WorkloadError):
            parse_mapping_text(bad, BASE)
    with pytest.raises(WorkloadError, match="cannot tell"):
        capture_workload(prog, torch.mm, {"M": "0.0"}, BASE)


def test_infer_mapping_from_a_kernel_file_then_capture():
    import torch

    def setup(M, N, dtype="float32", seed=0, device="cpu", **_):
        x = torch.randn(M, N, dtype=getattr(torch, dtype), device=device)
        w = torch.ones(N, dtype=x.dtype, device=device)
        return {"inputs": {"x": x, "w": w, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}

    def reference(x, w, y, M, N, **_):
        return torch.nn.functional.rms_norm(x, (N,), w)

    base = {"M": 8192, "N": 4096, "dtype": "float32"}
    op, mapping = infer_mapping(setup, reference, base)
    assert op == "aten::rms_norm"
    assert mapping == {"M": ["0.:-1"], "N": ["0.-1", "1.-1", "2.:"], "dtype": ["0.dtype"]}

    def model():
        w = torch.ones(64)
        for tokens in (1, 7, 7, 300):
            torch.nn.functional.rms_norm(torch.randn(2, tokens, 64), (64,), w)

    cap = capture_workload(model, op, mapping, base)
    assert [(e.shape["M"], e.shape["N"], e.weight) for e in cap.workload.entries] == [
        (2, 64, 1.0), (14, 64, 2.0), (600, 64, 1.0)]


def test_workload_import_pulls_no_torch():
    code = ("import sys, kernelpilot.workload; "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
