"""A run's bottleneck cards without the pattern entries that every card of the run repeats.

Each card (``vN/verdict.json``, :class:`kernelpilot.profile.card.BottleneckCard`) lists all 14 numeric patterns,
each entry with the pattern's text (title, rule, source, metrics) and, for a pattern a light card cannot evaluate,
the same missing metrics and note every time: 10 of a light card's 13 KB repeat from card to card. So ``optimize``
keeps each pattern's entry once per run, in ``patterns.json`` at the top of the run folder (pattern id -> the entry
as the first card of the run that listed it had it), and writes a card's entry as ``{"id": ..., "like":
"patterns.json"}`` plus only the fields whose values differ from that entry (a not-fired pattern's evidence values,
say). An entry with other fields than the kept one is written whole. ``patterns.json`` is written, journaled and
committed with the first version whose card added an id, and sealed like every record.

Readers put the entries back with :func:`unpack_card` (``restored``, ``report``'s validation and page): the kept
entry, then the card's own fields over it; an entry without ``like`` is read as written, so a card written before
this (or a session's) reads as before. An entry whose id ``patterns.json`` does not hold keeps its ``like`` and
fails the card's schema, naming the file (issue 25, "Records that scale").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["LIKE", "PATTERN_TEXTS_FILE", "pack_card", "read_texts", "unpack_card"]

PATTERN_TEXTS_FILE = "patterns.json"
#: the key of an entry written as its differences from the run's kept entry
LIKE = "like"


def pack_card(card: dict[str, Any], texts: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """``card`` (a card's JSON) with each pattern entry written as its differences from ``texts[id]``; an id not in
    ``texts`` is added to it, whole (``texts`` is updated in place). Returns (the card to write, whether ``texts``
    changed). A card without a list of patterns is returned as it is. Raises nothing."""
    patterns = card.get("patterns")
    if not isinstance(patterns, list):
        return card, False
    changed, out = False, []
    for entry in patterns:
        pid = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(pid, str) or LIKE in entry:
            out.append(entry)
            continue
        if pid not in texts:
            texts[pid] = entry
            changed = True
        kept = texts[pid]
        if set(kept) != set(entry):
            out.append(entry)
            continue
        out.append({"id": pid, LIKE: PATTERN_TEXTS_FILE, **{k: v for k, v in entry.items() if kept[k] != v}})
    return {**card, "patterns": out}, changed


def unpack_card(card: Any, texts: dict[str, Any]) -> Any:
    """``card`` with each entry written ``like`` the run's kept one (:func:`read_texts`) made whole again: the kept
    entry with the written fields over it. Anything else, and an entry whose id ``texts`` does not hold, unchanged.
    Raises nothing."""
    if not isinstance(card, dict) or not isinstance(card.get("patterns"), list):
        return card
    out = []
    for entry in card["patterns"]:
        if isinstance(entry, dict) and entry.get(LIKE) == PATTERN_TEXTS_FILE:
            kept = texts.get(entry.get("id"))  # type: ignore[arg-type]
            if isinstance(kept, dict):
                entry = {**kept, **{k: v for k, v in entry.items() if k != LIKE}}
        out.append(entry)
    return {**card, "patterns": out}


def read_texts(root: Path) -> dict[str, Any]:
    """The run's ``patterns.json`` (pattern id -> its kept entry); ``{}`` when absent or not a JSON object (a card
    that needs it then fails its schema, naming the card). Raises nothing."""
    try:
        data = json.loads((Path(root) / PATTERN_TEXTS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
