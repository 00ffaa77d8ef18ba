"""``kernelpilot configs`` and the config store at run time (issue 26, "Tuned configs that persist and travel"):
key parts of a kernel file, a second process that imports an export and looks the same configs up without
measuring, entries of another arch or toolchain never used, export/import/merge round trips through the CLI,
bad input refused with nothing already stored lost, and a run-time lookup that imports neither torch nor Triton
and never raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EXAMPLES, ROOT
from kernelpilot.cli import app
from kernelpilot.store import ConfigStore
from kernelpilot.store import runtime
from kernelpilot.store.keys import NO_DTYPE, key_parts, literal_shape, source_hash, strides_of

runner = CliRunner()
TC = {"torch": "2.9.0", "triton": "3.5.0"}
#: A kernel file that leaves a marker beside itself when anything imports it; its SHAPE is a literal.
SENTINEL = ("import pathlib\npathlib.Path(__file__).with_suffix('.ran').write_text('imported')\n"
            "SHAPE = {'M': 4096, 'N': 2**10, 'dtype': 'float16'}\n")


@pytest.fixture()
def kernel(tmp_path: Path) -> Path:
    path = tmp_path / "sentinel_kernel.py"
    path.write_text(SENTINEL)
    return path


def cli(*args: str) -> tuple[int, dict, str]:
    """Run ``kernelpilot configs ARGS --json`` in this process: (exit code, the JSON object, stderr)."""
    res = runner.invoke(app, ["configs", *args, "--json"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, json.loads(res.stdout), res.stderr


def put_two(store: Path, kernel: Path, arch: str = "cpu", toolchain: dict | None = None) -> None:
    """Two decided configs of ``kernel`` (M buckets 512..1023 and 1024..2047) under this machine's key parts."""
    parts = key_parts(kernel, {"M": 600}, arch=arch, toolchain=toolchain)
    with ConfigStore.open(store) as s:
        parts.put(s, {"M": [512, 1023], "N": 1024}, {"BLOCK": 64, "num_warps": 4}, 1000.0,
                  evidence={"run_dir": "runs/t", "record_ids": ["e1"]})
        parts.put(s, {"M": [1024, 2047], "N": 1024}, {"BLOCK": 128, "num_warps": 8}, 2000.0)


# -- key parts ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["vector_add.py", "layer_norm.py"])
def test_source_hash_is_the_contract_hash_without_importing(name, tmp_path):
    from kernelpilot.kernels.contract import load_kernel

    kf = load_kernel(EXAMPLES / name, interpreted=True)
    assert source_hash(EXAMPLES / name) == kf.source_sha256
    assert literal_shape(EXAMPLES / name) == kf.shape  # 2**26 read as the number the import gives
    with_ref = load_kernel(EXAMPLES / name, EXAMPLES / "softmax.py", interpreted=True)
    assert source_hash(EXAMPLES / name, EXAMPLES / "softmax.py") == with_ref.source_sha256 != kf.source_sha256
    assert key_parts(kf, {"N": 64}, arch="sm_90", toolchain=TC) == \
        key_parts(str(EXAMPLES / name), {"N": 64}, arch="sm_90", toolchain=TC)


def test_a_cu_kernel_is_keyed_by_its_loaded_hash_headers_and_sidecar_included(tmp_path):
    from kernelpilot.api.configs import kernel_key
    from kernelpilot.kernels.contract import load_kernel

    cu = EXAMPLES / "cuda" / "sgemm_db.cu"
    kf = load_kernel(cu, interpreted=True)
    parts = kernel_key(cu, {"M": 64}, arch="sm_90", toolchain=TC)
    assert parts.kernel_hash == kf.source_sha256 and parts.shape == {**kf.shape, "M": 64}
    with pytest.raises(Exception, match="bytes alone"):
        source_hash(cu)  # its bytes alone are not its hash: the sidecar counts too
    with ConfigStore.open(tmp_path / "c.db") as s:
        kernel_key(cu, {"M": 64}, arch="sm_90").put(s, {**kf.shape, "M": [64, 127]}, {"TILE": 32}, 1000.0)
    code, found, _ = cli("lookup", str(cu), "--shape", "M=100", "--arch", "sm_90", "--store", str(tmp_path / "c.db"))
    assert code == 0 and found["config"] == {"TILE": 32} and found["kernel_hash"] == kf.source_sha256


