"""``kernelpilot inductor``'s API function: :func:`kernelpilot.inductor.importer.import_inductor` (it lives in the
inductor package, below ``app``, so that ``optimize``'s Inductor candidate can call it without reaching up into
the API layer)."""

from __future__ import annotations

from kernelpilot.inductor.importer import MODES, InductorImport, import_inductor

__all__ = ["MODES", "InductorImport", "import_inductor"]
