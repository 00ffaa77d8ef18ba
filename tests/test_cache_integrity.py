"""Evaluation-cache lines are claims until checked (issue 24): signed with a per-user key kept outside the cache,
consistent (median = median of its samples), not under the floor; a forged, moved, unsigned-in-a-live-search or
inconsistent line is refused by name, live and in a replay; a replay re-decides every verdict on the stored
samples with the code a live run uses."""

from __future__ import annotations

import json
import os
import stat
import statistics
import warnings
from pathlib import Path

import pytest

from kernelpilot.engine.evaluator import Evaluator
from kernelpilot.engine.guards import ImpossibleTime
from kernelpilot.engine.runner import ReplayRunner, RunnerBase
from kernelpilot.errors import SearchError
from kernelpilot.hardware.roofline import compute_roofline
from kernelpilot.hardware.specs import find_spec
from kernelpilot.search.cache import CacheContext, EvaluationCache, read_cache_file
from kernelpilot.search.cache_trust import SECRET_ENV, CacheEntryRefused, CacheLineRefused, cache_secret
from kernelpilot.search.model import Evaluation, config_key
from kernelpilot.search.space import SearchSpace
from kernelpilot.search.stats import clearly_slower, decide

DATA = Path(__file__).parent / "data" / "search"


@pytest.fixture(autouse=True)
def own_key(tmp_path, monkeypatch):
    """Each test signs with its own key, in a folder apart from the cache's."""
    monkeypatch.setenv(SECRET_ENV, str(tmp_path / "keys"))


def ctx(**over) -> CacheContext:
    fields = {"kernel": "softmax", "kernel_sha256": "cd" * 32, "shape": {"M": 64, "N": 128, "dtype": "float32"},
              "gpu": "NVIDIA H100 80GB HBM3", "driver": "580.1", "torch": "2.13.0", "triton": "3.5.0",
              "python": "3.11.9", "interpreted": False}
    return CacheContext(**{**fields, **over})


def cfg(block: int) -> dict:
    return {"BLOCK": block, "num_warps": 4}


def timed(block: int, median_ns: float, **kw) -> Evaluation:
    samples = [median_ns * f for f in (0.98, 0.99, 1.0, 1.01, 1.02)]
    return Evaluation(config=cfg(block), status="ok", duration_ns=statistics.median(samples), samples_ns=samples,
                      worker="cuda:0", **kw)


def filled(tmp_path: Path, **over) -> EvaluationCache:
    cache = EvaluationCache(ctx(**over), tmp_path / "cache")
    for block, t in ((64, 10_000.0), (128, 8_000.0), (256, 9_000.0)):
        cache.put(timed(block, t))
    return cache


def edit_line(path: Path, block: int, change) -> int:
    """Apply ``change`` to the JSON object of the line recording BLOCK=block; returns its 1-based line number."""
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        obj = json.loads(line)
        if obj.get("evaluation", {}).get("config") == cfg(block):
            change(obj)
            lines[n] = json.dumps(obj, sort_keys=True, separators=(",", ":"))
            path.write_text("\n".join(lines) + "\n")
            return n + 1
    raise AssertionError(f"no line for BLOCK={block}")


def five_times_faster_median(obj):  # the median edited, the samples left as measured
    obj["evaluation"]["duration_ns"] /= 5


def five_times_faster_everything(obj):  # median and samples edited together: consistent, but the MAC breaks
    ev = obj["evaluation"]
    ev["duration_ns"] /= 5
    ev["samples_ns"] = [s / 5 for s in ev["samples_ns"]]


# ---------------------------------------------------------------- the key


def test_lines_are_signed_with_a_private_key_kept_outside_the_cache(tmp_path):
    cache = filled(tmp_path)
    key_file = tmp_path / "keys" / "cache-hmac.key"
    assert key_file.is_file() and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) & 0o077 == 0
    assert not str(key_file).startswith(str(cache.path.parent))
    secret_hex = key_file.read_text().strip()
    text = cache.path.read_text()
    assert secret_hex not in text
    records = [json.loads(line) for line in text.splitlines()[1:]]
    assert all(len(r["mac"]) == 64 and r["signer"] for r in records)
    assert len({r["signer"] for r in records}) == 1 and records[0]["signer"] not in secret_hex
    assert cache.get(cfg(128)).duration_ns == pytest.approx(8_000.0) and cache.refused == []
    assert read_cache_file(cache.path)[0].trust == "signed by this user (MAC checked)"


def test_a_key_others_can_read_is_refused(tmp_path):
    filled(tmp_path)
    key_file = tmp_path / "keys" / "cache-hmac.key"
    os.chmod(key_file, 0o644)
    os.environ[SECRET_ENV] = str(tmp_path / "keys")  # a fresh process's view: nothing held in memory
    from kernelpilot.search import cache_trust

    cache_trust._SECRETS.clear()
    with pytest.raises(SearchError, match="can be read or written by other users"):
        cache_secret()


