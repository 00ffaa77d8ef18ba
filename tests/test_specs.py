"""GPU spec files: every shipped value sourced, malformed files refused with path:line, lookup by name,
alias and device name, measured ceilings written, read back and preferred over the datasheet."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

try:
    import kernelpilot  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kernelpilot.errors import SpecError, ToolMissingError
from kernelpilot.hardware import ceilings
from kernelpilot.hardware.ceilings import Measurement, write_measured
from kernelpilot.hardware.specs import (
    PACKAGE_MEASURED_DIR,
    SPECS_DIR,
    SpecValue,
    expected_unit,
    find_spec,
    list_specs,
    load_spec_file,
    PACKAGE_ONLY_METRICS,
    is_package_split_metric,
    match_device,
    measured_dir,
    per_device_name,
    per_device_spec,
    source_is_citable,
)

SHIPPED = sorted(p for p in SPECS_DIR.glob("*.md") if p.name.lower() != "readme.md")
CORE_METRICS = [
    "sm_count", "memory_gb", "dram_bandwidth_gbps", "l2_cache_mb", "shared_mem_per_sm_kb",
    "shared_mem_per_block_kb", "registers_per_sm", "max_registers_per_thread", "max_warps_per_sm",
    "max_blocks_per_sm", "peak_fp64_tflops", "peak_fp64_tensor_tflops", "peak_fp32_tflops",
    "peak_tf32_tensor_dense_tflops", "peak_bf16_tensor_dense_tflops", "peak_fp16_tensor_dense_tflops",
    "peak_fp8_tensor_dense_tflops", "peak_int8_tensor_dense_tops", "tdp_w",
]
CITE_RE = re.compile(r"^(?P<metric>[a-z0-9_]+): (?P<value>[0-9.]+) (?P<unit>\S+) <- (?P<path>\S+):(?P<line>\d+)$")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """Keep the user's ~/.kernelpilot out of every test."""
    monkeypatch.setenv("KERNELPILOT_HOME", str(tmp_path / "kp_home"))


def _write(tmp_path: Path, body: str, name: str = "TestGPU.md") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


GOOD = """# Test GPU
aliases: Test GPU One
compute_capability: 9.0

## Sources
[doc]: A datasheet — https://example.com/datasheet

## Values
- sm_count: 10 count [doc]
- dram_bandwidth_gbps: 1000 GB/s [doc]
- peak_fp32_tflops: 20 TFLOP/s [doc]
"""


# ------------------------------------------------------------------ shipped files


#: The GPUs issue 5 asks for (file stems): every one must ship with sources.
REQUIRED_GPUS = {
    "V100-SXM2", "A100-SXM-40GB", "A100-SXM-80GB", "A100-PCIe", "H100-SXM", "H100-PCIe", "H100-NVL", "H200",
    "GH200", "L40S", "L4", "RTX-4090", "RTX-6000-Ada", "B200", "GB200", "MI250X", "MI300X", "MI325X", "MI355X",
    "Max-1550",
}
#: Values every shipped file must have: the two roofline inputs and the board power.
ALWAYS = ("memory_gb", "dram_bandwidth_gbps", "tdp_w")


