"""Dispatch tables (issue 26): the model and its self-checks, sha-checked files, the winner rule, the shape lookup,
and the generated autotune config list and plain dispatcher."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import itertools
import json
import sys
from pathlib import Path

import pytest

from kernelpilot.dispatch import (Measurement, autotune_configs_source, bucket_for, choose_winner, lookup,
                                  make_bucket, make_dispatch, make_total, python_dispatcher_source, read_dispatch,
                                  select_config, stable_order_key, write_dispatch)
from kernelpilot.dispatch.model import KernelRef
from kernelpilot.errors import DispatchError, DispatchIntegrityError, ShapeOutOfRange

SMALL = {"BLOCK": 64, "num_warps": 2, "num_stages": 1}
LARGE = {"BLOCK": 256, "num_warps": 8, "num_stages": 1}
KERNEL = KernelRef(file_name="rms_norm.py", sha256="ab" * 32)


def row(m: int, duration_ns: float, weight: float = 1.0, rid: str | None = None) -> Measurement:
    return Measurement(shape={"M": m, "dtype": "float32"}, weight=weight, duration_ns=duration_ns, samples_n=20,
                       record_id=rid or f"r-{m}-{duration_ns}")


def table(*, small_hi: int = 1024, large_lo: int = 1025, gpu_name: str = "NVIDIA H100", default: bool = True,
          one_config: bool = False):
    """Two buckets over M: [1, small_hi] with SMALL, [large_lo, 16384] with LARGE (or SMALL for one_config)."""
    small = make_bucket("small", {"M": (1, small_hi)}, SMALL,
                        [row(1, 1000.0, 5), row(64, 1100.0, 3), row(1024, 2000.0, 1)], ["tune.json"])
    large = make_bucket("large", {"M": (large_lo, 16384)}, SMALL if one_config else LARGE,
                        [row(2048, 4000.0, 2), row(16384, 30000.0, 1)], ["buckets/large/tune.json"])
    single = make_total(LARGE, [row(1, 1500.0, 5), row(64, 1600.0, 3), row(1024, 2100.0, 1),
                                row(2048, 4000.0, 2), row(16384, 30000.0, 1)])
    lib = make_total(None, [row(1, 2000.0, 5), row(64, 2000.0, 3), row(1024, 3000.0, 1),
                            row(2048, 5000.0, 2), row(16384, 40000.0, 1)]) if default else None
    return make_dispatch(kernel=KERNEL, arch="sm_90", gpu_name=gpu_name, toolchain={"triton": "3.3.1"},
                         keys=["M"], buckets=[small, large], single_config=single, library_default=lib)


# --- the model ------------------------------------------------------------------------------------------------------

def test_totals_and_losses_are_derived_from_the_rows() -> None:
    t = table()
    assert t.buckets[0].weight == 9 and t.buckets[0].weighted_time_ns == 5 * 1000 + 3 * 1100 + 2000
    assert t.buckets[1].weighted_time_ns == 2 * 4000 + 30000
    assert t.table_weighted_time_ns == 10300 + 38000
    single = 5 * 1500 + 3 * 1600 + 2100 + 8000 + 30000
    assert t.single_config.weighted_time_ns == single
    assert t.single_config_loss_pct == pytest.approx((single - 48300) / 48300 * 100)
    assert t.library_default_loss_pct == pytest.approx((10000 + 6000 + 3000 + 10000 + 40000 - 48300) / 48300 * 100)


def test_a_stored_total_that_contradicts_its_rows_is_refused() -> None:
    body = table().model_dump(mode="json")
    body["buckets"][0]["weighted_time_ns"] = 1.0
    with pytest.raises(Exception, match="rows give"):
        type(table()).model_validate(body)
    body = table().model_dump(mode="json")
    body["single_config_loss_pct"] = 50.0
    with pytest.raises(Exception, match="single_config_loss_pct"):
        type(table()).model_validate(body)


def test_overlapping_ranges_are_refused_even_by_one_shared_value() -> None:
    with pytest.raises(DispatchError, match="'small'.*'large'.*overlap"):
        table(small_hi=1024, large_lo=1024)
    table(small_hi=1024, large_lo=1025)  # adjacent, not overlapping


def test_buckets_overlap_only_when_every_key_overlaps(tmp_path: Path) -> None:
    def bucket(name, m, n, cfg):
        return make_bucket(name, {"M": m, "N": n}, cfg, [Measurement(shape={"M": m[0], "N": n[0]}, weight=1,
                                                                     duration_ns=10.0, samples_n=1, record_id=name)])
    a, b = bucket("a", (1, 100), (1, 10), SMALL), bucket("b", (50, 200), (11, 20), LARGE)  # M overlaps, N does not
    single = make_total(SMALL, [Measurement(shape={"M": 1, "N": 1}, weight=1, duration_ns=10.0, samples_n=1,
                                            record_id="x"),
                                Measurement(shape={"M": 50, "N": 11}, weight=1, duration_ns=10.0, samples_n=1,
                                            record_id="y")])
    ok = make_dispatch(kernel=KERNEL, arch="sm_90", gpu_name="", toolchain={}, keys=["M", "N"], buckets=[a, b],
                       single_config=single)
    assert bucket_for(ok, {"M": 60, "N": 5}) == "a" and bucket_for(ok, {"M": 60, "N": 15}) == "b"
    mod = load(python_dispatcher_source(ok), tmp_path / "kp_dispatch_2d.py", "kp_dispatch_2d")
    assert mod.select({"M": 100, "N": 10}) == SMALL and mod.select({"M": 50, "N": 11}) == LARGE
    for shape in ({"M": 101, "N": 10}, {"M": 49, "N": 11}, {"M": 200, "N": 21}):
        with pytest.raises(mod.ShapeOutOfRange, match="a M in \\[1, 100\\], N in \\[1, 10\\]; b M in"):
            mod.select(shape)
    c = bucket("c", (50, 200), (5, 20), LARGE)  # both overlap a
    with pytest.raises(DispatchError, match="overlap"):
        make_dispatch(kernel=KERNEL, arch="sm_90", gpu_name="", toolchain={}, keys=["M", "N"], buckets=[a, c],
                      single_config=single)


def test_a_measured_shape_outside_its_bucket_is_refused() -> None:
    small = make_bucket("small", {"M": (1, 1024)}, SMALL, [row(1, 1000.0), row(2048, 900.0)])
    large = make_bucket("large", {"M": (1025, 16384)}, LARGE, [row(4096, 4000.0)])
    single = make_total(LARGE, [row(1, 1.0), row(2048, 1.0), row(4096, 1.0)])
    with pytest.raises(DispatchError, match="'small' lists shape M=2048.*falls in bucket 'large'"):
        make_dispatch(kernel=KERNEL, arch="sm_90", gpu_name="", toolchain={}, keys=["M"], buckets=[small, large],
                      single_config=single)


def test_comparison_rows_must_cover_the_tables_shapes_with_its_weights() -> None:
    small = make_bucket("small", {"M": (1, 1024)}, SMALL, [row(1, 1000.0, 5), row(64, 1000.0)])
    for rows in ([row(1, 1.0, 5)], [row(1, 1.0, 5), row(64, 1.0, 2)], [row(1, 1.0, 5), row(64, 1.0), row(8, 1.0)]):
        with pytest.raises(DispatchError, match="single_config is not measured at the table's shapes"):
            make_dispatch(kernel=KERNEL, arch="sm_90", gpu_name="", toolchain={}, keys=["M"], buckets=[small],
                          single_config=make_total(LARGE, rows))


@pytest.mark.parametrize("path", ["/etc/passwd", "../other/tune.json", "a/../../x", "C:/x"])
def test_evidence_paths_stay_inside_the_run_folder(path: str) -> None:
    with pytest.raises(DispatchError, match="not a path inside the run folder"):
        make_bucket("b", {"M": (1, 2)}, SMALL, [row(1, 1.0)], [path])


def test_bad_numbers_are_refused() -> None:
    with pytest.raises(Exception, match="duration_ns"):
        row(1, float("nan"))
    with pytest.raises(Exception, match="weight"):
        row(1, 1.0, weight=0)
    with pytest.raises(DispatchError, match="lo > hi"):
        make_bucket("b", {"M": (5, 1)}, SMALL, [row(1, 1.0)])


# --- the file -------------------------------------------------------------------------------------------------------

def test_write_then_read_round_trips_and_stores_the_body_hash(tmp_path: Path) -> None:
    t = table()
    digest = write_dispatch(t, tmp_path / "dispatch.json")
    raw = json.loads((tmp_path / "dispatch.json").read_text())
    assert raw["sha256"] == digest and len(digest) == 64
    assert read_dispatch(tmp_path / "dispatch.json") == t


def test_an_edited_file_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "dispatch.json"
    write_dispatch(table(), path)
    raw = json.loads(path.read_text())
    raw["buckets"][1]["config"]["BLOCK"] = 512  # an edit that keeps the table self-consistent
    path.write_text(json.dumps(raw))
    with pytest.raises(DispatchIntegrityError, match=f"{path}.*changed after it was written"):
        read_dispatch(path)
    del raw["sha256"]
    path.write_text(json.dumps(raw))
    with pytest.raises(DispatchIntegrityError, match="no sha256"):
        read_dispatch(path)


def test_a_rehashed_file_that_contradicts_itself_is_still_refused(tmp_path: Path) -> None:
    from kernelpilot.dispatch import body_sha256

    path = tmp_path / "dispatch.json"
    write_dispatch(table(), path)
    raw = json.loads(path.read_text())
    del raw["sha256"]
    raw["buckets"][1]["ranges"]["M"] = [1000, 16384]  # now overlaps 'small'
    raw["sha256"] = body_sha256(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(DispatchError, match="overlap"):
        read_dispatch(path)


def test_other_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dispatch.json"
    path.write_text('{"kind": "something-else"}')
    with pytest.raises(DispatchError, match="not a kernelpilot dispatch table"):
        read_dispatch(path)
    path.write_text("{not json")
    with pytest.raises(DispatchError, match="cannot read"):
        read_dispatch(path)


# --- the winner rule ------------------------------------------------------------------------------------------------

SHAPES = [({"M": 1}, 3.0), ({"M": 64}, 1.0)]


def cand(config: dict, at1: list[float], at64: list[float]):
    return config, [({"M": 1}, at1), ({"M": 64}, at64)]


def test_the_fastest_by_weighted_median_wins_when_clearly_faster() -> None:
    slow = cand(SMALL, [100, 101, 102], [200, 200, 200])
    fast = cand(LARGE, [50, 51, 52], [100, 100, 100])
    win = choose_winner([slow, fast], SHAPES)
    assert win.config == LARGE and win.weighted_median_ns == 3 * 51 + 100
    assert [s.tied for s in win.ranking] == [True, False]


def test_a_tie_inside_the_noise_goes_to_fewer_resources_whatever_the_order() -> None:
    a = cand({"BLOCK": 128, "num_warps": 8, "num_stages": 2}, [100.0], [100.0])   # fastest, 16 warp-stages
    b = cand({"BLOCK": 256, "num_warps": 4, "num_stages": 2}, [100.5], [100.5])  # +0.5 %: tied, 8 warp-stages
    c = cand({"BLOCK": 64, "num_warps": 4, "num_stages": 2}, [100.9], [100.0])   # tied, 8, smaller tiles
    d = cand({"BLOCK": 16, "num_warps": 1, "num_stages": 1}, [103.0], [103.0])   # 3 % slower: not tied
    winners = {json.dumps(choose_winner(list(p), SHAPES).config, sort_keys=True)
               for p in itertools.permutations([a, b, c, d])}
    assert winners == {json.dumps(c[0], sort_keys=True)}
    win = choose_winner([a, b, c, d], SHAPES)
    assert win.fastest == a[0] and "inside the noise" in win.reason
    assert choose_winner([a, b, c, d], SHAPES, tie_pct=0.0).config == a[0]


def test_overlapping_quartiles_are_a_tie_even_beyond_the_percentage() -> None:
    fast = cand({"BLOCK": 128, "num_warps": 8}, [90, 100, 130], [100, 100, 100])
    noisy = cand({"BLOCK": 64, "num_warps": 4}, [95, 110, 200], [100, 100, 100])  # 7.5 % slower, q1 < fast q3
    assert choose_winner([fast, noisy], SHAPES).config == noisy[0]
    quiet = cand({"BLOCK": 64, "num_warps": 4}, [125, 125, 125], [125, 125, 125])
    assert choose_winner([fast, quiet], SHAPES).config == fast[0]


def test_equal_scores_resolve_by_the_canonical_json() -> None:
    x = cand({"BLOCK": 64, "num_warps": 4, "EVEN": 1}, [100.0], [100.0])
    y = cand({"BLOCK": 64, "num_warps": 4, "EVEN": 0}, [100.0], [100.0])
    assert choose_winner([x, y], SHAPES).config == y[0] == choose_winner([y, x], SHAPES).config
    assert stable_order_key(x[0])[:2] == stable_order_key(y[0])[:2] == (4, 64)


def test_a_candidate_not_measured_at_every_shape_cannot_win() -> None:
    partial = (LARGE, [({"M": 1}, [1.0])])  # much faster, but never run at M=64
    full = cand(SMALL, [100.0], [100.0])
    win = choose_winner([partial, full], SHAPES)
    assert win.config == SMALL and "M" in next(iter(win.excluded.values()))
    with pytest.raises(DispatchError, match="no candidate is measured at every shape"):
        choose_winner([partial], SHAPES)


def test_winner_input_errors() -> None:
    with pytest.raises(DispatchError, match="candidate twice"):
        choose_winner([cand(SMALL, [1.0], [1.0]), cand(dict(reversed(SMALL.items())), [2.0], [2.0])], SHAPES)
    with pytest.raises(DispatchError, match="finite times"):
        choose_winner([cand(SMALL, [float("inf")], [1.0])], SHAPES)


# --- the lookup and the generated modules ---------------------------------------------------------------------------

def load(source: str, path: Path, name: str):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Index:
    """An integer-like value (as NumPy integers are): has ``__index__``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_lookup_ranges_are_inclusive_and_misses_name_the_shape_and_ranges() -> None:
    t = table()
    assert [bucket_for(t, {"M": m}) for m in (1, 1024, 1025, 16384)] == ["small", "small", "large", "large"]
    assert bucket_for(t, {"M": Index(2000)}) == "large" and select_config(t, {"M": 5}) == SMALL
    for shape in ({"M": 0}, {"M": 16385}):
        with pytest.raises(ShapeOutOfRange, match=rf"'M': {shape['M']}.*small M in \[1, 1024\]; large M in "
                                                  r"\[1025, 16384\]"):
            bucket_for(t, shape)
    with pytest.raises(ShapeOutOfRange, match="lacks the dispatch key 'M'"):
        bucket_for(t, {"N": 5})
    for bad in (True, 5.0, "5"):
        with pytest.raises(ShapeOutOfRange, match="not an integer"):
            bucket_for(t, {"M": bad})


