"""Compatibility: the tuner moved to :mod:`kernelpilot.app.tune` (``tune``, ``TuneResult``),
:mod:`kernelpilot.engine.evaluator` (``Evaluator``, the one evaluation pipeline; ``Tuner`` is its old name) and
:mod:`kernelpilot.engine.prune` (static pruning). These names stay importable from here."""

from kernelpilot.app.tune import TuneResult, tune, write_tune_records
from kernelpilot.backends.triton.config import to_triton_config
from kernelpilot.engine.evaluator import Evaluator, IncumbentChange
from kernelpilot.engine.evaluator import Evaluator as Tuner
from kernelpilot.engine.prune import DEFAULT_MAX_SPILLS, CompileAhead, PruneReport, compile_order, prune_reason
from kernelpilot.report.tune_md import render_tune_md

__all__ = ["DEFAULT_MAX_SPILLS", "CompileAhead", "Evaluator", "IncumbentChange", "PruneReport", "TuneResult", "Tuner",
           "compile_order", "prune_reason", "render_tune_md", "to_triton_config", "tune", "write_tune_records"]
