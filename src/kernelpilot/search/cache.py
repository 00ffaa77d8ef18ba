"""The evaluation cache: append-only, crash-safe, one JSON line per evaluated config, and a replay runner.

One file per **context** — what makes a measurement reusable: the kernel file's source hash, the shape (with its
dtype), the GPU, the driver, and the torch / triton / Python versions, and whether the kernel ran under the Triton
interpreter (:class:`CacheContext`). The file is ``<dir>/<kernel>-<key[:16]>.jsonl`` where ``key`` is the sha256
of the context, so a changed kernel, shape, GPU or version opens a different file and nothing stale is reused,
while adding configs to a search space invalidates nothing (records are per config).

File format (JSON Lines, UTF-8)::

    {"kind": "kernelpilot.cache", "version": 1, "key": "<sha256>", "context": {...}, "created_at": "..."}
    {"key": "<config_key(config)>", "evaluation": {...Evaluation...}, "recorded_at": "2025-01-01T00:00:00.000+00:00",
     "signer": "<16 hex>", "mac": "<HMAC-SHA256 hex>"}
    ...

Trust (:mod:`~kernelpilot.search.cache_trust`): each record is signed when it is written, with a per-user key kept
outside the cache folder (``$KERNELPILOT_SECRET_DIR`` or ``<kernelpilot_home()>/keys``, mode 0600); the MAC covers
the context key and the whole line. A live search answers a line only when this user's key signed it, its median
is the median of its samples and it is not under the floor; every other line is refused by name and measured
again. A replay refuses a file with a forged or inconsistent line, answers unsigned lines (caches measured on
another machine) after the same consistency checks and says so, and holds every answer to the floor through the
evaluator. Records are read back as measurements only: the verdicts of the run that wrote them (accepted, decision,
"raced out", version numbers) are dropped and decided again.

Writing: each record is one ``os.write`` of the whole line to a file opened with ``O_APPEND``, under an exclusive
``fcntl.flock``, followed by ``os.fsync`` — several processes (workers, a rerun) can share a file. The header is
written with the first record, in the same write (again with the next record if a crash
tore it). A crash can at worst leave a torn last line; the next append
starts on a fresh line so the torn fragment never swallows a good record.

Reading (under a shared ``flock``) never loses good records: a torn last line or a corrupt line anywhere is
skipped, counted (``skipped_lines``) and named by line number (``warnings``). When a config was recorded more than
once, the last record wins.

Folder: an explicit ``root``, else ``$KERNELPILOT_CACHE``, else ``<kernelpilot_home()>/cache``
(:func:`cache_dir`).

This module is the cache's public face; the parts live in :mod:`~kernelpilot.search.cache_file` (format, reader),
:mod:`~kernelpilot.search.cache_store` (context, store), :mod:`~kernelpilot.search.cache_trust` (signatures and
checks), :mod:`~kernelpilot.search.cache_admin` (list, show, clear) and :mod:`~kernelpilot.search.replay`
(:class:`ReplayRunner`).
"""

from __future__ import annotations

from kernelpilot.search.cache_admin import CacheSummary, clear_cache, list_caches, read_cache_file, show_cache
from kernelpilot.search.cache_file import FORMAT_VERSION, HEADER_KIND, cache_dir
from kernelpilot.search.cache_store import CacheContext, EvaluationCache, NotInCache
from kernelpilot.search.cache_trust import CacheEntryRefused, CacheLineRefused, RefusedLine
from kernelpilot.search.replay import ReplayRunner

__all__ = [
    "FORMAT_VERSION",
    "HEADER_KIND",
    "CacheContext",
    "CacheEntryRefused",
    "CacheLineRefused",
    "RefusedLine",
    "CacheSummary",
    "EvaluationCache",
    "NotInCache",
    "ReplayRunner",
    "cache_dir",
    "clear_cache",
    "list_caches",
    "read_cache_file",
    "show_cache",
]