# ---------------------------------------------------------------- a live search


class AskedRunner(RunnerBase):
    """A runner that answers every config with one median (ns) and records which configs it was asked for."""

    parallel = 1

    def __init__(self, median_ns: float) -> None:
        self.median_ns, self.asked = median_ns, []

    def evaluate(self, config, race_against_ns=None):
        self.asked.append(config)
        return timed(config["BLOCK"], self.median_ns)

    def ab_samples(self, a, b, n):
        return None


@pytest.mark.parametrize("forge", [five_times_faster_median, five_times_faster_everything],
                         ids=["median-only", "median-and-samples"])
def test_a_forged_line_is_refused_by_name_and_measured_again_live(tmp_path, forge):
    cache = filled(tmp_path)
    line = edit_line(cache.path, 128, forge)
    live = EvaluationCache(ctx(), tmp_path / "cache")
    with pytest.warns(CacheLineRefused, match=rf"line {line} \(config {config_key(cfg(128))}\)"):
        assert live.get(cfg(128)) is None
    [refused] = live.refused
    assert refused.line == line and refused.config == cfg(128)
    assert "MAC does not match its content" in refused.why  # the signature is checked first, whatever was edited
    assert live.get(cfg(64)).duration_ns == pytest.approx(10_000.0)  # the honest lines are still answered
    # the evaluator measures the refused config again: the runner is asked, the forged time never leads
    runner = AskedRunner(8_100.0)
    space = SearchSpace({"BLOCK": [64, 128, 256], "num_warps": [4]})
    ev = Evaluator(space, runner, cache=live, ab_samples=0, race=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheLineRefused)
        got = ev(cfg(128))
    assert runner.asked == [cfg(128)] and not got.cached and got.duration_ns == pytest.approx(8_100.0)
    assert EvaluationCache(ctx(), tmp_path / "cache").get(cfg(128)).duration_ns == pytest.approx(8_100.0)


def test_unsigned_foreign_and_moved_lines_are_not_reused_live(tmp_path):
    cache = filled(tmp_path)
    edit_line(cache.path, 64, lambda o: (o.pop("mac"), o.pop("signer")))  # stripped: unsigned
    # another user's key signed this one
    edit_line(cache.path, 256, lambda o: o.update(signer="0123456789abcdef", mac="ab" * 32))
    other = EvaluationCache(ctx(gpu="NVIDIA H200"), tmp_path / "cache")  # a line moved into another context's file
    other.put(timed(512, 1.0))
    moved = cache.path.read_text().splitlines()[2]
    with open(other.path, "a") as f:
        f.write(moved + "\n")
    live = EvaluationCache(ctx(), tmp_path / "cache")
    with pytest.warns(CacheLineRefused):
        assert live.get(cfg(64)) is None and live.get(cfg(256)) is None
    whys = {r.config["BLOCK"]: r.why for r in live.refused}
    assert "unsigned" in whys[64] and "another user" in whys[256]
    assert all("reuses only lines signed" in w for w in whys.values())
    moved_into = EvaluationCache(ctx(gpu="NVIDIA H200"), tmp_path / "cache")
    with pytest.warns(CacheLineRefused, match="MAC does not match"):
        assert moved_into.get(cfg(128)) is None
    assert moved_into.get(cfg(512)) is not None


def test_a_signed_line_under_the_floor_or_escaping_it_is_refused_live(tmp_path):
    roof = compute_roofline(1e6, 3.35e12 * 5e-6, "fp32", find_spec("H100-SXM"))  # a 5 µs floor
    cache = EvaluationCache(ctx(), tmp_path / "cache", roofline=roof)
    cache.put(timed(64, 1_000.0))  # 1 µs, under the floor (as a changed spec could leave an old line)
    cache.put(timed(128, 9_000.0).model_copy(update={"measured": False}))  # would escape the floor
    cache.put(timed(256, 9_000.0))
    with pytest.warns(CacheLineRefused) as caught:
        assert cache.get(cfg(64)) is None and cache.get(cfg(128)) is None
    assert cache.get(cfg(256)) is not None
    assert "speed-of-light floor" in cache.refused[0].why and "escape the floor" in cache.refused[1].why
    assert [str(w.message).split(": line ")[1][:1] for w in caught] == ["2", "3"]  # each named by its line


