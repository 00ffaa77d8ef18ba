"""Normalized Nsight Compute metrics: one :class:`KernelMetrics` per profiled kernel launch.

Metric names are the ones docs/measuring.md ("Diagnosing") lists, read from real H200 ``--set full`` reports, plus
the GPU Speed Of Light section's own header metrics for L1/L2 throughput and clocks. Values are converted to
base units (ns, Hz, bytes, percent) from the unit ``ncu_report`` attaches to each metric. Every numeric field
is ``None`` when the report lacks the metric, so reports made with fewer sections still load. ``sources``
maps each filled field to the ncu metric it came from.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from kernelpilot.errors import ReportError
from kernelpilot.profile.kernel_metrics import KernelMetrics, RuleResult, StallReason
from kernelpilot.profile.ncu_names import (  # every metric name, re-exported: kernelpilot.profile.metrics.WAVES keeps working
    DURATION,
    COMPUTE_SOL,
    MEMORY_SOL,
    MEMORY_SOL_BREAKDOWN,
    DRAM_PCT,
    L1_THROUGHPUT,
    L2_THROUGHPUT,
    L1_HIT_RATE,
    L2_HIT_RATE,
    ACHIEVED_OCCUPANCY,
    THEORETICAL_OCCUPANCY,
    OCCUPANCY_LIMIT_PREFIX,
    OCCUPANCY_LIMIT_KINDS,
    REGISTERS,
    SHARED_STATIC,
    SHARED_DYNAMIC,
    SHARED_DRIVER,
    SHARED_TOTAL,
    SHARED_CONFIG,
    BLOCK_SIZE,
    GRID_SIZE,
    WAVES,
    SM_COUNT,
    SM_FREQUENCY,
    DRAM_FREQUENCY,
    DRAM_BYTES_READ,
    DRAM_BYTES_WRITE,
    L2_CACHE_SIZE,
    LOCAL_LOADS,
    LOCAL_STORES,
    SPILL_INSTRUCTIONS,
    DEVICE_NAME,
    CC_MAJOR,
    CC_MINOR,
    GLOBAL_LOAD_SECTORS,
    GLOBAL_LOAD_REQUESTS,
    GLOBAL_LOAD_BYTES_PER_SECTOR,
    GLOBAL_STORE_BYTES_PER_SECTOR,
    GLOBAL_LOAD_INST,
    GLOBAL_STORE_INST,
    GLOBAL_SECTORS_THEORETICAL,
    GLOBAL_SECTORS_IDEAL,
    FMA_PIPE,
    TENSOR_PIPE,
    TENSOR_GMMA_INST,
    FP64_PIPE,
    GLOBAL_ATOMIC_SECTORS,
    GLOBAL_ATOMIC_REQUESTS,
    SHARED_LOAD_BANK_CONFLICTS,
    SHARED_STORE_BANK_CONFLICTS,
    SHARED_LOAD_WAVEFRONTS,
    SHARED_STORE_WAVEFRONTS,
    ACTIVE_THREADS_PER_INST,
    NAMED_STALLS,
    SECTOR_BYTES,
    STALL_RE,
    STALL_TEMPLATE,
    NOT_STALLS,
    TOP_STALLS,
)
from kernelpilot.profile.report_reader import load_actions


_MSG_TYPES = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}  # ncu_report.MsgType
_SPEEDUP_TYPES = {0: "unknown", 1: "local", 2: "global"}  # ncu_report.SpeedupType
_TIME_TO_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "µs": 1e3, "ms": 1e6, "msecond": 1e6,
               "s": 1e9, "second": 1e9}
_FREQ_TO_HZ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "cycle/second": 1.0, "cycle/msecond": 1e3,
               "cycle/usecond": 1e6, "cycle/nsecond": 1e9}
_BYTES = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 1024.0, "mibyte": 1024.0**2}
#: Device attributes in bytes carry no unit (``device__attribute_l2_cache_size``: 62914560, unit '' on the H200).
_BYTES_OR_PLAIN = {**_BYTES, "": 1.0}
_PCT = {"%": 1.0, "": 1.0}



class _Reader:
    """Reads metrics of one ``IAction`` with unit checks, recording which metric filled which field."""

    def __init__(self, action: Any, label: str) -> None:
        self.action = action
        self.label = label
        self.names = set(action.metric_names())
        self.sources: dict[str, str] = {}

    def raw(self, name: str) -> Any:
        """The metric's value, or None when absent or valueless."""
        if name not in self.names:
            return None
        return self.action[name].value()

    def number(self, field: str, names: str | tuple[str, ...], scale: Optional[dict[str, float]] = None) -> Optional[float]:
        """First present metric of ``names`` as float, scaled to base units by ``scale`` (unit -> factor)."""
        for name in (names,) if isinstance(names, str) else names:
            value = self.raw(name)
            if value is None or isinstance(value, str):
                continue
            factor = 1.0
            if scale is not None:
                unit = (self.action[name].unit() or "").strip()
                key = unit.split("/block")[0].lower() if scale is _BYTES else unit.lower()
                if key not in scale:
                    raise ReportError(
                        f"{self.label}: metric {name} has unit {unit!r}, which kernelpilot cannot convert",
                        "report this with the ncu version; re-profile with `ncu --print-units base` meanwhile",
                    )
                factor = scale[key]
            self.sources[field] = name
            return float(value) * factor
        return None

    def integer(self, field: str, names: str | tuple[str, ...], scale: Optional[dict[str, float]] = None) -> Optional[int]:
        """Like :meth:`number`, rounded to int."""
        value = self.number(field, names, scale)
        return None if value is None else int(round(value))

    def total(self, field: str, names: tuple[str, ...]) -> Optional[float]:
        """Sum of the present metrics of ``names`` (counts), or None when none is present."""
        present = [n for n in names if isinstance(self.raw(n), (int, float)) and not isinstance(self.raw(n), bool)]
        if not present:
            return None
        self.sources[field] = " + ".join(present)
        return float(sum(self.raw(n) for n in present))

    def bytes_per_sector(self, field: str, names: tuple[str, ...]) -> Optional[float]:
        """Bytes used per 32-byte sector: a ``byte/sector`` metric as is, a ``%`` metric as percent of 32 B."""
        for name in names:
            value = self.raw(name)
            if value is None or isinstance(value, str):
                continue
            unit = (self.action[name].unit() or "").strip().lower()
            if unit in ("byte/sector", "bytes/sector", "byte", ""):
                factor = 1.0
            elif unit == "%":
                factor = SECTOR_BYTES / 100.0
            else:
                raise ReportError(
                    f"{self.label}: metric {name} has unit {unit!r}, which kernelpilot cannot convert",
                    "report this with the ncu version; re-profile with `ncu --print-units base` meanwhile",
                )
            self.sources[field] = name
            return float(value) * factor
        return None