def test_key_parts_fill_the_shape_and_read_dtype_and_strides(kernel):
    class T:  # a tensor as far as the store cares: .shape and .stride()
        def __init__(self, shape, stride):
            self.shape, self._stride = shape, stride

        def stride(self):
            return self._stride

    p = key_parts(kernel, {"M": 600}, arch="9.0", toolchain=TC)
    assert p.shape == {"M": 600, "N": 1024, "dtype": "float16"} and p.dtype == "float16" and p.arch == "sm_90"
    assert p.strides == "contiguous" and p.kernel_hash == source_hash(kernel)
    assert not kernel.with_suffix(".ran").exists()  # hashed and read, never imported
    transposed = key_parts(kernel, {}, arch="cpu", toolchain=TC, tensors={"x": T((4, 8), (1, 4)), "n": 3})
    assert transposed.strides == "p10" == strides_of([T((4, 8), (1, 4)), 3])
    assert key_parts("ab" * 32, {"M": 1}, arch="cpu", toolchain=TC).dtype == NO_DTYPE
    with pytest.raises(Exception, match="dtype"):
        key_parts(kernel, {"M": 1}, dtype="bfloat16", arch="cpu", toolchain=TC)


def test_a_shape_the_file_could_change_is_not_read_from_the_text(tmp_path):
    for body in ("SHAPE = {'M': 1}\nSHAPE['M'] = 2\n", "SHAPE = {'M': 1}\nSHAPE.update(M=2)\n",
                 "SHAPE = {'M': 1}\nglobals()['SHAPE'] = {'M': 2}\n", "SHAPE = dict(M=1)\n",
                 "SHAPE = {'M': 1}\nfrom os import *\n", "SHAPE = {'M': 1}\ndef f():\n    global SHAPE\n"):
        (tmp_path / "k.py").write_text(body)
        assert literal_shape(tmp_path / "k.py") is None, body
    (tmp_path / "k.py").write_text("SHAPE = {'M': 1}\nSHAPE = {'M': 1 << 4}\nprint(SHAPE)\n")
    assert literal_shape(tmp_path / "k.py") == {"M": 16}


# -- a second process, another machine's export ------------------------------------------------------------------

def test_a_second_process_imports_the_export_and_gets_the_same_configs_without_measuring(kernel, tmp_path):
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    put_two(home_a / "configs.db", kernel)
    code, exported, _ = cli("export", str(tmp_path / "team.jsonl"), "--store", str(home_a / "configs.db"))
    assert code == 0 and exported["written"] == 2
    here = {m: cli("lookup", str(kernel), "--shape", f"M={m}", "--store", str(home_a / "configs.db"))[1]["config"]
            for m in (512, 700, 1500)}
    assert here == {512: {"BLOCK": 64, "num_warps": 4}, 700: {"BLOCK": 64, "num_warps": 4},
                    1500: {"BLOCK": 128, "num_warps": 8}}
    env = {**os.environ, "KERNELPILOT_HOME": str(home_b), "PYTHONPATH": str(ROOT / "src")}
    env.pop("KERNELPILOT_CONFIG_STORE", None)

    def kp(*args: str) -> dict:
        proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "configs", *args, "--json"], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        return json.loads(proc.stdout)

    before = kp("lookup", str(kernel), "--shape", "M=700")
    assert before["found"] is False and "no config store" in before["reason"]
    taken = kp("import", str(tmp_path / "team.jsonl"))
    assert taken["store"] == str(home_b / "configs.db") and (taken["added"], taken["total"]) == (2, 2)
    there = {m: kp("lookup", str(kernel), "--shape", f"M={m}") for m in (700, 1500)}
    assert {m: r["config"] for m, r in there.items()} == {700: here[700], 1500: here[1500]}
    assert there[700]["entry"]["origin"] == "import:team.jsonl" and there[700]["entry"]["evidence"]["record_ids"] == ["e1"]
    assert not kernel.with_suffix(".ran").exists()  # the kernel was never imported, so nothing ran
    # library code in that process: the run-time lookup, neither torch nor Triton imported
    script = ("import json, sys\nfrom kernelpilot.store.keys import source_hash\n"
              "from kernelpilot.store.runtime import configs_for, last_reason\n"
              f"h = source_hash({str(kernel)!r})\n"
              "got = {m: configs_for(h, {'M': m, 'N': 1024, 'dtype': 'float16'}) for m in (512, 700, 1500, 4096)}\n"
              "print(json.dumps({'got': {str(k): v for k, v in got.items()}, 'why': last_reason(),\n"
              "                  'heavy': sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton'))}))\n")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["heavy"] == []
    assert data["got"] == {"512": here[512], "700": here[700], "1500": here[1500], "4096": None}
    assert "no stored range holds" in data["why"]


# -- another arch or toolchain -----------------------------------------------------------------------------------

