"""Tune a kernel for a workload, not a point (issue 26): search per bucket, check every bucket's candidates at the
bucket's other shapes, and write the dispatch table.

The run, in the order it happens (every step a real ``tune`` with its own folder, so every number has a record):

1. **Buckets** (:func:`kernelpilot.workload.bucket_workload`): the workload's shapes grouped where one config is
   expected to serve (by default the power-of-two class of every key that varies).
2. **Search per bucket**, heaviest first: ``tune`` at the bucket's representative shape (its heaviest member), with
   the search's start at the winner of the nearest bucket already searched (a warm start: a neighbouring bucket's
   best is the likeliest good config here), in ``buckets/<i>/``.
3. **Cross-check**: the candidates — the ``top_k`` fastest configs of every bucket's search and the kernel file's
   own config (the library default) — are measured at **every** workload shape, one ``tune`` per shape over exactly
   that config list (``shapes/<i>/``, no static pruning: the bucket searches compiled these configs already): each
   config is checked against the reference at that shape before it is
   timed, so a config correct at one shape is never assumed correct at another.
4. **Winners** (:func:`kernelpilot.dispatch.choose_winner`): per bucket, over the candidates measured correct at every
   shape of the bucket, by weighted median time, ties inside the noise broken by a stated order (the same winner in
   every process); the best single config for the whole workload by the same rule; the library default's weighted
   time. The loss of one-config-fits-all against the table is then a measured number.
5. **Outputs** in ``out``: ``dispatch.json`` (:mod:`kernelpilot.dispatch`), ``dispatch_autotune.py`` (a
   ``triton.autotune`` config list whose pruning function picks the bucket's config without benchmarking; Triton
   kernels), ``dispatch_select.py`` (a plain Python dispatcher, e.g. for ``.cu`` defines), ``workload.md`` (per shape:
   bucket, table, single config, default) and ``workload.json`` (this result); the winners go into the config store
   (:mod:`kernelpilot.store`) unless ``store`` is False.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from pydantic import BaseModel, Field

from kernelpilot.options import TuneOptions

__all__ = ["BucketRun", "ShapeRow", "WorkloadResult", "list_constraint", "tune_workload"]


class BucketRun(BaseModel):
    """One bucket's search and decision.

    Attributes:
        name: the bucket's name (:class:`kernelpilot.workload.Bucket`); ranges: key -> ``[lo, hi]`` inclusive.
        shapes: its workload shapes; representative: the shape its search ran at.
        start: the warm start given to its search (a neighbour's winner), None for the first bucket.
        tune_folder: the search's folder, relative to the run's ``out``.
        search_best: the search's fastest config and its median (ns) at the representative shape.
        config: the chosen config (the winner of step 4); decision: why (the rule's sentence).
    """

    name: str
    ranges: dict[str, list[int]]
    shapes: list[dict[str, Any]]
    representative: dict[str, Any]
    start: Optional[dict[str, Any]] = None
    tune_folder: str
    search_best: Optional[dict[str, Any]] = None
    search_best_ns: Optional[float] = None
    config: Optional[dict[str, Any]] = None
    decision: str = ""


class ShapeRow(BaseModel):
    """One workload shape: its weight, bucket and the median (ns) under the table, the best single config and the
    library default (None where that config failed or was not measured there)."""

    shape: dict[str, Any]
    weight: float
    bucket: str
    table_ns: Optional[float] = None
    single_ns: Optional[float] = None
    default_ns: Optional[float] = None


class WorkloadResult(BaseModel):
    """What ``tune --workload`` did (``workload.json`` in its folder; ``--json`` prints it).

    Attributes:
        kernel: the kernel file; keys: the dispatched shape keys; rule: the bucket rule.
        buckets / rows: per bucket and per workload shape (see there).
        candidates: the configs cross-checked at every shape.
        table_ns / single_ns / default_ns: the workload's weighted time (sum of weight x median, ns) under the table,
            the best single config and the library default (None where one is not measured at every shape).
        single_config / default_config: those two configs.
        single_loss_pct / default_loss_pct: how much slower each is than the table, percent.
        measured: False under the Triton interpreter (times are not measurements; nothing goes to the store).
        files: output name -> path relative to ``out`` (``dispatch``, ``autotune``, ``dispatcher``, ``markdown``).
        store: the config store written, or why not; wall_s: seconds of the whole run.
    """

    kernel: str
    keys: list[str]
    rule: str
    buckets: list[BucketRun]
    rows: list[ShapeRow]
    candidates: list[dict[str, Any]]
    table_ns: Optional[float] = None
    single_ns: Optional[float] = None
    default_ns: Optional[float] = None
    single_config: Optional[dict[str, Any]] = None
    default_config: Optional[dict[str, Any]] = None
    single_loss_pct: Optional[float] = None
    default_loss_pct: Optional[float] = None
    measured: bool = True
    files: dict[str, str] = Field(default_factory=dict)
    store: str = ""
    wall_s: float = 0.0


def list_constraint(configs: list[Mapping[str, Any]]) -> str:
    """One constraint expression admitting exactly ``configs`` (``(A == 1 and B == 'x') or (...)``), the way a
    config list is searched as a space. Raises ValueError on an empty list."""
    if not configs:
        raise ValueError("no config to admit")
    return " or ".join("(" + " and ".join(f"{k} == {v!r}" for k, v in sorted(c.items())) + ")" for c in configs)


def _key(config: Mapping[str, Any]) -> str:
    from kernelpilot.dispatch import config_json

    return config_json(config)


def _ok(evaluations: list[Any]) -> dict[str, Any]:
    """canonical config JSON -> its correct, timed evaluation."""
    return {_key(e.config): e for e in evaluations if e.status == "ok" and e.duration_ns and e.samples_ns}


def tune_workload(kernel: str | Path, workload: Any, *, out: str | Path, keys: Optional[list[str]] = None,
                  rule: str = "pow2", strategy: str = "auto", budget_s: Optional[float] = None,
                  budget_evals: Optional[int] = None, top_k: int = 2, store: bool | str | Path = True,
                  log: Optional[Callable[[str], None]] = None, options: Optional[TuneOptions] = None,
                  **tune_options: Any) -> WorkloadResult:
    """Tune ``kernel`` for ``workload`` (the module docstring says how).

    Args:
        kernel: the kernel file. workload: a :class:`kernelpilot.workload.Workload` (full shapes, weights > 0).
        out: the run folder (new or empty). keys: the keys to dispatch on (default: every key whose value varies).
        rule: the bucket rule (``pow2`` or ``exact``). strategy: each bucket's search strategy.
        budget_s / budget_evals: the whole search phase's budget, split evenly over the buckets (None: each search
            runs to its own end). top_k: configs per bucket cross-checked at every shape (>= 1).
        store: True: put the winners into the default config store; a path: that store; False: none.
        log: progress callback (one line per call).
        options: the :class:`kernelpilot.options.TuneOptions` every ``tune`` starts from (``gpu``, ``timeout_s``,
            ``constraints``, ``use_cache``, ``replay`` ...; its strategy, budgets, shape, start, and for the
            cross-check race and prune, are set here); None: built from ``tune_options`` (its fields as keywords).

    Returns:
        A :class:`WorkloadResult`; ``out`` holds the files it names.

    Raises:
        WorkloadError: a workload with no shape, or no candidate correct at every shape of a bucket.
        RunFolderError: ``out`` exists and is not empty. Everything :func:`kernelpilot.app.tune.tune` raises.
    """
    from kernelpilot.app.tune import tune as run_tune
    from kernelpilot.options import build_options
    from kernelpilot.dispatch import choose_winner
    from kernelpilot.errors import RunFolderError
    from kernelpilot.kernels.contract import load_kernel
    from kernelpilot.workload import bucket_workload, varying_keys
    from kernelpilot.workload.model import WorkloadError, shape_id

    base = options if options is not None else build_options(TuneOptions, **tune_options)

    def with_(**changes: Any) -> TuneOptions:
        """``base`` with ``changes`` (None kept as None: no budget), validated."""
        return TuneOptions.model_validate({**base.model_dump(), **changes})

    say = log or (lambda _line: None)
    t0 = time.monotonic()
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise RunFolderError(f"{out} is not empty", "give a new folder to --out")
    out.mkdir(parents=True, exist_ok=True)
    shapes = workload.shapes()
    if not shapes:
        raise WorkloadError("the workload has no shape", "give at least one shape with a weight > 0")
    keys = keys or varying_keys(shapes)
    buckets = bucket_workload(workload, keys, rule)
    kf = load_kernel(kernel, base.ref)
    default = dict(kf.default_config)
    order = sorted(range(len(buckets)), key=lambda i: (-buckets[i].weight, i))
    per_s = budget_s / len(buckets) if budget_s else None
    per_evals = max(1, budget_evals // len(buckets)) if budget_evals else None
    runs: dict[int, BucketRun] = {}
    tops: list[dict[str, Any]] = []
    measured = True
    for n, i in enumerate(order):
        b = buckets[i]
        searched = [(buckets[j], runs[j].search_best) for j in runs if runs[j].search_best]
        start = _nearest(b, searched) if searched else None
        folder = f"buckets/{i}"
        say(f"bucket {n + 1}/{len(buckets)} {b.name}: searching at {b.representative()}"
            + (f", starting from its neighbour's best {start}" if start else ""))
        res = run_tune(kernel, with_(strategy=strategy, budget_s=per_s, budget_evals=per_evals,
                                     shape=b.representative(), start=start or base.start),
                       out=out / folder, log=log)
        measured = measured and res.measured
        ranked = sorted(_ok(res.evaluations).values(), key=lambda e: e.duration_ns)
        runs[i] = BucketRun(name=b.name, ranges={k: list(b.ranges[k]) for k in keys}, shapes=b.shapes(),
                            representative=b.representative(), start=start, tune_folder=folder,
                            search_best=dict(ranked[0].config) if ranked else None,
                            search_best_ns=ranked[0].duration_ns if ranked else None)
        tops += [dict(e.config) for e in ranked[:max(1, top_k)]]
    candidates = list({_key(c): c for c in [*tops, default]}.values())
    candidates.sort(key=_key)
    # step 3: every candidate at every shape, one tune per shape over exactly the candidates
    at: dict[str, dict[str, Any]] = {}  # shape id -> {config key -> evaluation}
    ids: dict[str, str] = {}
    for n, s in enumerate(shapes):
        sid = shape_id(s)
        folder = f"shapes/{n}"
        say(f"cross-check {n + 1}/{len(shapes)} at {s}: {len(candidates)} candidates")
        # no static pruning here: the list is a handful of configs the bucket searches compiled already, and a pool
        # of compile workers per shape would cost more than the list (seconds of boot each on a GPU host)
        res = run_tune(kernel, with_(strategy="exhaustive", shape=s, race=False, prune=False, budget_s=None,
                                     budget_evals=None, start=None,
                                     constraints=[*(base.constraints or []), list_constraint(candidates)]),
                       out=out / folder, log=log)
        for pos, e in enumerate(res.evaluations):  # the record id's position, where tune did not number them
            e.seq = pos if e.seq is None else e.seq
        at[sid] = _ok(res.evaluations)
        ids[sid] = folder
    weights = {shape_id(s): workload.weight_of(s) for s in shapes}

    def samples(config: Mapping[str, Any], members: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[float]]]:
        k = _key(config)
        return [(s, list(at[shape_id(s)][k].samples_ns)) for s in members if k in at[shape_id(s)]]

    for i, b in enumerate(buckets):
        members = b.shapes()
        try:
            w = choose_winner([(c, samples(c, members)) for c in candidates],
                              [(s, weights[shape_id(s)]) for s in members])
        except Exception as exc:  # noqa: BLE001 - DispatchError: no candidate correct at every shape
            raise WorkloadError(f"bucket {b.name}: {exc}",
                                "widen the search (budget, top_k) or split the bucket (rule exact)") from exc
        runs[i].config, runs[i].decision = dict(w.config), w.reason
    single = None
    try:
        single = choose_winner([(c, samples(c, shapes)) for c in candidates],
                               [(s, weights[shape_id(s)]) for s in shapes])
    except Exception:  # noqa: BLE001 - no single config correct everywhere: the table is the only answer
        pass
    result = _assemble(kernel, keys, rule, buckets, runs, shapes, weights, at, candidates, default,
                       single.config if single else None, measured)
    from kernelpilot.app.workload_out import write_outputs

    write_outputs(result, kf, out, at, ids, store=store if measured else False, log=say)
    result.wall_s = time.monotonic() - t0
    (out / "workload.json").write_text(result.model_dump_json(indent=1))
    return result


def _nearest(bucket: Any, searched: list[tuple[Any, dict[str, Any]]]) -> dict[str, Any]:
    """The best config of the searched bucket nearest ``bucket`` (log2 distance of the range centres over its keys;
    ties: the earlier searched)."""
    def centre(b: Any) -> list[float]:
        return [(math.log2(max(lo, 1)) + math.log2(max(hi, 1))) / 2 for lo, hi in (b.ranges[k] for k in bucket.keys)]

    here = centre(bucket)
    return min(searched, key=lambda t: sum(abs(a - c) for a, c in zip(here, centre(t[0]))))[1]


def _assemble(kernel: Any, keys: list[str], rule: str, buckets: list[Any], runs: dict[int, BucketRun],
              shapes: list[dict[str, Any]], weights: dict[str, float], at: dict[str, dict[str, Any]],
              candidates: list[dict[str, Any]], default: dict[str, Any], single: Optional[dict[str, Any]],
              measured: bool) -> WorkloadResult:
    """The result's rows and weighted times from the cross-check's evaluations."""
    from kernelpilot.workload.model import shape_id

    def ns(config: Optional[Mapping[str, Any]], s: Mapping[str, Any]) -> Optional[float]:
        e = at[shape_id(s)].get(_key(config)) if config is not None else None
        return e.duration_ns if e is not None else None

    rows = []
    for i, b in enumerate(buckets):
        for s in b.shapes():
            rows.append(ShapeRow(shape=s, weight=weights[shape_id(s)], bucket=b.name, table_ns=ns(runs[i].config, s),
                                 single_ns=ns(single, s), default_ns=ns(default, s)))

    def total(col: str) -> Optional[float]:
        vals = [(r.weight, getattr(r, col)) for r in rows]
        return math.fsum(w * v for w, v in vals) if all(v is not None for _, v in vals) else None

    table, one, dflt = total("table_ns"), total("single_ns"), total("default_ns")
    loss = lambda x: (x / table - 1) * 100 if x is not None and table else None  # noqa: E731
    return WorkloadResult(kernel=str(kernel), keys=keys, rule=rule, buckets=[runs[i] for i in range(len(buckets))],
                          rows=rows, candidates=candidates, table_ns=table, single_ns=one, default_ns=dflt,
                          single_config=single, default_config=default, single_loss_pct=loss(one),
                          default_loss_pct=loss(dflt), measured=measured)
