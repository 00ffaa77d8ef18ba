"""The workload manifest (``kernelpilot-bundle/2``) as pydantic models, and its checks without a GPU.

Two kinds share the format: ``triton`` (cubins per bucket and specialization, :class:`RangeManifest`) and
``cuda-so`` (a ``.cu`` kernel's shared library per bucket config, :class:`CudaManifest`). Both carry the dispatch
table's keys and sha256, the buckets' inclusive ranges, the files with their sha256 and the ``bundle_id`` over the
whole manifest (as ``kernelpilot-bundle/1``; :mod:`kernelpilot.bundle.reader`). docs/bundles.md, "Workload bundles".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelpilot.bundle.manifest import ArgRule, BundleFile
from kernelpilot.bundle.reader import BundleError, read_files, read_manifest_data

__all__ = ["CudaBucket", "CudaLibrary", "CudaManifest", "CudaParam", "DispatchRef", "RangeBucket", "RangeEntry",
           "RangeManifest", "validate_v2", "verify_v2"]

_OPEN = ConfigDict(extra="forbid")
Rule = dict[str, Any]


class DispatchRef(BaseModel):
    """The dispatch table the bundle serves: its file ``sha256``, the ``keys`` it dispatches on, and for each key
    the run_kernel input carrying it (``{"input": name, "dim": d or None}``: a scalar input, or a tensor's size)."""

    model_config = _OPEN
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    keys: list[str] = Field(min_length=1)
    key_inputs: dict[str, dict[str, Any]]
    arch: str = ""
    gpu_name: str = ""


class RangeBucket(BaseModel):
    """One bucket: inclusive ``ranges`` per key, its ``config``, the shapes sampled at export, the rules (over the
    keys, :mod:`kernelpilot.bundle.rules`) giving each input's size/stride/value, each kernel parameter's value
    (``params``) and the ``grid``; the coverage caps; the indices of its ``entries``."""

    model_config = _OPEN
    name: str
    ranges: dict[str, tuple[int, int]]
    config: dict[str, Any]
    samples: list[dict[str, Any]] = Field(min_length=1)
    inputs: dict[str, dict[str, Any]]
    params: dict[str, Rule]
    grid: list[Rule] = Field(min_length=3, max_length=3)
    coverage: dict[str, Any]
    entries: list[int] = Field(min_length=1)


class RangeEntry(BaseModel):
    """One cubin: ``bucket``'s config compiled for one specialization (``constexprs`` and the ``args``' types and
    divisibility) at the sampled ``shape``; launch options and binary facts as :class:`BundleEntry`."""

    model_config = _OPEN
    bucket: str
    kernel_name: str
    cubin: str
    config: dict[str, Any]
    shape: dict[str, Any]
    constexprs: dict[str, Any]
    args: list[ArgRule]
    num_warps: int
    num_stages: int
    num_ctas: int = 1
    shared_mem_bytes: int
    n_regs: int
    n_spills: int
    spills: bool
    ptx_version: str
    ptx_target: str


class RangeManifest(BaseModel):
    """``manifest.json`` of a Triton workload bundle (``kind`` ``triton``, ``grid_rule`` ``shape-ranges``)."""

    model_config = _OPEN
    format: Literal["kernelpilot-bundle/2"]
    kind: Literal["triton"]
    kernel: str
    kernel_function: str
    run_kernel_params: list[str]
    source_sha256: str
    arch: str
    compute_capability: tuple[int, int]
    triton_version: str = ""
    ptxas_version: str = ""
    nvcc_version: str = ""
    torch_version: str = ""
    min_driver_cuda: str
    grid_rule: Literal["shape-ranges"]
    created: str = ""
    dispatch: DispatchRef
    buckets: list[RangeBucket] = Field(min_length=1)
    entries: list[RangeEntry] = Field(min_length=1)
    files: list[BundleFile]
    bundle_id: str = Field(pattern=r"^[0-9a-f]{64}$")


class CudaParam(BaseModel):
    """One ``solve`` parameter: ``name``, ``kind`` (buffer/int/float), C type, torch dtype of a buffer, ctypes type."""

    model_config = _OPEN
    name: str
    kind: Literal["buffer", "int", "float"]
    ctype: str
    dtype: str = ""
    ctypes_name: str


class CudaLibrary(BaseModel):
    """A built shared library: its ``file`` in the bundle, the ``config`` (``-D`` defines) it was built with."""

    model_config = _OPEN
    file: str
    config: dict[str, Any]


class CudaBucket(BaseModel):
    """A bucket of a ``.cu`` workload bundle: ``ranges``, ``config`` and the index of its ``library``."""

    model_config = _OPEN
    name: str
    ranges: dict[str, tuple[int, int]]
    config: dict[str, Any]
    library: int


class CudaManifest(BaseModel):
    """``manifest.json`` of a ``.cu`` workload bundle (``kind`` ``cuda-so``): ``solve``'s signature, one library
    per distinct bucket config (built by kernelpilot's nvcc build with its ``cudaDeviceSynchronize`` shim), the
    buckets. ``min_driver_cuda``: the major release of the nvcc that built them."""

    model_config = _OPEN
    format: Literal["kernelpilot-bundle/2"]
    kind: Literal["cuda-so"]
    kernel: str
    source_sha256: str
    arch: str
    compute_capability: tuple[int, int]
    nvcc_arch: str
    nvcc_version: str
    min_driver_cuda: str
    created: str = ""
    solve: list[CudaParam] = Field(min_length=1)
    dispatch: DispatchRef
    libraries: list[CudaLibrary] = Field(min_length=1)
    buckets: list[CudaBucket] = Field(min_length=1)
    files: list[BundleFile]
    bundle_id: str = Field(pattern=r"^[0-9a-f]{64}$")


def validate_v2(data: dict[str, Any], where: str) -> Union[RangeManifest, CudaManifest]:
    """The manifest validated against the model of its ``kind``.

    Raises:
        BundleError: it breaks the schema (the first field named), an unknown kind.
    """
    model = {"triton": RangeManifest, "cuda-so": CudaManifest}.get(str(data.get("kind")))
    if model is None:
        raise BundleError(f"{where}: kind {data.get('kind')!r}, this kernelpilot reads 'triton' and 'cuda-so'",
                          "export the bundle with this kernelpilot")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise BundleError(f"{where}: breaks the manifest schema: {err['loc']}: {err['msg']}",
                          "export the bundle again") from exc


def verify_v2(bundle: str | Path, data: dict[str, Any]) -> dict[str, Any]:
    """``bundle verify`` of a workload bundle (no GPU): the schema, every file's sha256, no two buckets sharing a
    shape, every bucket's entries/library in range, one arch for every cubin, and (Triton) the grid rule covering
    every output at each sampled shape and at both corners of the ranges.

    Returns:
        ``{"kind", "kernel", "arch", "min_driver_cuda", "n_entries", "n_files", "entries"}`` for the CLI.

    Raises:
        BundleError / BundleTampered / BundleCoverageError: what failed, named.
    """
    from kernelpilot.bundle.ranges import RangeBundleKernel, bucket_coverage, bucket_env_corners
    from kernelpilot.bundle.rules import lookup_functions

    where = str(Path(bundle) / "manifest.json")
    m = validate_v2(data, where)
    keys = m.dispatch.keys
    lk = lookup_functions()
    for i, first in enumerate(m.buckets):
        if set(first.ranges) != set(keys):
            raise BundleError(f"{where}: bucket {first.name!r} has ranges for {sorted(first.ranges)}, the bundle "
                              f"dispatches on {keys}", "export the bundle again")
        for second in m.buckets[i + 1:]:
            if lk.ranges_overlap(first.ranges, second.ranges, keys):
                raise BundleError(f"{where}: buckets {first.name!r} and {second.name!r} overlap",
                                  "export the bundle again")
    if isinstance(m, CudaManifest):
        read_files(bundle, [(f.path, f.sha256) for f in m.files], [(lib.file, "solve") for lib in m.libraries])
        for b in m.buckets:
            if not 0 <= b.library < len(m.libraries):
                raise BundleError(f"{where}: bucket {b.name!r} names library {b.library} of {len(m.libraries)}",
                                  "export the bundle again")
        rows = [{"bucket": b.name, "ranges": dict(b.ranges), "config": b.config,
                 "file": m.libraries[b.library].file} for b in m.buckets]
        return {"kind": m.kind, "kernel": m.kernel, "arch": m.arch, "min_driver_cuda": m.min_driver_cuda,
                "n_entries": len(m.libraries), "n_files": len(m.files), "entries": rows}
    read_files(bundle, [(f.path, f.sha256) for f in m.files], [(e.cubin, e.kernel_name) for e in m.entries])
    RangeBundleKernel(Path(bundle), data)  # every rule evaluates at every bucket's samples and corners, as load checks
    for e in m.entries:
        if e.ptx_target.rstrip("a") != m.arch:
            raise BundleError(f"{e.cubin}: built for {e.ptx_target}, the manifest's arch is {m.arch}",
                              "a bundle holds one arch; export the bundle again")
    for b in m.buckets:
        if any(not 0 <= j < len(m.entries) or m.entries[j].bucket != b.name for j in b.entries):
            raise BundleError(f"{where}: bucket {b.name!r} lists entries {b.entries} that are not its own",
                              "export the bundle again")
        raw = next(x for x in data["buckets"] if x["name"] == b.name)
        for env in bucket_env_corners(raw, keys):
            bucket_coverage(f"{where} bucket {b.name!r}", raw, env, max(m.entries[j].num_ctas for j in b.entries))
    rows = [{"bucket": e.bucket, "cubin": e.cubin, "config": e.config, "shape": e.shape, "n_regs": e.n_regs,
             "n_spills": e.n_spills, "shared_mem_bytes": e.shared_mem_bytes} for e in m.entries]
    return {"kind": m.kind, "kernel": m.kernel, "arch": m.arch, "min_driver_cuda": m.min_driver_cuda,
            "n_entries": len(m.entries), "n_files": len(m.files), "entries": rows}


def read_v2(bundle: str | Path, expect_id: Optional[str] = None) -> Union[RangeManifest, CudaManifest]:
    """Read and validate a workload manifest (identity first). Raises as :func:`validate_v2` and
    :func:`kernelpilot.bundle.reader.read_manifest_data`."""
    data = read_manifest_data(bundle, expect_id)
    return validate_v2(data, str(Path(bundle) / "manifest.json"))
