"""The schema of every record kernelpilot writes into a run folder (``optimize``), a tune folder (``tune --out``) or
a session folder (``session start``: session.json, vN/memory.json), of the seals of a run or session folder
(``seals.jsonl``, one :class:`~kernelpilot.records.seal.Seal` a line), and of a bundle's ``manifest.json``.

Each record file has one pydantic model (:data:`RECORDS`: file pattern -> model); the models are the schemas, and
their JSON Schema exports ship in the package (``kernelpilot/records/schema/<name>.schema.json``) for tools that
read run folders without kernelpilot. ``python -m kernelpilot.app.schemas`` rewrites the exports after a model
changes; ``tests/test_records.py`` fails while an export is out of date.

The bottleneck card (``vN/verdict.json``) keeps its own versioned schema, ``profile/schema/bottleneck_card.v1.json``
(:mod:`kernelpilot.profile.card`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from kernelpilot.profile.kernel_metrics import KernelMetrics

__all__ = ["MetricsRecord", "RECORDS", "SCHEMA_DIR", "model_for", "schema_texts", "write_schemas"]

#: Where the JSON Schema exports live (package data).
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "records" / "schema"


class MetricsRecord(BaseModel):
    """``vN/metrics.json``: the ncu metrics of a profiled version's main kernel, and every kernel the report held."""

    main_kernel: KernelMetrics
    all_kernels: list[str]


def _models() -> dict[str, type[BaseModel]]:
    """Record file pattern (``v*/`` for every version folder) -> its model; imported when needed."""
    from kernelpilot.app.tune_run import TuneLine, TuneRun
    from kernelpilot.app.tune import TuneResult
    from kernelpilot.hardware.roofline import Roofline
    from kernelpilot.measure.correctness import CorrectnessResult
    from kernelpilot.measure.env import EnvInfo
    from kernelpilot.measure.timing import TimingResult
    from kernelpilot.profile.card import BottleneckCard
    from kernelpilot.records.evaluation import Evaluation
    from kernelpilot.records.models import Interruption, RunInfo, VersionConfig
    from kernelpilot.records.seal import Seal
    from kernelpilot.report.benchmark import BenchmarkResult
    from kernelpilot.versions.records import MemoryRecord, SessionState

    return {"run.json": RunInfo, "env.json": EnvInfo, "roofline.json": Roofline, "baselines.json": BenchmarkResult,
            "benchmark.json": BenchmarkResult, "v*/config.json": VersionConfig, "v*/correctness.json": CorrectnessResult,
            "v*/timing.json": TimingResult, "v*/outcome.json": Evaluation, "v*/verdict.json": BottleneckCard,
            "v*/metrics.json": MetricsRecord, "v*/interrupted.json": Interruption,
            "tune-run.json": TuneRun, "evaluations.jsonl": TuneLine, "tune.json": TuneResult,
            "session.json": SessionState, "v*/memory.json": MemoryRecord, "seals.jsonl": Seal}


#: The record files (patterns) that have a schema; :func:`model_for` gives the model.
RECORDS = ("run.json", "env.json", "roofline.json", "baselines.json", "benchmark.json", "v*/config.json",
           "v*/correctness.json", "v*/timing.json", "v*/outcome.json", "v*/verdict.json", "v*/metrics.json",
           "v*/interrupted.json", "tune-run.json", "evaluations.jsonl", "tune.json", "session.json", "v*/memory.json",
           "seals.jsonl")


def model_for(rel: str) -> type[BaseModel] | None:
    """The model of the record at ``rel`` (a path relative to the run folder, ``v3/timing.json``), or None when the
    file is not a record with a schema (Markdown, the kernel copy, the ncu report)."""
    parts = Path(rel).parts
    if len(parts) == 2 and parts[0].startswith("v") and parts[0][1:].isdigit():
        key = f"v*/{parts[1]}"
    elif len(parts) == 1:
        key = parts[0]
    else:
        return None
    return _models().get(key)


def _schema_name(pattern: str) -> str:
    return pattern.replace("v*/", "version.").rsplit(".", 1)[0] + ".schema.json"


def _other_models() -> dict[str, type[BaseModel]]:
    """Schema file name -> model of the files kernelpilot writes outside run folders: a bundle's manifest.json (one
    config per declared shape; a workload bundle's, Triton or ``.cu``) and a workload run's ``dispatch.json``."""
    from kernelpilot.bundle.manifest import BundleManifest
    from kernelpilot.bundle.manifest2 import CudaManifest, RangeManifest
    from kernelpilot.dispatch.model import Dispatch

    return {"bundle.manifest.schema.json": BundleManifest, "bundle.workload.manifest.schema.json": RangeManifest,
            "bundle.cuda.manifest.schema.json": CudaManifest, "dispatch.schema.json": Dispatch}


def _allow_event_ns(schema: dict) -> None:
    """Declare in a version record's schema the compact samples ``optimize`` writes (:mod:`kernelpilot.records.
    samples`): ``samples_event_ns`` (whole ns) in place of ``samples_ns``, one of the two when the model requires
    samples."""
    schema.setdefault("properties", {})["samples_event_ns"] = {
        "description": "the samples as the event timer's whole nanoseconds n, each sample being float32(n / 1e6) * "
                       "1e6 ns exactly (kernelpilot.records.samples); written instead of samples_ns when every "
                       "sample comes back exactly", "items": {"type": "integer"}, "title": "Samples Event Ns",
        "type": "array"}
    required = schema.get("required") or []
    if "samples_ns" in required:
        required.remove("samples_ns")
        schema["anyOf"] = [{"required": ["samples_ns"]}, {"required": ["samples_event_ns"]}]


def schema_texts() -> dict[str, str]:
    """File name -> the JSON Schema text of each record's model (:data:`RECORDS`; the card's is its own file) and
    of a bundle's ``manifest.json`` (``bundle.manifest.schema.json``, docs/bundles.md)."""
    models = _models()
    out: dict[str, str] = {}
    for name, model in _other_models().items():
        schema = model.model_json_schema()
        schema["$comment"] = f"kernelpilot {name.replace('.schema.json', '').replace('.', ' ')} (model {model.__name__})"
        out[name] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    for pattern in RECORDS:
        if pattern == "v*/verdict.json":
            continue  # profile/schema/bottleneck_card.v1.json
        schema = models[pattern].model_json_schema()
        schema["$comment"] = f"kernelpilot record {pattern} (model {models[pattern].__name__})"
        if pattern in ("v*/outcome.json", "v*/timing.json"):
            _allow_event_ns(schema)
        out[_schema_name(pattern)] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def write_schemas(folder: Path = SCHEMA_DIR) -> list[Path]:
    """Write every :func:`schema_texts` file into ``folder``; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_texts().items():
        path = folder / name
        path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write_schemas(Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_DIR):
        print(p)
