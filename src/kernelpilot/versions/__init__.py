"""Versions an author writes (``kernelpilot session``): the seed workflows' loop for code changes.

Public API::

    from kernelpilot.versions import start, try_version, status, mask, unmask, restart, finish

``start`` → v0 with the check frozen; ``try_version`` → one version per hypothesis (committed before it runs);
``status``; ``mask``/``unmask``/``restart`` (nothing deleted); ``finish`` → final_report.md + benchmark.md. The
records: :mod:`kernelpilot.versions.records`; the outcome rules: :mod:`kernelpilot.versions.outcome`. A version is
evaluated by the one :class:`~kernelpilot.engine.evaluator.Evaluator` (:mod:`kernelpilot.versions.run_version`):
its file is the candidate (:mod:`kernelpilot.versions.candidates`), and :mod:`kernelpilot.versions.recorder`
writes its folder.
"""

from kernelpilot.versions.manage import finish, mask, restart, status, unmask
from kernelpilot.versions.records import MemoryRecord, SessionState
from kernelpilot.versions.session import SessionStatus, TryResult, start, try_version

__all__ = ["MemoryRecord", "SessionState", "SessionStatus", "TryResult", "finish", "mask", "restart", "start",
           "status", "try_version", "unmask"]
