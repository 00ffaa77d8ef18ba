"""Measured ceilings: what this GPU actually does, to set beside (and in place of) its datasheet.

docs/measuring.md ("Roofline"): use measured ceilings where available, from a large device-to-device copy
counting read + write bytes and a large cuBLAS GEMM; datasheet values are leads. This module measures
both with torch and CUDA events and writes them as a ``kind: measured`` spec file that
:func:`kernelpilot.hardware.specs.load_spec_file` reads back, each value with its provenance (date,
method, device, driver, torch version, n samples, median, IQR) as its source.

Needs a CUDA GPU: every ``measure_*`` function raises :class:`~kernelpilot.errors.ToolMissingError`
without one. Timing rules followed (docs/measuring.md, "Timing"): CUDA events around each sample, warm-up
first, raw samples kept, median and IQR reported, random (never zero) inputs. The buffers are far
larger than L2 (2 GiB copy; 3 × 128 MiB GEMM operands at n = 8192), so no L2 flush is needed.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import BaseModel, Field

from kernelpilot.errors import SpecError, ToolMissingError
from kernelpilot.facts import utc_now_iso
from kernelpilot.measure.gpu_state import driver_version as nvml_driver_version
from kernelpilot.measure.timing import quartiles, time_events
from kernelpilot.hardware.specs import (
    expected_unit,
    find_spec,
    format_number,
    load_spec_file,
    match_device,
    measured_dir,
)

__all__ = [
    "COPY_METRIC",
    "GEMM_METRIC",
    "Measurement",
    "driver_version",
    "measure_copy_bandwidth",
    "measure_bf16_gemm",
    "write_measured",
    "measure_ceilings",
]

COPY_METRIC = "measured_copy_bandwidth_gbps"
GEMM_METRIC = "measured_bf16_gemm_tflops"
_GIB = 1 << 30


class Measurement(BaseModel):
    """One measured ceiling with its provenance.

    Attributes:
        metric: ``measured_copy_bandwidth_gbps`` or ``measured_bf16_gemm_tflops`` (units in names).
        value: the ceiling, = ``median``, in ``unit``.
        unit: ``GB/s`` or ``TFLOP/s``.
        median: median of ``samples``, in ``unit``.
        iqr: interquartile range (Q3 − Q1, inclusive quartiles) of ``samples``, in ``unit``.
        samples: per-sample rates, in ``unit`` (raw, in run order).
        samples_ms: per-sample times from CUDA events, ms (raw, in run order).
        method: how it was measured (operation, sizes, byte/FLOP count, warm-up, timer).
        device_name: ``torch.cuda.get_device_name()``.
        driver: NVIDIA driver version from NVML, or ``CUDA <version>, driver unknown``.
        torch_version: ``torch.__version__``.
        date: ISO 8601 UTC time the measurement finished.
    """

    metric: str
    value: float
    unit: str
    median: float
    iqr: float
    samples: list[float]
    samples_ms: list[float] = Field(default_factory=list)
    method: str
    device_name: str
    driver: str
    torch_version: str
    date: str

    def provenance(self) -> str:
        """One line of provenance, as written after the value's source key in a measured spec file."""
        text = (
            f"measured {self.date}; method: {self.method}; device: {self.device_name}; driver: {self.driver}; "
            f"torch: {self.torch_version}; n_samples: {len(self.samples)}; "
            f"median: {format_number(self.median)} {self.unit}; IQR: {format_number(self.iqr)} {self.unit}"
        )
        return " ".join(text.split())  # one line, whatever the fields hold


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        raise ToolMissingError("torch is not importable, so no GPU can be reached",
                               hint=f"install a CUDA build of torch ({exc})") from exc
    return torch


def _cuda_device(device: int | str | None) -> Any:
    torch = _torch()
    if not torch.cuda.is_available():
        raise ToolMissingError(
            "no CUDA device: measuring ceilings needs an NVIDIA GPU visible to torch",
            hint=(
                f"run on a machine with an NVIDIA GPU and a CUDA build of torch (this torch is "
                f"{torch.__version__}, CUDA {torch.version.cuda or 'none'}); check nvidia-smi and CUDA_VISIBLE_DEVICES"
            ),
        )
    dev = torch.device("cuda" if device is None else device)
    if dev.type != "cuda":
        raise ToolMissingError(f"device '{device}' is not a CUDA device", hint="pass a CUDA device such as 0 or 'cuda:0'")
    return torch.device("cuda", torch.cuda.current_device() if dev.index is None else dev.index)


