"""``kernelpilot export``: compile the chosen config(s) of a kernel for one arch and write a bundle folder.

The kernel file runs only in a compile-mode isolated worker (:mod:`kernelpilot.bundle.worker`, which reuses static
inspection); this process writes the cubins and ``manifest.json`` (:class:`~kernelpilot.bundle.manifest.BundleManifest`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

from kernelpilot.bundle.manifest import MANIFEST, BundleError, BundleFile, BundleManifest, file_sha256, manifest_id
from kernelpilot.errors import ContractError, KernelpilotError, ToolMissingError
from kernelpilot.facts import utc_now_iso

__all__ = ["ptx_isa_cuda", "device_arch", "export_bundle", "export_workload", "find_dispatch", "min_driver_cuda",
           "resolve_source"]

def _ver(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2]) or (0,)


def ptx_isa_cuda(isa: str) -> str:
    """The CUDA version whose ptxas first emits PTX ISA ``isa`` (``"8.7"`` -> ``"12.8"``, ``"9.4"`` -> ``"13.4"``):
    the inverse of Triton's ``ptx_get_version`` (12.0-12.5 -> 8.0-8.5, 12.6+ -> ISA minor + 1 ... CUDA 13.x -> 9.x).

    Raises:
        BundleError: not an ``X.Y`` version, or older than PTX ISA 7.0.
    """
    m = re.fullmatch(r"(\d+)\.(\d+)", str(isa).strip())
    if not m:
        raise BundleError(f"PTX ISA {isa!r} is not a version X.Y", "export the bundle again")
    major, minor = int(m.group(1)), int(m.group(2))
    if major >= 9:
        return f"{13 + major - 9}.{minor}"
    if major == 8:
        return f"12.{minor if minor < 6 else minor + 1}"
    if major == 7:
        return f"11.{minor}"
    raise BundleError(f"PTX ISA {isa} predates CUDA 11", "export with a current Triton")


def min_driver_cuda(ptx_versions: list[str]) -> str:
    """The oldest CUDA driver that loads cubins assembled from these PTX ISA versions: the major release of the
    newest ptxas behind them (``["8.7"]`` -> ``"12.0"``, ``["9.4"]`` -> ``"13.0"``). A cubin (SASS, no PTX) needs no
    PTX JIT, so CUDA's minor-version compatibility applies: a 13.x cubin loads on any 13.x driver.

    Raises:
        BundleError: a version that is not ``X.Y``.
    """
    newest = max((ptx_isa_cuda(v) for v in ptx_versions), key=_ver, default="0.0")
    return f"{_ver(newest)[0]}.0"


def device_arch() -> str:
    """The arch of this machine's GPU (``sm_90``), read through torch.

    Raises:
        ToolMissingError: no GPU here (pass an explicit arch: bundles never fall back to a default).
    """
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:  # a broken CUDA install behaves as no GPU
        pass
    raise ToolMissingError("--arch auto: no GPU here to read the arch from",
                           "pass the target explicitly, e.g. --arch sm_90 (H100/H200)")


def resolve_source(source: str | Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """(kernel file, config, shape) of ``source``: a kernel file (its DEFAULT_CONFIG, SHAPE: empty overrides), a
    tune folder (``tune.json``: the best config and the shape searched) or an optimize run (``run.json``: the best
    version's ``vN/config.json``).

    Raises:
        ContractError: ``source`` is none of these; a tune folder or run with no accepted config.
    """
    p = Path(source)
    if p.is_dir() and (p / "run.json").is_file() and not (p / "tune.json").is_file():
        return _from_run(p)
    if p.is_dir():
        tune = p / "tune.json"
        if not tune.is_file():
            raise ContractError(f"{p}: a folder without tune.json or run.json (export takes a kernel file, a `tune "
                                f"--out` folder or an `optimize` run)", "e.g. kernelpilot export runs/tune-softmax --out bundle/")
        data = json.loads(tune.read_text())
        if not data.get("best"):
            raise ContractError(f"{tune}: the search accepted no config (best is null)", "tune again, or export the "
                                "kernel file with --config")
        kernel = Path(data["kernel"])
        if not kernel.is_file() and (p / kernel.name).is_file():
            kernel = p / kernel.name
        return kernel, dict(data["best"]["config"]), dict(data.get("shape") or {})
    if not p.is_file():
        raise ContractError(f"{p}: no such kernel file or tune folder", "pass a kernel .py file or a tune --out folder")
    if p.suffix != ".py":
        raise ContractError(f"{p}: a single-config bundle exports a Triton .py kernel file; a .cu kernel is "
                            f"bundled from a dispatch table", "kernelpilot export KERNEL.cu --dispatch dispatch.json "
                            "--out BUNDLE (docs/bundles.md, Workload bundles)")
    return p, {}, {}


def _from_run(run: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """(kernel, best version's config, shape) of an ``optimize`` run folder (``run.json``, ``vN/config.json``).

    Raises:
        ContractError: the run has no best version, or its config record is missing.
    """
    info = json.loads((run / "run.json").read_text())
    best = info.get("best_version")
    if best is None:
        raise ContractError(f"{run}: the run has no best version (no config was accepted)", "export a kernel file "
                            "with --config")
    cfg_file = run / f"v{best}" / "config.json"
    if not cfg_file.is_file():
        raise ContractError(f"{cfg_file}: missing (the best version's config)", "kernelpilot report RUN checks a run")
    kernel = Path(info["kernel"])
    if not kernel.is_file():
        kernel = run / kernel.name if (run / kernel.name).is_file() else kernel
    return kernel, dict(json.loads(cfg_file.read_text())["config"]), dict(info.get("shape") or {})


def _tool_version(name: str) -> str:
    exe = shutil.which(name)
    if not exe:
        return ""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"release (\d+\.\d+)[^\n]*", out)
    return m.group(0).strip() if m else ""


def _run_kernel_path(folder: Path, file_name: str) -> Path:
    """The kernel file of a run folder: the ``kernel`` of ``workload.json`` (a ``tune --workload`` run),
    ``tune.json`` or ``run.json`` when that file exists and has the table's file name, else the file of that name in
    the folder. Raises ContractError when none is found (its sha256 is checked by the caller)."""
    for rec in ("workload.json", "tune.json", "run.json"):
        try:
            kernel = Path(json.loads((folder / rec).read_text()).get("kernel") or "")
        except (OSError, ValueError, AttributeError):
            continue
        if kernel.name == file_name and kernel.is_file():
            return kernel
    if (folder / file_name).is_file():
        return folder / file_name
    raise ContractError(f"{folder}: the dispatch table is for {file_name}, which neither the run's records nor the "
                        f"folder hold", "pass the kernel file: kernelpilot export KERNEL --dispatch DISPATCH.json")


def find_dispatch(source: str | Path, dispatch: str | Path | None = None) -> Optional[tuple[Path, Path]]:
    """(kernel file, dispatch.json) when ``source`` asks for a workload bundle, else None.

    A workload export is asked by ``dispatch`` (then ``source`` is the kernel file, or a run folder holding it), by
    a ``source`` folder holding ``dispatch.json`` (a ``tune --workload --out`` folder), or by ``source`` being a
    ``dispatch.json`` itself (the kernel beside it or in its folder's records).

    Raises:
        ContractError: the dispatch file or the kernel it names is missing.
    """
    src = Path(source)
    if dispatch is not None:
        d = Path(dispatch)
        if not d.is_file():
            raise ContractError(f"{d}: no such dispatch table", "pass the dispatch.json a tune --workload run wrote")
    elif src.is_dir() and (src / "dispatch.json").is_file():
        d = src / "dispatch.json"
    elif src.is_file() and src.suffix == ".json":
        d = src
    else:
        return None
    from kernelpilot.backends.registry import language_of

    if src.is_file() and language_of(src) is not None:  # a kernel file some back end reads
        return src, d
    from kernelpilot.dispatch import read_dispatch

    name = read_dispatch(d).kernel.file_name
    return _run_kernel_path(src if src.is_dir() else d.parent, name), d


def export_workload(kernel: str | Path, dispatch: str | Path, out: str | Path, *, arch: Optional[str],
                    timeout_s: float = 300.0) -> Any:
    """Write a workload bundle (``kernelpilot-bundle/2``) of a dispatch table: for a Triton kernel one cubin per
    (bucket config, specialization) with the rules that serve every shape of the buckets' ranges
    (:func:`kernelpilot.bundle.workload.export_triton_workload`); for a ``.cu`` kernel one shared library per
    bucket config (:func:`kernelpilot.bundle.cudaso.export_cuda_workload`).

    Args:
        kernel: the kernel file the table was tuned for. dispatch: its ``dispatch.json``.
        out: the new bundle folder. arch: ``sm_90``; None/``auto``: this GPU, else the table's arch (the GPU it
            was tuned on). timeout_s: per sampled shape.

    Returns:
        The written manifest as :class:`kernelpilot.bundle.manifest2.RangeManifest` or ``CudaManifest``.

    Raises:
        DispatchError / DispatchIntegrityError: the table is unreadable or was edited. BundleError: the kernel file
            is not the one the table was tuned for (both sha256 named), ``out`` not empty, a bucket export cannot
            serve (named). CompileError / ContractError: the kernel does not build.
    """
    import hashlib

    from kernelpilot.bundle.manifest2 import validate_v2, verify_v2
    from kernelpilot.dispatch import dispatch_sha256, read_dispatch
    from kernelpilot.backends.binary.arch import arch_name, parse_arch

    kernel, out = Path(kernel), Path(out)
    table = read_dispatch(dispatch)
    got = hashlib.sha256(kernel.read_bytes()).hexdigest()
    if kernel.name != table.kernel.file_name or got != table.kernel.sha256:
        raise BundleError(f"{kernel}: sha256 {got} is not the source {table.kernel.file_name} (sha256 "
                          f"{table.kernel.sha256}) the dispatch table {dispatch} was tuned for",
                          "export the kernel file that was tuned, or tune this one")
    if arch in (None, "auto"):
        try:
            arch = device_arch()
        except ToolMissingError:
            if not str(table.arch).startswith("sm_"):
                raise ToolMissingError(f"--arch auto: no GPU here, and the dispatch table was tuned on "
                                       f"{table.arch!r}, not a GPU arch",
                                       "pass the target explicitly, e.g. --arch sm_90 (H100/H200)") from None
            arch = table.arch
    cc = parse_arch(arch)
    target = arch_name(cc)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"{out}: exists and is not an empty folder", "pass a new --out folder")
    sha = dispatch_sha256(table)
    from kernelpilot.backends.registry import language_of

    if language_of(kernel) == "cuda":
        from kernelpilot.bundle.cudaso import export_cuda_workload

        data = export_cuda_workload(kernel, table, sha, out, target=target, cc=cc)
    else:
        from kernelpilot.bundle.workload import export_triton_workload

        source_sha, params = iso_meta_source(kernel)
        data = export_triton_workload(kernel, table, sha, out, target=target, cc=cc, timeout_s=timeout_s,
                                      meta={"source_sha256": source_sha, "run_kernel_params": params,
                                            "nvcc_version": _tool_version("nvcc")})
        data["min_driver_cuda"] = min_driver_cuda([e["ptx_version"] for e in data["entries"]])
    data = json.loads(json.dumps(data))  # the identity is over the JSON exactly as it will be read back
    data["bundle_id"] = manifest_id(data)
    manifest = validate_v2(data, str(out / MANIFEST))
    verify_v2(out, data)  # schema, hashes, ranges, and (Triton) coverage at every sample and range corner
    (out / MANIFEST).write_text(json.dumps(data, indent=2) + "\n")
    return manifest


def export_bundle(source: str | Path, out: str | Path, *, arch: Optional[str], config: Optional[dict[str, Any]] = None,
                  shapes: Optional[list[dict[str, Any]]] = None,
                  pairs: Optional[list[tuple[dict[str, Any], dict[str, Any]]]] = None,
                  timeout_s: float = 300.0, dispatch: str | Path | None = None) -> Any:
    """Compile and write a bundle: one cubin per (config, declared shape) for ``arch``, plus ``manifest.json``.

    A ``source`` folder holding ``dispatch.json``, a ``dispatch.json`` itself, or ``dispatch=`` makes a workload
    bundle instead (:func:`export_workload`; ``config``, ``shapes`` and ``pairs`` must then be None).

    Args:
        source: a kernel ``.py`` file or a ``tune --out`` folder (its best config and shape).
        dispatch: a dispatch table to bundle (see above).
        out: the bundle folder (created; must be empty or absent).
        arch: target (``sm_90``, ``sm_90a``) or ``"auto"``/None for this machine's GPU; never a default.
        config: tunables overriding the source's config (every shape gets it).
        shapes: the declared shapes (overrides of SHAPE, one dict each); default: the source's shape.
        pairs: instead of config x shapes, explicit (config, shape) entries: e.g. one config per shape bucket.
        timeout_s: seconds one entry may take in the worker (setup, run_kernel capture, compile).

    Returns:
        The written :class:`BundleManifest`; its ``bundle_id`` is the bundle's identity (record it to pin the
        bundle: ``load(..., expect_id=...)``).

    Raises:
        ContractError: bad source, config or shape. ToolMissingError: ``auto`` without a GPU.
        BundleError: ``out`` is not empty, or an entry cannot be bundled (it names why: several launches, scratch
            memory, a parameter type), or it failed to compile or exceeds the target's resources.
    """
    from kernelpilot.backends.binary.arch import arch_name, parse_arch
    from kernelpilot.profile.static import config_tasks, isolated_workers

    found = find_dispatch(source, dispatch)
    if found is not None:
        if config or shapes or pairs:
            raise ContractError("a workload bundle takes its configs and shapes from the dispatch table; --config "
                                "and --shapes are for single-config bundles", "drop --config/--shapes")
        return export_workload(found[0], found[1], out, arch=arch, timeout_s=timeout_s)
    kernel, base_config, base_shape = resolve_source(source)
    cc = parse_arch(device_arch() if arch in (None, "auto") else arch)
    target = arch_name(cc)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"{out}: exists and is not an empty folder", "pass a new --out folder")
    if pairs is None:
        cfg = {**base_config, **(config or {})}
        pairs = [(cfg, {**base_shape, **s}) for s in (shapes or [{}])]

    def failed(task: dict[str, Any], exc: KernelpilotError) -> dict[str, Any]:
        return {"failure": {"stage": "worker", "error_type": type(exc).__name__, "message": exc.message,
                            "hint": exc.hint}}

    with isolated_workers(kernel, 1, timeout_s) as (iso, meta):
        tasks = [config_tasks(kernel, [c], s, target, meta=meta)[0] for c, s in pairs]
        results: list[Any] = [None] * len(tasks)
        for i, r in iso.map("kernelpilot.bundle.worker:_bundle_in_worker", tasks, failed):
            results[i] = r
    for task, r in zip(tasks, results):
        if "failure" in r:
            f = r["failure"]
            raise BundleError(f"{Path(kernel).name} {task['config']} at {task['shape'] or 'SHAPE'} for {target}: "
                              f"{f.get('stage')}: {f.get('error_type')}: {f.get('message')}", f.get("hint") or "")
    out.mkdir(parents=True, exist_ok=True)
    entries, files = [], []
    for i, r in enumerate(results):
        e = r["entry"]
        name = f"{kernel.stem}-{target}-{i}-{e['kernel_name']}.cubin"
        (out / name).write_bytes(r["cubin"])
        e["cubin"] = name
        entries.append(e)
        files.append(BundleFile(path=name, sha256=file_sha256(out / name), bytes=len(r["cubin"])))
    source_sha, params = iso_meta_source(kernel)
    manifest = BundleManifest(
        kernel=kernel.name, kernel_function=results[0]["function"], run_kernel_params=params, source_sha256=source_sha,
        arch=target, compute_capability=cc, triton_version=results[0]["triton_version"],
        ptxas_version=results[0]["ptxas_version"], nvcc_version=_tool_version("nvcc"), torch_version=results[0]["torch_version"],
        min_driver_cuda=min_driver_cuda([e["ptx_version"] for e in entries]),
        created=utc_now_iso(), entries=entries,
        files=files, bundle_id="0" * 64)
    # The identity is computed over the JSON exactly as it will be read back (numbers as json parses them).
    manifest = manifest.model_copy(update={"bundle_id": manifest_id(json.loads(manifest.model_dump_json()))})
    (out / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
    return manifest


def iso_meta_source(kernel: Path) -> tuple[str, list[str]]:
    """(sha256 of the kernel file's text, run_kernel's input parameter names) read from the file's text with
    :mod:`ast` (this process does not import the kernel file)."""
    import ast
    import hashlib

    text = kernel.read_text()
    sha = hashlib.sha256(text.encode()).hexdigest()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == "run_kernel":
            return sha, [a.arg for a in node.args.posonlyargs + node.args.args]
    raise ContractError(f"{kernel}: no run_kernel function", "see docs/contract.md")
