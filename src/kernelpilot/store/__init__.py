"""The config store: decided configs that persist and travel (issue 26; docs/workloads.md, "The config store").

A SQLite file beside the evaluation cache (``<kernelpilot home>/configs.db``) keyed by kernel source hash, arch,
toolchain versions, dtype, stride pattern and shape range; export to JSON Lines, import and merge with a stated
conflict rule; a run-time lookup that imports neither torch nor Triton.

Modules: :mod:`.model` (key, entry, normalisation, default path), :mod:`.schema` (the SQLite layout),
:mod:`.lookup` (the run-time lookup and its rule), :mod:`.db` (:class:`ConfigStore`: put, export, import, merge),
:mod:`.keys` (a kernel file and shape as key parts), :mod:`.runtime` (``configs_for``: cached, never raises, for
library code). The commands: ``kernelpilot configs`` (:mod:`kernelpilot.api.configs`).
"""

from kernelpilot.store.db import ConfigStore, MergeReport, read_jsonl
# `lookup` the function is not bound here: `kernelpilot.store.lookup` must stay the module (import it as
# `from kernelpilot.store.lookup import lookup`, or use `lookup_config`, the same function).
from kernelpilot.store.lookup import lookup as lookup_config
from kernelpilot.store.lookup import lookup_entry, runtime_toolchain, select
from kernelpilot.store.model import (ConfigStoreError, Evidence, StoreKey, StoredConfig, default_store_path,
                                     normalize_arch, normalize_dtype, normalize_range, normalize_toolchain,
                                     range_contains)
from kernelpilot.store.schema import KIND, SCHEMA_VERSION

__all__ = ["ConfigStore", "MergeReport", "read_jsonl", "lookup_config", "lookup_entry", "runtime_toolchain", "select",
           "ConfigStoreError", "Evidence", "StoreKey", "StoredConfig", "default_store_path", "normalize_arch",
           "normalize_dtype", "normalize_range", "normalize_toolchain", "range_contains", "KIND", "SCHEMA_VERSION"]