def test_python_dispatcher_imports_nothing_and_agrees_with_kernelpilot(tmp_path: Path) -> None:
    t = table()
    source = python_dispatcher_source(t)
    assert not [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert inspect.getsource(lookup.find_bucket) in source  # the one implementation, copied, not rewritten
    mod = load(source, tmp_path / "kp_dispatch_plain.py", "kp_dispatch_plain")
    assert mod.select({"M": 1024}) == SMALL and mod.select({"M": 1025}) == LARGE
    assert mod.bucket_name({"M": 1, "K": 7}) == "small"
    mod.select({"M": 1})["BLOCK"] = 0  # a copy: the table is not changed through it
    assert mod.select({"M": 1}) == SMALL
    for m in list(range(0, 40)) + list(range(1000, 1050)) + [16383, 16384, 16385, 10 ** 9]:
        try:
            expected = bucket_for(t, {"M": m})
        except ShapeOutOfRange as exc:
            with pytest.raises(mod.ShapeOutOfRange) as got:
                mod.bucket_name({"M": m})
            assert str(got.value) == exc.message and isinstance(got.value, LookupError)
        else:
            assert mod.bucket_name({"M": m}) == expected


def test_names_from_the_table_cannot_inject_code(tmp_path: Path) -> None:
    evil = 'H100"""\nraise SystemExit("injected")\n"""'
    t = table(gpu_name=evil)
    mod = load(python_dispatcher_source(t), tmp_path / "kp_dispatch_evil.py", "kp_dispatch_evil")
    assert evil in mod.__doc__ and mod.select({"M": 3}) == SMALL
    assert 'raise SystemExit("injected")' not in autotune_configs_source(t).splitlines()


def _autotuned(mod, bench_calls: list):
    import triton
    import triton.language as tl

    def counting_bench(fn, quantiles):
        bench_calls.append(1)
        return [1.0, 1.0, 1.0]

    @triton.autotune(configs=mod.CONFIGS, key=mod.KEY, prune_configs_by=mod.PRUNE_CONFIGS_BY, do_bench=counting_bench)
    @triton.jit
    def write_block(out_ptr, n_rows, BLOCK: tl.constexpr):
        tl.store(out_ptr, BLOCK)

    return write_block


def test_autotune_list_runs_the_buckets_config_without_benchmarking(tmp_path: Path) -> None:
    import torch

    t = table()
    mod = load(autotune_configs_source(t, arg_names={"M": "n_rows"}), tmp_path / "kp_dispatch_at.py", "kp_dispatch_at")
    assert mod.KEY == ["n_rows"] and len(mod.CONFIGS) == 2
    bench: list = []
    kernel = _autotuned(mod, bench)
    out = torch.zeros(1, dtype=torch.int32)
    for n_rows, block in ((1024, 64), (1025, 256), (3, 64), (16384, 256)):
        kernel[(1,)](out, n_rows)
        assert int(out[0]) == block, n_rows
        assert kernel.best_config.num_warps == (2 if block == 64 else 8)
    kernel[(1,)](out, n_rows=2048)  # the key as a keyword argument
    assert int(out[0]) == 256
    assert bench == []
    with pytest.raises(mod.ShapeOutOfRange, match=r"'M': 16385"):
        kernel[(1,)](out, 16385)


def test_one_config_for_every_bucket_still_refuses_a_shape_outside(tmp_path: Path) -> None:
    import torch

    mod = load(autotune_configs_source(table(one_config=True), arg_names={"M": "n_rows"}),
               tmp_path / "kp_dispatch_one.py", "kp_dispatch_one")
    assert len(mod.CONFIGS) == 2 and mod.BUCKET_CONFIG == [0, 0]
    bench: list = []
    kernel = _autotuned(mod, bench)
    out = torch.zeros(1, dtype=torch.int32)
    kernel[(1,)](out, 5000)
    assert int(out[0]) == 64 and bench == []
    with pytest.raises(mod.ShapeOutOfRange):
        kernel[(1,)](out, 0)


def test_arg_names_must_name_table_keys() -> None:
    with pytest.raises(DispatchError, match="does not dispatch on"):
        autotune_configs_source(table(), arg_names={"N": "n_cols"})


def test_autotune_kwargs_alone_pick_the_buckets_config(tmp_path: Path) -> None:
    import torch
    import triton
    import triton.language as tl

    mod = load(autotune_configs_source(table()), tmp_path / "kp_dispatch_kw.py", "kp_dispatch_kw")
    assert mod.AUTOTUNE_KWARGS["key"] == ["M"] and mod.AUTOTUNE_KWARGS["do_bench"] is mod.no_bench

    @triton.autotune(**mod.AUTOTUNE_KWARGS)
    @triton.jit
    def write_block(out_ptr, M, BLOCK: tl.constexpr):
        tl.store(out_ptr, BLOCK)

    out = torch.zeros(1, dtype=torch.int32)
    write_block[(1,)](out, 7)
    assert int(out[0]) == 64
    write_block[(1,)](out, 9000)
    assert int(out[0]) == 256


# --- evidence -------------------------------------------------------------------------------------------------------

def _records(t) -> dict[str, dict]:
    """The records a honest run would hold for every row of ``t``: the row's config, shape, median and samples."""
    out = {}
    sources = [(b.config, b.measured) for b in t.buckets] + [(t.single_config.config, t.single_config.measured),
                                                             (None, t.library_default.measured)]
    for config, rows in sources:
        for r in rows:
            samples = [r.duration_ns * 0.99] * 9 + [r.duration_ns] * 2 + [r.duration_ns * 1.01] * 9
            out[r.record_id] = {"config": dict(config or {"BLOCK": 128}), "shape": dict(r.shape), "status": "ok",
                                "duration_ns": r.duration_ns, "samples_ns": samples}
    return out


def test_rows_borne_out_by_their_records_pass_and_each_contradiction_is_named() -> None:
    from kernelpilot.dispatch import evidence_problems

    t = table()
    records = _records(t)
    assert evidence_problems(t, records.get) == []
    rid = t.buckets[0].measured[0].record_id  # cited by this row only
    cases = [
        ("config", LARGE, "is of config"),
        ("shape", {"M": 4096, "dtype": "float32"}, "is at shape M=4096"),
        ("status", "wrong_result", "status 'wrong_result'"),
        ("duration_ns", 3000.0, "has duration_ns 3000.0"),
        ("samples_ns", [1000.0] * 19, "holds 19 samples"),
        ("samples_ns", [3000.0] * 20, "median of its samples is 3000.0"),
    ]
    for field, value, message in cases:
        changed = {**records, rid: {**records[rid], field: value}}
        problems = evidence_problems(t, changed.get)
        # a record whose median is not the row's is also not the median of its own samples: two problems
        assert len(problems) == (2 if field == "duration_ns" else 1), (field, problems)
        assert message in problems[0]["problem"], (field, problems)
        assert "bucket 'small', shape M=1,dtype=float32" in problems[0]["problem"]
    missing = {k: v for k, v in records.items() if k != rid}
    assert [p["problem"] for p in evidence_problems(t, missing.get)] == [
        f"bucket 'small', shape M=1,dtype=float32: record {rid!r} is not in the run"]


def test_the_lookup_module_can_be_embedded_as_it_is() -> None:
    """Generated modules copy lookup.py's functions: it may hold no import (a ``from __future__`` line in the middle
    of a module is a SyntaxError) and nothing at module level but its docstring and functions."""
    tree = ast.parse(inspect.getsource(lookup))
    kinds = {type(node).__name__ for node in tree.body[1:]}
    assert kinds == {"FunctionDef"}