def test_an_entry_of_another_arch_or_toolchain_is_not_used(kernel, tmp_path):
    store = tmp_path / "configs.db"
    put_two(store, kernel, arch="sm_80", toolchain=TC)
    base = ["lookup", str(kernel), "--shape", "M=700", "--store", str(store), "--toolchain", "torch=2.9.0,triton=3.5.0"]
    assert cli(*base, "--arch", "sm_80")[1]["config"] == {"BLOCK": 64, "num_warps": 4}  # the control: it is there
    code, other_arch, _ = cli(*base, "--arch", "sm_90")
    assert code == 0 and other_arch["found"] is False and other_arch["config"] is None
    assert "arch sm_80, not sm_90" in other_arch["reason"]
    code, other_tools, _ = cli("lookup", str(kernel), "--shape", "M=700", "--store", str(store), "--arch", "sm_80",
                               "--toolchain", '{"torch": "2.9.0", "triton": "3.6.0"}')
    assert other_tools["found"] is False and "toolchain" in other_tools["reason"]
    h = source_hash(kernel)
    shape = {"M": 700, "N": 1024, "dtype": "float16"}
    runtime.reload()
    assert runtime.configs_for(h, shape, arch="sm_80", toolchain=TC, path=store) == {"BLOCK": 64, "num_warps": 4}
    assert runtime.configs_for(h, shape, arch="sm_90", toolchain=TC, path=store) is None
    assert "arch" in runtime.last_reason()
    assert runtime.configs_for(h, shape, arch="sm_80", toolchain={**TC, "cuda": "12.8"}, path=store) is None
    assert "toolchain" in runtime.last_reason()
    assert runtime.configs_for(h, shape, arch="sm_80", toolchain=TC, strides="p10", path=store) is None


# -- round trips through the CLI ---------------------------------------------------------------------------------

def test_export_import_merge_round_trip_through_the_cli(kernel, tmp_path):
    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    put_two(a, kernel)
    assert cli("export", str(tmp_path / "a.jsonl"), "--store", str(a))[1]["written"] == 2
    code, first, _ = cli("import", str(tmp_path / "a.jsonl"), "--store", str(b))
    assert code == 0 and (first["read"], first["added"], first["kept"], first["total"]) == (2, 2, 0, 2)
    again = cli("import", str(tmp_path / "a.jsonl"), "--store", str(b))[1]
    assert (again["added"], again["kept"], again["total"]) == (0, 2, 2)  # importing twice changes nothing
    listed = {json.dumps(e["config"], sort_keys=True): e for e in cli("list", "--store", str(b))[1]["entries"]}
    originals = {json.dumps(e["config"], sort_keys=True): e for e in cli("list", "--store", str(a))[1]["entries"]}
    drop = ("origin",)
    assert {k: {f: v for f, v in e.items() if f not in drop} for k, e in listed.items()} == \
        {k: {f: v for f, v in e.items() if f not in drop} for k, e in originals.items()}
    assert {e["origin"] for e in listed.values()} == {"import:a.jsonl"}
    cli("export", str(tmp_path / "b.jsonl"), "--store", str(b))
    cli("export", str(tmp_path / "b2.jsonl"), "--store", str(b))
    assert (tmp_path / "b.jsonl").read_bytes() == (tmp_path / "b2.jsonl").read_bytes()  # stable bytes
    merged = cli("merge", str(a), "--store", str(c))[1]
    assert (merged["added"], merged["total"]) == (2, 2)
    assert cli("merge", str(a), "--store", str(c))[1]["added"] == 0
    # a different config for a stored key: kept beside it, listed as a conflict, the faster local one answers
    with ConfigStore.open(c) as s:
        key_parts(kernel, {"M": 600}, arch="cpu").put(s, {"M": [512, 1023], "N": 1024}, {"BLOCK": 32}, 900.0)
    conflicts = cli("conflicts", "--store", str(c))[1]
    assert conflicts["count"] == 1
    assert [e["config"] for e in conflicts["conflicts"][0]["entries"]] == [{"BLOCK": 32}, {"BLOCK": 64, "num_warps": 4}]
    assert cli("lookup", str(kernel), "--shape", "M=600", "--store", str(c))[1]["config"] == {"BLOCK": 32}
    assert cli("list", "--store", str(c), "--kernel", source_hash(kernel)[:10])[1]["count"] == 3
    assert cli("list", "--store", str(c), "--kernel", str(kernel), "--arch", "sm_90")[1]["count"] == 0


# -- bad input ---------------------------------------------------------------------------------------------------

def _snapshot(store: Path) -> list[dict]:
    with ConfigStore.open(store) as s:
        return [e.as_record() for e in s.entries()]


