"""The config store (issue 26): put, lookup by key and range, export/import/merge and the conflict rule, schema,
and a lookup that imports neither torch nor Triton."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from kernelpilot.store import (KIND, SCHEMA_VERSION, ConfigStore, ConfigStoreError, lookup_config, lookup_entry,
                               normalize_arch, read_jsonl, runtime_toolchain)
from kernelpilot.store.lookup import lookup
from kernelpilot.workload import bucket_workload, workload_from_ranges

H = "ab" * 32
TC = {"triton": "3.5.0", "torch": "2.9.0", "cuda": "12.8"}
RANGE = {"M": [512, 1023], "N": [4096, 4096]}


def shape(m, n=4096):
    return {"M": m, "N": n}


@pytest.fixture()
def store(tmp_path):
    with ConfigStore.open(tmp_path / "configs.db") as s:
        yield s


def test_lookup_inside_and_outside_the_range(store):
    assert store.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"BLOCK": 64}, 1000.0,
                     evidence={"run_dir": "runs/t", "record_ids": ["e7"]}, gpu="NVIDIA H100") == "added"
    for m in (512, 700, 1023):
        assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(m)) == {"BLOCK": 64}
    for m in (511, 1024):
        assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(m)) is None
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(700, 2048)) is None  # N outside
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", {"M": 700}) is None  # not the range's keys
    entry = store.lookup_entry(H, "sm_90", TC, "bfloat16", "contiguous", shape(600))
    assert entry.evidence.record_ids == ["e7"] and entry.origin == "put" and entry.gpu == "NVIDIA H100"
    assert entry.decided_at.endswith("Z")


def test_another_arch_toolchain_dtype_or_strides_is_never_used(store):
    store.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"BLOCK": 64}, 1000.0)
    hit = dict(kernel_hash=H, arch="sm_90", toolchain=TC, dtype="bfloat16", strides="contiguous", shape=shape(600))
    assert store.lookup(**hit) == {"BLOCK": 64}
    assert store.lookup(**{**hit, "arch": "9.0"}) == {"BLOCK": 64}  # the same arch, written another way
    assert store.lookup(**{**hit, "dtype": "torch.bfloat16"}) == {"BLOCK": 64}
    for change in ({"arch": "sm_80"}, {"arch": "sm_90a"}, {"toolchain": {**TC, "triton": "3.4.0"}},
                   {"toolchain": {"triton": "3.5.0", "torch": "2.9.0"}}, {"dtype": "float16"},
                   {"strides": "p10,c"}, {"kernel_hash": "cd" * 32}):
        assert store.lookup(**{**hit, **change}) is None, change


def test_most_specific_range_then_local_then_fastest(store, tmp_path):
    store.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"BLOCK": 64}, 1000.0)
    store.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"BLOCK": 128}, 900.0)  # another config: both kept
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(600)) == {"BLOCK": 128}
    assert [[e.config["BLOCK"] for e in g] for g in store.conflicts()] == [[128, 64]]
    store.put(H, "sm_90", TC, "bfloat16", "contiguous", {"M": 600, "N": 4096}, {"BLOCK": 32}, 5000.0)
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(600)) == {"BLOCK": 32}  # exact shape first
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(601)) == {"BLOCK": 128}
    # a claim from elsewhere saying it is faster does not displace what was measured here
    with ConfigStore.open(tmp_path / "other.db") as other:
        other.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"BLOCK": 256}, 1.0)
    report = store.merge(tmp_path / "other.db")
    assert report.added == 1 and report.conflicts == 0  # the key already held two configs
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(601)) == {"BLOCK": 128}
    assert {e.config["BLOCK"]: e.origin for e in store.entries()}[256] == "merge:other.db"


def test_same_config_keeps_the_better_measurement_and_history(store):
    args = (H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"BLOCK": 64})
    assert store.put(*args, 1000.0, evidence={"record_ids": ["a"]}) == "added"
    assert store.put(*args, 1200.0, evidence={"record_ids": ["b"]}) == "kept"
    assert store.put(*args, 800.0, evidence={"record_ids": ["c"]}) == "improved"
    assert store.put(*args, 800.0, evidence={"record_ids": ["d"]}) == "kept"  # a tie keeps the stored one
    (entry,) = store.entries()
    assert entry.duration_ns == 800.0 and entry.evidence.record_ids == ["c"]
    assert [(h["record"]["evidence"]["record_ids"], h["outcome"]) for h in store.history()] == [
        (["a"], "added"), (["b"], "kept"), (["c"], "improved"), (["d"], "kept")]


def test_export_import_round_trip_is_stable(store, tmp_path):
    store.put(H, "sm_90", TC, "float16", "contiguous", {"N": [1, 1]}, {"BLOCK": 8, "num_warps": 1}, 10.0)
    store.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"num_warps": 4, "BLOCK": 64}, 1000.0,
              evidence={"run_dir": "runs/x", "record_ids": ["e1", "e2"]}, decided_at="2026-11-26T10:00:00Z")
    first = tmp_path / "a.jsonl"
    assert store.export(first) == 2
    lines = [json.loads(x) for x in first.read_text().splitlines()]
    assert [x["dtype"] for x in lines] == ["bfloat16", "float16"]  # stable order, not insertion order
    assert lines[0]["config"] == {"BLOCK": 64, "num_warps": 4} and lines[0]["format"] == 1
    with ConfigStore.open(tmp_path / "b.db") as b:
        report = b.import_(first)
        assert (report.added, report.improved, report.kept) == (2, 0, 0)
        assert b.import_(first).added == 0  # importing twice changes no config
        assert [(e.key, e.config, e.duration_ns, e.evidence, e.decided_at) for e in b.entries()] == [
            (e.key, e.config, e.duration_ns, e.evidence, e.decided_at) for e in store.entries()]
        assert {e.origin for e in b.entries()} == {"import:a.jsonl"}
        again = tmp_path / "b.jsonl"
        b.export(again)
    strip = [{k: v for k, v in json.loads(x).items() if k != "origin"} for x in again.read_text().splitlines()]
    assert strip == [{k: v for k, v in x.items() if k != "origin"} for x in lines]


def test_import_refuses_a_bad_line_and_takes_nothing(store, tmp_path):
    store.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"BLOCK": 64}, 1000.0)
    good = tmp_path / "good.jsonl"
    store.export(good)
    line = json.loads(good.read_text())
    for bad, why in (({**line, "duration_ns": -1}, "duration_ns"), ({**line, "arch": "hopper"}, "sm_XY"),
                     ({**line, "shape_range": {"M": [9, 1]}}, "lo <= hi"), ({**line, "format": 99}, "newer"),
                     ({**line, "extra": 1}, "extra")):
        f = tmp_path / "bad.jsonl"
        f.write_text(good.read_text() + json.dumps(bad) + "\n")
        with pytest.raises(ConfigStoreError, match=rf"bad.jsonl:2: .*{why}"):
            read_jsonl(f)
    with ConfigStore.open(tmp_path / "c.db") as c:
        with pytest.raises(ConfigStoreError):
            c.import_(f)
        assert c.entries() == []


def test_schema_version_table_and_foreign_files(tmp_path):
    p = tmp_path / "s.db"
    ConfigStore.open(p).close()
    conn = sqlite3.connect(p)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT version FROM schema_versions").fetchall() == [(SCHEMA_VERSION,)]
    assert conn.execute("SELECT value FROM meta WHERE name = 'kind'").fetchone()[0] == KIND
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(ConfigStoreError, match="newer"):
        ConfigStore.open(p)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(ConfigStoreError, match="not a kernelpilot config store"):
        ConfigStore.open(other)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ConfigStoreError):
        ConfigStore.open(junk)
    with pytest.raises(ConfigStoreError, match="not a kernelpilot config store"):
        lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(600), path=other)


def test_module_lookup_reads_the_file_and_a_missing_store_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_CONFIG_STORE", str(tmp_path / "env.db"))
    assert lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(600)) is None  # no file: a miss, nothing created
    assert not (tmp_path / "env.db").exists()
    with ConfigStore.open() as s:
        assert s.path == tmp_path / "env.db"
        s.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"BLOCK": 64}, 1000.0)
    assert lookup(H, "sm_90", TC, "bfloat16", "contiguous", shape(600)) == {"BLOCK": 64}
    assert lookup_entry(H, "sm_90", TC, "bfloat16", "contiguous", {**shape(600), "dtype": "bfloat16"}).config
    with pytest.raises(ConfigStoreError, match="dtype"):
        lookup(H, "sm_90", TC, "bfloat16", "contiguous", {**shape(600), "dtype": "float16"})


def test_a_bucket_goes_in_and_unmeasured_shapes_come_out(store):
    base = {"M": 4096, "N": 4096, "dtype": "bfloat16"}
    buckets = bucket_workload(workload_from_ranges("M=1:4096", base), ["M"])
    for i, b in enumerate(buckets):
        store.put(H, "sm_90", TC, "bfloat16", "contiguous", b.store_range(), {"BLOCK": 2 ** i}, 100.0 + i)
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", {"M": 1000, "N": 4096, "dtype": "bfloat16"}) == {
        "BLOCK": 2 ** [b.name.split(",")[0] for b in buckets].index("M=512..1023")}
    # the top bucket is its whole class, 4096..8191; past it nothing answers
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", {"M": 8191, "N": 4096}) == {"BLOCK": 2 ** 12}
    assert store.lookup(H, "sm_90", TC, "bfloat16", "contiguous", {"M": 8192, "N": 4096}) is None


def test_fixed_values_match_exactly_by_type(store):
    rng = {"N": [1, 64], "causal": True, "bias": None, "eps": 1e-5}
    store.put(H, "sm_90", TC, "float16", "contiguous", rng, {"B": 1}, 10.0)
    hit = {"N": 8, "causal": True, "bias": None, "eps": 1e-5}
    assert store.lookup(H, "sm_90", TC, "float16", "contiguous", hit) == {"B": 1}
    assert store.lookup(H, "sm_90", TC, "float16", "contiguous", {**hit, "causal": 1}) is None  # 1 is not True
    assert store.lookup(H, "sm_90", TC, "float16", "contiguous", {**hit, "causal": False}) is None
    assert store.lookup(H, "sm_90", TC, "float16", "contiguous", {**hit, "bias": 0}) is None


def test_bad_fields_are_typed_errors(store):
    with pytest.raises(ConfigStoreError, match="sm_XY"):
        store.put(H, "hopper", TC, "bfloat16", "contiguous", RANGE, {"B": 1}, 1.0)
    with pytest.raises(ConfigStoreError, match="duration_ns"):
        store.put(H, "sm_90", TC, "bfloat16", "contiguous", RANGE, {"B": 1}, float("nan"))
    with pytest.raises(ConfigStoreError, match="kernel_hash"):
        store.put("xyz", "sm_90", TC, "bfloat16", "contiguous", RANGE, {"B": 1}, 1.0)
    with pytest.raises(ConfigStoreError, match="is not dtype"):
        store.put(H, "sm_90", TC, "bfloat16", "contiguous", {**RANGE, "dtype": "float16"}, {"B": 1}, 1.0)
    assert normalize_arch("SM90") == normalize_arch("9.0") == "sm_90" and normalize_arch("sm_90a") == "sm_90a"


def test_lookup_module_imports_neither_torch_nor_triton(tmp_path):
    code = ("import kernelpilot.store.lookup as L; import sys; "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('torch', 'triton')); "
            f"print(L.lookup('{H}', 'sm_90', L.runtime_toolchain(), 'bfloat16', 'contiguous', {{'M': 1}}, "
            f"path={str(tmp_path / 'none.db')!r})); "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
    assert lookup_config is lookup


def test_runtime_toolchain_names_this_interpreter():
    import importlib.metadata

    tc = runtime_toolchain()
    assert tc["torch"] == importlib.metadata.version("torch")
    import torch

    assert tc.get("cuda") == torch.version.cuda  # None on a CPU build: left out
