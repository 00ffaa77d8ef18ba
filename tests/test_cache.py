"""The evaluation cache on real files: round trip, last write wins, torn and corrupt lines, contexts, a process
killed mid-run and resumed without repeating work, list/show/clear, and the replay runner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kernelpilot.errors import SearchError
from kernelpilot.search.cache import (
    CacheContext,
    EvaluationCache,
    NotInCache,
    ReplayRunner,
    cache_dir,
    clear_cache,
    list_caches,
    read_cache_file,
    show_cache,
)
from kernelpilot.search.model import Evaluation, config_key


def ctx(**over) -> CacheContext:
    fields = {"kernel": "softmax", "kernel_sha256": "ab" * 32, "shape": {"M": 64, "N": 128, "dtype": "float32"},
              "gpu": "NVIDIA H200", "driver": "550.54.15", "torch": "2.13.0", "triton": "3.5.0",
              "python": "3.11.9", "interpreted": False}
    return CacheContext(**{**fields, **over})


def cfg(block: int, warps: int = 4) -> dict:
    return {"BLOCK": block, "num_warps": warps}


def ev(block: int, duration: float | None = 1000.0, status: str = "ok", **kw) -> Evaluation:
    return Evaluation(config=cfg(block), status=status, duration_ns=duration if status == "ok" else None,
                      samples_ns=[duration] * 3 if duration and status == "ok" else [], worker="cuda:0", **kw)


def record_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


# ---------------------------------------------------------------- basics


def test_round_trip_and_reopen(tmp_path):
    cache = EvaluationCache(ctx(), tmp_path)
    assert len(cache) == 0 and cache.get(cfg(64)) is None and not cache.path.exists()
    first = ev(64, 1234.5, wall_s=0.8, compile_s=0.5, static={"registers_per_thread": 32, "spills": 0},
               card={"class": "memory"}, message="note")
    cache.put(first)
    cache.put(ev(128, status="compile_error", message="OutOfResources: shared memory"))
    assert cache.path == tmp_path / ctx().file_name() and cache.path.name.startswith("softmax-")
    got = cache.get({"num_warps": 4, "BLOCK": 64})  # key order does not matter
    assert got is not None and got.cached and got.duration_ns == 1234.5
    assert got.model_dump(exclude={"cached"}) == first.model_dump(exclude={"cached"})
    assert cfg(64) in cache and config_key(cfg(128)) in cache and cfg(256) not in cache
    # a fresh process's view: everything back, failures included, header first
    again = EvaluationCache(ctx(), tmp_path)
    assert len(again) == 2 and again.skipped_lines == 0 and again.warnings == []
    assert [e.status for e in again.evaluations()] == ["ok", "compile_error"]
    assert all(e.cached for e in again.evaluations())
    header, *records = [json.loads(line) for line in record_lines(again.path)]
    assert header["kind"] == "kernelpilot.cache" and header["key"] == ctx().key()
    assert CacheContext.model_validate(header["context"]) == ctx()
    assert records[0]["key"] == config_key(cfg(64)) and records[0]["recorded_at"].endswith("+00:00")
    assert records[0]["evaluation"]["cached"] is False


def test_last_write_wins(tmp_path):
    cache = EvaluationCache(ctx(), tmp_path)
    cache.put(ev(64, 2000.0))
    cache.put(ev(128, 1500.0))
    cache.put(ev(64, status="timeout"))
    cache.put(ev(64, 900.0))
    assert cache.get(cfg(64)).duration_ns == 900.0 and len(cache) == 2
    reopened = EvaluationCache(ctx(), tmp_path)
    assert reopened.get(cfg(64)).duration_ns == 900.0 and reopened.records == 4 and len(reopened) == 2
    assert [e.config["BLOCK"] for e in reopened.evaluations()] == [64, 128]


def test_torn_last_line_tolerated_and_next_append_intact(tmp_path):
    cache = EvaluationCache(ctx(), tmp_path)
    for b in (16, 32, 64):
        cache.put(ev(b, 100.0 * b))
    full = json.dumps({"key": config_key(cfg(128)), "evaluation": ev(128).model_dump(), "recorded_at": "x"})
    with open(cache.path, "a") as f:
        f.write(full[: len(full) // 2])  # a crash mid-write: half a line, no newline
    torn = EvaluationCache(ctx(), tmp_path)
    assert len(torn) == 3 and torn.skipped_lines == 1 and cfg(128) not in torn
    assert len(torn.warnings) == 1 and "line 5" in torn.warnings[0] and "torn" in torn.warnings[0]
    # the next append starts a fresh line: the new record is whole, the fragment stays one skipped line
    torn.put(ev(256, 7.0))
    assert torn.get(cfg(256)).duration_ns == 7.0 and torn.skipped_lines == 1
    after = EvaluationCache(ctx(), tmp_path)
    assert len(after) == 4 and after.skipped_lines == 1 and "line 5" in after.warnings[0]
    assert after.get(cfg(256)).duration_ns == 7.0


def test_corrupt_middle_line_skipped_counted_and_named(tmp_path):
    cache = EvaluationCache(ctx(), tmp_path)
    for b in (16, 32, 64, 128):
        cache.put(ev(b, float(b)))
    lines = record_lines(cache.path)
    lines[2] = lines[2][:40] + "\x00garbage" + lines[2][60:]  # record of BLOCK=32, line 3
    lines[3] = json.dumps({"key": "k", "evaluation": {"config": {}, "status": "exploded"}})  # does not validate
    cache.path.write_text("\n".join(lines) + "\n")
    reread = EvaluationCache(ctx(), tmp_path)
    assert reread.skipped_lines == 2
    assert sorted(e.config["BLOCK"] for e in reread.evaluations()) == [16, 128]
    assert any("line 3" in w for w in reread.warnings) and any("line 4" in w for w in reread.warnings)
    summary, evals = read_cache_file(cache.path)
    assert summary.skipped_lines == 2 and summary.configs == 2 and len(evals) == 2


def test_context_changes_give_a_different_file(tmp_path):
    base = ctx()
    changed = [ctx(kernel_sha256="cd" * 32), ctx(shape={"M": 64, "N": 256, "dtype": "float32"}),
               ctx(shape={"M": 64, "N": 128, "dtype": "float16"}), ctx(gpu="NVIDIA H100 80GB HBM3"),
               ctx(driver="560.1"), ctx(torch="2.12.0"), ctx(triton="3.4.0"), ctx(python="3.12.1"),
               ctx(interpreted=True)]
    keys = {base.key()} | {c.key() for c in changed}
    assert len(keys) == 1 + len(changed)
    assert ctx(shape={"dtype": "float32", "N": 128, "M": 64}).key() == base.key()  # order-free
    EvaluationCache(base, tmp_path).put(ev(64, 10.0))
    other = EvaluationCache(ctx(gpu="NVIDIA H100 80GB HBM3"), tmp_path)
    assert other.path != EvaluationCache(base, tmp_path).path and len(other) == 0 and other.get(cfg(64)) is None


def test_adding_configs_invalidates_nothing(tmp_path):
    cache = EvaluationCache(ctx(), tmp_path)
    for b in (16, 32):
        cache.put(ev(b, float(b)))
    # a bigger search space later: same context, old records still answer, new configs are simply missing
    bigger = EvaluationCache(ctx(), tmp_path)
    space = [cfg(b) for b in (16, 32, 64, 128)]
    assert [c in bigger for c in space] == [True, True, False, False]


def test_file_of_another_context_is_refused(tmp_path):
    a = EvaluationCache(ctx(), tmp_path)
    a.put(ev(64))
    b_ctx = ctx(gpu="other")
    (tmp_path / b_ctx.file_name()).write_bytes(a.path.read_bytes())  # copied by hand under the wrong name
    with pytest.raises(SearchError, match="another context"):
        EvaluationCache(b_ctx, tmp_path)


def test_cache_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELPILOT_CACHE", raising=False)
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / "cache"
    monkeypatch.setenv("KERNELPILOT_CACHE", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
    assert cache_dir(tmp_path / "explicit") == tmp_path / "explicit"
    EvaluationCache(ctx(), None).put(ev(64))
    assert (tmp_path / "elsewhere" / ctx().file_name()).is_file()


def test_shared_file_between_caches(tmp_path):
    one, two = EvaluationCache(ctx(), tmp_path), EvaluationCache(ctx(), tmp_path)
    one.put(ev(64, 5.0))
    assert two.get(cfg(64)).duration_ns == 5.0  # a miss re-reads what the other appended
    two.put(ev(128, 6.0))
    one.put(ev(256, 7.0))
    assert len(one) == len(two) == 3 and one.skipped_lines == two.skipped_lines == 0


# ---------------------------------------------------------------- killed mid-run, then resumed

CHILD = r"""
import sys, time
from kernelpilot.search.cache import CacheContext, EvaluationCache
from kernelpilot.search.model import Evaluation, config_key
context, root, mode, n, delay = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
cache = EvaluationCache(CacheContext.model_validate_json(context), root)
for i in range(n):
    config = {"BLOCK": 16 * (i + 1), "num_warps": 4}
    if mode == "resume" and config in cache:
        continue
    time.sleep(delay)  # the evaluation
    cache.put(Evaluation(config=config, status="ok", duration_ns=1000.0 + i, samples_ns=[1000.0 + i] * 40,
                         worker=mode))
    print(config_key(config), flush=True)  # after put returned: durable (fsync'd)
