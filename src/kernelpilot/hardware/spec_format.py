"""GPU spec sheets: the Markdown format of the files in ``hardware/specs/`` and its reader.

Every number kernelpilot uses as a hardware ceiling comes from one of these files, and every value in
them carries its source, so a roofline or a verdict can cite where each ceiling came from in the form
``<metric>: <value> <unit> <- <path>:<line>`` (the citation rule of docs/measuring.md, "Roofline").

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

The values read are :class:`~kernelpilot.hardware.spec_model.SpecValue` / ``GpuSpec``; lookup across folders is
:mod:`kernelpilot.hardware.specs`, which re-exports :func:`load_spec_file`.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from kernelpilot.errors import SpecError
from kernelpilot.hardware.spec_model import GpuSpec, SpecValue, display_path, expected_unit, source_is_citable

__all__ = ["load_spec_file"]

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
_VENDORS = ("NVIDIA", "AMD", "Intel")
_CC_RE = re.compile(r"^(?P<cc>\d+\.\d+)\s*(?:\[(?P<key>[^\]]*)\])?\s*(?P<note>.*)$")

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