def test_shipped_files_exist():
    assert REQUIRED_GPUS <= {p.stem for p in SHIPPED}
    assert (PACKAGE_MEASURED_DIR / "README.md").is_file()


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_value_loads_with_a_source(path):
    spec = load_spec_file(path)
    assert spec.kind == "datasheet" and spec.values
    if spec.vendor == "NVIDIA":
        assert spec.compute_capability and re.fullmatch(r"\d+\.\d+", spec.compute_capability)
    else:
        assert spec.arch, f"{path.name}: a non-NVIDIA GPU names its ISA target on an 'arch:' line"
    lines = path.read_text(encoding="utf-8").splitlines()
    for metric, first in spec.values.items():
        for value in [first, *first.alternatives]:
            assert value.source_key and value.source.strip(), metric
            assert value.path == f"hardware/specs/{path.name}"
            assert lines[value.line - 1].lstrip("- ").startswith(f"{metric}:"), (metric, value.line)
            assert value.unit == expected_unit(metric)
            assert value.value > 0
            # a source is a document title with a URL (or, for device queries, a provenance line)
            assert "http" in value.source or "device query" in value.source, (metric, value.source)
            assert source_is_citable(value.source), (metric, value.source)
        if "_dense_" in metric and first.derived and "sparse" in first.note + first.source:
            # a dense rate derived from a quoted sparse one is exactly half of it (dense and sparse kept apart)
            sparse = spec.values.get(metric.replace("_dense_", "_sparse_"))
            assert sparse is not None, f"{path.name}: {metric} is derived from a sparse rate the file does not give"
            assert first.value == pytest.approx(sparse.value / 2, rel=0.01), metric
    for metric in ALWAYS:
        assert metric in spec.values, (path.name, metric)
    # every shipped GPU has at least one sourced peak, so a roofline on it can resolve some compute unit
    assert any(m.startswith("peak_") for m in spec.values), path.name


def test_shipped_conflicts_are_flagged_not_averaged():
    specs = {s.name: s for s in list_specs()}
    flagged = {name: [v.metric for v in spec.conflicts()] for name, spec in specs.items() if spec.conflicts()}
    # B200: the Blackwell datasheet's 7.7 TB/s against the DGX B200 page's 64 TB/s / 8 GPUs
    assert "dram_bandwidth_gbps" in flagged.get("B200", [])
    b200 = specs["B200"].get("dram_bandwidth_gbps")
    assert b200.value == 7700 and [alt.value for alt in b200.conflicting] == [8000]


@pytest.mark.parametrize("path", sorted(PACKAGE_MEASURED_DIR.glob("*.md")), ids=lambda p: p.name)
def test_shipped_measured_files_load(path):
    if path.name.lower() == "readme.md":
        pytest.skip("the README is not a spec file")
    spec = load_spec_file(path)
    assert spec.kind == "measured" and spec.measured
    for value in spec.measured.values():
        assert value.metric.startswith("measured_") and "measured" in value.source


def test_list_specs_and_key_values():
    specs = {s.name: s for s in list_specs()}
    assert REQUIRED_GPUS <= set(specs)
    h100, pcie, h200 = specs["H100-SXM"], specs["H100-PCIe"], specs["H200"]
    assert h100.get("sm_count").value == 132 and pcie.get("sm_count").value == 114
    assert h200.get("sm_count").value == 132
    assert h100.get("dram_bandwidth_gbps").value == 3350
    assert pcie.get("dram_bandwidth_gbps").value == 2000
    assert h200.get("dram_bandwidth_gbps").value == 4800
    assert h200.get("memory_gb").value == 141 and h100.get("memory_gb").value == 80
    assert h100.get("l2_cache_mb").value == 50 and h200.get("l2_cache_mb").value == 60
    # same GH100 compute on H100 SXM and H200
    for metric in CORE_METRICS:
        if metric.startswith("peak_"):
            assert h100.get(metric).value == h200.get(metric).value, metric
    assert h200.get("peak_bf16_tensor_dense_tflops").value == 989.5


def test_cite_format():
    value = find_spec("H200").get("dram_bandwidth_gbps")
    m = CITE_RE.match(value.cite())
    assert m, value.cite()
    assert m["metric"] == "dram_bandwidth_gbps" and m["value"] == "4800" and m["unit"] == "GB/s"
    assert m["path"] == "hardware/specs/H200.md" and int(m["line"]) == value.line
    made = SpecValue(metric="x_gbps", value=4221.3456, unit="GB/s", source_key="k", source="s", path="p.md", line=3)
    assert made.cite() == "x_gbps: 4221.35 GB/s <- p.md:3"


# ------------------------------------------------------------------ refused files


def test_good_temp_file_loads_and_cites_absolute_path(tmp_path):
    path = _write(tmp_path, GOOD)
    spec = load_spec_file(path)
    assert spec.name == "TestGPU" and spec.aliases == ["Test GPU One"]
    assert spec.get("sm_count").cite() == f"sm_count: 10 count <- {path.resolve()}:9"