def _stall_ratios(reader: _Reader) -> dict[str, float]:
    """Every stall reason's ratio (cycles stalled per issued instruction), "selected" excluded, sorted by name."""
    ratios: dict[str, float] = {}
    for name in sorted(reader.names):
        match = STALL_RE.match(name)
        if match and match["reason"] not in NOT_STALLS:
            value = reader.raw(name)
            if isinstance(value, (int, float)):
                ratios[match["reason"]] = float(value)
    if ratios:
        reader.sources["stall_ratios"] = STALL_TEMPLATE.format("<reason>")
    return ratios


def _stalls(reader: _Reader, ratios: dict[str, float]) -> list[StallReason]:
    """Top stall reasons by ratio, with shares of the sum of all stall ratios ("selected" excluded)."""
    total = sum(ratios.values())
    ranked = sorted(ratios.items(), key=lambda item: (-item[1], item[0]))[:TOP_STALLS]
    if ranked:
        reader.sources["top_stalls"] = STALL_TEMPLATE.format("<reason>")
    return [StallReason(reason=r, ratio=v, share_pct=(v / total * 100.0) if total > 0 else 0.0) for r, v in ranked]


def _rules(action: Any) -> list[RuleResult]:
    """ncu's rule results; an empty list when the report (or ncu_report version) has none."""
    getter: Optional[Callable[[], Any]] = getattr(action, "rule_results_as_dicts", None)
    if getter is None:
        return []
    results = []
    for item in getter() or []:
        message = item.get("rule_message") or {}
        speedup = item.get("speedup_estimation") or {}
        value = speedup.get("speedup")
        results.append(
            RuleResult(
                identifier=str(item.get("rule_identifier", "")),
                section=str(item.get("section_identifier", "")),
                title=str(message.get("title", "")),
                message=str(message.get("message", "")),
                type=_MSG_TYPES.get(int(message.get("type", 0)), str(message.get("type"))),
                estimated_speedup_pct=None if value is None else float(value),
                speedup_type=_SPEEDUP_TYPES.get(int(speedup["type"])) if "type" in speedup else None,
            )
        )
    return results


