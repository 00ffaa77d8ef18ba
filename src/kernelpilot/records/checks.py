"""A run's correctness records without the parts that every version of the run repeats.

Each ``vN/correctness.json`` (:class:`kernelpilot.measure.correctness.CorrectnessResult`) carries the check's rule
text, the tolerances, the observed roles of every tensor (what the kernel read and wrote, how it was probed), and,
per seed and shape, one object per output whose keys are the same every time. Measured on session 12's H200 runs
(docs/device-runs/2026-11-27-s12): a live ``optimize`` version cost about 10.7 KB on disk, files and git objects
together (the matmul example: 9.19 MB for 657 versions, of which about 2.1 MB is the run's fixed part), so a run of
1,000 measured configs would exceed issue 25's 10 MB ("Records that scale"); a correctness record of the attention
tutorial is 6.5 KB.

So ``optimize`` keeps each distinct ``rule``, ``tolerances`` and ``roles`` block once per run, in ``checks.json``
at the top of the run folder (an id, the first 16 hex digits of the SHA-256 of the block's canonical JSON -> the
block), and writes the version's block as ``{"like": "checks.json", "id": ...}``; when every seed's outputs are
objects with the same keys in the same order, those keys once as ``output_columns`` and each output as the list of
its values; and the seeds the same way (``seed_columns``), a seed's ``shape`` written as the string ``"shape"``
when it is the record's own (the check's seeds: the derived shapes of an audit keep theirs), and a passed output's
reason as ``"="`` when it is exactly the sentence its own numbers give (:func:`pass_reason`). Session 13's matmul
example on an H200 still spent 1.9 KB per version on ``correctness.json`` after the blocks and output columns alone.
All of it is lossless: readers put the record back with :func:`unpack_checks` (``report``'s validation) and get
the record the check made, the same JSON. A block whose id ``checks.json`` does not hold keeps its reference and
fails the record's schema, naming the file; a record written before this (or by a ``session``) reads as written. ``checks.json`` is written,
journaled and committed with the first version that added an id, and sealed like every record.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kernelpilot.records.cards import LIKE

__all__ = ["CHECKS_FILE", "pack_checks", "pass_reason", "read_checks", "unpack_checks"]

CHECKS_FILE = "checks.json"
#: the blocks of a correctness record kept once per run
KEPT = ("rule", "tolerances", "roles")
#: the record-level key naming the output objects' keys, when every seed's outputs are rows of them
COLUMNS = "output_columns"
#: the record-level key naming the seed objects' keys, when every seed is a row of them
SEED_COLUMNS = "seed_columns"
#: a seed row's shape when it is the record's own ``shape`` (the check's seeds; derived shapes keep theirs)
SAME_SHAPE = "shape"
#: a passed output's reason when it is exactly :func:`pass_reason` of the output's own ``rel_l2_error`` and ``rtol``
SAME_REASON = "="


def pass_reason(rel_l2_error: float, rtol: float) -> str:
    """The reason an output within tolerance gets (:func:`kernelpilot.measure.compare.verdict` says it with this):
    ``relative L2 error 2.72e-08 <= 0.001; every element and row within tolerance``. Raises nothing for numbers."""
    return f"relative L2 error {rel_l2_error:.3g} <= {rtol:g}; every element and row within tolerance"


def _reason_packed(output: Any) -> Any:
    """An output object whose ``reason`` is exactly :func:`pass_reason` of its own numbers, with the reason written
    as :data:`SAME_REASON`; anything else unchanged."""
    if not isinstance(output, dict) or output.get("passed") is not True:
        return output
    rel, rtol = output.get("rel_l2_error"), output.get("rtol")
    if not isinstance(rel, (int, float)) or not isinstance(rtol, (int, float)) or isinstance(rel, bool):
        return output
    return {**output, "reason": SAME_REASON} if output.get("reason") == pass_reason(rel, rtol) else output


def _reason_unpacked(output: Any) -> Any:
    if isinstance(output, dict) and output.get("reason") == SAME_REASON and output.get("passed") is True:
        return {**output, "reason": pass_reason(output["rel_l2_error"], output["rtol"])}
    return output


def _block_id(block: Any) -> str:
    return hashlib.sha256(json.dumps(block, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def pack_checks(record: dict[str, Any], kept: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``record`` (a correctness record's JSON) with its :data:`KEPT` blocks written as references to ``kept``
    (updated in place with a block not seen before), passed outputs' own reasons as :data:`SAME_REASON`, each
    seed's outputs as rows of ``output_columns`` and the seeds as rows of ``seed_columns``. Returns (the record to
    write, whether ``kept`` changed). Anything that is not such a record is returned as it is. Raises nothing."""
    if not isinstance(record, dict):
        return record, False
    out, changed = dict(record), False
    for name in KEPT:
        block = out.get(name)
        if block is None or (isinstance(block, dict) and LIKE in block):
            continue
        bid = _block_id(block)
        if bid not in kept:
            kept[bid] = block
            changed = True
        out[name] = {LIKE: CHECKS_FILE, "id": bid}
    seeds = out.get("seeds")
    if isinstance(seeds, list) and COLUMNS not in out:
        seeds = [{**s, "outputs": [_reason_packed(o) for o in s["outputs"]]}
                 if isinstance(s, dict) and isinstance(s.get("outputs"), list) else s for s in seeds]
        out["seeds"] = seeds
    outputs = [s.get("outputs") if isinstance(s, dict) else None for s in seeds] if isinstance(seeds, list) else []
    columns = _columns(outputs)
    if columns is not None and COLUMNS not in out:
        out[COLUMNS] = columns
        out["seeds"] = seeds = [{**s, "outputs": [[o[k] for k in columns] for o in s["outputs"]]} for s in seeds]
    seed_columns = _columns([seeds]) if isinstance(seeds, list) and SEED_COLUMNS not in out else None
    if seed_columns is not None and "shape" in out:
        out[SEED_COLUMNS] = seed_columns
        out["seeds"] = [[SAME_SHAPE if k == "shape" and s[k] == out["shape"] else s[k] for k in seed_columns]
                        for s in seeds]
    return out, changed