@pytest.mark.parametrize(
    "bad_line, words",
    [
        ("- peak_fp64_tflops: 10 TFLOP/s", "no source"),
        ("- peak_fp64_tflops: 10 TFLOP/s []", "no source"),
        ("- peak_fp64_tflops: 10 TFLOPS [doc]", "unit 'TFLOPS' does not match"),
        ("- l2_cache_mb: 50 KB [doc]", "unit 'KB' does not match"),
        ("- max_warps_per_sm: 64 count [doc]", "unit 'count' does not match"),
        ("- peak_fp64_tflops: 10 TFLOP/s [nowhere]", "unknown source key [nowhere]"),
        ("- peak_fp64_tflops: 1,979 TFLOP/s [doc]", "is not a number"),
        ("- peak_fp64_tflops: 0 TFLOP/s [doc]", "positive"),
        ("- peak_fp64_tflops: 10 [doc]", "no unit"),
        ("- sm_count: 12 count [doc]", "given twice"),
        ("- measured_copy_bandwidth_gbps: 10 GB/s [doc]", "measured metric"),
        ("- Peak_FP64: 10 TFLOP/s [doc]", "lower_snake_case"),
    ],
)
def test_bad_value_lines_are_refused_with_path_and_line(tmp_path, bad_line, words):
    path = _write(tmp_path, GOOD + bad_line + "\n")
    bad_line_number = len(GOOD.splitlines()) + 1
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    err = info.value
    assert f"{path.resolve()}:{bad_line_number}:" in err.message
    assert words in err.message
    assert err.hint


def test_bad_source_lines_are_refused(tmp_path):
    path = _write(tmp_path, GOOD.replace("[doc]: A datasheet — https://example.com/datasheet", "[doc]:"))
    with pytest.raises(SpecError, match=r":6: source \[doc\] has no text"):
        load_spec_file(path)
    twice = GOOD.replace("## Values", "[doc]: again\n\n## Values")
    with pytest.raises(SpecError, match="defined twice"):
        load_spec_file(_write(tmp_path, twice))


def test_unreadable_or_empty_files_are_refused(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_spec_file(tmp_path / "missing.md")
    with pytest.raises(SpecError, match="no values"):
        load_spec_file(_write(tmp_path, "# Empty\n\n## Values\n"))


def test_user_spec_file_is_found(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("KERNELPILOT_HOME", str(home))
    (home / "specs").mkdir(parents=True)
    _write(home / "specs", GOOD)
    spec = find_spec("test gpu one")
    assert spec.name == "TestGPU" and spec.path == str((home / "specs" / "TestGPU.md").resolve())


def test_alias_shared_by_two_files_is_refused(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("KERNELPILOT_HOME", str(home))
    (home / "specs").mkdir(parents=True)
    _write(home / "specs", GOOD.replace("aliases: Test GPU One", "aliases: NVIDIA H200"))
    with pytest.raises(SpecError, match="names two GPUs"):
        list_specs()


# ------------------------------------------------------------------ lookup


@pytest.mark.parametrize(
    "query, name",
    [
        ("H200", "H200"),
        ("h200", "H200"),
        ("NVIDIA H200 SXM 141GB", "H200"),
        ("H100-SXM", "H100-SXM"),
        ("h100 sxm", "H100-SXM"),
        ("H100_SXM5", "H100-SXM"),
        ("nvidia-h100-pcie", "H100-PCIe"),
    ],
)
def test_find_spec_ignores_case_spaces_dashes(query, name):
    assert find_spec(query).name == name


@pytest.mark.parametrize(
    "device, name",
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),  # the SXM5 board's reported name
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"),
        ("NVIDIA B200", "B200"),
        ("AMD Instinct MI300X", "MI300X"),
    ],
)
def test_match_device_names(device, name):
    assert match_device(device).name == name


@pytest.mark.parametrize(
    "device, close",
    [
        ("NVIDIA H200 NVL", "H200"),  # the NVL board has its own power and rates; no file for it
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "H100-SXM"),
        ("NVIDIA A800 80GB PCIe", "A100-PCIe"),
        # the 40 GB PCIe A100 has 1555 GB/s; A100-PCIe.md is the 80 GB card (1935 GB/s): refuse, never borrow
        ("NVIDIA A100-PCIE-40GB", "A100-PCIe"),
    ],
)
def test_match_device_refuses_unlisted_variants(device, close):
    with pytest.raises(SpecError) as info:
        match_device(device)
    assert device in info.value.message and close in info.value.hint