def _memory_units(reader: _Reader) -> dict[str, float]:
    """Per memory unit (DRAM, L1, L2), the largest sub-metric of the memory-SOL breakdown, in percent."""
    listing = reader.raw(MEMORY_SOL_BREAKDOWN)
    if not isinstance(listing, str):
        return {}
    prefixes = {"dram__": "DRAM", "fbpa__": "DRAM", "lts__": "L2", "l1tex__": "L1"}
    units: dict[str, float] = {}
    for name in (part.strip() for part in listing.split(",")):
        unit = next((u for p, u in prefixes.items() if name.startswith(p)), None)
        value = reader.raw(name)
        if unit is None or not isinstance(value, (int, float)):
            continue
        if unit not in units or float(value) > units[unit]:
            units[unit] = float(value)
            reader.sources[f"memory_units_pct.{unit}"] = name
    if units:
        reader.sources["memory_units_pct"] = MEMORY_SOL_BREAKDOWN
    return units


def _occupancy_limits(reader: _Reader) -> tuple[dict[str, float], list[str]]:
    """``launch__occupancy_limit_*`` in blocks per SM, and the kinds at the minimum in OCCUPANCY_LIMIT_KINDS order."""
    limits: dict[str, float] = {}
    for kind in OCCUPANCY_LIMIT_KINDS:
        value = reader.number(f"occupancy_limits_blocks.{kind}", OCCUPANCY_LIMIT_PREFIX + kind)
        if value is not None:
            limits[kind] = value
    smallest = min(limits.values(), default=None)
    limiters = [kind for kind in OCCUPANCY_LIMIT_KINDS if kind in limits and limits[kind] == smallest]
    if limiters:
        reader.sources["occupancy_limits_blocks"] = OCCUPANCY_LIMIT_PREFIX + "<kind>"
        reader.sources["occupancy_limiter"] = OCCUPANCY_LIMIT_PREFIX + limiters[0]
        reader.sources["occupancy_limiters"] = ", ".join(OCCUPANCY_LIMIT_PREFIX + k for k in limiters)
    return limits, limiters