def test_bad_input_is_refused_and_nothing_stored_is_lost(kernel, tmp_path):
    store = tmp_path / "configs.db"
    put_two(store, kernel)
    before = _snapshot(store)
    good = json.dumps(before[0] | {"config": {"BLOCK": 4096}})  # a valid new line, then a broken one
    (tmp_path / "bad.jsonl").write_text(good + "\n{\"kernel_hash\": \"zz\"}\n")
    (tmp_path / "junk.db").write_bytes(b"this is not a database, " * 100)
    cases = [("import", str(tmp_path / "missing.jsonl"), "cannot read"),
             ("import", str(tmp_path / "bad.jsonl"), "bad.jsonl:2"),
             ("import", str(store), "is a SQLite file"),  # a store file given to import: the hint says merge
             ("merge", str(tmp_path / "junk.db"), "cannot be read as a config store"),
             ("merge", str(tmp_path / "missing.db"), "no config store"),
             ("merge", str(store), "the store itself")]
    for command, arg, words in cases:
        code, err, _ = cli(command, arg, "--store", str(store))
        assert code == 1 and err["error"] == "ConfigStoreError" and words in err["message"] and err["hint"], err
        res = runner.invoke(app, ["configs", command, arg, "--store", str(store)])
        assert res.exit_code == 1 and "error:" in res.stderr and "hint:" in res.stderr and not res.stdout.strip()
        assert _snapshot(store) == before, (command, arg)
    assert "merge" in cli("import", str(store), "--store", str(store))[1]["hint"]
    # a corrupt store is refused, and left as it was
    junk = (tmp_path / "junk.db").read_bytes()
    for args in (["import", str(tmp_path / "a.jsonl")], ["list"], ["conflicts"], ["export", str(tmp_path / "x.jsonl")],
                 ["lookup", str(kernel), "--shape", "M=600"]):
        if args[0] == "import":
            cli("export", args[1], "--store", str(store))
        code, err, _ = cli(*args, "--store", str(tmp_path / "junk.db"))
        assert code == 1 and err["error"] == "ConfigStoreError", (args, err)
    assert (tmp_path / "junk.db").read_bytes() == junk and not (tmp_path / "x.jsonl").exists()
    # a mistyped --store is an error, not an empty store; bad option syntax is a usage error (2)
    code, err, _ = cli("list", "--store", str(tmp_path / "nope.db"))
    assert code == 1 and "no config store" in err["message"] and not (tmp_path / "nope.db").exists()
    for bad in (["--shape", "{bad"], ["--shape", "M512"], ["--toolchain", "triton"]):
        code, err, _ = cli("lookup", str(kernel), *bad, "--store", str(store))
        assert code == 2 and err["error"] == "OptionError", bad
    assert _snapshot(store) == before


def test_the_runtime_lookup_never_raises_and_says_why(kernel, tmp_path):
    h = source_hash(kernel)
    shape = {"M": 700, "N": 1024, "dtype": "float16"}
    runtime.reload()
    assert runtime.configs_for(h, shape, path=tmp_path / "none.db") is None
    assert "no config store" in runtime.last_reason()
    (tmp_path / "junk.db").write_bytes(b"garbage " * 200)
    assert runtime.configs_for(h, shape, path=tmp_path / "junk.db") is None
    assert "cannot" in runtime.last_reason()
    store = tmp_path / "configs.db"
    assert runtime.configs_for(h, shape, arch="cpu", path=store) is None  # missing now: looked for again later
    put_two(store, kernel)
    assert runtime.configs_for(h, shape, arch="cpu", path=store) == {"BLOCK": 64, "num_warps": 4}
    assert runtime.last_reason().startswith("hit")
    for bad in ({"arch": "not-an-arch"}, {"toolchain": "x"}, {"dtype": "bfloat16"}):  # the shape says float16
        assert runtime.configs_for(h, shape, path=store, **bad) is None, bad
        assert runtime.last_reason().startswith("lookup failed"), runtime.last_reason()
    answer = runtime.explain(h, shape, arch="cpu", path=store)
    assert answer.entry is not None and answer.entry.evidence.record_ids == ["e1"]
    # loaded once: a config put after the first read is seen after reload()
    with ConfigStore.open(store) as s:
        key_parts(kernel, {"M": 700}, arch="cpu").put(s, {"M": 700, "N": 1024}, {"BLOCK": 16}, 5000.0)
    assert runtime.configs_for(h, shape, arch="cpu", path=store) == {"BLOCK": 64, "num_warps": 4}
    runtime.reload()
    assert runtime.configs_for(h, shape, arch="cpu", path=store) == {"BLOCK": 16}  # the exact range is more specific