def driver_version() -> str:
    """The NVIDIA driver version (NVML, via :func:`kernelpilot.measure.gpu_state.driver_version`), or
    ``"CUDA <torch.version.cuda>, driver unknown"`` when NVML cannot tell. Raises nothing."""
    version = nvml_driver_version()
    if version:
        return version
    try:
        cuda = _torch().version.cuda
    except ToolMissingError:
        cuda = None
    return f"CUDA {cuda or 'unknown'}, driver unknown"


def _warm_up(torch: Any, fn: Callable[[], None], min_iters: int, min_ms: float) -> int:
    """Run ``fn`` until at least ``min_iters`` calls and ``min_ms`` of wall time (clocks ramp, caches fill)."""
    iters = 0
    start = time.perf_counter()
    while iters < min_iters or (time.perf_counter() - start) * 1e3 < min_ms:
        fn()
        torch.cuda.synchronize()
        iters += 1
    return iters


def _time_ms(fn: Callable[[], None], n_samples: int) -> list[float]:
    """CUDA-event time of each of ``n_samples`` calls of ``fn``, ms (no cache flush: the buffers dwarf L2)."""
    return [ns / 1e6 for ns in time_events(fn, n_samples)]


def _median_iqr(values: list[float]) -> tuple[float, float]:
    q1, median, q3 = quartiles(values)
    return median, q3 - q1


def _check_samples(n_samples: int) -> None:
    if not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"n_samples must be an int ≥ 2 (median and IQR need samples), got {n_samples!r}")


def _check_free_memory(torch: Any, dev: Any, need_bytes: int, what: str) -> None:
    free, _total = torch.cuda.mem_get_info(dev)
    if need_bytes > 0.9 * free:
        raise ToolMissingError(
            f"not enough free GPU memory for the {what}: needs {need_bytes / _GIB:.2f} GiB, "
            f"{free / _GIB:.2f} GiB free on {torch.cuda.get_device_name(dev)}",
            hint="free the GPU (other processes: nvidia-smi) or pass a smaller size",
        )


def _now() -> str:
    return utc_now_iso()