def _columns(outputs: list[Any]) -> list[str] | None:
    """The keys every output object of every seed has, in the same order; None when they differ or are absent."""
    if not outputs or not all(isinstance(o, list) and o and all(isinstance(x, dict) for x in o) for o in outputs):
        return None
    keys = list(outputs[0][0])
    return keys if all(list(x) == keys for o in outputs for x in o) else None


def unpack_checks(record: Any, kept: dict[str, Any]) -> Any:
    """``record`` made whole again (:func:`pack_checks` undone): each reference replaced by the kept block it names,
    each seed and output row back to an object, each :data:`SAME_SHAPE` and :data:`SAME_REASON` back to what it
    stands for. A reference ``kept`` does not hold stays as it is (the schema then refuses
    the record); anything else is returned unchanged. Raises nothing."""
    if not isinstance(record, dict):
        return record
    out = dict(record)
    for name in KEPT:
        block = out.get(name)
        if isinstance(block, dict) and block.get(LIKE) == CHECKS_FILE and block.get("id") in kept:
            out[name] = kept[block["id"]]
    seed_columns, seeds = out.get(SEED_COLUMNS), out.get("seeds")
    if isinstance(seed_columns, list) and isinstance(seeds, list) and all(
            isinstance(r, list) and len(r) == len(seed_columns) for r in seeds):
        del out[SEED_COLUMNS]
        out["seeds"] = [{k: out.get("shape") if k == "shape" and v == SAME_SHAPE else v
                         for k, v in zip(seed_columns, r)} for r in seeds]
    columns, seeds = out.get(COLUMNS), out.get("seeds")
    if isinstance(columns, list) and isinstance(seeds, list) and all(
            isinstance(s, dict) and isinstance(s.get("outputs"), list)
            and all(isinstance(r, list) and len(r) == len(columns) for r in s["outputs"]) for s in seeds):
        del out[COLUMNS]
        out["seeds"] = seeds = [{**s, "outputs": [dict(zip(columns, r)) for r in s["outputs"]]} for s in seeds]
    if isinstance(seeds, list):
        out["seeds"] = [{**s, "outputs": [_reason_unpacked(o) for o in s["outputs"]]}
                        if isinstance(s, dict) and isinstance(s.get("outputs"), list) else s for s in seeds]
    return out


def read_checks(root: Path) -> dict[str, Any]:
    """The run's ``checks.json`` (block id -> block); ``{}`` when absent or not a JSON object (a record that needs it
    then fails its schema, naming the record). Raises nothing."""
    try:
        data = json.loads((Path(root) / CHECKS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
