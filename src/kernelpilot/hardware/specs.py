"""GPU spec sheets: read, check and look up the Markdown files in ``hardware/specs/``.

Every number kernelpilot uses as a hardware ceiling comes from one of these files, and every value in
them carries its source, so a roofline or a verdict can cite where each ceiling came from in the form
``<metric>: <value> <unit> <- <path>:<line>`` (the citation rule of docs/measuring.md, "Roofline").

This module finds the files and looks GPUs up (:func:`list_specs`, :func:`find_spec`, :func:`match_device`,
:func:`per_device_spec`); the values are :mod:`kernelpilot.hardware.spec_model`, the file format and its
reader :mod:`kernelpilot.hardware.spec_format`. Every public name of those two is re-exported here, so
``from kernelpilot.hardware.specs import GpuSpec, load_spec_file`` keeps working.

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
import re
from pathlib import Path

from kernelpilot.errors import SpecError
from kernelpilot.facts import kernelpilot_home  # re-exported: the one computation of the user's folder
from kernelpilot.hardware.spec_format import load_spec_file
from kernelpilot.hardware.spec_model import (
    CONFLICT_TOLERANCE,
    PACKAGE_ROOT,
    GpuSpec,
    SpecValue,
    display_path,
    expected_unit,
    format_number,
    source_is_citable,
)


__all__ = [
    "PACKAGE_ROOT",
    "CONFLICT_TOLERANCE",
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

#: The packaged datasheet files.
SPECS_DIR = Path(__file__).resolve().parent / "specs"
#: The packaged measured-ceiling files.
PACKAGE_MEASURED_DIR = SPECS_DIR / "measured"
_HOW_TO_ADD = (
    "To add a GPU, copy hardware/specs/H200.md to {dir}/<NAME>.md, replace every value with one from a "
    "cited source (one value per line: '- <metric>: <value> <unit> [<source key>]'), and put the name "
    "the device reports (torch.cuda.get_device_name()) on its 'aliases:' line"
)


def user_specs_dir() -> Path:
    """Folder of the user's own datasheet files: ``<kernelpilot_home()>/specs`` (not created here)."""
    return kernelpilot_home() / "specs"


def measured_dir() -> Path:
    """Folder where measured ceilings are written and read: ``<kernelpilot_home()>/specs/measured``.

    ``kernelpilot specs measure`` writes ``<GPU name>.md`` here (see
    :func:`kernelpilot.hardware.ceilings.write_measured`); the folder is not created by this function.
    """
    return user_specs_dir() / "measured"



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