def test_a_cached_answer_carries_no_verdict_of_the_run_that_measured_it(tmp_path):
    cache = EvaluationCache(ctx(), tmp_path / "cache")
    cache.put(timed(64, 10_000.0, accepted=True, decision="faster beyond noise", index=7, pct_of_roofline=99.0,
                    decision_detail={"replace": True}, speedup_vs_first=3.0, commit="abc"))
    cache.put(timed(128, 12_000.0, message="raced out after 8 samples: median 12000 ns vs incumbent 9000 ns"))
    got = EvaluationCache(ctx(), tmp_path / "cache")
    a, b = got.get(cfg(64)), got.get(cfg(128))
    assert (a.accepted, a.decision, a.index, a.pct_of_roofline, a.decision_detail, a.commit) == (
        None, "", None, None, None, None)
    assert a.samples_ns == timed(64, 10_000.0).samples_ns  # the measurement itself is kept
    assert not b.raced_out and b.message.startswith("short timing: 5 samples")


def test_a_live_tune_measures_a_forged_line_again(write_kernel, tmp_path, monkeypatch):
    from kernelpilot.search.tune import tune

    monkeypatch.setenv("KERNELPILOT_CACHE", str(tmp_path / "cache"))
    kernel = write_kernel()
    first = tune(kernel, strategy="exhaustive", prune=False, ab_samples=5)
    assert first.n_new == 9
    [path] = (tmp_path / "cache").glob("*.jsonl")
    target = {"BLOCK": 128, "num_warps": 4}
    lines = path.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if json.loads(line).get("evaluation", {}).get("config") == target)
    obj = json.loads(lines[n])
    honest_ns = obj["evaluation"]["duration_ns"]
    obj["evaluation"]["duration_ns"] = honest_ns / 5
    obj["evaluation"]["samples_ns"] = [s / 5 for s in obj["evaluation"]["samples_ns"]]
    lines[n] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(CacheLineRefused, match=rf"line {n + 1} \(config {config_key(target)}\)"):
        again = tune(kernel, strategy="exhaustive", prune=False, ab_samples=5)
    assert again.n_new == 1 and again.n_cached == 8
    [redone] = [e for e in again.evaluations if e.config == target]
    assert not redone.cached and redone.duration_ns != pytest.approx(honest_ns / 5)


# ---------------------------------------------------------------- a replay


@pytest.mark.parametrize("forge", [five_times_faster_median, five_times_faster_everything],
                         ids=["median-only", "median-and-samples"])
def test_a_forged_line_refuses_the_replay_by_name(tmp_path, forge):
    cache = filled(tmp_path)
    line = edit_line(cache.path, 128, forge)
    with pytest.raises(CacheEntryRefused, match=rf"line {line} \(config {config_key(cfg(128))}\)") as err:
        ReplayRunner(cache.path)
    assert [r.line for r in err.value.refused] == [line]
    summary, _ = read_cache_file(cache.path)
    assert summary.refused and f"line {line}" in summary.refused[0] and summary.best_config == cfg(256)


def test_an_inconsistent_unsigned_line_refuses_the_replay(tmp_path):
    lines = (DATA / "softmax-h100.jsonl").read_text().splitlines()
    obj = json.loads(lines[5])
    obj["evaluation"]["duration_ns"] /= 5  # the 443 % story: a median edited, the samples left
    lines[5] = json.dumps(obj)
    forged = tmp_path / "softmax-forged.jsonl"
    forged.write_text("\n".join(lines) + "\n")
    with pytest.raises(CacheEntryRefused, match="line 6 .*not the median of its"):
        ReplayRunner(forged)
    header = json.loads(lines[0])
    header["context"]["interpreted"] = True  # the context edited to let unmeasured times through
    lines[0], lines[5] = json.dumps(header), (DATA / "softmax-h100.jsonl").read_text().splitlines()[5]
    forged.write_text("\n".join(lines) + "\n")
    with pytest.raises(SearchError, match="line 1: the header's context does not hash to its key"):
        ReplayRunner(forged)


def test_an_unsigned_consistent_line_under_the_floor_stops_the_replay_like_a_live_one(tmp_path):
    roof = compute_roofline(1e6, 3.35e12 * 5e-6, "fp32", find_spec("H100-SXM"))  # a 5 µs floor
    cache = filled(tmp_path)
    edit_line(cache.path, 128, lambda o: (five_times_faster_everything(o), o.update(
        evaluation={**o["evaluation"], "duration_ns": o["evaluation"]["duration_ns"] / 2,
                    "samples_ns": [s / 2 for s in o["evaluation"]["samples_ns"]]}), o.pop("mac"), o.pop("signer")))
    runner = ReplayRunner(cache.path)  # unsigned, consistent: answered, and said to be consistency-checked only
    assert "consistency-checked only" in runner.trust
    space = SearchSpace({"BLOCK": [64, 128, 256], "num_warps": [4]})
    ev = Evaluator(space, runner, roofline=roof, ab_samples=0, race=False)
    ev(cfg(64))
    with pytest.raises(ImpossibleTime, match="under the speed-of-light floor"):
        ev(cfg(128))
    assert ev.incumbent.config == cfg(64) and ev.order[-1].status == "impossible"


