"""The NVIDIA binary tools Triton's wheel ships, and what they print: ``cuobjdump`` (resource usage, SASS) and
``ptxas -v`` (spill bytes), with an on-disk cache of disassembled SASS.

The tools are found through ``triton.knobs`` (``triton/backends/nvidia/bin``), else ``PATH``; a missing or failing
tool is a :class:`~kernelpilot.errors.ToolMissingError`. The parsers are pure text and work on any tool output.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from kernelpilot.errors import ToolMissingError

__all__ = ["parse_ptxas_spills", "parse_resource_usage", "sass_cache_dir"]

_RESOURCE_LINE = re.compile(r"Function\s+(\S+):\s*\n\s*(REG:.*)")
STACK_FRAME = re.compile(r"(\d+)\s+bytes stack frame")
_SPILL_LINE = re.compile(r"(\d+)\s+bytes spill stores,\s*(\d+)\s+bytes spill loads")


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """``cuobjdump --dump-resource-usage`` output -> ``{function: {"REG": 64, "SHARED": 1024, "LOCAL": 0, ...}}``.

    ``CONSTANT[0]`` is kept under that name; values are integers (bytes, except REG: registers per thread).
    """
    out: dict[str, dict[str, int]] = {}
    for name, fields in _RESOURCE_LINE.findall(text):
        out[name] = {k: int(v) for k, v in re.findall(r"([A-Z_]+(?:\[\d+\])?):(\d+)", fields)}
    return out


def parse_ptxas_spills(log: str) -> tuple[int, int] | None:
    """(spill stores, spill loads) in bytes from a ``ptxas -v`` log (summed over functions), or None if absent."""
    found = _SPILL_LINE.findall(log)
    if not found:
        return None
    return sum(int(s) for s, _ in found), sum(int(lo) for _, lo in found)



def find_tool(name: str) -> str:
    """Path of an NVIDIA tool Triton ships (``cuobjdump``, ``ptxas``...), via ``triton.knobs`` then ``PATH``.

    Raises:
        ToolMissingError: neither has it.
    """
    try:
        from triton import knobs

        tool = getattr(knobs.nvidia, name.replace("-", "_"))
        if tool is not None and tool.path and Path(tool.path).exists():
            return tool.path
    except Exception:  # older Triton without knobs, or a broken tool entry
        pass
    import shutil

    found = shutil.which(name)
    if found:
        return found
    raise ToolMissingError(f"{name} not found (Triton's wheel ships it under triton/backends/nvidia/bin)",
                           f"install a Triton wheel with the NVIDIA backend, or put {name} on PATH")


def _ptxas_for(capability: int) -> str:
    """The ptxas Triton itself uses for ``capability`` (3.6: ``ptxas`` below sm_100; 3.9: ``ptxas-blackwell`` from
    sm_90), via ``triton.backends.nvidia.compiler.get_ptxas``."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return get_ptxas(capability).path
    except Exception:
        return find_tool("ptxas")


def ptxas_command(capability: int, options: dict[str, Any], ptx: Path, out: Path) -> list[str]:
    """The ptxas command Triton's ``CUDABackend.make_cubin`` runs, rebuilt for a ``-v`` rerun on the same PTX.

    Mirrors, from the installed Triton: the ptxas it picks for the arch; ``-lineinfo`` (or ``-g`` /
    ``-suppress-debug-info`` per its knobs); ``--fmad=false`` without fp fusion; ``--opt-level 0`` when ptxas
    optimization is disabled; ``--regAllocOptLevel=2`` when its ``make_cubin`` passes it (3.9 does, 3.6 does not:
    read from both sources; on vector_add 4096/1 warp it changes the stack frame from 232 to 168 bytes); the
    ``ptx_options``; ``--gpu-name=sm_XYa``.
    """
    import inspect as _inspect

    from triton import knobs
    from triton.backends.nvidia.compiler import CUDABackend, sm_arch_from_capability

    try:
        source = _inspect.getsource(CUDABackend.make_cubin)
    except (OSError, TypeError):
        source = ""
    cmd = [_ptxas_for(capability)]
    if getattr(knobs.compilation, "disable_line_info", False):
        cmd += ["-lineinfo", "-suppress-debug-info"]
    elif getattr(knobs.nvidia, "disable_ptxas_opt", False):
        cmd += ["-g"]
    else:
        cmd += ["-lineinfo"]
    if not options.get("enable_fp_fusion", True):
        cmd += ["--fmad=false"]
    cmd += ["-v"]
    if getattr(knobs.nvidia, "disable_ptxas_opt", False):
        cmd += ["--opt-level", "0"]
    if "--regAllocOptLevel=2" in source:
        cmd += ["--regAllocOptLevel=2"]
    if options.get("ptx_options"):
        cmd += str(options["ptx_options"]).split(" ")
    return cmd + [f"--gpu-name={sm_arch_from_capability(capability)}", str(ptx), "-o", str(out)]


def run_tool(cmd: list[str], what: str) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissingError(f"{what} could not run: {exc}", f"check {cmd[0]}") from exc
    if proc.returncode != 0:
        raise ToolMissingError(f"{what} failed ({proc.returncode}): {proc.stderr.strip()[:500]}", f"command: {' '.join(cmd)}")
    return proc.stdout + proc.stderr


def sass_cache_dir() -> Path:
    """Where disassembled SASS is kept between runs: ``$KERNELPILOT_CACHE_DIR/sass`` or ``~/.cache/kernelpilot/sass``.

    ``cuobjdump -sass`` costs about 0.75 s per cubin here whatever its size (tool start-up: 0.76 s for a 6 KB
    vector_add cubin, 0.74 s for a 25 KB matmul one, measured on this 2-core machine), so a re-run of
    ``--all-configs`` reads the SASS by the cubin's SHA-256 instead (Triton's own cache already skips the compile).
    """
    root = os.environ.get("KERNELPILOT_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "kernelpilot") / "sass"


def disassemble(cuobjdump: str, cubin_path: Path, cubin: bytes) -> str:
    """``cuobjdump -sass`` of a cubin, through the on-disk cache of :func:`sass_cache_dir` (keyed by content)."""
    import gzip

    digest = hashlib.sha256(cubin).hexdigest()
    cache = sass_cache_dir() / f"{digest}.sass.gz"
    try:
        return gzip.decompress(cache.read_bytes()).decode()
    except (OSError, EOFError, ValueError):
        pass
    text = run_tool([cuobjdump, "-sass", str(cubin_path)], "cuobjdump -sass")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(gzip.compress(text.encode()))
        os.replace(tmp, cache)
    except OSError:  # a read-only home only costs the speed-up
        pass
    return text