def measure_copy_bandwidth(
    size_bytes: int = 2 * _GIB,
    n_samples: int = 30,
    device: int | str | None = None,
) -> Measurement:
    """Device-to-device copy bandwidth, GB/s (10^9 B/s), counting bytes read plus bytes written.

    ``dst.copy_(src)`` on two float32 tensors of ``size_bytes`` each, filled with random values; each
    sample is one copy timed with CUDA events after a warm-up (≥ 5 copies and ≥ 200 ms); rate per sample
    = 2 × size_bytes / time. The copy is checked to be exact afterwards.

    Args:
        size_bytes: bytes per buffer (default 2 GiB; at least 1 MiB, a multiple of 4). Two buffers are
            allocated.
        n_samples: timed copies (≥ 2).
        device: CUDA device index or name; None for the current device.

    Returns:
        :class:`Measurement` with metric ``measured_copy_bandwidth_gbps``, value = median.

    Raises:
        ToolMissingError: no CUDA device, or not enough free GPU memory.
        ValueError: ``size_bytes`` or ``n_samples`` out of range.
        RuntimeError: the copy was not exact (the GPU or driver is misbehaving).
    """
    _check_samples(n_samples)
    if not isinstance(size_bytes, int) or size_bytes < (1 << 20) or size_bytes % 4:
        raise ValueError(f"size_bytes must be an int ≥ 1 MiB and a multiple of 4, got {size_bytes!r}")
    torch = _torch()
    dev = _cuda_device(device)
    with torch.cuda.device(dev):
        _check_free_memory(torch, dev, 2 * size_bytes, "copy buffers")
        src = torch.empty(size_bytes // 4, dtype=torch.float32, device=dev).uniform_(-1.0, 1.0)
        dst = torch.empty_like(src)

        def copy() -> None:
            dst.copy_(src)

        warm = _warm_up(torch, copy, min_iters=5, min_ms=200.0)
        times_ms = _time_ms(copy, n_samples)
        if not torch.equal(dst, src):
            raise RuntimeError("device-to-device copy produced different data; the measurement is void")
        name = torch.cuda.get_device_name(dev)
        del src, dst
        torch.cuda.empty_cache()
    moved = 2 * size_bytes
    rates = [moved / (ms * 1e-3) / 1e9 for ms in times_ms]
    median, iqr = _median_iqr(rates)
    method = (
        f"torch dst.copy_(src), device to device, two float32 buffers of {size_bytes} B (random values); "
        f"bytes counted = read + write = {moved} B per copy; CUDA events around each copy; "
        f"{warm} warm-up copies first; rate = bytes / time, value = median"
    )
    return Measurement(
        metric=COPY_METRIC, value=median, unit="GB/s", median=median, iqr=iqr, samples=rates,
        samples_ms=times_ms, method=method, device_name=name, driver=driver_version(),
        torch_version=str(torch.__version__), date=_now(),
    )


def measure_bf16_gemm(
    n: int = 8192,
    n_samples: int = 20,
    device: int | str | None = None,
) -> Measurement:
    """Dense bf16 matrix-multiply rate through ``torch.matmul`` (cuBLAS), TFLOP/s (10^12 FLOP/s).

    ``torch.matmul(a, b, out=c)`` on n×n bf16 matrices of uniform random values in [0, 1) (never zeros:
    zeros run faster and would overstate the ceiling); 2·n³ FLOPs per product; each sample one product
    timed with CUDA events after a warm-up (≥ 5 products and ≥ 500 ms, so clocks have ramped). The
    output is checked to be finite.

    The rate depends on the data: a large GEMM runs into the board's power cap, and the power drawn
    depends on the bits switched. On an H200 (700 W cap, 2026-11-22, nvidia-smi showing the power-cap
    throttle reason at ~1440 MHz) uniform [0, 1) inputs gave 689-702 TFLOP/s, uniform [-0.5, 0.5) 666,
    standard normal 614-648. A ceiling must not sit below what real kernels reach, so the fastest of
    those random distributions is used; kernels fed normal data will show a lower percent of roofline.

    Args:
        n: matrix size (≥ 256; default 8192: 3 × 128 MiB of operands).
        n_samples: timed products (≥ 2).
        device: CUDA device index or name; None for the current device.

    Returns:
        :class:`Measurement` with metric ``measured_bf16_gemm_tflops``, value = median.

    Raises:
        ToolMissingError: no CUDA device, or not enough free GPU memory.
        ValueError: ``n`` or ``n_samples`` out of range.
        RuntimeError: the inputs came out all zero or the product holds NaN or Inf.
    """
    _check_samples(n_samples)
    if not isinstance(n, int) or n < 256:
        raise ValueError(f"n must be an int ≥ 256, got {n!r}")
    torch = _torch()
    dev = _cuda_device(device)
    with torch.cuda.device(dev):
        _check_free_memory(torch, dev, 3 * n * n * 2, "GEMM operands")
        gen = torch.Generator(device=dev)
        gen.manual_seed(0)
        a = torch.rand(n, n, dtype=torch.bfloat16, device=dev, generator=gen)
        b = torch.rand(n, n, dtype=torch.bfloat16, device=dev, generator=gen)
        if not (bool(a.any()) and bool(b.any())):
            raise RuntimeError("random GEMM inputs came out all zero; the measurement would be void")
        c = torch.empty(n, n, dtype=torch.bfloat16, device=dev)

        def gemm() -> None:
            torch.matmul(a, b, out=c)

        warm = _warm_up(torch, gemm, min_iters=5, min_ms=500.0)
        times_ms = _time_ms(gemm, n_samples)
        if not bool(torch.isfinite(c).all()):
            raise RuntimeError("bf16 GEMM produced NaN or Inf; the measurement is void")
        name = torch.cuda.get_device_name(dev)
        del a, b, c
        torch.cuda.empty_cache()
    flops = 2 * n**3
    rates = [flops / (ms * 1e-3) / 1e12 for ms in times_ms]
    median, iqr = _median_iqr(rates)
    method = (
        f"torch.matmul(a, b, out=c), bf16, n = {n} (uniform random inputs in [0, 1), seed 0); "
        f"FLOPs counted = 2·n³ = {flops} "
        f"per product; CUDA events around each product; {warm} warm-up products first; "
        f"rate = FLOPs / time, value = median"
    )
    return Measurement(
        metric=GEMM_METRIC, value=median, unit="TFLOP/s", median=median, iqr=iqr, samples=rates,
        samples_ms=times_ms, method=method, device_name=name, driver=driver_version(),
        torch_version=str(torch.__version__), date=_now(),
    )


def _value_line(metric: str, value_text: str, unit: str, key: str, note: str) -> str:
    note = " ".join(note.split())
    return f"- {metric}: {value_text} {unit} [{key}]" + (f" {note}" if note else "")


def write_measured(spec_name: str, measurements: Iterable[Measurement], folder: str | Path) -> Path:
    """Write (or update) ``<folder>/<GPU name>.md``, a ``kind: measured`` spec file.

    Each measurement becomes one value line whose source key's text is its provenance (date, method,
    device, driver, torch version, n samples, median, IQR); raw samples go in a ``## Raw samples``
    section. Measured values already in the file for other metrics are kept (their raw samples are not).
    The written file is read back with :func:`~kernelpilot.hardware.specs.load_spec_file` before
    returning.

    Args:
        spec_name: the GPU's spec name or alias (``H200``, ``NVIDIA H200``); written under its spec name.
        measurements: at least one :class:`Measurement`, metrics ``measured_*`` with units fitting their names.
        folder: where to write, usually :func:`~kernelpilot.hardware.specs.measured_dir` (created if missing).

    Returns:
        The written file's path.

    Raises:
        SpecError: unknown GPU, no measurements, a metric not ``measured_*`` or a unit not fitting its
            name, a non-positive value, an existing file that cannot be read, or a file that does not read
            back.
        OSError: the folder or file cannot be written.
    """
    spec = find_spec(spec_name)
    items = list(measurements)
    if not items:
        raise SpecError("no measurements to write", hint="measure first: measure_copy_bandwidth(), measure_bf16_gemm()")
    for m in items:
        if not m.metric.startswith("measured_"):
            raise SpecError(f"measurement metric '{m.metric}' does not start with 'measured_'",
                            hint="measured ceilings are named measured_<what>_<unit suffix>")
        if m.unit != expected_unit(m.metric):
            raise SpecError(f"measurement '{m.metric}' is in {m.unit}, its name requires {expected_unit(m.metric)}",
                            hint="convert the value or rename the metric")
        if not (math.isfinite(m.value) and m.value > 0):
            raise SpecError(f"measurement '{m.metric}' has value {m.value!r}; ceilings must be positive",
                            hint="measure again")

    out_dir = Path(folder).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{spec.name}.md"
    kept = {}
    if path.exists():
        try:
            kept = load_spec_file(path).measured
        except SpecError as exc:
            raise SpecError(f"cannot update {path}: {exc.message}",
                            hint=f"move the file aside or fix it ({exc.hint})") from exc
    new = {m.metric: m for m in items}

    sources: list[str] = []
    values: list[str] = []
    for metric in sorted(set(kept) | set(new)):
        if metric in new:
            m = new[metric]
            sources.append(f"[{metric}]: {m.provenance()}")
            note = f"median of {len(m.samples)} samples; IQR {format_number(m.iqr)} {m.unit}"
            values.append(_value_line(metric, format_number(m.value), m.unit, metric, note))
        else:
            old = kept[metric]
            sources.append(f"[{old.source_key}]: {' '.join(old.source.split())}")
            values.append(_value_line(metric, old.value_text or format_number(old.value), old.unit, old.source_key,
                                      old.note))

    lines = [
        f"# Measured ceilings: {spec.name}",
        "kind: measured",
        f"spec: {spec.name}",
        "",
        "Written by kernelpilot (kernelpilot.hardware.ceilings.write_measured). Each value is the median of",
        "its samples; its source line holds the provenance. The roofline prefers these values over the",
        "datasheet's (GpuSpec.ceiling).",
        "",
        "## Sources",
        *sources,
        "",
        "## Values",
        *values,
        "",
        "## Raw samples",
    ]
    for metric in sorted(new):
        m = new[metric]
        lines.append(f"{metric} ({m.unit}): " + ", ".join(format_number(round(s, 3)) for s in m.samples))
        if m.samples_ms:
            lines.append(f"{metric} times (ms): " + ", ".join(format_number(round(t, 5)) for t in m.samples_ms))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    back = load_spec_file(path)
    missing = sorted(set(new) - set(back.measured))
    if back.kind != "measured" or missing:
        raise SpecError(f"{path} did not read back (missing: {', '.join(missing) or 'kind'})",
                        hint="report this as a kernelpilot bug")
    return path


def measure_ceilings(
    folder: str | Path | None = None,
    device: int | str | None = None,
    copy_size_bytes: int = 2 * _GIB,
    copy_samples: int = 30,
    gemm_n: int = 8192,
    gemm_samples: int = 20,
) -> tuple[Path, list[Measurement]]:
    """Measure both ceilings on one device and write them for the spec that device matches.

    Args:
        folder: where to write; default :func:`~kernelpilot.hardware.specs.measured_dir`.
        device: CUDA device index or name; None for the current device.
        copy_size_bytes, copy_samples: see :func:`measure_copy_bandwidth`.
        gemm_n, gemm_samples: see :func:`measure_bf16_gemm`.

    Returns:
        (path written, [copy measurement, GEMM measurement]).

    Raises:
        ToolMissingError: no CUDA device or not enough GPU memory.
        SpecError: the device's name matches no spec (:func:`~kernelpilot.hardware.specs.match_device`),
            checked before anything is measured.
    """
    torch = _torch()
    dev = _cuda_device(device)
    spec = match_device(torch.cuda.get_device_name(dev))
    results = [
        measure_copy_bandwidth(copy_size_bytes, copy_samples, dev),
        measure_bf16_gemm(gemm_n, gemm_samples, dev),
    ]
    path = write_measured(spec.name, results, measured_dir() if folder is None else folder)
    return path, results
