"""Compatibility: ``kernelpilot optimize`` moved to :mod:`kernelpilot.app.optimize` (the engine + the run-folder
recorder + the guided strategy); device detection and the roofline set-up to :mod:`kernelpilot.app.context`. These
names stay importable from here."""

from kernelpilot.app.context import detect_device
from kernelpilot.app.context import roofline_at as roofline_for
from kernelpilot.app.optimize import OptimizeResult, now_utc, optimize

__all__ = ["OptimizeResult", "detect_device", "now_utc", "optimize", "roofline_for"]
