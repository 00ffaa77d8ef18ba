"""Workloads: the shapes a kernel really runs at, with weights (issue 26; formats in docs/workloads.md).

Modules: :mod:`.model` (the :class:`Workload` and its JSON file), :mod:`.ranges` (workloads generated from ranges,
``M=1:16384``), :mod:`.buckets` (shapes grouped where one config should serve, and their neighbours),
:mod:`.capture` (shapes and counts of a real PyTorch program's calls to the reference op, through the torch
profiler), :mod:`.infer` (the capture mapping observed by running a kernel file's ``setup`` and ``reference``),
:mod:`.strides` (the canonical stride pattern). Only the standard library and pydantic at import: torch is imported
inside the functions that run a program.
"""

from kernelpilot.workload.buckets import (BUCKET_RULES, Bucket, bucket_for, bucket_neighbours, bucket_workload, varying_keys,
                                         class_range)
from kernelpilot.workload.capture import (Capture, ProfiledCall, capture_workload, map_call, op_name, parse_mapping,
                                         parse_mapping_text)
from kernelpilot.workload.model import Workload, WorkloadEntry, WorkloadError, build_workload, load_workload, shape_id
from kernelpilot.workload.ranges import POINT_RULES, format_ranges, parse_ranges, range_points, workload_from_ranges
from kernelpilot.workload.strides import CONTIGUOUS, stride_pattern, tensor_pattern

__all__ = ["varying_keys", "Workload", "WorkloadEntry", "WorkloadError", "build_workload", "load_workload", "shape_id",
           "POINT_RULES", "range_points", "parse_ranges", "format_ranges", "workload_from_ranges",
           "BUCKET_RULES", "Bucket", "bucket_workload", "bucket_for", "bucket_neighbours", "class_range",
           "Capture", "ProfiledCall", "capture_workload", "map_call", "op_name", "parse_mapping",
           "parse_mapping_text",
           "CONTIGUOUS", "stride_pattern", "tensor_pattern"]