def metrics_from_action(action: Any, label: str = "report") -> KernelMetrics:
    """Normalize one ``ncu_report`` action (kernel launch) into :class:`KernelMetrics`.

    Args:
        action: an ``ncu_report`` ``IAction`` (anything with ``name()``, ``metric_names()``, ``[name]``
            giving objects with ``value()`` and ``unit()``, and optionally ``rule_results_as_dicts()``).
        label: how errors name the source, e.g. ``"profile.ncu-rep, launch 0"``.

    Returns:
        The normalized metrics; fields the report lacks are None (empty for lists and dicts).

    Raises:
        ReportError: a metric carries a unit this module cannot convert to base units.
    """
    r = _Reader(action, label)
    static = r.integer("shared_mem_per_block_bytes", SHARED_STATIC, _BYTES)
    dynamic = r.integer("shared_mem_per_block_bytes", SHARED_DYNAMIC, _BYTES)
    driver = r.integer("shared_mem_driver_bytes", SHARED_DRIVER, _BYTES)
    if static is not None or dynamic is not None:
        shared: Optional[int] = (static or 0) + (dynamic or 0)
        r.sources["shared_mem_per_block_bytes"] = f"{SHARED_STATIC} + {SHARED_DYNAMIC}"
    else:
        total = r.integer("shared_mem_per_block_bytes", SHARED_TOTAL, _BYTES)
        shared = None if total is None else total - (driver or 0)
        if total is not None and driver is not None:
            r.sources["shared_mem_per_block_bytes"] = f"{SHARED_TOTAL} - {SHARED_DRIVER}"
    major, minor = r.raw(CC_MAJOR), r.raw(CC_MINOR)
    cc = (int(major), int(minor)) if isinstance(major, int) and isinstance(minor, int) else None
    if cc is not None:
        r.sources["compute_capability"] = f"{CC_MAJOR}, {CC_MINOR}"
    device = r.raw(DEVICE_NAME)
    if isinstance(device, str):
        r.sources["device_name"] = DEVICE_NAME
    limits, limiters = _occupancy_limits(r)
    sectors = r.number("global_load_sectors", GLOBAL_LOAD_SECTORS)
    requests = r.number("global_load_requests", GLOBAL_LOAD_REQUESTS)
    sectors_per_request = sectors / requests if sectors is not None and requests else None
    if sectors_per_request is not None:
        r.sources["global_load_sectors_per_request"] = f"{GLOBAL_LOAD_SECTORS} / {GLOBAL_LOAD_REQUESTS}"
    ratios = _stall_ratios(r)
    r.sources["kernel_name"] = "IAction.name()"
    values: dict[str, Any] = dict(
        kernel_name=str(action.name()),
        device_name=device if isinstance(device, str) else None,
        compute_capability=cc,
        duration_ns=r.number("duration_ns", DURATION, _TIME_TO_NS),
        compute_sol_pct=r.number("compute_sol_pct", COMPUTE_SOL, _PCT),
        memory_sol_pct=r.number("memory_sol_pct", MEMORY_SOL, _PCT),
        dram_pct=r.number("dram_pct", DRAM_PCT, _PCT),
        l1_throughput_pct=r.number("l1_throughput_pct", L1_THROUGHPUT, _PCT),
        l2_throughput_pct=r.number("l2_throughput_pct", L2_THROUGHPUT, _PCT),
        memory_units_pct=_memory_units(r),
        l1_hit_rate_pct=r.number("l1_hit_rate_pct", L1_HIT_RATE, _PCT),
        l2_hit_rate_pct=r.number("l2_hit_rate_pct", L2_HIT_RATE, _PCT),
        achieved_occupancy_pct=r.number("achieved_occupancy_pct", ACHIEVED_OCCUPANCY, _PCT),
        theoretical_occupancy_pct=r.number("theoretical_occupancy_pct", THEORETICAL_OCCUPANCY, _PCT),
        occupancy_limiter=limiters[0] if limiters else None,
        occupancy_limiters=limiters,
        occupancy_limits_blocks=limits,
        registers_per_thread=r.integer("registers_per_thread", REGISTERS),
        shared_mem_per_block_bytes=shared,
        shared_mem_driver_bytes=driver,
        shared_mem_config_bytes=r.integer("shared_mem_config_bytes", SHARED_CONFIG, _BYTES),
        block_size=r.integer("block_size", BLOCK_SIZE),
        grid_size=r.integer("grid_size", GRID_SIZE),
        waves_per_sm=r.number("waves_per_sm", WAVES),
        sm_count=r.integer("sm_count", SM_COUNT),
        sm_frequency_hz=r.number("sm_frequency_hz", SM_FREQUENCY, _FREQ_TO_HZ),
        dram_frequency_hz=r.number("dram_frequency_hz", DRAM_FREQUENCY, _FREQ_TO_HZ),
        dram_bytes_read=r.number("dram_bytes_read", DRAM_BYTES_READ, _BYTES),
        dram_bytes_write=r.number("dram_bytes_write", DRAM_BYTES_WRITE, _BYTES),
        l2_cache_bytes=r.integer("l2_cache_bytes", L2_CACHE_SIZE, _BYTES_OR_PLAIN),
        local_load_inst_count=r.number("local_load_inst_count", LOCAL_LOADS),
        local_store_inst_count=r.number("local_store_inst_count", LOCAL_STORES),
        register_spill_inst_count=r.number("register_spill_inst_count", SPILL_INSTRUCTIONS),
        global_load_sectors=sectors,
        global_load_requests=requests,
        global_load_sectors_per_request=sectors_per_request,
        global_load_inst_count=r.number("global_load_inst_count", GLOBAL_LOAD_INST),
        global_load_bytes_per_sector=r.bytes_per_sector("global_load_bytes_per_sector", GLOBAL_LOAD_BYTES_PER_SECTOR),
        global_store_inst_count=r.number("global_store_inst_count", GLOBAL_STORE_INST),
        global_store_bytes_per_sector=r.bytes_per_sector("global_store_bytes_per_sector", GLOBAL_STORE_BYTES_PER_SECTOR),
        global_sectors_theoretical=r.number("global_sectors_theoretical", GLOBAL_SECTORS_THEORETICAL),
        global_sectors_ideal=r.number("global_sectors_ideal", GLOBAL_SECTORS_IDEAL),
        fma_pipe_pct=r.number("fma_pipe_pct", FMA_PIPE, _PCT),
        tensor_pipe_pct=r.number("tensor_pipe_pct", TENSOR_PIPE, _PCT),
        tensor_gmma_inst_pct=r.number("tensor_gmma_inst_pct", TENSOR_GMMA_INST, _PCT),
        fp64_pipe_pct=r.number("fp64_pipe_pct", FP64_PIPE, _PCT),
        global_atomic_sectors=r.total("global_atomic_sectors", GLOBAL_ATOMIC_SECTORS),
        global_atomic_requests=r.total("global_atomic_requests", GLOBAL_ATOMIC_REQUESTS),
        shared_load_bank_conflicts=r.number("shared_load_bank_conflicts", SHARED_LOAD_BANK_CONFLICTS),
        shared_store_bank_conflicts=r.number("shared_store_bank_conflicts", SHARED_STORE_BANK_CONFLICTS),
        shared_load_wavefronts=r.number("shared_load_wavefronts", SHARED_LOAD_WAVEFRONTS),
        shared_store_wavefronts=r.number("shared_store_wavefronts", SHARED_STORE_WAVEFRONTS),
        active_threads_per_warp_inst=r.number("active_threads_per_warp_inst", ACTIVE_THREADS_PER_INST),
        **{f"{reason}_stall_ratio": r.number(f"{reason}_stall_ratio", STALL_TEMPLATE.format(reason))
           for reason in NAMED_STALLS},
        stall_ratios=ratios,
        top_stalls=_stalls(r, ratios),
        rules=_rules(action),
    )
    if values["rules"]:
        r.sources["rules"] = "IAction.rule_results_as_dicts()"
    return KernelMetrics(**values, sources=r.sources)


