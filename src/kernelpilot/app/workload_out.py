"""The outputs of a workload run (issue 26; :mod:`kernelpilot.app.workload_run` decides, this writes): the dispatch
table and its two generated dispatchers, the per-shape table in markdown, and the winners in the config store.

Record ids in ``dispatch.json`` are ``<tune folder>/tune.json#<seq>``: the evaluation at position ``seq`` of that
cross-check's ``tune.json`` (:func:`resolve_record` reads one back, and ``report``-style checks compare the row with
it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

__all__ = ["machine", "resolve_record", "store_winners", "write_outputs"]


def machine() -> tuple[str, str]:
    """(arch, GPU name) of this machine's first GPU (``sm_90`` as the config store keys it,
    :func:`kernelpilot.store.keys.this_arch`; ``NVIDIA H100 80GB HBM3`` from torch), or ``("interpreter", "cpu")``
    without one. Raises nothing."""
    from kernelpilot.store.keys import this_arch

    arch = this_arch()
    if arch == "cpu":
        return "interpreter", "cpu"
    try:
        import torch

        return arch, torch.cuda.get_device_name()
    except Exception:  # noqa: BLE001 - a broken torch install still has the driver's arch
        return arch, "unknown GPU"


def resolve_record(out: str | Path, record_id: str) -> Optional[dict[str, Any]]:
    """The evaluation a dispatch row cites, as a dict with its ``shape`` added, or None when the id names no record
    (a missing file, a bad position). Raises nothing."""
    path, _, seq = record_id.partition("#")
    try:
        data = json.loads((Path(out) / path).read_text())
        found = next(e for e in data["evaluations"] if str(e.get("seq")) == seq)
    except Exception:  # noqa: BLE001 - an id that resolves to nothing is reported by the caller
        return None
    return {**found, "shape": data.get("shape")}


def _rows(at: Mapping[str, Mapping[str, Any]], ids: Mapping[str, str], config: Mapping[str, Any],
          shapes: list[tuple[dict[str, Any], float]]) -> list[Any]:
    from kernelpilot.dispatch import Measurement, config_json
    from kernelpilot.workload.model import shape_id

    k = config_json(config)
    rows = []
    for s, w in shapes:
        e = at[shape_id(s)][k]
        rows.append(Measurement(shape=s, weight=w, duration_ns=e.duration_ns, samples_n=len(e.samples_ns),
                                record_id=f"{ids[shape_id(s)]}/tune.json#{e.seq}"))
    return rows


def write_outputs(result: Any, kf: Any, out: Path, at: Mapping[str, Mapping[str, Any]], ids: Mapping[str, str], *,
                  store: bool | str | Path, log: Callable[[str], None]) -> None:
    """Write ``dispatch.json``, ``dispatch_autotune.py`` (Triton kernels), ``dispatch_select.py``, ``workload.md``
    and put the winners into the store; fills ``result.files`` and ``result.store``.

    Args:
        result: the :class:`kernelpilot.app.workload_run.WorkloadResult` (rows, buckets decided).
        kf: the loaded kernel file. out: the run folder. at: shape id -> config JSON -> evaluation (correct ones).
        ids: shape id -> its cross-check folder (relative). store: as ``tune_workload``'s. log: progress callback.

    Raises:
        DispatchError: the table contradicts itself (a bug: every number comes from ``at``).
    """
    from kernelpilot.dispatch import (KernelRef, autotune_configs_source, make_bucket, make_dispatch, make_total,
                                      python_dispatcher_source, write_dispatch)
    from kernelpilot.store.lookup import runtime_toolchain

    arch, gpu = machine()
    from kernelpilot.workload.model import shape_id

    weights = {shape_id(r.shape): r.weight for r in result.rows}
    all_shapes = [(r.shape, r.weight) for r in result.rows]
    buckets = []
    for b in result.buckets:
        members = [(s, weights[shape_id(s)]) for s in b.shapes]
        buckets.append(make_bucket(b.name, {k: (lo, hi) for k, (lo, hi) in b.ranges.items()}, b.config,
                                   _rows(at, ids, b.config, members),
                                   evidence=[f"{b.tune_folder}/tune.json", *sorted(set(ids.values()))]))
    toolchain = runtime_toolchain()
    md = _markdown(result)
    (out / "workload.md").write_text(md)
    result.files["markdown"] = "workload.md"
    if result.single_config is None:
        log("dispatch.json not written: no single config ran correctly at every shape to compare the table with")
        return _report_page(result, out, log)
    dflt = (make_total(result.default_config, _rows(at, ids, result.default_config, all_shapes))
            if result.default_ns is not None else None)
    d = make_dispatch(kernel=KernelRef(file_name=Path(kf.path).name,
                                       sha256=hashlib.sha256(Path(kf.path).read_bytes()).hexdigest()),
                      arch=arch, gpu_name=gpu, toolchain=toolchain, keys=list(result.keys), buckets=buckets,
                      single_config=make_total(result.single_config, _rows(at, ids, result.single_config, all_shapes)),
                      library_default=dflt)
    write_dispatch(d, out / "dispatch.json")
    result.files["dispatch"] = "dispatch.json"
    (out / "dispatch_select.py").write_text(python_dispatcher_source(d))
    result.files["dispatcher"] = "dispatch_select.py"
    if Path(kf.path).suffix == ".py":
        (out / "dispatch_autotune.py").write_text(autotune_configs_source(d))
        result.files["autotune"] = "dispatch_autotune.py"
    if store:
        result.store = store_winners(result, kf, d, out, None if store is True else Path(store), toolchain, arch, gpu)
        log(f"config store: {result.store}")
    else:
        result.store = "not written (interpreted run: no measurement)" if not result.measured else "not written"
    _report_page(result, out, log)


def _report_page(result: Any, out: Path, log: Callable[[str], None]) -> None:
    """``report.html`` (:mod:`kernelpilot.report.workload_html`): skipped with a logged line without plotly."""
    from kernelpilot.report.workload_html import try_write_workload_html

    if try_write_workload_html(out, result.model_dump(mode="json"), log):
        result.files["report"] = "report.html"


def store_winners(result: Any, kf: Any, d: Any, out: Path, path: Optional[Path], toolchain: dict[str, str], arch: str,
         gpu: str) -> str:
    """Put every bucket's config into the store under the kernel's key parts (:func:`kernelpilot.store.keys.key_parts`:
    the kernel's source hash, this arch and toolchain, the dtype, contiguous strides — the inputs ``setup`` makes);
    its range is the bucket's, the other shape keys fixed at the bucket's values. Returns the store's path."""
    from kernelpilot.store import ConfigStore
    from kernelpilot.store.keys import key_parts

    with ConfigStore.open(path) as st:
        for bucket, b in zip(d.buckets, result.buckets):
            rng = {**{k: list(v) for k, v in bucket.ranges.items()},
                   **{k: v for k, v in b.representative.items() if k not in bucket.ranges}}
            key_parts(kf, b.representative, arch=arch, toolchain=toolchain).put(
                st, rng, bucket.config, bucket.weighted_time_ns / bucket.weight,
                evidence={"run_dir": str(out.resolve()), "record_ids": [m.record_id for m in bucket.measured]},
                gpu=gpu)
        return str(st.path)


def _us(ns: Optional[float]) -> str:
    return f"{ns / 1000:.2f}" if ns is not None else "—"


def _markdown(r: Any) -> str:
    """workload.md: per bucket its config, per shape the three medians, and the weighted totals."""
    lines = [f"# Workload run: {Path(r.kernel).name}", "",
             f"Dispatch keys {r.keys}, bucket rule `{r.rule}`, {len(r.buckets)} buckets, {len(r.rows)} shapes, "
             f"{len(r.candidates)} candidate configs checked at every shape.", "",
             "| bucket | config | searched at | decision |", "|---|---|---|---|"]
    for b in r.buckets:
        lines.append(f"| {b.name} | `{json.dumps(b.config, sort_keys=True)}` | {b.representative} | {b.decision} |")
    lines += ["", f"Single config for all: `{json.dumps(r.single_config, sort_keys=True)}`; library default (the "
              f"kernel file's own config): `{json.dumps(r.default_config, sort_keys=True)}`.", "",
              "| shape | weight | bucket | table µs | single config µs | library default µs |",
              "|---|---|---|---|---|---|"]
    for row in r.rows:
        lines.append(f"| {row.shape} | {row.weight:g} | {row.bucket} | {_us(row.table_ns)} | {_us(row.single_ns)} "
                     f"| {_us(row.default_ns)} |")
    pct = lambda x: f" ({x:+.1f} % vs the table)" if x is not None else ""  # noqa: E731
    lines += ["", f"Weighted time (sum of weight x median): table {_us(r.table_ns)} µs, single config "
              f"{_us(r.single_ns)} µs{pct(r.single_loss_pct)}, library default {_us(r.default_ns)} µs"
              f"{pct(r.default_loss_pct)}."]
    if not r.measured:
        lines.append("\nTimes are from the Triton interpreter: not measurements.")
    return "\n".join(lines) + "\n"
