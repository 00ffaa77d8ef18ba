"""Dispatch tables: per bucket of shapes, the config that serves it (``dispatch.json``), the winner rule that picks
it, and generated ways to use it (a ``triton.autotune`` config list with a pruning function, a plain Python
dispatcher). Format and rules: docs/dispatch.md.
"""

from kernelpilot.dispatch.evidence import evidence_problems
from kernelpilot.dispatch.generate import (autotune_configs_source, bucket_for, lookup_source,
                                           python_dispatcher_source, select_config)
from kernelpilot.dispatch.io import (DISPATCH_FILE, body_sha256, canonical_json, dispatch_sha256, read_dispatch,
                                     write_dispatch)
from kernelpilot.dispatch.model import (FILE_KIND, SCHEMA_VERSION, Bucket, ConfigTotal, Dispatch, KernelRef,
                                        Measurement, make_bucket, make_dispatch, make_total, shape_id,
                                        weighted_time_ns)
from kernelpilot.dispatch.winner import TIE_PCT, CandidateScore, Winner, choose_winner, config_json, stable_order_key

__all__ = ["DISPATCH_FILE", "FILE_KIND", "SCHEMA_VERSION", "TIE_PCT", "Bucket", "CandidateScore", "ConfigTotal",
           "Dispatch", "KernelRef", "Measurement", "Winner", "autotune_configs_source", "body_sha256", "bucket_for",
           "canonical_json", "choose_winner", "config_json", "dispatch_sha256", "evidence_problems", "lookup_source", "make_bucket",
           "make_dispatch", "make_total", "python_dispatcher_source", "read_dispatch", "select_config", "shape_id",
           "stable_order_key", "weighted_time_ns", "write_dispatch"]
