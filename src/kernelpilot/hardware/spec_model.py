"""GPU spec sheets, the values: :class:`SpecValue` (one sourced number) and :class:`GpuSpec` (one GPU's sheet).

Also the small rules every spec file obeys: the unit a metric's name requires (:func:`expected_unit`), how a
number is written back (:func:`format_number`), what makes a datasheet source citable
(:func:`source_is_citable`) and how citations name a file (:func:`display_path`). The file format is in
:mod:`kernelpilot.hardware.spec_format`; where files are found and looked up, in :mod:`kernelpilot.hardware.specs`
(which re-exports every name here).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelpilot.errors import SpecError

__all__ = [
    "PACKAGE_ROOT",
    "CONFLICT_TOLERANCE",
    "SpecValue",
    "GpuSpec",
    "expected_unit",
    "format_number",
    "display_path",
    "source_is_citable",
]

#: ``src/kernelpilot``: citations of packaged files are relative to this folder (``hardware/specs/H200.md``).
PACKAGE_ROOT = Path(__file__).resolve().parent.parent

# (suffix, unit) in the order they are tested; the rule is this module's own (units in names).
_UNIT_BY_SUFFIX: tuple[tuple[str, str], ...] = (
    ("_gbps", "GB/s"),
    ("_tflops", "TFLOP/s"),
    ("_tops", "TOP/s"),
    ("_mhz", "MHz"),
    ("_mb", "MB"),
    ("_kb", "KB"),
    ("_gb", "GB"),
    ("_w", "W"),
)
#: A URL in a source's text.
_URL_RE = re.compile(r"https?://\S+")
#: The marker of a first-hand reading of the device (its own provenance, no document to point into).
_DEVICE_QUERY_RE = re.compile(r"device\s*query", re.IGNORECASE)
#: Words that say where in a document a value is (kernelpilot's own list).
_LOCATOR_RE = re.compile(
    r"(\b(?:table|tables|page|pages|section|sections|appendix|figure|fig\.|chapter|row|rows|column|columns|"
    r"footnote|footnotes|endnote|endnotes|slide)\b|\bp\.\s*\d|\bpp\.\s*\d|§\s*\d)",
    re.IGNORECASE,
)
#: Two sources "agree" on a metric when they differ by at most this fraction of the first; kernelpilot's own rule.
CONFLICT_TOLERANCE = 0.01


def expected_unit(metric: str) -> str:
    """The unit a metric's name requires (units in names).

    Args:
        metric: a metric name such as ``dram_bandwidth_gbps`` or ``max_warps_per_sm``.

    Returns:
        ``GB/s`` for ``_gbps``, ``TFLOP/s`` for ``_tflops``, ``TOP/s`` for ``_tops``, ``MHz`` for ``_mhz``,
        ``MB`` for ``_mb``, ``KB`` for ``_kb``, ``GB`` for ``_gb``, ``W`` for ``_w``, ``threads`` for
        ``_threads``; for other (count) metrics ``registers``, ``threads``, ``warps`` or ``blocks`` for the
        first of those words the name contains (in that order), else ``count``.
        The rule is kernelpilot's own naming convention (see this module's docstring); nothing raised.
    """
    for suffix, unit in _UNIT_BY_SUFFIX:
        if metric.endswith(suffix):
            return unit
    if metric.endswith("_threads"):
        return "threads"
    for word, unit in (("register", "registers"), ("thread", "threads"), ("warp", "warps"), ("block", "blocks")):
        if word in metric:
            return unit
    return "count"


def format_number(value: float) -> str:
    """A number as spec files and citations write it: integers without a decimal point, else 6 significant digits.

    Args:
        value: any finite float (units are the caller's).

    Returns:
        ``"132"`` for 132.0, ``"989.5"`` for 989.5, ``"4221.35"`` for 4221.3456; never exponent notation for
        magnitudes below 10^15. Raises nothing.
    """
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    text = f"{value:.6g}"
    if "e" in text and math.isfinite(value):
        text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text


def source_is_citable(text: str) -> bool:
    """Whether a datasheet source's text lets a reader find the value again.

    Args:
        text: the text after ``[key]:`` under ``## Sources``.

    Returns:
        True when the text gives a URL (``http://`` or ``https://``), says ``device query`` (a first-hand
        reading of the device: its provenance is the citation), or names where in a document the value
        is: a table, page (``p. 12``, ``pp. 3``), section (``§2.2``), appendix, figure, chapter, row,
        column, footnote, endnote or slide. ``trust me`` or a bare title is False. The word list is
        kernelpilot's own rule (issue 5: every value cited with document, URL, table or page). Raises nothing.
    """
    return bool(_URL_RE.search(text) or _DEVICE_QUERY_RE.search(text) or _LOCATOR_RE.search(text))


def display_path(path: str | os.PathLike[str]) -> str:
    """How citations name a spec file.

    Args:
        path: the file's path.

    Returns:
        The path relative to the package folder ``src/kernelpilot`` for packaged files
        (``hardware/specs/H200.md``), else the absolute path (user files). Raises nothing.
    """
    resolved = Path(path).expanduser().resolve()
    try:
        return resolved.relative_to(PACKAGE_ROOT).as_posix()
    except ValueError:
        return str(resolved)



class SpecValue(BaseModel):
    """One sourced hardware value, read from one line of a spec file.

    Attributes:
        metric: metric name with its unit in the name (``dram_bandwidth_gbps``).
        value: the number, in ``unit``.
        unit: the unit as written (``GB/s``, ``TFLOP/s``, ``count`` ...; see :func:`expected_unit`).
        source_key: the key in brackets on the value's line.
        source: the text of that key's ``## Sources`` entry: ``title — URL`` for datasheet values, the
            provenance (date, method, device, driver, torch, n samples, median, IQR) for measured ones.
        path: the file as citations name it (:func:`display_path`).
        line: 1-based line number of the value in that file.
        note: free text after the source key (``derived: ...`` marks a value computed from the source).
        value_text: the number exactly as written in the file (used by :meth:`cite`; may be empty).
        alternatives: the same metric from other sources in the same file (later lines), kept as
            corroboration or as a conflict; the value used is always this one (never an average).
    """

    model_config = ConfigDict(frozen=True)

    metric: str
    value: float
    unit: str
    source_key: str
    source: str
    path: str
    line: int
    note: str = ""
    value_text: str = ""
    alternatives: list["SpecValue"] = Field(default_factory=list)

    @property
    def conflicting(self) -> list["SpecValue"]:
        """The alternatives whose value differs from this one by more than :data:`CONFLICT_TOLERANCE` of it."""
        return [alt for alt in self.alternatives if abs(alt.value - self.value) > CONFLICT_TOLERANCE * self.value]

    @property
    def conflict(self) -> bool:
        """True when another source in the file gives this metric a different value (see :attr:`conflicting`)."""
        return bool(self.conflicting)

    @property
    def derived(self) -> bool:
        """True when the value's note starts with ``derived`` (computed from the source, e.g. dense = sparse / 2)."""
        return self.note.lower().startswith("derived")

    @property
    def is_measured(self) -> bool:
        """True for measured ceilings (metric names starting with ``measured_``)."""
        return self.metric.startswith("measured_")

    def cite(self) -> str:
        """The citation ``<metric>: <value> <unit> <- <path>:<line>`` (format from docs/measuring.md, "Roofline")."""
        number = self.value_text or format_number(self.value)
        return f"{self.metric}: {number} {self.unit} <- {self.path}:{self.line}"


class GpuSpec(BaseModel):
    """A GPU's spec sheet: datasheet values plus any measured ceilings found for it.

    Attributes:
        name: the GPU's name in kernelpilot (the datasheet file's stem, e.g. ``H200``).
        title: the file's ``#`` heading.
        aliases: other names it is found by (:func:`find_spec`, :func:`match_device`).
        compute_capability: e.g. ``"9.0"``, or None when the file gives none.
        values: datasheet values by metric.
        measured: measured ceilings by metric (``measured_*``), merged in by :func:`list_specs`.
        vendor: ``NVIDIA``, ``AMD`` or ``Intel`` (the file's ``vendor:`` line; ``NVIDIA`` when absent).
        arch: the ISA target the vendor names (``gfx942``, ``pvc``), or None.
        path: the datasheet file as citations name it.
        kind: ``datasheet`` or ``measured`` (what :func:`load_spec_file` read).
        devices_per_package: how many devices the system shows for one package whose values the file
            gives (1 for most GPUs; 2 for an MI250X's two GCDs or a Max 1550's two stacks), from the file's
            ``devices_per_package:`` line; see :func:`per_device_spec`.
        device_unit: what one of those devices is called (``GCD``, ``stack``; ``device`` by default).
        package_of: for a per-device view made by :func:`per_device_spec`, the package spec's name; else None.
        device_measured: measured ceilings of ONE device of a multi-device package (a measured file naming
            the per-device spec, e.g. ``MI250X-GCD``); :func:`per_device_spec` uses them as they are (never
            divided), and the package's own ``measured`` stays empty of them.
    """

    name: str
    title: str = ""
    aliases: list[str] = Field(default_factory=list)
    compute_capability: str | None = None
    values: dict[str, SpecValue] = Field(default_factory=dict)
    measured: dict[str, SpecValue] = Field(default_factory=dict)
    path: str = ""
    kind: Literal["datasheet", "measured"] = "datasheet"
    vendor: str = "NVIDIA"
    arch: str | None = None
    devices_per_package: int = 1
    device_unit: str = "device"
    package_of: str | None = None
    device_measured: dict[str, SpecValue] = Field(default_factory=dict)

    def conflicts(self) -> list[SpecValue]:
        """The datasheet values whose sources disagree (:attr:`SpecValue.conflict`), in metric order."""
        return [self.values[m] for m in sorted(self.values) if self.values[m].conflict]

    def get(self, metric: str) -> SpecValue:
        """The value of ``metric`` (datasheet values first, then measured ones).

        Raises:
            SpecError: the spec has no such metric; the message names the metric and the file, the hint
                lists the metrics it has and how to add one.
        """
        if metric in self.values:
            return self.values[metric]
        if metric in self.measured:
            return self.measured[metric]
        known = ", ".join(sorted(self.values) + sorted(self.measured)) or "none"
        raise SpecError(
            f"GPU spec '{self.name}' ({self.path or 'no file'}) has no value for '{metric}'",
            hint=(
                f"its metrics: {known}. Add a line '- {metric}: <value> {expected_unit(metric)} [<source key>]' "
                f"under '## Values' in {self.path or 'its spec file'}, citing a source under '## Sources'"
                + (" (or run 'kernelpilot specs measure' on that GPU)" if metric.startswith("measured_") else "")
            ),
        )

    def ceiling(self, metric_datasheet: str, metric_measured: str | None = None) -> SpecValue:
        """The ceiling to use: the measured value when present, else the datasheet value.

        docs/measuring.md ("Roofline"): use measured ceilings where available; datasheet values are leads.

        Args:
            metric_datasheet: datasheet metric, e.g. ``dram_bandwidth_gbps``.
            metric_measured: measured metric, e.g. ``measured_copy_bandwidth_gbps``, or None.

        Raises:
            SpecError: neither value exists (names the datasheet metric and the file).
        """
        if metric_measured and metric_measured in self.measured:
            return self.measured[metric_measured]
        return self.get(metric_datasheet)