"""
N_CONFIGS = 200


def all_keys() -> list[str]:
    return [config_key({"BLOCK": 16 * (i + 1), "num_warps": 4}) for i in range(N_CONFIGS)]


def child(mode: str, root: Path, delay: float, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, ctx().model_dump_json(), str(root), mode, str(N_CONFIGS),
                             str(delay)], stdout=subprocess.PIPE, text=True, **kw)


def test_survives_sigkill_mid_run_and_resumes_without_repeating(tmp_path):
    proc = child("fill", tmp_path, delay=0.005)
    reported: list[str] = []
    try:
        while len(reported) < 25:
            line = proc.stdout.readline()
            assert line, "the child died before writing 25 records"
            reported.append(line.rstrip("\n"))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
    finally:
        proc.kill() if proc.poll() is None else None
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    reported += rest.split("\n")[:-1]  # complete lines only
    assert 25 <= len(reported) < N_CONFIGS, "the kill should land mid-run"

    cache = EvaluationCache(ctx(), tmp_path)
    cached = {e.key for e in cache.evaluations()}
    assert set(reported) <= cached  # everything reported was durable
    assert len(cached) - len(reported) in (0, 1)  # at most the record written just before the kill
    for e in cache.evaluations():
        assert e.ok and e.duration_ns == 1000.0 + (e.config["BLOCK"] // 16 - 1) and len(e.samples_ns) == 40
    # every complete line is readable; only a torn last line may be skipped
    raw = cache.path.read_bytes().split(b"\n")
    assert all(json.loads(line) for line in raw[:-1])
    assert cache.skipped_lines == (1 if raw[-1] else 0)

    # resume: a second process given every config evaluates only the missing ones
    resumed = child("resume", tmp_path, delay=0.0)
    out, _ = resumed.communicate(timeout=60)
    assert resumed.returncode == 0
    evaluated = out.split("\n")[:-1]
    assert len(evaluated) == len(set(evaluated)) == N_CONFIGS - len(cached)
    assert set(evaluated).isdisjoint(cached)
    final = EvaluationCache(ctx(), tmp_path)
    assert {e.key for e in final.evaluations()} == set(all_keys())
    keys_in_file = Counter(json.loads(line)["key"] for line in record_lines(final.path)[1:] if line.strip()
                           and _valid(line))
    assert set(keys_in_file.values()) == {1}, "no config was evaluated twice"
    assert final.skipped_lines == cache.skipped_lines


def _valid(line: str) -> bool:
    try:
        json.loads(line)
        return True
    except ValueError:
        return False


def test_two_processes_append_to_one_file(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD.replace('"num_warps": 4', f'"num_warps": {w}'),
                               ctx().model_dump_json(), str(tmp_path), "fill", "60", "0"],
                              stdout=subprocess.PIPE, text=True) for w in (4, 8)]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    cache = EvaluationCache(ctx(), tmp_path)
    assert len(cache) == 120 and cache.skipped_lines == 0 and cache.records == 120
    assert {e.key for e in cache.evaluations()} == {k for out in outs for k in out.split()}
    lines = record_lines(cache.path)
    assert json.loads(lines[0])["kind"] == "kernelpilot.cache" and len(lines) == 121


# ---------------------------------------------------------------- list / show / clear


def fill_two(root: Path) -> tuple[EvaluationCache, EvaluationCache]:
    a = EvaluationCache(ctx(), root)
    for b, d in ((16, 300.0), (32, 200.0), (64, 250.0)):
        a.put(ev(b, d))
    a.put(ev(128, status="nan", message="NaN in output"))
    a.put(ev(32, 210.0))  # supersedes 200.0
    b = EvaluationCache(ctx(kernel="matmul", shape={"M": 512, "N": 512, "K": 512, "dtype": "float16"}), root)
    b.put(ev(64, status="compile_error"))
    return a, b


def test_list_show_clear(tmp_path):
    assert list_caches(tmp_path / "missing") == []
    a, b = fill_two(tmp_path)
    (tmp_path / "notes.txt").write_text("not a cache")
    summaries = list_caches(tmp_path)
    assert [s.kernel for s in summaries] == ["matmul", "softmax"]
    sa = summaries[1]
    assert sa.file == a.path and sa.key == ctx().key() and sa.context == ctx()
    assert (sa.records, sa.configs, sa.ok) == (5, 4, 3)
    assert sa.statuses == {"ok": 3, "nan": 1}
    assert sa.best_duration_ns == 210.0 and sa.best_config == cfg(32)
    assert sa.size_bytes == a.path.stat().st_size and sa.skipped_lines == 0
    sb = summaries[0]
    assert sb.ok == 0 and sb.best_duration_ns is None and sb.best_config is None

    # show: by path, file-name prefix, key prefix
    for ref in (a.path, "softmax", a.path.name, a.path.stem, ctx().key()[:8], ctx().key()):
        summary, evals = show_cache(ref, root=tmp_path)
        assert summary.file == a.path and len(evals) == 4 and all(e.cached for e in evals)
    with pytest.raises(SearchError, match="no cache file matches") as err:
        show_cache("nothing-here", root=tmp_path)
    assert err.value.hint
    EvaluationCache(ctx(kernel_sha256="ef" * 32), tmp_path).put(ev(16))  # a second softmax context
    with pytest.raises(SearchError, match="matches 2 cache files"):
        show_cache("softmax", root=tmp_path)

    # clear one, then all (other files stay)
    assert clear_cache(b.path.name[:12], root=tmp_path) == [b.path]
    assert not b.path.exists()
    deleted = clear_cache(root=tmp_path)
    assert len(deleted) == 2 and a.path in deleted
    assert list_caches(tmp_path) == [] and (tmp_path / "notes.txt").exists()
    assert clear_cache(root=tmp_path) == []
    # a cache whose file was cleared starts over
    a.put(ev(16, 1.0))
    assert len(a) == 1 and len(EvaluationCache(ctx(), tmp_path)) == 1


# ---------------------------------------------------------------- replay


def test_replay_runner(tmp_path):
    a, _ = fill_two(tmp_path)
    for runner in (ReplayRunner(a), ReplayRunner(a.path), ReplayRunner("softmax", root=tmp_path)):
        assert len(runner) == 4 and runner.context == ctx()
        got = runner({"num_warps": 4, "BLOCK": 32})
        assert got.worker == "replay" and got.cached and got.duration_ns == 210.0
        assert runner(cfg(128)).status == "nan"
        assert runner.calls == 2 and runner.history == [cfg(32), cfg(128)]
        assert runner.best().config == cfg(32) and runner.best().duration_ns == 210.0
        assert runner.configs() == [cfg(16), cfg(32), cfg(64), cfg(128)]
        assert cfg(16) in runner and cfg(999) not in runner
        with pytest.raises(NotInCache) as err:
            runner(cfg(999))
        assert isinstance(err.value, KeyError) and err.value.config == cfg(999)
        assert config_key(cfg(999)) in str(err.value) and str(a.path) in str(err.value)
        assert runner.calls == 2
    empty = ReplayRunner(EvaluationCache(ctx(kernel="matmul", shape={"M": 512, "N": 512, "K": 512,
                                                                     "dtype": "float16"}), tmp_path))
    assert empty.best() is None and len(empty) == 1


def test_torn_header_is_rewritten_with_the_next_record(tmp_path):
    header = json.dumps({"kind": "kernelpilot.cache", "version": 1, "key": ctx().key(),
                         "context": ctx().model_dump(mode="json")})
    path = tmp_path / ctx().file_name()
    path.write_text(header[:30])  # the very first write was torn
    cache = EvaluationCache(ctx(), tmp_path)
    assert len(cache) == 0 and cache.skipped_lines == 1
    cache.put(ev(64, 3.0))
    summary, evals = read_cache_file(path)
    assert summary.context == ctx() and summary.skipped_lines == 1 and "line 1" in summary.warnings[0]
    assert [e.duration_ns for e in evals] == [3.0]