def test_the_committed_h100_caches_replay_unsigned_and_consistent():
    for name in ("softmax", "matmul"):
        runner = ReplayRunner(DATA / f"{name}-h100.jsonl")
        assert runner.trust == "unsigned: consistency-checked only" and len(runner) > 100
        assert not any(e.raced_out or e.accepted is not None or e.decision for e in runner.evaluations())


def _replayed(name: str, race: bool):
    """Every config of the H100 cache replayed through the evaluator, starting from a config the measuring run
    raced out (as v0 was shown in the issue)."""
    runner = ReplayRunner(DATA / f"{name}-h100.jsonl")
    configs = runner.configs()
    stored = {json.loads(line)["key"]: json.loads(line)["evaluation"]
              for line in (DATA / f"{name}-h100.jsonl").read_text().splitlines()[1:]}
    first = next(c for c in configs if stored[config_key(c)]["message"].startswith("raced out"))
    tunables = {k: sorted({c[k] for c in configs}) for k in configs[0]}
    ev = Evaluator(SearchSpace(tunables), runner, ab_samples=0, race=race)
    for c in [first] + [c for c in configs if c != first]:
        ev(c)
    return ev, first


@pytest.mark.parametrize("race", [False, True], ids=["no-race", "race"])
def test_replayed_decisions_equal_a_fresh_decision_on_the_same_samples(race):
    ev, first = _replayed("matmul", race)
    v0 = ev.order[0]
    assert v0.config == first and v0.accepted and v0.decision == "first correct config"
    incumbent = None
    n_decided = 0
    for e in ev.order:
        if not e.ok:
            continue
        if incumbent is None:
            incumbent = e
            continue
        faster = e.duration_ns < incumbent.duration_ns
        if e.raced_out:  # only when this run races, and only by the live race's rule against this incumbent
            assert race and clearly_slower(e.samples_ns[:8], incumbent.duration_ns)
            assert not faster, "a config faster than the incumbent is never 'clearly slower'"
            assert not e.accepted
            continue
        if not faster:
            assert not e.accepted and e.decision.startswith("not faster")
            continue
        fresh = decide(e.samples_ns, incumbent.samples_ns)
        assert e.decision_detail == fresh.model_dump() and bool(e.accepted) == fresh.replace
        n_decided += 1
        if e.accepted:
            incumbent = e
    assert n_decided >= 3 and ev.incumbent is incumbent
    if race:
        assert any(e.raced_out for e in ev.order)


def test_a_raced_out_line_is_measured_again_by_a_run_that_does_not_race_it_out(tmp_path):
    """A line raced out by another run is a short timing: a run without racing (the workload cross-check) measures
    the config in full; a racing run whose incumbent it is clearly slower than races it out again on the stored
    samples; a racing run it is not clearly slower than measures it again. Found on an H100: the workload
    cross-check served an 8-sample raced-out median (47.9 µs against 12.7 µs measured in full) as a config's time."""
    slow = [40_000.0 + 500 * i for i in range(8)]
    raced = Evaluation(config=cfg(128), status="ok", duration_ns=statistics.median(slow), samples_ns=slow,
                       worker="cuda:0", message="raced out after 8 samples: median 41750 ns vs incumbent 9000 ns")
    space = SearchSpace({"BLOCK": [64, 128], "num_warps": [4]})

    def evaluator(name: str, incumbent_ns: float | None, race: bool) -> tuple[Evaluator, AskedRunner]:
        """A fresh cache holding the raced-out line (and an incumbent's, measured first), read by a new run."""
        cache = EvaluationCache(ctx(), tmp_path / name)
        cache.put(raced)
        if incumbent_ns is not None:
            cache.put(timed(64, incumbent_ns))
        runner = AskedRunner(12_000.0)
        ev = Evaluator(space, runner, cache=EvaluationCache(ctx(), tmp_path / name), ab_samples=0, race=race)
        if incumbent_ns is not None:
            ev(cfg(64))
        return ev, runner

    plain, runner = evaluator("plain", None, race=False)
    got = plain(cfg(128))
    assert runner.asked == [cfg(128)] and not got.cached and got.duration_ns == pytest.approx(12_000.0)
    assert len(got.samples_ns) == 5 and not got.raced_out
    # read by racing runs: clearly slower than a 9 µs incumbent -> raced out again on the stored samples, unmeasured
    racing, runner = evaluator("fast-incumbent", 9_000.0, race=True)
    again = racing(cfg(128))
    assert runner.asked == [] and again.raced_out and again.cached
    # not clearly slower than a 41 µs incumbent: measured again in full
    racing, runner = evaluator("slow-incumbent", 41_000.0, race=True)
    racing(cfg(128))
    assert runner.asked == [cfg(128)]
