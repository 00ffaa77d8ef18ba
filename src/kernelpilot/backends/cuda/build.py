"""Build a CUDA C++ kernel file with nvcc: a shared library exporting ``solve`` (run on a GPU, inspected without one),
cached by content.

- **Arch**: from the GPU when one is present (``torch.cuda.get_device_capability()``; ``sm_90a`` on an H100: the
  ``a`` variant for 9.0 and above so ``wgmma``/``setmaxnreg`` code builds), else an explicit ``--arch``, else
  :data:`kernelpilot.backends.binary.arch.DEFAULT_CPU_ARCH` (``sm_90``), labelled as an assumption. Never hard-coded for a
  run on a GPU.
- **One artifact**: the shared library is built with ``-Xptxas -v`` and its log kept beside it; static inspection
  reads registers, shared memory and SASS from the same ``.so`` (``cuobjdump`` reads the fatbin in it), so what is
  inspected is exactly what runs, and ``inspect`` on a CPU machine warms the cache a GPU run uses.
- **Cache**: ``$KERNELPILOT_CACHE_DIR/cuda`` (else ``~/.cache/kernelpilot/cuda``, beside the SASS cache of
  :func:`kernelpilot.backends.binary.tools.sass_cache_dir`), one build record per key = SHA-256 of the source, every local
  header it includes, the flags, the defines, the arch and ``nvcc --version``. The record
  (:mod:`kernelpilot.backends.cuda.buildrecord`) lists every file nvcc read (its own ``-MD`` dependency list: headers
  behind ``-I``, ``#include <...>`` and the toolkit's included) with their sha256, and the binary's sha256: a lookup
  re-hashes all of them, any change rebuilds, and a binary that does not hash to its record is never loaded. A
  ``.so`` lying beside the kernel file is never loaded: only a file in the cache that its record vouches for.
- **cudaDeviceSynchronize**: the library is linked with ``-Xlinker --wrap=cudaDeviceSynchronize`` and a shim
  (:data:`SYNC_SHIM`) that, by default, skips the host wait inside ``solve`` and only counts it; see docs/cuda.md,
  "Synchronization", for why the timing stays honest (``KERNELPILOT_CUDA_SYNC=keep`` keeps the real wait).
- **Errors**: nvcc's failure is a :class:`~kernelpilot.errors.CompileError` whose message holds nvcc's ``error``
  lines (with their file:line), not a traceback.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kernelpilot.errors import CompileError, ToolMissingError

__all__ = ["SYNC_SHIM", "BuildResult", "build_shared", "cache_root", "define_flags", "device_arch",
           "find_nvcc", "nvcc_arch", "nvcc_version"]

#: Linked into every shared library: ``solve``'s calls of ``cudaDeviceSynchronize`` land here (``--wrap``).
SYNC_SHIM = r"""
#include <cuda_runtime.h>
extern "C" cudaError_t __real_cudaDeviceSynchronize(void);
static int kp_sync_keep = 0;
static long long kp_sync_count = 0;
extern "C" cudaError_t __wrap_cudaDeviceSynchronize(void) {
  ++kp_sync_count;
  if (kp_sync_keep) return __real_cudaDeviceSynchronize();
  return cudaPeekAtLastError();
}
extern "C" void kp_set_sync_keep(int keep) { kp_sync_keep = keep; }
extern "C" long long kp_sync_calls(void) { return kp_sync_count; }
extern "C" int kp_last_error(void) { return (int)cudaGetLastError(); }
extern "C" const char* kp_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }
"""

#: Flags every build gets (before the file's own ``NVCC_FLAGS``).
BASE_FLAGS = ("-O3", "-std=c++17", "-lineinfo")


def find_nvcc() -> str:
    """Path of nvcc: ``$NVCC``, ``PATH``, then ``$CUDA_HOME/bin`` and ``/usr/local/cuda/bin``.

    Raises:
        ToolMissingError: none found.
    """
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"),
                 *(str(Path(p) / "bin" / "nvcc") for p in (os.environ.get("CUDA_HOME"), "/usr/local/cuda") if p)):
        if cand and Path(cand).is_file():
            return cand
    raise ToolMissingError("nvcc (the CUDA compiler) was not found: a .cu kernel file is built with it",
                           "install the CUDA toolkit, put nvcc on PATH, or set NVCC=/path/to/nvcc")


@functools.lru_cache(maxsize=4)
def nvcc_version(nvcc: str | None = None) -> str:
    """The last line of ``nvcc --version`` (``Build cuda_13.0.r13.0/compiler.36424714_0``): part of every build key.

    Raises:
        ToolMissingError: nvcc is missing or does not run.
    """
    nvcc = nvcc or find_nvcc()
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissingError(f"{nvcc} --version failed: {exc}", "check the CUDA toolkit install") from exc
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def device_arch() -> str | None:
    """``sm_XY`` of the GPU torch sees (first device), or None without one."""
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - a broken CUDA install is no GPU here
        pass
    return None


def nvcc_arch(arch: str) -> str:
    """The ``-arch`` value for ``arch``: ``sm_90`` -> ``sm_90a`` (9.0 and above get the arch-specific ``a`` variant,
    as Triton compiles them, so Hopper-only instructions build); ``sm_80`` stays ``sm_80``.

    Raises:
        ContractError: not an arch name.
    """
    from kernelpilot.backends.binary.arch import parse_arch

    major, minor = parse_arch(arch)
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def cache_root() -> Path:
    """The build cache: ``$KERNELPILOT_CACHE_DIR/cuda``, else ``~/.cache/kernelpilot/cuda`` (created on first build)."""
    root = os.environ.get("KERNELPILOT_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "kernelpilot") / "cuda"


def define_flags(defines: dict[str, Any]) -> list[str]:
    """``{"BLOCK_SIZE": 256, "USE_X": True}`` -> ``["-DBLOCK_SIZE=256", "-DUSE_X=1"]`` (sorted by name; booleans as
    1/0, so ``#if USE_X`` works).

    Raises:
        CompileError: a name that is not a C identifier, or a value with spaces or quotes.
    """
    out = []
    for name in sorted(defines):
        value = defines[name]
        value = int(value) if isinstance(value, bool) else value
        if not re.fullmatch(r"[A-Za-z_]\w*", name) or not re.fullmatch(r"[\w.+\-]+", str(value)):
            raise CompileError(f"tunable {name}={value!r} cannot be a preprocessor define",
                               "tunables of a .cu file are -DNAME=VALUE macros: identifiers and numbers only")
        out.append(f"-D{name}={value}")
    return out


class BuildResult:
    """One build.

    Attributes:
        path: the cached ``.so`` (content-addressed: its name holds the first 16 digits of ``sha256``).
        key: the request's hash (source, local headers, flags, arch, nvcc version). hit: found in the cache.
        seconds: compile time (0 on a hit). arch: the ``-arch`` used. log: nvcc's output (``ptxas -v``).
        sha256: the binary's sha256 as its build record holds it (what :func:`load_library` checks before loading).
        deps: every file nvcc read for it (its ``-MD`` list), absolute paths.
        reason: why the cache was not used ("" on a hit): no record, a dependency changed (named), a missing
            binary, or ``tampered: ...``.
        tampered: the finding when the cached binary did not hash to its record (it was quarantined, not
            loaded, and rebuilt; see :mod:`kernelpilot.backends.cuda.buildrecord`), else "".
    """

    def __init__(self, path: Path, key: str, hit: bool, seconds: float, arch: str, log: str, *, sha256: str = "",
                 deps: list[str] | None = None, reason: str = "") -> None:
        self.path, self.key, self.hit, self.seconds, self.arch, self.log = path, key, hit, seconds, arch, log
        self.sha256, self.deps, self.reason = sha256, list(deps or []), reason
        self.tampered = reason if reason.startswith("tampered: ") else ""

    def load(self) -> Any:
        """``ctypes.CDLL`` of exactly the bytes that hash to :attr:`sha256`
        (:func:`kernelpilot.backends.cuda.buildrecord.load_library`).

        Raises:
            BuildIntegrityError: the file changed since its build record was checked. OSError: not loadable here.
        """
        from kernelpilot.backends.cuda.buildrecord import load_library

        return load_library(self.path, self.sha256)


def _key(kind: str, source: Path, flags: list[str], arch: str, nvcc: str, includes: list[Path]) -> str:
    h = hashlib.sha256()
    for part in (kind, arch, nvcc_version(nvcc), "\0".join(flags), SYNC_SHIM):
        h.update(part.encode() + b"\0")
    h.update(source.read_bytes())
    for inc in includes:
        h.update(str(inc.name).encode() + b"\0" + inc.read_bytes())
    return h.hexdigest()


def _errors(text: str, source: Path) -> str:
    """nvcc's error lines (``file(line): error: ...`` and the lines after each, up to 40), else its last lines."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    picked: list[str] = []
    for i, ln in enumerate(lines):
        if re.search(r"\berror\b", ln, re.I) or "undefined reference" in ln:
            picked += [x for x in lines[i:i + 3] if x not in picked]
    return "\n".join((picked or lines[-12:])[:40]).replace(str(source.parent) + "/", "")


def _nvcc(cmd: list[str], source: Path, defines: dict[str, Any], target: str, cwd: Path) -> str:
    """Run one nvcc step; its output. Raises CompileError with nvcc's error lines on failure or a 600 s timeout."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        raise CompileError(f"{source}: nvcc did not finish within 600 s", "simplify the kernel") from exc
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise CompileError(f"{source.name}: nvcc failed (exit {proc.returncode}) with "
                           f"{' '.join(define_flags(defines)) or 'no defines'} for {target}:\n" + _errors(log, source),
                           "fix the error above (file:line as nvcc gives it); the command was: " + " ".join(cmd))
    return log


def _compile(source: Path, defines: dict[str, Any], arch: str, extra_flags: list[str] | None,
             include_dirs: list[Path] | None) -> BuildResult:
    import time

    from kernelpilot.backends.cuda.buildrecord import check_cached, hash_files, parse_depfile, sha256_bytes, write_record
    from kernelpilot.backends.cuda.signature import local_includes

    nvcc = find_nvcc()
    target = nvcc_arch(arch)
    incs = [Path(p) for p in include_dirs or []]
    flags = [*BASE_FLAGS, *(extra_flags or []), *define_flags(defines), *(f"-I{p}" for p in incs)]
    kind = "so"
    key = _key(kind, source, [*flags, f"-arch={target}"], target, nvcc, local_includes(source, incs))
    root = cache_root()
    record_path = root / f"{source.stem}-{target}-{key[:24]}.build.json"
    found, record, reason = check_cached(record_path) if record_path.is_file() else (None, {}, "not built yet")
    if found is not None:
        try:
            log = found.with_suffix(".log").read_text()
        except OSError:
            log = ""
        return BuildResult(found, key, True, 0.0, target, log, sha256=record["binary_sha256"],
                           deps=[str(d[0]) for d in record["deps"]])
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kp-nvcc-") as tmp_name:
        tmp = Path(tmp_name)
        shim = tmp / "kp_sync_shim.cu"
        shim.write_text(SYNC_SHIM)
        common = [nvcc, "-Xcompiler", "-fPIC", f"-arch={target}", *flags]
        t0 = time.perf_counter()
        # Three steps, so that nvcc's dependency list (-MD -MF) is written by the very compile that makes the object:
        # with two sources in one command nvcc keeps only the last file's list.
        log = _nvcc([*common, "-c", "-Xptxas", "-v", "-MD", "-MF", str(tmp / "kernel.d"), "-o", str(tmp / "kernel.o"),
                     str(source)], source, defines, target, source.parent)
        log += _nvcc([*common, "-c", "-MD", "-MF", str(tmp / "shim.d"), "-o", str(tmp / "shim.o"), str(shim)],
                     source, defines, target, tmp)
        tmp_out = tmp / "out.so"
        log += _nvcc([*common, "-shared", "-o", str(tmp_out), str(tmp / "kernel.o"), str(tmp / "shim.o"),
                      "-Xlinker", "--wrap=cudaDeviceSynchronize"], source, defines, target, tmp)
        if not tmp_out.is_file():
            raise CompileError(f"{source.name}: nvcc wrote no library for {target}", "check the nvcc install")
        seconds = time.perf_counter() - t0
        read = parse_depfile((tmp / "kernel.d").read_text(), source.parent)
        read += [p for p in parse_depfile((tmp / "shim.d").read_text(), tmp) if p not in read and tmp not in p.parents]
        deps = hash_files(read)  # hashed now: a file nvcc read must still hash so at lookup, or the build runs again
        data = tmp_out.read_bytes()
        sha = sha256_bytes(data)
        out = root / f"{source.stem}-{target}-{key[:24]}-{sha[:16]}.{kind}"
        staged = root / f".{out.name}.{os.getpid()}.tmp"
        staged.write_bytes(data)  # the bytes hashed are the bytes cached, whatever file system /tmp is on
        os.replace(staged, out)  # content-addressed: a concurrent build never replaces a file another one checked
    out.with_suffix(".log").write_text(log)
    write_record(record_path, {"key": key, "source": str(source), "arch": target, "flags": flags,
                               "nvcc_version": nvcc_version(nvcc), "binary": out.name, "binary_sha256": sha,
                               "binary_bytes": len(data), "deps": deps})
    return BuildResult(out, key, False, seconds, target, log, sha256=sha, deps=[d[0] for d in deps], reason=reason)


def build_shared(source: str | Path, defines: dict[str, Any] | None = None, arch: str | None = None, *,
                 extra_flags: list[str] | None = None, include_dirs: list[Path] | None = None) -> BuildResult:
    """Build (or find in the cache) the shared library of a ``.cu`` file with ``-DNAME=VALUE`` for each define.

    Args:
        source: the ``.cu`` file. defines: the config (tunable -> value).
        arch: target (``sm_90``); None: the GPU here (:func:`device_arch`), else ``sm_90``.
        extra_flags: more nvcc flags (the file's ``NVCC_FLAGS``). include_dirs: ``-I`` folders.

    Returns:
        The :class:`BuildResult` (``path``: the ``.so`` in the cache).

    Raises:
        CompileError: nvcc failed (the message holds its error lines); ToolMissingError: no nvcc.
    """
    from kernelpilot.backends.binary.arch import DEFAULT_CPU_ARCH

    return _compile(Path(source).resolve(), defines or {}, arch or device_arch() or DEFAULT_CPU_ARCH,
                    extra_flags, include_dirs)