def test_bare_h100_is_refused_naming_every_h100_board():
    """'NVIDIA H100' starts the names of three boards with different bandwidth and rates: refuse and name them."""
    with pytest.raises(SpecError) as info:
        match_device("NVIDIA H100")
    hint = info.value.hint
    assert "H100-NVL, H100-PCIe, H100-SXM" in hint and "--gpu" in hint


def test_unknown_gpu_lists_closest_and_how_to_add():
    with pytest.raises(SpecError) as info:
        find_spec("H300")
    err = info.value
    assert "H300" in err.message
    assert "closest known:" in err.hint and "H200" in err.hint
    assert "H100-SXM" in err.hint and "To add a GPU" in err.hint and ".md" in err.hint


def test_get_unknown_metric_names_metric_and_file():
    with pytest.raises(SpecError) as info:
        find_spec("H100-PCIe").get("boost_clock_mhz")
    assert "boost_clock_mhz" in info.value.message and "hardware/specs/H100-PCIe.md" in info.value.message


# ------------------------------------------------------------------ measured ceilings


def _measurement(metric: str, unit: str, samples: list[float]) -> Measurement:
    ordered = sorted(samples)
    median = ordered[len(ordered) // 2]
    return Measurement(
        metric=metric, value=median, unit=unit, median=median, iqr=ordered[-2] - ordered[1], samples=samples,
        samples_ms=[1.0] * len(samples), method="test method; no GPU", device_name="NVIDIA H200",
        driver="580.159.03", torch_version="2.11.0", date="2026-11-22T00:00:00+00:00",
    )


def test_measured_round_trip_and_preferred_over_datasheet(tmp_path, monkeypatch):
    # packaged measured files (if any) would set the GEMM ceiling; keep only the user folder in play
    monkeypatch.setattr("kernelpilot.hardware.specs.PACKAGE_MEASURED_DIR", tmp_path / "no_package_measured")
    copy = _measurement("measured_copy_bandwidth_gbps", "GB/s", [4210.0, 4220.5, 4215.25, 4230.0, 4219.0])
    path = write_measured("NVIDIA H200", [copy], measured_dir())
    assert path == measured_dir() / "H200.md"

    back = load_spec_file(path)
    assert back.kind == "measured" and back.name == "H200"
    value = back.measured["measured_copy_bandwidth_gbps"]
    assert value.value == pytest.approx(copy.value)
    for field in ("2026-11-22", "test method", "NVIDIA H200", "580.159.03", "2.11.0", "n_samples: 5", "median", "IQR"):
        assert field in value.source, field
    assert value.cite() == f"measured_copy_bandwidth_gbps: 4219 GB/s <- {path.resolve()}:{value.line}"

    spec = find_spec("H200")
    bandwidth = spec.ceiling("dram_bandwidth_gbps", "measured_copy_bandwidth_gbps")
    assert bandwidth.metric == "measured_copy_bandwidth_gbps" and bandwidth.value == pytest.approx(4219.0)
    # no measured GEMM yet: the datasheet value stands
    assert spec.ceiling("peak_bf16_tensor_dense_tflops", "measured_bf16_gemm_tflops").value == 989.5
    # other GPUs are untouched
    assert "measured_copy_bandwidth_gbps" not in find_spec("H100-SXM").measured

    # a second write adds the GEMM and keeps the copy
    gemm = _measurement("measured_bf16_gemm_tflops", "TFLOP/s", [760.0, 770.0, 765.5])
    write_measured("H200", [gemm], measured_dir())
    spec = find_spec("H200")
    assert set(spec.measured) == {"measured_copy_bandwidth_gbps", "measured_bf16_gemm_tflops"}
    assert spec.measured["measured_copy_bandwidth_gbps"].value == pytest.approx(4219.0)
    assert spec.ceiling("peak_bf16_tensor_dense_tflops", "measured_bf16_gemm_tflops").value == pytest.approx(765.5)


def test_write_measured_refuses_bad_input(tmp_path):
    good = _measurement("measured_copy_bandwidth_gbps", "GB/s", [1.0, 2.0, 3.0])
    with pytest.raises(SpecError):
        write_measured("H300", [good], tmp_path)
    with pytest.raises(SpecError, match="requires GB/s"):
        write_measured("H200", [good.model_copy(update={"unit": "TFLOP/s"})], tmp_path)
    with pytest.raises(SpecError, match="measured_"):
        write_measured("H200", [good.model_copy(update={"metric": "copy_bandwidth_gbps"})], tmp_path)
    with pytest.raises(SpecError, match="no measurements"):
        write_measured("H200", [], tmp_path)


def test_packaged_measured_values_are_merged():
    for path in sorted(PACKAGE_MEASURED_DIR.glob("*.md")):
        if path.name.lower() == "readme.md":
            continue
        found = load_spec_file(path)
        spec = find_spec(found.name)
        for metric, value in found.measured.items():
            assert spec.measured[metric].value == value.value
            assert spec.measured[metric].path == f"hardware/specs/measured/{path.name}"


def test_measured_file_for_unknown_gpu_is_refused(tmp_path):
    folder = measured_dir()
    folder.mkdir(parents=True)
    (folder / "X.md").write_text(
        "# m\nkind: measured\nspec: H300\n\n## Sources\n[m]: measured today\n\n## Values\n"
        "- measured_copy_bandwidth_gbps: 10 GB/s [m]\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecError, match="unknown GPU 'H300'"):
        list_specs()


def test_datasheet_metric_in_measured_file_is_refused(tmp_path):
    path = _write(tmp_path, "# m\nkind: measured\n\n## Sources\n[m]: measured\n\n## Values\n- sm_count: 3 count [m]\n")
    with pytest.raises(SpecError, match=r":8: datasheet metric 'sm_count' in a measured file"):
        load_spec_file(path)


def test_measure_without_cuda_raises_tool_missing():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ToolMissingError) as info:
        ceilings.measure_copy_bandwidth(1 << 20, 2)
    assert info.value.hint
    with pytest.raises(ToolMissingError):
        ceilings.measure_bf16_gemm(256, 2)


@pytest.mark.gpu
def test_measure_small_on_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    copy = ceilings.measure_copy_bandwidth(64 << 20, 5)
    gemm = ceilings.measure_bf16_gemm(1024, 5)
    assert copy.unit == "GB/s" and copy.value > 10 and len(copy.samples) == 5 and copy.iqr >= 0
    assert gemm.unit == "TFLOP/s" and gemm.value > 1 and len(gemm.samples) == 5
    assert copy.driver and copy.device_name == torch.cuda.get_device_name()
    try:
        name = match_device(copy.device_name).name
    except SpecError:
        pytest.skip(f"no spec for {copy.device_name}")
    path = write_measured(name, [copy, gemm], tmp_path)
    assert set(load_spec_file(path).measured) == {"measured_copy_bandwidth_gbps", "measured_bf16_gemm_tflops"}


def test_second_source_is_kept_and_disagreement_is_flagged_not_averaged(tmp_path):
    text = GOOD.replace("## Values", "[other]: Another document — https://example.com/other\n\n## Values")
    text += "- sm_count: 10 count [other] agrees\n- memory_gb: 80 GB [doc]\n- memory_gb: 96 GB [other] the later revision\n"
    spec = load_spec_file(_write(tmp_path, text))
    sm, mem = spec.get("sm_count"), spec.get("memory_gb")
    assert sm.value == 10 and [a.source_key for a in sm.alternatives] == ["other"] and not sm.conflict
    assert mem.value == 80, "the first line is the value used, never an average"
    assert mem.conflict and [a.value for a in mem.conflicting] == [96]
    assert [v.metric for v in spec.conflicts()] == ["memory_gb"]


def test_vendor_arch_and_thread_units(tmp_path):
    text = GOOD.replace("aliases:", "vendor: AMD\narch: gfx942 [doc]\naliases:")
    text += "- threads_per_warp: 64 threads [doc]\n- max_threads_per_block: 1024 threads [doc]\n"
    spec = load_spec_file(_write(tmp_path, text))
    assert (spec.vendor, spec.arch) == ("AMD", "gfx942")
    assert spec.get("threads_per_warp").unit == "threads"
    assert expected_unit("max_threads_per_block") == "threads"
    assert expected_unit("max_registers_per_thread") == "registers"
    with pytest.raises(SpecError, match="vendor 'ATI'"):
        load_spec_file(_write(tmp_path, GOOD.replace("aliases:", "vendor: ATI\naliases:")))
    with pytest.raises(SpecError, match=r"unknown source key \[nope\] on arch"):
        load_spec_file(_write(tmp_path, GOOD.replace("aliases:", "arch: gfx90a [nope]\naliases:")))


# ------------------------------------------------------------------ citable sources


@pytest.mark.parametrize(
    "source_text",
    [
        "trust me",
        "A datasheet",
        "NVIDIA H100 datasheet (2024)",
    ],
)
def test_value_whose_source_has_no_url_and_no_locator_is_refused(tmp_path, source_text):
    path = _write(tmp_path, GOOD.replace("A datasheet — https://example.com/datasheet", source_text))
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    err = info.value
    # file and the first value line citing it (line 9: sm_count), the metric, the source key and its line
    assert f"{path.resolve()}:9:" in err.message
    assert "'sm_count' cites [doc] (line 6)" in err.message
    assert "neither a URL nor a table/page/section locator" in err.message
    assert "URL" in err.hint and "table, page or section" in err.hint and "line 6" in err.hint


@pytest.mark.parametrize(
    "source_text",
    [
        "A datasheet — https://example.com/datasheet",
        "NVIDIA H100 datasheet, Table 3 (print copy)",
        "AMD CDNA 3 white paper, p. 14",
        "CUDA guide §5.2",
        "device query on our own node, 2026-11-22, torch.cuda.get_device_properties(0)",
    ],
)
def test_value_with_url_or_locator_or_device_query_loads(tmp_path, source_text):
    path = _write(tmp_path, GOOD.replace("A datasheet — https://example.com/datasheet", source_text))
    assert load_spec_file(path).get("sm_count").source == source_text


def test_measured_provenance_needs_no_url():
    text = "measured 2026-11-22T03:15:33+00:00; method: torch copy; n_samples: 30; median: 4200 GB/s"
    assert not source_is_citable(text)  # the rule is for datasheet files; measured files cite their provenance


# ------------------------------------------------------------------ one device of a multi-device package


def test_mi250x_package_and_one_gcd():
    package = find_spec("MI250X")
    assert package.devices_per_package == 2 and package.device_unit == "GCD"
    assert per_device_name(package) == "MI250X-GCD"
    gcd = per_device_spec(package)
    assert gcd.name == "MI250X-GCD" and gcd.package_of == "MI250X" and gcd.devices_per_package == 1
    for metric, value in package.values.items():
        if metric in PACKAGE_ONLY_METRICS:
            assert metric not in gcd.values, metric  # power and external links are not split by guessing
        elif is_package_split_metric(metric):
            half = gcd.values[metric]
            assert half.value == pytest.approx(value.value / 2), metric
            assert half.note.startswith("derived: package value") and half.derived
            assert (half.path, half.line) == (value.path, value.line)  # still cites the package line
            assert half.cite().startswith(f"{metric}: {half.value_text} ")
        else:
            assert gcd.values[metric].value == value.value, metric  # per-CU limits and clocks stay whole
    assert gcd.get("dram_bandwidth_gbps").value == pytest.approx(1638.4)
    assert gcd.get("memory_gb").value == 64 and gcd.get("sm_count").value == 110
    h200 = find_spec("H200")
    assert per_device_spec(h200) is h200  # one device per package: the spec itself


def test_device_names_match_one_die_and_package_names_match_the_file():
    assert match_device("AMD Instinct MI250X").name == "MI250X-GCD"
    assert match_device("Intel(R) Data Center GPU Max 1550").name == "Max-1550-stack"
    assert find_spec("MI250X").name == "MI250X"  # the file: the whole package
    assert find_spec("mi250x-gcd").name == "MI250X-GCD"
    stack = find_spec("Max-1550-stack")
    card = find_spec("Max-1550")
    for metric in ("peak_bf16_tensor_dense_tflops", "dram_bandwidth_gbps", "memory_gb", "peak_fp64_tflops"):
        assert stack.get(metric).value == pytest.approx(card.get(metric).value / 2), metric
    assert match_device("AMD Instinct MI300X").name == "MI300X"  # one device per package: unchanged


def test_roofline_on_one_device_uses_halved_ceilings():
    from kernelpilot.hardware.roofline import compute_roofline

    card = compute_roofline(2 * 4096**3, 3 * 4096 * 4096 * 2, "bf16_tensor", find_spec("Max-1550"))
    stack = compute_roofline(2 * 4096**3, 3 * 4096 * 4096 * 2, "bf16_tensor", match_device("Intel(R) Data Center GPU Max 1550"))
    assert stack.floor_ns == pytest.approx(2 * card.floor_ns)
    assert stack.gpu == "Max-1550-stack" and stack.citations[0].startswith("peak_bf16_tensor_dense_tflops: 419.43 ")


def test_measured_on_one_gcd_is_kept_whole_and_package_measure_is_refused(tmp_path):
    folder = measured_dir()
    folder.mkdir(parents=True)
    body = ("# m\nkind: measured\nspec: {spec}\n\n## Sources\n[m]: measured 2026-11-22 on one GCD\n\n## Values\n"
            "- measured_copy_bandwidth_gbps: 1300 GB/s [m]\n")
    (folder / "MI250X-GCD.md").write_text(body.format(spec="MI250X-GCD"), encoding="utf-8")
    gcd = match_device("AMD Instinct MI250X")
    assert gcd.measured["measured_copy_bandwidth_gbps"].value == 1300  # measured per device: never divided
    assert gcd.ceiling("dram_bandwidth_gbps", "measured_copy_bandwidth_gbps").value == 1300
    assert not find_spec("MI250X").measured  # the package's own measured ceilings stay empty
    (folder / "MI250X.md").write_text(body.format(spec="MI250X"), encoding="utf-8")
    with pytest.raises(SpecError, match="a measurement runs on one device") as info:
        list_specs()
    assert "spec: MI250X-GCD" in info.value.hint


@pytest.mark.parametrize(
    "header, words",
    [
        ("devices_per_package: two [doc]", "not a whole number"),
        ("devices_per_package: 0 [doc]", "not a whole number"),
        ("devices_per_package: 2", "has no source"),
        ("devices_per_package: 2 [nope]", "unknown source key [nope] on devices_per_package"),
        ("device_unit: two words", "one word"),
    ],
)
def test_bad_package_headers_are_refused(tmp_path, header, words):
    with pytest.raises(SpecError, match=re.escape(words)):
        load_spec_file(_write(tmp_path, GOOD.replace("aliases:", header + "\naliases:")))


def test_package_header_in_temp_file_splits_values(tmp_path):
    spec = load_spec_file(_write(tmp_path, GOOD.replace("aliases:", "devices_per_package: 2 [doc]\ndevice_unit: tile\naliases:")))
    one = per_device_spec(spec)
    assert one.name == "TestGPU-tile"
    assert one.get("dram_bandwidth_gbps").value == 500 and one.get("peak_fp32_tflops").value == 10
    assert one.get("sm_count").value == 5
