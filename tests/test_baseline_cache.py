"""The torch.compile baseline cache: what invalidates an entry (code, age, the eager canary, corruption), and the
CLI process of check/bench that no longer imports torch (the worker finds the device)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from kernelpilot.measure import baseline_cache as bc
from kernelpilot.measure.timing import TimingResult, summarize


def _timing(median_ns: float) -> TimingResult:
    samples = [median_ns * f for f in (0.99, 1.0, 1.01)]
    return TimingResult(timer="cuda_event", is_measurement=True, samples_ns=samples, n_samples=3,
                        **summarize(samples), n_warmup=1, warmup_ms=0.0, warmup_stable=True, flush_bytes=0,
                        l2_bytes=None)


def _module(source: str) -> types.ModuleType:
    mod = types.ModuleType("kp_fp_test")
    exec(compile(textwrap.dedent(source), "kp_fp_test.py", "exec"), mod.__dict__)
    for value in mod.__dict__.values():
        if isinstance(value, types.FunctionType):
            value.__module__ = "kp_fp_test"
    return mod


BASE = """
import math
SCALE = 2.0
def helper(x): return x * SCALE
def kernel_launch(x): return x + 1
def reference(x): return helper(x) + math.pi
"""


def test_fingerprint_follows_the_reference_and_its_helpers_not_the_kernel() -> None:
    fp = bc.code_fingerprint(_module(BASE).reference)
    assert fp == bc.code_fingerprint(_module(BASE).reference)  # deterministic across loads
    assert fp == bc.code_fingerprint(_module(BASE.replace("x + 1", "x + 2")).reference)  # kernel edited
    assert fp != bc.code_fingerprint(_module(BASE.replace("x * SCALE", "x * SCALE * SCALE")).reference)  # helper
    assert fp != bc.code_fingerprint(_module(BASE.replace("SCALE = 2.0", "SCALE = 3.0")).reference)  # constant
    assert fp != bc.code_fingerprint(_module(BASE.replace("+ math.pi", "- math.pi")).reference)  # reference


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNELPILOT_CACHE_DIR", str(tmp_path))
    return tmp_path / "baselines"


KEY = {"reference": "abc", "inputs": [["x", [8], [1], "torch.float32", "cuda"]], "gpu": "H100", "torch": "2.x"}


def test_store_then_lookup_reuses_within_the_canary(cache_dir: Path) -> None:
    assert bc.lookup(KEY, _timing(100_000))[0] is None  # empty cache: a miss
    path = bc.store(KEY, _timing(100_000), _timing(60_000))
    assert path is not None and path.parent == cache_dir
    entry, why = bc.lookup(KEY, _timing(102_000))
    assert entry is not None and entry.compiled.median_ns == 60_000 and "+2.0%" in why
    other = {**KEY, "gpu": "H200"}
    assert bc.lookup(other, _timing(100_000))[0] is None  # another GPU: another key


def test_eager_drift_beyond_the_canary_is_a_miss(cache_dir: Path) -> None:
    bc.store(KEY, _timing(100_000), _timing(60_000))
    entry, why = bc.lookup(KEY, _timing(104_000))
    assert entry is None and "eager moved +4.0%" in why
    assert bc.lookup(KEY, _timing(97_500))[0] is not None


def test_old_or_corrupt_entries_are_misses(cache_dir: Path) -> None:
    path = bc.store(KEY, _timing(100_000), _timing(60_000))
    data = json.loads(path.read_text())
    data["measured_at"] = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=25)).isoformat()
    path.write_text(json.dumps(data))
    entry, why = bc.lookup(KEY, _timing(100_000))
    assert entry is None and "h old" in why
    path.write_text("{not json")
    assert bc.lookup(KEY, _timing(100_000))[0] is None
    data["measured_at"] = dt.datetime.now(dt.timezone.utc).isoformat()
    data["key"] = {**KEY, "reference": "edited"}
    path.write_text(json.dumps(data))
    assert bc.lookup(KEY, _timing(100_000))[0] is None  # an entry whose key does not match is never used


def test_check_and_bench_cli_processes_never_import_torch(tmp_path: Path) -> None:
    """The parent of `check`/`bench` refuses any torch import; the commands still answer (the worker imports it)."""
    script = textwrap.dedent("""
        import sys
        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch imported in the CLI process")
        sys.meta_path.insert(0, NoTorch())
        from kernelpilot.cli import app
        app(sys.argv[1:])
    """)
    example = Path(__file__).resolve().parents[1] / "src" / "kernelpilot" / "examples" / "vector_add.py"
    for command in (["check", str(example), "--json"], ["bench", str(example), "--json"]):
        proc = subprocess.run([sys.executable, "-c", script, *command], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        result = json.loads(proc.stdout)
        assert ("passed" in result) if command[0] == "check" else (result["timing"]["n_samples"] > 0)