def read_report_here(path: str | os.PathLike[str]) -> list[KernelMetrics]:
    """Read every launch of a report in this process (see :func:`read_report`, which isolates it)."""
    return [metrics_from_action(a, f"{path}, launch {i}") for i, a in enumerate(load_actions(path))]


def read_report(path: str | os.PathLike[str], timeout_s: float = 300.0) -> list[KernelMetrics]:
    """Read every profiled kernel launch of an Nsight Compute report, in report order.

    The report is read in a child Python process that never imports torch: Nsight Compute's own ``ncu_report``
    build (``extras/python``, SWIG) crashed with a segmentation fault when read inside a process that had loaded
    torch (seen on an H200, ncu 2025.3.1, torch 2.11), and a crash while reading must not take the caller down.

    Args:
        path: the ``.ncu-rep`` file.

    Returns:
        One :class:`KernelMetrics` per launch.

    Raises:
        ReportError: the file is missing, not a report, has no kernels, has a metric in an unknown unit, or the
            reader crashed or timed out.
        ToolMissingError: ``ncu_report`` is not installed.
    """
    import json
    import subprocess
    import sys

    from kernelpilot.childproc import child_env
    from kernelpilot.errors import ToolMissingError

    try:
        proc = subprocess.run([sys.executable, "-m", "kernelpilot.profile.metrics", str(path)], capture_output=True,
                              text=True, timeout=timeout_s, env=child_env())
    except subprocess.TimeoutExpired as exc:
        raise ReportError(f"reading {path} took over {timeout_s:.0f} s", "the report may be corrupt") from exc
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    except ValueError:
        data = None
    if proc.returncode == 0 and isinstance(data, list):
        return [KernelMetrics.model_validate(d) for d in data]
    if isinstance(data, dict) and "error" in data:
        cls = ToolMissingError if data["error"] == "ToolMissingError" else ReportError
        raise cls(data["message"], data.get("hint", ""))
    tail = " | ".join((proc.stderr or "").strip().splitlines()[-3:])
    raise ReportError(f"the report reader for {path} exited with {proc.returncode}: {tail}",
                      "the file may be corrupt; open it in the Nsight Compute GUI")


