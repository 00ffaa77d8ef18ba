"""The bundle manifest (``BUNDLE/manifest.json``) and its checks, none of which needs a GPU, Triton or torch.

A bundle is a folder: ``manifest.json`` plus one native binary (``*.cubin``) per (kernel, config, shape bucket,
arch). The manifest says how to launch each binary without Triton's JIT (:class:`BundleEntry`) and the sha256 of
every file (:class:`BundleFile`); :func:`verify_bundle` checks the schema, the hashes and the arch list
(docs/bundles.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field, ValidationError

from kernelpilot.bundle.reader import (FORMAT, MANIFEST, BundleError, check_coverage, file_sha256, manifest_id,
                                       read_files, read_manifest_data)

__all__ = ["ArgRule", "BundleEntry", "BundleError", "BundleFile", "BundleManifest", "BundleVerify", "EntryCoverage",
           "FORMAT", "OutputTile", "TensorSpec", "file_sha256", "manifest_id", "read_manifest", "read_verified",
           "verify_bundle", "verify_files"]


class BundleFile(BaseModel):
    """One file of the bundle: ``path`` relative to the bundle folder, its ``sha256`` (hex) and size in bytes."""

    path: str
    sha256: str
    bytes: int


class TensorSpec(BaseModel):
    """A tensor input as the bundle was built for it: shape and strides (elements), dtype name (``float32``)."""

    shape: list[int]
    stride: list[int]
    dtype: str


class ArgRule(BaseModel):
    """How to make one runtime parameter of the compiled kernel (constexprs are compiled in and have no rule).

    Attributes:
        param: the @triton.jit parameter name. type: Triton's type after specialization (``*fp32``, ``i32``).
        kind: ``tensor`` (a pointer: ``input``'s data pointer + ``offset_bytes``) or ``scalar`` (``value``, fixed
            for the shape bucket: the call's shape must equal the declared one).
        divisibility: Triton specialized the value as divisible by this (16 for a 16-byte aligned pointer, 1
            otherwise); a call whose pointer breaks it is refused.
    """

    param: str
    type: str
    kind: Literal["tensor", "scalar"]
    input: Optional[str] = None
    offset_bytes: int = 0
    value: Optional[float | int | bool] = None
    divisibility: int = 1


class OutputTile(BaseModel):
    """The part of one output tensor a single program writes: ``tile[d]`` elements along dimension ``d`` (the
    bounding box of its writes, observed at export)."""

    input: str
    tile: list[int]


class EntryCoverage(BaseModel):
    """How the entry's grid covers its outputs, observed at export by running programs of the launch under
    Triton's interpreter on the CPU (:mod:`kernelpilot.bundle.worker`); ``load`` and ``verify`` refuse a grid of
    fewer than ``prod_d ceil(shape_d / tile_d)`` programs (:func:`kernelpilot.bundle.reader.check_coverage`).

    Attributes:
        observed: the programs ran (False: the interpreter could not run them; ``why`` says why; nothing is checked).
        programs: the (x, y, z) program ids that ran. outputs: the tile of each tensor they wrote.
        unchecked: outputs whose programs write unequal parts (the rule would refuse the honest launch), with why.
        why: the reason nothing was observed ("" when observed).
    """

    observed: bool
    programs: list[list[int]] = Field(default_factory=list)
    outputs: list[OutputTile] = Field(default_factory=list)
    unchecked: dict[str, str] = Field(default_factory=dict)
    why: str = ""


class BundleEntry(BaseModel):
    """One binary: a config of the kernel compiled for one declared shape (a shape bucket) and the target arch.

    Attributes:
        kernel_name: the compiled function's symbol (Triton's ``metadata.name``). cubin: its file in the bundle.
        config: the tunables. shape: the declared shape this binary serves (the call must match it exactly).
        inputs: the run_kernel inputs it was built for: tensors (:class:`TensorSpec`) and scalars (their values).
        constexprs: compile-time values (param -> value). args: the runtime parameters in launch order.
        grid: programs along x, y, z for this shape and config (the grid rule: exact shape -> grid).
        num_warps / num_stages / num_ctas: launch options; block = 32 * num_warps threads, num_ctas a cluster.
        shared_mem_bytes: dynamic shared memory per block (Triton's ``metadata.shared``).
        n_regs / n_spills: registers per thread and spilled 4-byte words, read from the binary (cuobjdump).
        spills: the binary spills (``n_spills > 0``).
        ptx_version: the PTX ISA version the cubin was assembled from (``8.7``); ptx_target: its ``.target``.
        coverage: the tile each program writes of each output (:class:`EntryCoverage`): the grid must cover them.
            Every export writes it; ``verify`` and ``load`` refuse an entry without it.
    """

    kernel_name: str
    cubin: str
    config: dict[str, Any]
    shape: dict[str, Any]
    inputs: dict[str, TensorSpec | int | float | bool | str]
    constexprs: dict[str, Any]
    args: list[ArgRule]
    grid: list[int] = Field(min_length=3, max_length=3)
    num_warps: int
    num_stages: int
    num_ctas: int = 1
    shared_mem_bytes: int
    n_regs: int
    n_spills: int
    spills: bool
    ptx_version: str
    ptx_target: str
    coverage: Optional[EntryCoverage] = None


class BundleManifest(BaseModel):
    """``manifest.json``: what the bundle holds and how to launch it (docs/bundles.md).

    Attributes:
        format: :data:`FORMAT`. kernel: the kernel file's name; kernel_function: the @triton.jit function.
        run_kernel_params: run_kernel's input parameters, in order (the loaded callable takes them).
        source_sha256: the kernel file's source hash. arch: the target (``sm_90``); compute_capability: (9, 0).
        triton_version / ptxas_version / nvcc_version / torch_version: the tools that built it ("" if unknown).
        min_driver_cuda: the oldest CUDA driver version (``12.8``) whose PTX ISA covers every entry.
        grid_rule: how a call picks its entry (``exact-shape``: inputs equal to an entry's declared inputs).
        entries: the binaries. files: every file but the manifest, with its sha256.
        bundle_id: the bundle's identity: sha256 of this manifest's canonical JSON without this field
            (:func:`kernelpilot.bundle.reader.manifest_id`); it covers every field and, through ``files``, every
            binary. ``load`` and ``verify`` recompute it and refuse a manifest that does not hash to it, or has none.
    """

    format: Literal["kernelpilot-bundle/1"] = FORMAT
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
    grid_rule: Literal["exact-shape"] = "exact-shape"
    created: str = ""
    entries: list[BundleEntry] = Field(min_length=1)
    files: list[BundleFile]
    bundle_id: str = Field("", pattern=r"^([0-9a-f]{64})?$")


class BundleVerify(BaseModel):
    """``kernelpilot bundle verify``: the bundle passed (identity, schema, hashes, arch list, grid coverage); what it
    holds. ``bundle_id``: its identity (record it to pin the bundle: ``load(..., expect_id=...)``). ``kind``:
    ``exact-shape`` (``kernelpilot-bundle/1``), ``triton`` or ``cuda-so`` (workload bundles)."""

    bundle: str
    ok: bool
    bundle_id: str = ""
    kernel: str
    arch: str
    min_driver_cuda: str
    n_entries: int
    n_files: int
    entries: list[dict[str, Any]]
    kind: str = "exact-shape"


def read_manifest(bundle: str | Path, expect_id: str | None = None) -> BundleManifest:
    """Read and validate ``BUNDLE/manifest.json``: its identity (the content must hash to its ``bundle_id``, and to
    ``expect_id`` when given) and its schema; the files' hashes are not checked here.

    Raises:
        BundleError: the folder or manifest is missing, not JSON, or breaks the schema (the field is named).
        BundleTampered: the manifest does not hash to its ``bundle_id`` or to ``expect_id``.
    """
    path = Path(bundle) / MANIFEST
    data = read_manifest_data(bundle, expect_id)
    try:
        return BundleManifest.model_validate(data)
    except ValidationError as exc:
        raise BundleError(f"{path}: breaks the manifest schema: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}",
                          "see kernelpilot/records/schema/bundle.manifest.schema.json") from exc


def verify_files(bundle: str | Path, manifest: BundleManifest) -> None:
    """Check every listed file's sha256 and that every entry's cubin is listed (:func:`read_verified`).

    Raises:
        BundleError: as :func:`read_verified`.
    """
    read_verified(bundle, manifest)


def read_verified(bundle: str | Path, manifest: BundleManifest) -> dict[str, bytes]:
    """Every listed file's bytes (path -> bytes), each checked against its sha256 once read (the bytes returned
    are the bytes hashed), and every entry's cubin checked to be listed.

    Raises:
        BundleError: a file is missing, or its sha256 differs (tampered or corrupt): the message names the file
            and both hashes; a cubin not listed in ``files``.
    """
    return read_files(bundle, [(f.path, f.sha256) for f in manifest.files],
                      [(e.cubin, e.kernel_name) for e in manifest.entries])


def verify_bundle(bundle: str | Path, expect_id: str | None = None) -> BundleVerify:
    """``kernelpilot bundle verify`` (no GPU): the manifest's identity, its schema, every file's sha256, one arch
    for every entry, and every entry's grid covering its outputs (``kernelpilot-bundle/1``; both formats:
    :func:`kernelpilot.bundle.verify.verify_bundle`).

    Args:
        bundle: the folder. expect_id: the ``bundle_id`` the caller recorded (None: only self-consistency).

    Returns:
        :class:`BundleVerify` (``ok`` True, ``bundle_id``).

    Raises:
        BundleError: as :func:`read_manifest` and :func:`verify_files`; an entry whose PTX target is not the
            manifest's arch (``sm_90a`` serves ``sm_90``). BundleTampered: an edited manifest or file.
        BundleCoverageError: an entry's grid does not cover an output.
    """
    m = read_manifest(bundle, expect_id)
    verify_files(bundle, m)
    for i, e in enumerate(m.entries):
        if e.ptx_target.rstrip("a") != m.arch:
            raise BundleError(f"{e.cubin}: built for {e.ptx_target}, the manifest's arch is {m.arch}",
                              "a bundle holds one arch; export the bundle again")
        check_coverage(f"{Path(bundle) / MANIFEST} entry {i} ({e.cubin})", e.grid, e.num_ctas,
                       {n: v.model_dump() for n, v in e.inputs.items() if isinstance(v, TensorSpec)},
                       e.coverage.model_dump() if e.coverage is not None else None)
    return BundleVerify(bundle=str(bundle), ok=True, bundle_id=m.bundle_id, kernel=m.kernel, arch=m.arch, min_driver_cuda=m.min_driver_cuda,
                        n_entries=len(m.entries), n_files=len(m.files),
                        entries=[{"cubin": e.cubin, "config": e.config, "shape": e.shape, "n_regs": e.n_regs,
                                  "n_spills": e.n_spills, "shared_mem_bytes": e.shared_mem_bytes} for e in m.entries])
