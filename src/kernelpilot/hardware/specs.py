"""GPU spec sheets: read, check and look up the Markdown files in ``hardware/specs/``.

Every number kernelpilot uses as a hardware ceiling comes from one of these files, and every value in
them carries its source, so a roofline or a verdict can cite where each ceiling came from in the form
``<metric>: <value> <unit> <- <path>:<line>`` (the citation rule of docs/PRODUCT.md, "Roofline").

File format (one value per line, each with its source)::

    # NVIDIA H200 SXM                      <- title (first "# " heading)
    aliases: NVIDIA H200, H200 SXM         <- names this GPU is found by (comma separated)
    compute_capability: 9.0 [devq]         <- optional, with an optional source key
    kind: datasheet                        <- "datasheet" (default) or "measured"
    spec: H200                             <- measured files only: the GPU the values belong to

    ## Sources
    [dsh200]: NVIDIA H200 Tensor Core GPU product page — https://...

    ## Values
    - dram_bandwidth_gbps: 4800 GB/s [dsh200]
    - peak_bf16_tensor_dense_tflops: 989.5 TFLOP/s [dsh200] derived: 1979 with sparsity; dense = half

* A GPU's name is its file's stem (``H200.md`` -> ``H200``); a measured file names its GPU in ``spec:``
  (default: its stem).
* A value line is ``- <metric>: <number> <unit> [<source key>] <optional note>``. A metric may appear again
  with another source key: the first line is the value used, later ones are kept as ``alternatives`` and
  flagged as a conflict when they differ by more than :data:`CONFLICT_TOLERANCE` (never averaged).
  The key must be defined under ``## Sources`` as ``[key]: <title> — <URL>`` (or, for measured values, their
  provenance). A note starting with ``derived`` marks a value computed from the source (for example
  the dense half of a sparse tensor rate) rather than read off it.
* ``vendor:`` (NVIDIA, AMD, Intel) and ``arch:`` (e.g. ``gfx942 [key]``) are optional header lines.
* ``devices_per_package: 2 [key]`` (optional, default 1) says the file's values are for a package that the
  system shows as that many devices (AMD MI250X: two GCDs; Intel Max 1550: two stacks), and ``device_unit:``
  names one of them (``GCD``, ``stack``). :func:`per_device_spec` divides the package ceilings by that count;
  :func:`match_device` applies it, since a process runs on one device.
* A datasheet value's source must be citable: its ``## Sources`` text gives a URL (``http...``) or says
  ``device query`` (a first-hand reading of the device), or names where in the document the value is
  (a table, page, section, appendix, figure, row, column or footnote). ``[x]: trust me`` is refused at load
  time (:func:`source_is_citable`). Measured files cite their provenance instead.
* The unit must fit the metric's suffix (units in names): ``_gbps`` GB/s, ``_tflops`` TFLOP/s,
  ``_tops`` TOP/s, ``_mb`` MB, ``_kb`` KB, ``_gb`` GB, ``_mhz`` MHz, ``_w`` W; other metrics are counts:
  ``registers`` when the name says registers, ``warps`` for warps, ``blocks`` for blocks, else ``count``.
* Datasheet files may not hold ``measured_*`` metrics and measured files hold only those.
* Other sections and prose lines are ignored; ``README.md`` files are not spec files.

Where files are read from:

* datasheets: the package's ``hardware/specs/*.md``, then ``$KERNELPILOT_HOME/specs/*.md`` (default
  ``~/.kernelpilot/specs``); a user file with a packaged file's name replaces it.
* measured ceilings: the package's ``hardware/specs/measured/*.md``, then
  ``$KERNELPILOT_HOME/specs/measured/*.md`` (see :func:`measured_dir`); files are applied in name order,
  user files last, and a later file's value for a metric replaces an earlier one.

Units: GB and GB/s are decimal (10^9 bytes) as in NVIDIA's datasheets; MB and KB for on-chip memory
(L2, shared memory) are written as NVIDIA writes them (the device reports 2^20 and 2^10 multiples).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelpilot.errors import SpecError

__all__ = [
    "PACKAGE_ROOT",
    "SPECS_DIR",
    "PACKAGE_MEASURED_DIR",
    "SpecValue",
    "GpuSpec",
    "expected_unit",
    "format_number",
    "display_path",
    "kernelpilot_home",
    "user_specs_dir",
    "measured_dir",
    "load_spec_file",
    "source_is_citable",
    "PACKAGE_SPLIT_METRICS",
    "PACKAGE_ONLY_METRICS",
    "is_package_split_metric",
    "per_device_name",
    "per_device_spec",
    "list_specs",
    "find_spec",
    "match_device",
]

#: ``src/kernelpilot``: citations of packaged files are relative to this folder (``hardware/specs/H200.md``).
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
#: The packaged datasheet files.
SPECS_DIR = Path(__file__).resolve().parent / "specs"
#: The packaged measured-ceiling files.
PACKAGE_MEASURED_DIR = SPECS_DIR / "measured"

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
_METRIC_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_KEY_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_SOURCE_RE = re.compile(r"^\[(?P<key>[^\]]*)\]:\s*(?P<text>.*?)\s*$")
_VALUE_RE = re.compile(r"^[-*+]\s+(?P<metric>[^:\s]+)\s*:\s*(?P<rest>.*?)\s*$")
_VALUE_REST_RE = re.compile(
    r"^(?P<value>[^\s\[]+)(?:\s+(?P<unit>[^\s\[]+))?(?:\s*\[(?P<key>[^\]]*)\])?\s*(?P<note>.*)$"
)
_HEADER_RE = re.compile(
    r"^(?P<key>aliases|compute_capability|kind|spec|vendor|arch|devices_per_package|device_unit)\s*:\s*(?P<value>.*?)\s*$"
)
_DPP_RE = re.compile(r"^(?P<n>\d+)\s*(?:\[(?P<key>[^\]]*)\])?\s*(?P<note>.*)$")
_DEVICE_UNIT_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
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
_VENDORS = ("NVIDIA", "AMD", "Intel")
#: Two sources "agree" on a metric when they differ by at most this fraction of the first; kernelpilot's own rule.
CONFLICT_TOLERANCE = 0.01
_CC_RE = re.compile(r"^(?P<cc>\d+\.\d+)\s*(?:\[(?P<key>[^\]]*)\])?\s*(?P<note>.*)$")
_HOW_TO_ADD = (
    "To add a GPU, copy hardware/specs/H200.md to {dir}/<NAME>.md, replace every value with one from a "
    "cited source (one value per line: '- <metric>: <value> <unit> [<source key>]'), and put the name "
    "the device reports (torch.cuda.get_device_name()) on its 'aliases:' line"
)


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


def kernelpilot_home() -> Path:
    """The user's kernelpilot folder: ``$KERNELPILOT_HOME`` if set, else ``~/.kernelpilot`` (not created here)."""
    env = os.environ.get("KERNELPILOT_HOME", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".kernelpilot"


def user_specs_dir() -> Path:
    """Folder of the user's own datasheet files: ``<kernelpilot_home()>/specs`` (not created here)."""
    return kernelpilot_home() / "specs"


def measured_dir() -> Path:
    """Folder where measured ceilings are written and read: ``<kernelpilot_home()>/specs/measured``.

    ``kernelpilot specs measure`` writes ``<GPU name>.md`` here (see
    :func:`kernelpilot.hardware.ceilings.write_measured`); the folder is not created by this function.
    """
    return user_specs_dir() / "measured"


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
        """The citation ``<metric>: <value> <unit> <- <path>:<line>`` (format from docs/PRODUCT.md, "Roofline")."""
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

        docs/PRODUCT.md ("Roofline"): use measured ceilings where available; datasheet values are leads.

        Args:
            metric_datasheet: datasheet metric, e.g. ``dram_bandwidth_gbps``.
            metric_measured: measured metric, e.g. ``measured_copy_bandwidth_gbps``, or None.

        Raises:
            SpecError: neither value exists (names the datasheet metric and the file).
        """
        if metric_measured and metric_measured in self.measured:
            return self.measured[metric_measured]
        return self.get(metric_datasheet)


# ----------------------------------------------------------------------------------------------------
# parsing


def _fail(shown: str, line: int | None, problem: str, hint: str) -> SpecError:
    where = f"{shown}:{line}" if line else shown
    return SpecError(f"{where}: {problem}", hint=hint)


def _clean_note(text: str) -> str:
    return text.strip().lstrip("—–-;:,").strip()


def load_spec_file(path: str | os.PathLike[str]) -> GpuSpec:
    """Read and check one spec file (datasheet or measured; format in this module's docstring).

    Args:
        path: the Markdown file.

    Returns:
        A :class:`GpuSpec`. For a datasheet file its ``values`` hold the values; for a measured file
        (``kind: measured``) its ``measured`` hold them and ``name`` is the GPU named by ``spec:``.
        Nothing from other files is merged in (that is :func:`list_specs`).

    Raises:
        SpecError: the file cannot be read, or a line breaks the format; the message names
            ``path:line`` and the problem (value without a source key, unknown source key, non-numeric or
            non-positive value, unit not matching the metric's suffix, duplicate metric or key, bad
            header), the hint says how to fix it.
    """
    file = Path(path)
    shown = display_path(file)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(shown, None, f"cannot read spec file ({exc})", "check the path and that the file is UTF-8 text")

    title = ""
    aliases: list[str] = []
    compute_capability: str | None = None
    cc_key: tuple[str, int] | None = None
    vendor = "NVIDIA"
    arch: str | None = None
    arch_key: tuple[str, int] | None = None
    kind = "datasheet"
    spec_name = file.stem
    devices_per_package = 1
    dpp_key: tuple[str, int] | None = None
    device_unit = "device"
    section = ""  # "" before the first "##" heading
    sources: dict[str, tuple[str, int]] = {}
    raw_values: list[tuple[int, str, str]] = []  # (line, metric, rest)

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        heading = _HEADING_RE.match(line)
        if heading:
            level, heading_text = len(heading.group(1)), heading.group(2)
            if level == 1 and not title:
                title = heading_text
            elif level == 2:
                section = heading_text.strip().lower()
            continue
        if section == "":
            header = _HEADER_RE.match(line)
            if not header:
                continue  # prose
            key, value = header.group("key"), header.group("value")
            if key == "aliases":
                aliases.extend(a.strip() for a in value.split(",") if a.strip())
            elif key == "compute_capability":
                cc = _CC_RE.match(value)
                if not cc:
                    raise _fail(shown, number, f"compute_capability '{value}' is not of the form 9.0",
                                "write it as major.minor, optionally followed by a source key in brackets")
                compute_capability = cc.group("cc")
                if cc.group("key") is not None:
                    cc_key = (cc.group("key").strip(), number)
            elif key == "kind":
                if value not in ("datasheet", "measured"):
                    raise _fail(shown, number, f"kind '{value}' is neither 'datasheet' nor 'measured'",
                                "use 'kind: datasheet' (the default) or 'kind: measured'")
                kind = value
            elif key == "vendor":
                if value not in _VENDORS:
                    raise _fail(shown, number, f"vendor '{value}' is not one of {', '.join(_VENDORS)}",
                                "write e.g. 'vendor: NVIDIA'")
                vendor = value
            elif key == "arch":
                name, _, rest = value.partition("[")
                if not name.strip():
                    raise _fail(shown, number, "'arch:' names no target", "write e.g. 'arch: gfx942 [source key]'")
                arch = name.strip()
                if rest:
                    arch_key = (rest.split("]", 1)[0].strip(), number)
            elif key == "devices_per_package":
                dpp = _DPP_RE.match(value)
                if not dpp or int(dpp.group("n")) < 1:
                    raise _fail(shown, number, f"devices_per_package '{value}' is not a whole number of 1 or more",
                                "write e.g. 'devices_per_package: 2 [source key]' (devices the system shows per package)")
                devices_per_package = int(dpp.group("n"))
                if dpp.group("key") is None or not dpp.group("key").strip():
                    raise _fail(shown, number, "devices_per_package has no source",
                                "cite where the vendor says how many devices one package shows: "
                                "'devices_per_package: 2 [source key]'")
                dpp_key = (dpp.group("key").strip(), number)
            elif key == "device_unit":
                if not _DEVICE_UNIT_RE.match(value):
                    raise _fail(shown, number, f"device_unit '{value}' is not one word of letters and digits",
                                "write e.g. 'device_unit: GCD' or 'device_unit: stack'")
                device_unit = value
            elif key == "spec":
                if not value:
                    raise _fail(shown, number, "'spec:' names no GPU", "write e.g. 'spec: H200'")
                spec_name = value
        elif section == "sources":
            if not line.startswith("["):
                continue  # prose
            src = _SOURCE_RE.match(line)
            if not src:
                raise _fail(shown, number, f"malformed source line '{line}'",
                            "write sources as '[key]: <document title> — <URL>'")
            key, body = src.group("key").strip(), src.group("text")
            if not _KEY_RE.match(key):
                raise _fail(shown, number, f"source key '[{key}]' has characters other than letters, digits, '_.:-'",
                            "rename the key, e.g. [dsh200]")
            if not body:
                raise _fail(shown, number, f"source [{key}] has no text",
                            "write the document's title and URL (or the measurement's provenance) after the colon")
            if key in sources:
                raise _fail(shown, number, f"source key [{key}] is defined twice (first on line {sources[key][1]})",
                            "give each source its own key")
            sources[key] = (body, number)
        elif section == "values":
            if line[0] not in "-*+":
                continue  # prose
            val = _VALUE_RE.match(line)
            if not val:
                raise _fail(shown, number, f"malformed value line '{line}'",
                            "write values as '- <metric>: <value> <unit> [<source key>]'")
            raw_values.append((number, val.group("metric"), val.group("rest")))

    for header_key, header in ((cc_key, "compute_capability"), (arch_key, "arch"), (dpp_key, "devices_per_package")):
        if header_key is not None and header_key[0] not in sources:
            raise _fail(shown, header_key[1], f"unknown source key [{header_key[0]}] on {header}",
                        f"define it under '## Sources'; keys defined: {', '.join(sorted(sources)) or 'none'}")

    parsed: dict[str, SpecValue] = {}
    for number, metric, rest in raw_values:
        if not _METRIC_RE.match(metric):
            raise _fail(shown, number, f"metric name '{metric}' is not lower_snake_case",
                        "name metrics like 'dram_bandwidth_gbps' (unit as the suffix)")
        parts = _VALUE_REST_RE.match(rest)
        if not parts:
            raise _fail(shown, number, f"value of '{metric}' is missing",
                        f"write '- {metric}: <value> {expected_unit(metric)} [<source key>]'")
        value_text, unit, key, note = parts.group("value"), parts.group("unit"), parts.group("key"), parts.group("note")
        try:
            value = float(value_text)
        except ValueError:
            raise _fail(shown, number, f"value '{value_text}' of '{metric}' is not a number",
                        "write a plain number (no thousands separators, no unit glued on), e.g. 1979 or 989.5")
        if not math.isfinite(value) or value <= 0:
            raise _fail(shown, number, f"value {value_text} of '{metric}' must be a positive finite number",
                        "hardware ceilings are positive; leave a metric out rather than write 0")
        want = expected_unit(metric)
        if unit is None:
            raise _fail(shown, number, f"'{metric}' has no unit (expected '{want}')",
                        f"write '- {metric}: {value_text} {want} [<source key>]'")
        if unit != want:
            raise _fail(shown, number, f"unit '{unit}' does not match metric '{metric}' (expected '{want}')",
                        "the unit must fit the name's suffix: _gbps GB/s, _tflops TFLOP/s, _tops TOP/s, _mb MB, "
                        "_kb KB, _gb GB, _mhz MHz, _w W; counts: count/registers/warps/blocks")
        if key is None or not key.strip():
            raise _fail(shown, number, f"'{metric}' has no source",
                        f"every value needs a source key in brackets: '- {metric}: {value_text} {unit} [<key>]', "
                        "with '[<key>]: <title> — <URL>' under '## Sources'")
        key = key.strip()
        if key not in sources:
            raise _fail(shown, number, f"unknown source key [{key}] for '{metric}'",
                        f"define it under '## Sources'; keys defined: {', '.join(sorted(sources)) or 'none'}")
        if kind == "datasheet" and not source_is_citable(sources[key][0]):
            raise _fail(
                shown, number,
                f"'{metric}' cites [{key}] (line {sources[key][1]}), whose source gives neither a URL nor a "
                "table/page/section locator",
                f"add the document's URL (https://...) and where in it the value is (table, page or section) to "
                f"line {sources[key][1]}: '[{key}]: <document title>, <table/page/section> — <URL>'; a first-hand "
                "reading of the device says 'device query' and how it was read",
            )
        if kind == "datasheet" and metric.startswith("measured_"):
            raise _fail(shown, number, f"measured metric '{metric}' in a datasheet file",
                        "measured ceilings go in a 'kind: measured' file under specs/measured/")
        if kind == "measured" and not metric.startswith("measured_"):
            raise _fail(shown, number, f"datasheet metric '{metric}' in a measured file",
                        "measured files hold only 'measured_*' metrics")
        entry = SpecValue(
            metric=metric,
            value=value,
            unit=unit,
            source_key=key,
            source=sources[key][0],
            path=shown,
            line=number,
            note=_clean_note(note),
            value_text=value_text,
        )
        first = parsed.get(metric)
        if first is None:
            parsed[metric] = entry
            continue
        if key in {first.source_key, *(alt.source_key for alt in first.alternatives)}:
            raise _fail(shown, number, f"'{metric}' is given twice from source [{key}] (first on line {first.line})",
                        "keep one value per metric per source; a second source for the same metric needs its own key")
        parsed[metric] = first.model_copy(update={"alternatives": [*first.alternatives, entry]})

    if kind == "measured" and (devices_per_package != 1 or dpp_key is not None):
        raise _fail(shown, dpp_key[1] if dpp_key else None, "devices_per_package in a measured file",
                    "measured ceilings are per device; name the per-device spec on the 'spec:' line instead")
    if not parsed and kind == "datasheet":
        raise _fail(shown, None, "no values found",
                    "put value lines '- <metric>: <value> <unit> [<source key>]' under a '## Values' heading")
    return GpuSpec(
        name=spec_name,
        title=title,
        aliases=aliases,
        compute_capability=compute_capability,
        values=parsed if kind == "datasheet" else {},
        measured=parsed if kind == "measured" else {},
        path=shown,
        kind=kind,  # type: ignore[arg-type]
        vendor=vendor,
        arch=arch,
        devices_per_package=devices_per_package,
        device_unit=device_unit,
    )


# ----------------------------------------------------------------------------------------------------
# one device of a multi-device package

#: Package ceilings that one device of an N-device package has 1/N of (besides every ``peak_*`` rate):
#: its compute units, memory, memory bandwidth and cache belong to one die each (AMD CDNA 2 white paper,
#: "Scaling the Memory Hierarchy"; Intel oneAPI GPU optimization guide, "Multi-Stack GPU Architecture").
PACKAGE_SPLIT_METRICS: frozenset[str] = frozenset(
    {"sm_count", "memory_gb", "dram_bandwidth_gbps", "l2_cache_mb", "last_level_cache_mb"}
)
#: Package values that cannot be split per device from the datasheet (power, external links are shared or
#: unevenly wired); the per-device view leaves them out rather than guess.
PACKAGE_ONLY_METRICS: frozenset[str] = frozenset({"tdp_w", "interconnect_bandwidth_gbps", "pcie_bandwidth_gbps"})


def is_package_split_metric(metric: str) -> bool:
    """True for a metric one device of a multi-device package has a share of: every ``peak_*`` rate
    (TFLOP/s, TOP/s) and :data:`PACKAGE_SPLIT_METRICS` (count, GB, GB/s, MB). Per-SM, per-thread and clock
    metrics are False (each device has them whole). Raises nothing."""
    return metric.startswith("peak_") or metric in PACKAGE_SPLIT_METRICS


def per_device_name(spec: GpuSpec) -> str:
    """The name of one device of ``spec``'s package: ``<name>-<device_unit>`` (``MI250X-GCD``,
    ``Max-1550-stack``); ``spec.name`` itself when the package is one device. Raises nothing."""
    if spec.devices_per_package <= 1:
        return spec.name
    return f"{spec.name}-{spec.device_unit}"


def _split_value(value: SpecValue, n: int, unit_name: str) -> SpecValue:
    share = value.value / n
    text = format_number(share)
    original = value.value_text or format_number(value.value)
    why = f"derived: package value {original} {value.unit} / {n} ({unit_name}s per package)"
    return value.model_copy(update={
        "value": share,
        "value_text": text,
        "note": why + (f"; {value.note}" if value.note else ""),
        "alternatives": [_split_value(alt, n, unit_name) for alt in value.alternatives],
    })


def per_device_spec(spec: GpuSpec) -> GpuSpec:
    """The ceilings of ONE device of a package the system shows as several devices.

    An MI250X module is two GCDs and a Max 1550 card two stacks, each listed by ROCm / Level Zero as its
    own device with its own memory and memory bandwidth (see the files' ``devices_per_package:`` sources);
    a kernel launched on one of them gets 1/N of the package's quoted rates. This view divides every
    :func:`is_package_split_metric` value (peaks in TFLOP/s or TOP/s, bandwidth in GB/s, memory in GB, L2
    in MB, compute units) by ``devices_per_package``, notes ``derived: package value X / N`` on each, and
    keeps the citation of the package line (``path:line``). Per-SM/per-thread limits and clocks stay whole;
    :data:`PACKAGE_ONLY_METRICS` (power, external links) are left out. The package's measured ceilings are
    not used (none can be measured on a package); ``spec.device_measured`` (measured on one device)
    becomes the view's ``measured``, undivided.

    Args:
        spec: a spec from :func:`list_specs` / :func:`find_spec`.

    Returns:
        ``spec`` itself when ``devices_per_package`` is 1; else a new spec named :func:`per_device_name`
        with ``package_of`` set to the package's name and ``devices_per_package`` 1. Raises nothing.
    """
    n = spec.devices_per_package
    if n <= 1:
        return spec
    values = {
        metric: _split_value(value, n, spec.device_unit) if is_package_split_metric(metric) else value
        for metric, value in spec.values.items()
        if metric not in PACKAGE_ONLY_METRICS
    }
    return spec.model_copy(update={
        "name": per_device_name(spec),
        "title": f"{spec.title} — one {spec.device_unit} (1 of {n} devices per package)",
        "aliases": [],
        "values": values,
        "measured": dict(spec.device_measured),
        "device_measured": {},
        "devices_per_package": 1,
        "package_of": spec.name,
    })


# ----------------------------------------------------------------------------------------------------
# lookup


def _spec_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.md") if p.is_file() and p.name.lower() != "readme.md")


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def _name_index(specs: list[GpuSpec]) -> dict[str, GpuSpec]:
    index: dict[str, GpuSpec] = {}
    for spec in specs:
        for label in [spec.name, *spec.aliases]:
            key = _norm(label)
            other = index.get(key)
            if other is not None and other.name != spec.name:
                raise SpecError(
                    f"'{label}' names two GPUs: {other.name} ({other.path}) and {spec.name} ({spec.path})",
                    hint="remove the name from the aliases of one of the two files",
                )
            index[key] = spec
    return index


def list_specs() -> list[GpuSpec]:
    """Every known GPU spec, with its measured ceilings merged in, sorted by name.

    Reads the packaged datasheets, the user's (``user_specs_dir()``; same name replaces), then the
    packaged and the user's measured files (``measured_dir()``), later files replacing earlier values
    metric by metric. Files are re-read on every call.

    Raises:
        SpecError: a file is malformed (``path:line``), a measured file sits in a datasheet folder or the
            reverse, a measured file names an unknown GPU, or one name is an alias of two GPUs.
    """
    by_name: dict[str, GpuSpec] = {}
    for folder in (SPECS_DIR, user_specs_dir()):
        for file in _spec_files(folder):
            spec = load_spec_file(file)
            if spec.kind != "datasheet":
                raise SpecError(
                    f"{spec.path}: a measured file in the datasheet folder {display_path(folder)}",
                    hint=f"move it to {display_path(folder / 'measured')}",
                )
            by_name[spec.name] = spec
    specs = list(by_name.values())
    index = _name_index(specs)
    for folder in (PACKAGE_MEASURED_DIR, measured_dir()):
        for file in _spec_files(folder):
            found = load_spec_file(file)
            if found.kind != "measured":
                raise SpecError(
                    f"{found.path}: a datasheet file in the measured folder {display_path(folder)}",
                    hint="measured files start with 'kind: measured'; move datasheets up one folder",
                )
            target = index.get(_norm(found.name))
            package = _device_index(specs).get(_norm(found.name))
            if target is None and package is not None:
                package.device_measured.update(found.measured)  # measured on one device: never divided
                continue
            if target is None:
                raise SpecError(
                    f"{found.path}: measured ceilings for unknown GPU '{found.name}'",
                    hint=f"known GPUs: {', '.join(sorted(by_name))}; fix its 'spec:' line or add a datasheet file",
                )
            if target.devices_per_package > 1:
                raise SpecError(
                    f"{found.path}: measured ceilings for '{found.name}', a package of {target.devices_per_package} "
                    "devices; a measurement runs on one device",
                    hint=f"name the device on the file's 'spec:' line: 'spec: {per_device_name(target)}'",
                )
            target.measured.update(found.measured)
    return sorted(specs, key=lambda s: s.name)


def _device_index(specs: list[GpuSpec]) -> dict[str, GpuSpec]:
    """Per-device names (``MI250X-GCD``) of multi-device packages -> the package spec."""
    return {_norm(per_device_name(s)): s for s in specs if s.devices_per_package > 1}


def _labels(spec: GpuSpec) -> list[str]:
    labels = [spec.name, *spec.aliases]
    if spec.devices_per_package > 1:
        labels.append(per_device_name(spec))
    return labels


def _closest(query: str, specs: list[GpuSpec]) -> list[str]:
    """Up to four spec names whose name or an alias is most like ``query`` (difflib ratio >= 0.4), best first."""
    q = _norm(query)
    scored: list[tuple[float, str]] = []
    for spec in specs:
        best = max(difflib.SequenceMatcher(None, q, _norm(label)).ratio() for label in _labels(spec))
        if best >= 0.4:
            scored.append((best, spec.name))
    return [name for _, name in sorted(scored, key=lambda t: (-t[0], t[1]))[:4]]


def _prefix_of(query: str, specs: list[GpuSpec]) -> list[str]:
    """Spec names with a name or alias that starts with ``query`` (a name several boards share the start of)."""
    q = _norm(query)
    if len(q) < 4:
        return []
    return sorted({spec.name for spec in specs for label in _labels(spec) if _norm(label).startswith(q)})


def _unknown(query: str, specs: list[GpuSpec], what: str) -> SpecError:
    shared = _prefix_of(query, specs)
    close = [name for name in _closest(query, specs) if name not in shared]
    names = ", ".join(s.name for s in specs) or "none"
    lead = ""
    if len(shared) > 1:
        lead = (f"'{query}' is the start of the names of {len(shared)} boards with different ceilings: "
                f"{', '.join(shared)}; pass the one you have (--gpu NAME). ")
    elif shared:
        lead = f"closest known: {shared[0]}. "
    closest = f"closest known: {', '.join(close)}. " if close and not lead else (
        f"also close: {', '.join(close)}. " if close else "")
    return SpecError(
        f"unknown GPU {what}'{query}': no spec file names it",
        hint=f"{lead}{closest}Known GPUs: {names}. " + _HOW_TO_ADD.format(dir=user_specs_dir()),
    )


def find_spec(name_or_alias: str) -> GpuSpec:
    """The spec whose name or an alias matches, ignoring case, spaces, dashes and underscores.

    Args:
        name_or_alias: e.g. ``H200``, ``h100-sxm``, ``NVIDIA H100 PCIe``; or the per-device name of a
            multi-device package (``MI250X-GCD``, ``Max-1550-stack``), which returns
            :func:`per_device_spec` of it. A file's own name or alias returns the file's (package) values.

    Raises:
        SpecError: no spec matches (the hint names the closest entries, by :mod:`difflib`, and how to add
            a spec file), or a spec file is malformed (see :func:`list_specs`).
    """
    specs = list_specs()
    spec = _name_index(specs).get(_norm(name_or_alias))
    if spec is not None:
        return spec
    package = _device_index(specs).get(_norm(name_or_alias))
    if package is not None:
        return per_device_spec(package)
    raise _unknown(name_or_alias, specs, "")


def match_device(device_name: str) -> GpuSpec:
    """The spec for a device as it names itself (``torch.cuda.get_device_name()``, ``nvidia-smi``).

    Exact match on name or alias after normalising case, spaces, dashes and underscores, so
    ``NVIDIA H100 80GB HBM3`` (the SXM5 board; the PCIe card uses HBM2e and reports ``NVIDIA H100 PCIe``),
    ``NVIDIA H100 PCIe`` and ``NVIDIA H200`` each find their file. No partial matching: a MIG slice or an
    unlisted variant (``NVIDIA H200 NVL``, ``NVIDIA A100-PCIE-40GB``), or a name several boards report
    (a bare ``NVIDIA H100``), has other or unknown ceilings and must not borrow a neighbour's.

    A device that is one die of a multi-device package (an MI250X GCD, a Max 1550 stack in Level Zero's
    default flat hierarchy) reports the package's name; since a process runs on that one device, the
    result is :func:`per_device_spec` of the file (``MI250X-GCD``: half the bandwidth, peaks and memory).

    Raises:
        SpecError: no spec lists the name (hint: closest entries and how to add the name or a file).
    """
    specs = list_specs()
    spec = _name_index(specs).get(_norm(device_name))
    if spec is None:
        raise _unknown(device_name, specs, "device ")
    return per_device_spec(spec)