def _main(argv: list[str]) -> int:
    """Child-process entry: print the report's metrics (or the error) as one JSON line."""
    import json

    from kernelpilot.errors import KernelpilotError

    try:
        metrics = read_report_here(argv[0])
    except KernelpilotError as exc:
        print(json.dumps(exc.to_dict()))
        return 1
    print(json.dumps([m.model_dump(mode="json") for m in metrics]))
    return 0


def main_kernel(metrics: list[KernelMetrics]) -> KernelMetrics:
    """The launch that ran longest (``duration_ns``; launches without a duration count as 0).

    Raises:
        ReportError: ``metrics`` is empty.
    """
    if not metrics:
        raise ReportError("no kernel metrics to choose the main kernel from",
                          "profile at least one kernel launch (check the ncu -k filter)")
    return max(metrics, key=lambda m: m.duration_ns if m.duration_ns is not None else 0.0)


#: The main kernel's metrics a verdict needs, with the ncu section that holds them.
REQUIRED_FOR_VERDICT = {"duration_ns": "GPU Speed Of Light Throughput (gpu__time_duration)",
                        "compute_sol_pct": "GPU Speed Of Light Throughput (compute SOL %)",
                        "memory_sol_pct": "GPU Speed Of Light Throughput (memory SOL %)"}


def require_verdict_metrics(metrics: KernelMetrics, path: str | os.PathLike[str]) -> KernelMetrics:
    """``metrics`` when it has what a verdict needs (:data:`REQUIRED_FOR_VERDICT`); a report without them gives no
    verdict at all rather than one from missing data.

    Raises:
        ReportError: a required metric is missing (the message names the report, the kernel and the sections).
    """
    missing = [f"{name} ({section})" for name, section in REQUIRED_FOR_VERDICT.items()
               if getattr(metrics, name, None) is None]
    if missing:
        raise ReportError(f"{path}: the main kernel {metrics.kernel_name or '(unnamed)'} lacks "
                          f"{', '.join(missing)}: no verdict can be made from this report",
                          "profile again with the full section set (`ncu --set full`, as `kernelpilot profile` "
                          "does), or include --section SpeedOfLight")
    return metrics


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
