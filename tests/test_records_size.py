"""Records that scale (issue 25): a run of 1,000 measured configs stays under 10 MB, ``.ncu-rep`` aside.

A replay of the committed H100 matmul cache, as ``benchmarks/records_size.py`` measures it: the bytes of a version
(files and git objects) and the projected size of 1,000 must stay under the bound, and every byte saved must read
back exactly: samples (kept as the event timer's whole nanoseconds), cards (pattern entries kept once per run),
the report page (plotly compressed; its rendering is tested in a browser in tests/test_report_html.py).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
from pathlib import Path

import pytest

from conftest import ROOT

from kernelpilot.records.cards import PATTERN_TEXTS_FILE, pack_card, unpack_card
from kernelpilot.records.samples import SAMPLES_EVENT_NS, pack_samples, sample_ns_of, unpack_samples

try:  # a test-only dependency, as in tests/test_card.py
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

CACHE = ROOT / "tests" / "data" / "search" / "matmul-h100.jsonl"
#: issue 25: a run of 1,000 measured configs under 10 MB
LIMIT_BYTES = 10_000_000


def _bench():
    spec = importlib.util.spec_from_file_location("records_size", ROOT / "benchmarks" / "records_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cached_samples() -> list[list[float]]:
    out = []
    for line in CACHE.read_text().splitlines():
        ev = json.loads(line).get("evaluation") or {}
        if ev.get("samples_ns"):
            out.append(ev["samples_ns"])
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The two replays of ``benchmarks/records_size.py``: 5 iterations, and the whole cached space (102 versions,
    exhaustive): (versions, bytes, folder) each."""
    bench, base = _bench(), tmp_path_factory.mktemp("size")
    out = {}
    for name, iterations in (("short", 5), ("long", None)):
        n, size = bench.run(CACHE, base / name, iterations)
        out[name] = (n, size, base / name)
    return out


def test_a_replayed_run_of_1000_versions_projects_under_10_mb(runs):
    (n1, b1, _), (n2, b2, _) = runs["short"], runs["long"]
    assert n2 - n1 >= 90
    per_version = (b2["total"] - b1["total"]) / (n2 - n1)
    projected = b2["total"] + (1000 - n2) * per_version
    # the bound: what is left of 10 MB after the fixed part (report.html's plotly), per version, with a margin
    fixed = b2["total"] - n2 * per_version
    assert fixed < 2.3e6, fixed  # report.html inlining plotly uncompressed (4.8 MB) fails here
    assert per_version < (LIMIT_BYTES - fixed) / 1000, per_version  # ~8 KB: samples as floats, cards whole fail
    assert projected < LIMIT_BYTES, projected


def test_the_smaller_records_read_back_as_written_and_validate(runs):
    from kernelpilot import api
    from kernelpilot.records.models import outcome_from_json, restored

    _n, _b, run = runs["long"]
    assert api.report(run).finished  # validates every record, the seals and git, then rebuilds the reports
    texts = json.loads((run / PATTERN_TEXTS_FILE).read_text())
    cached = {json.dumps(e["config"], sort_keys=True): e for e in
              (json.loads(line).get("evaluation") or {} for line in CACHE.read_text().splitlines()) if e}
    carded = 0
    outcome_schema = json.loads((ROOT / "src" / "kernelpilot" / "records" / "schema" /
                                 "version.outcome.schema.json").read_text())
    for vdir in sorted(run.glob("v*/")):
        stored = json.loads((vdir / "outcome.json").read_text())
        ev = restored(vdir, outcome_from_json(stored))
        source = cached[json.dumps(ev.config, sort_keys=True)]
        if jsonschema is not None:  # the exported schema declares the compact samples
            jsonschema.validate(stored, outcome_schema)
        if ev.ok:
            # the stored samples are the cache's, bit for bit, and their median is the recorded one
            assert SAMPLES_EVENT_NS in stored and "samples_ns" not in stored
            assert ev.samples_ns == source["samples_ns"][:len(ev.samples_ns)] and ev.samples_ns
            assert statistics.median(ev.samples_ns) == pytest.approx(ev.duration_ns, rel=1e-12)
        if (vdir / "verdict.json").is_file():
            carded += 1
            from kernelpilot.profile.card import BottleneckCard

            card = BottleneckCard.model_validate(ev.card)
            assert len(card.patterns) == 14 and all(p.title and p.rule for p in card.patterns)
            written = json.loads((vdir / "verdict.json").read_text())
            assert unpack_card(written, texts) == ev.card
    assert carded >= 2


