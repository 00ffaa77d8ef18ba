"""A config about to lead is compiled at the shapes its audit will draw while its A/B timing runs (session 14: the
attention tutorial's audits spent 1.4-3.4 s each compiling at those shapes on an H200). The shapes stay drawn from
a secret: one per run, never written down, from which the parent's compile pool and the worker's audit draw the same
shapes per config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kernelpilot.api import bundled_example
from kernelpilot.engine.prune import CompileAhead
from kernelpilot.kernels.contract import load_kernel
from kernelpilot.kernels.shapes import derived_shapes, shape_rng
from kernelpilot.search.space import SearchSpace

VECTOR_ADD = bundled_example("vector_add")
SHAPE = {"N": 4096}


def _drawn(kf, seed, config):
    return derived_shapes(kf, SHAPE, config, rng=shape_rng(seed, config))[0]


def test_one_secret_draws_the_same_shapes_per_config_in_every_process_and_other_secrets_others():
    kf = load_kernel(VECTOR_ADD, interpreted=True)
    config = SearchSpace.from_kernel(kf).configs()[0]
    seed = "5f0c" * 8
    shapes = _drawn(kf, seed, config)
    assert shapes and all(s != SHAPE for s in shapes)
    assert _drawn(kf, seed, dict(reversed(list(config.items())))) == shapes, "keyed by the items, not their order"
    code = ("import json, sys; from kernelpilot.kernels.contract import load_kernel; "
            "from kernelpilot.kernels.shapes import derived_shapes, shape_rng; "
            "kf = load_kernel(sys.argv[1], interpreted=True); c = json.loads(sys.argv[3]); "
            "print(json.dumps(derived_shapes(kf, {'N': 4096}, c, rng=shape_rng(sys.argv[2], c))[0]))")
    other = subprocess.run([sys.executable, "-c", code, str(VECTOR_ADD), seed, json.dumps(config)],
                           capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(other.stdout) == shapes, "another process (another PYTHONHASHSEED) draws the same shapes"
    others = {json.dumps(_drawn(kf, f"{n:032x}", config)) for n in range(8)}
    assert len(others) > 1, "the secret decides the shapes"
    assert shape_rng(None, config) is None, "no secret: drawn afresh (secrets.SystemRandom)"


def test_the_audits_shapes_stage_draws_from_the_runs_secret():
    from kernelpilot.search.stage_steps import StageContext, _shapes
    from kernelpilot.search.worker_child import WorkerOptions
    from kernelpilot.target import Target

    kf = load_kernel(VECTOR_ADD, interpreted=True)
    config = SearchSpace.from_kernel(kf).configs()[0]
    seed = "ab" * 16
    seen: list[list[dict]] = []

    import kernelpilot.kernels.shapes as shapes_mod

    real = shapes_mod.derived_shapes

    def spy(*args, **kw):
        got = real(*args, **kw)
        seen.append(got[0])
        return [], got[1]  # nothing run: only what would be checked matters here

    opts = WorkerOptions(kernel=str(VECTOR_ADD), shape=SHAPE, interpreted=True, shape_seed=seed)
    shapes_mod.derived_shapes = spy
    try:
        assert _shapes(StageContext(kf, opts, Target.cpu(), config)) is None
    finally:
        shapes_mod.derived_shapes = real
    assert seen == [_drawn(kf, seed, config)]


def _cubins(root: Path) -> set[str]:
    return {p.parent.name for p in root.rglob("*.cubin")}


def test_warm_compiles_a_config_at_its_drawn_shapes_into_tritons_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "tc"))
    kf = load_kernel(VECTOR_ADD, interpreted=True)
    configs = SearchSpace.from_kernel(kf).configs()[:2]
    seed = "cd" * 16
    monkeypatch.setattr("kernelpilot.engine.prune.WARM_ALL_MAX", 1)  # on demand only: two configs are more
    ahead = CompileAhead(VECTOR_ADD, configs, SHAPE, arch="sm_90", timeout_s=120, max_workers=2, domain=kf,
                         shape_seed=seed)
    for c in configs:
        ahead.reason(c)  # waits for the configs' own compiles
    before = _cubins(tmp_path / "tc")
    import kernelpilot.profile.static as static

    imports: list[object] = []
    real = static.read_kernel_meta
    monkeypatch.setattr(static, "read_kernel_meta", lambda *a: (imports.append(a), real(*a))[1])
    ahead.warm(configs[1])
    ahead.warm(configs[1])  # once per config
    assert not imports, "warm() runs where the evaluator waits: it does not import the kernel file again"
    report = ahead.finish()
    drawn = _drawn(kf, seed, configs[1])
    assert report.warm_compiles == len(drawn) and report.warm_s > 0
    warmed = _cubins(tmp_path / "tc")
    assert warmed - before, "odd sizes specialize another binary"
    from kernelpilot.profile.static import inspect_config

    for shape in drawn:  # what the audit compiles at those shapes is already there
        inspect_config(VECTOR_ADD, configs[1], shape, "sm_90")
    assert _cubins(tmp_path / "tc") == warmed
    assert report.n_compiled == len(configs), "a warm compile gives no verdict"


def test_without_the_runs_secret_warm_compiles_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "tc"))
    kf = load_kernel(VECTOR_ADD, interpreted=True)
    configs = SearchSpace.from_kernel(kf).configs()[:1]
    ahead = CompileAhead(VECTOR_ADD, configs, SHAPE, arch="sm_90", timeout_s=120, max_workers=1, domain=kf)
    ahead.warm(configs[0])
    report = ahead.finish()
    assert report.warm_compiles == 0 and report.n_compiled == 1


def test_a_light_card_takes_the_compile_warm_started_instead_of_compiling_again(monkeypatch):
    import kernelpilot.profile.light as light
    from kernelpilot.engine.evidence import LightEvidence
    from kernelpilot.records.evaluation import Evaluation

    calls: list[dict] = []
    real = light.inspect_static

    def counting(*args, **kw):
        calls.append(dict(args[1]))
        return real(*args, **kw)

    monkeypatch.setattr(light, "inspect_static", counting)
    kf = load_kernel(VECTOR_ADD, interpreted=True)
    config = SearchSpace.from_kernel(kf).configs()[0]
    source = LightEvidence(VECTOR_ADD, SHAPE, None, "H200", "vector_add", "test", arch="sm_90")
    source.warm(config)
    source.warm(config)  # once
    ev = Evaluation(config=config, status="ok", duration_ns=5000.0, samples_ns=[5000.0] * 5, measured=True)
    carded = source.evidence(ev)
    assert calls == [config], "compiled once, by warm(), in its thread"
    assert carded.card is not None and "no compile metadata" not in carded.card["light_reason"]
    source.evidence(ev.model_copy(update={"card": None}))
    assert len(calls) == 2, "taken once: a later card compiles again"


def test_a_small_space_is_compiled_at_every_configs_drawn_shapes_after_its_own_compiles(tmp_path, monkeypatch):
    """A config about to lead whose A/B timing is short leaves the on-demand compiles no time (session 14, H100:
    the attention tutorial's v3 and v8, A/B 0.15 s, audits still compiling 1.2-2.3 s): a space of at most
    WARM_ALL_MAX configs has them all compiled at their drawn shapes, after its own compiles."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "tc"))
    kf = load_kernel(VECTOR_ADD, interpreted=True)
    configs = SearchSpace.from_kernel(kf).configs()[:3]
    seed = "ef" * 16
    ahead = CompileAhead(VECTOR_ADD, configs, SHAPE, arch="sm_90", timeout_s=120, max_workers=2, domain=kf,
                         shape_seed=seed)
    ahead.warm(configs[2])  # asked for ahead of the queue too: compiled once
    report = ahead.finish()
    assert report.n_compiled == len(configs)
    assert report.warm_compiles == sum(len(_drawn(kf, seed, c)) for c in configs)
    compiled = _cubins(tmp_path / "tc")
    from kernelpilot.profile.static import inspect_config

    for c in configs:
        for shape in _drawn(kf, seed, c):
            inspect_config(VECTOR_ADD, c, shape, "sm_90")
    assert _cubins(tmp_path / "tc") == compiled, "every audit's compile is already in the cache"