def test_samples_pack_exactly_or_not_at_all():
    lists = _cached_samples()
    assert len(lists) > 50
    for samples in lists:  # every H100 sample is a float32 millisecond of whole nanoseconds
        packed = pack_samples(samples)
        assert list(packed) == [SAMPLES_EVENT_NS] and all(isinstance(n, int) for n in packed[SAMPLES_EVENT_NS])
        assert unpack_samples(packed)["samples_ns"] == samples
    # one sample that no whole nanosecond gives back (an interpreter's wall clock, an edited value): kept as floats
    odd = [*lists[0][:5], lists[0][5] + 0.001]
    assert pack_samples(odd) == {"samples_ns": odd}
    assert pack_samples([]) == {}
    assert sample_ns_of(977216) == 977216.0053253174  # float32(0.977216 ms) * 1e6
    # both keys: nothing is picked apart from samples_ns; a non-integer list is refused
    both = {"samples_ns": [1.0], SAMPLES_EVENT_NS: [5]}
    assert unpack_samples(both) is both
    with pytest.raises(TypeError):
        unpack_samples({SAMPLES_EVENT_NS: [1.5]})


def test_a_card_packed_against_the_run_entries_unpacks_to_itself():
    card = {"class": "memory", "patterns": [
        {"id": "a", "title": "A", "status": "not_evaluated", "missing": ["m1", "m2"], "evidence": []},
        {"id": "b", "title": "B", "status": "not_fired", "missing": [], "evidence": [{"value": 1.0}]}]}
    texts: dict = {}
    first, changed = pack_card(card, texts)
    assert changed and set(texts) == {"a", "b"}
    assert first["patterns"] == [{"id": "a", "like": PATTERN_TEXTS_FILE}, {"id": "b", "like": PATTERN_TEXTS_FILE}]
    second = {**card, "patterns": [card["patterns"][0], {**card["patterns"][1], "evidence": [{"value": 2.0}]}]}
    packed, changed = pack_card(second, texts)
    assert not changed and packed["patterns"][1] == {"id": "b", "like": PATTERN_TEXTS_FILE,
                                                     "evidence": [{"value": 2.0}]}
    assert unpack_card(packed, texts) == second
    # an entry with other fields is written whole; one of an id the run does not keep stays unresolved
    other = {**card, "patterns": [{"id": "a", "title": "A", "status": "fired"}]}
    assert pack_card(other, texts)[0] == other
    assert unpack_card(packed, {})["patterns"][0] == {"id": "a", "like": PATTERN_TEXTS_FILE}


def test_report_names_a_card_whose_pattern_entries_are_gone(runs, tmp_path):
    from kernelpilot.app.validate import validate_run

    run = tmp_path / "run"
    shutil.copytree(runs["short"][2], run, symlinks=True)
    (run / PATTERN_TEXTS_FILE).write_text("{}\n")
    problems = validate_run(run).problems
    assert any(p.file == PATTERN_TEXTS_FILE and "changed since it was committed" in p.problem for p in problems)
    assert any(p.file.endswith("verdict.json") and "BottleneckCard schema" in p.problem for p in problems)


def test_a_gpu_runs_timing_json_keeps_its_samples_as_whole_ns_and_validates(tmp_path):
    """optimize on a GPU keeps a version's samples in timing.json: packed the same way, and every reader (the
    schema check of ``report``, ``restored`` for ``--resume``) reads back the worker's samples exactly."""
    from kernelpilot.app.recorder import _packed_timing
    from kernelpilot.app.validate import _read
    from kernelpilot.measure.timing import TimingResult, summarize
    from kernelpilot.records.evaluation import Evaluation
    from kernelpilot.records.models import restored
    from kernelpilot.records.workspace import write_json

    samples = _cached_samples()[0]
    timing = TimingResult(timer="cuda_event", is_measurement=True, samples_ns=samples, n_samples=len(samples),
                          **summarize(samples), n_warmup=3, warmup_ms=1.0, warmup_stable=True, flush_bytes=1 << 20,
                          l2_bytes=50 << 20)
    vdir = tmp_path / "v0"
    vdir.mkdir()
    write_json(vdir / "timing.json", _packed_timing(timing.model_dump()), compact=True)
    on_disk = json.loads((vdir / "timing.json").read_text())
    assert "samples_ns" not in on_disk and len(on_disk[SAMPLES_EVENT_NS]) == len(samples)
    problems: list = []
    assert _read(tmp_path, "v0/timing.json", problems, set()) == timing and problems == []
    ev = Evaluation(config={}, status="ok", duration_ns=timing.median_ns)  # outcome.json without samples
    assert restored(vdir, ev).samples_ns == samples
    # a forged list (not whole nanoseconds) is a schema problem naming the file
    (vdir / "timing.json").write_text(json.dumps({**on_disk, SAMPLES_EVENT_NS: [1.5]}))
    assert _read(tmp_path, "v0/timing.json", problems, set()) is None
    assert problems and problems[0].file == "v0/timing.json" and "TimingResult" in problems[0].problem
