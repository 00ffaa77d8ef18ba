"""Open Nsight Compute reports (``.ncu-rep``) through NVIDIA's ``ncu_report`` Python module.

``ncu_report`` is published on PyPI as ``ncu-report`` and is also shipped inside every Nsight Compute
install under ``extras/python`` (docs/measuring.md, "Diagnosing"). It reads reports without a GPU.

``ncu_report.load_report`` does not fail on a file that is not a report: an empty file or random bytes load
as a context with zero ranges. :func:`load_actions` therefore checks for zero kernels itself and turns every
failure into a :class:`~kernelpilot.errors.ReportError` that names the file.
"""

from __future__ import annotations

import glob
import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpilot.errors import ReportError, ToolMissingError

#: First bytes of every ``.ncu-rep`` file seen so far (Nsight Compute 2025.3 reports in tests/fixtures/ncu).
#: Used only to word the error for a file that loads with no kernels; never to reject a file up front.
NCU_REPORT_MAGIC = b"NVR\x00"

_INSTALL_GLOBS = (
    "/opt/nvidia/nsight-compute/*/extras/python",
    "/usr/local/cuda/nsight-compute*/extras/python",
)


def _candidate_python_dirs() -> list[str]:
    """Folders that may hold Nsight Compute's own copy of ``ncu_report``, most specific first."""
    candidates: list[str] = []
    ncu = shutil.which("ncu")
    if ncu:
        # <install>/ncu or <install>/target/.../ncu: walk up from the resolved binary to find extras/python.
        here = Path(ncu).resolve().parent
        for folder in (here, *here.parents):
            extras = folder / "extras" / "python"
            if extras.is_dir():
                candidates.append(str(extras))
                break
    for pattern in _INSTALL_GLOBS:
        candidates.extend(sorted(glob.glob(pattern), reverse=True))  # newest version first
    return candidates


def import_ncu_report() -> ModuleType:
    """Return the ``ncu_report`` module, from the Python environment or from an Nsight Compute install.

    Order: a plain ``import ncu_report`` (PyPI package ``ncu-report``); then ``extras/python`` of the install
    that ``ncu`` on ``PATH`` resolves to (symlinks followed); then ``/opt/nvidia/nsight-compute/*/extras/python``
    and ``/usr/local/cuda/nsight-compute*/extras/python``. A folder that works is added to ``sys.path``.

    Returns:
        The imported ``ncu_report`` module.

    Raises:
        ToolMissingError: no importable ``ncu_report`` was found anywhere.
    """
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    tried: list[str] = []
    for folder in _candidate_python_dirs():
        if not os.path.isfile(os.path.join(folder, "ncu_report.py")) and not os.path.isdir(
            os.path.join(folder, "ncu_report")
        ):
            continue
        tried.append(folder)
        if folder not in sys.path:
            sys.path.append(folder)
        try:
            return importlib.import_module("ncu_report")
        except ImportError:
            sys.path.remove(folder)
    where = f" (tried {', '.join(tried)})" if tried else ""
    raise ToolMissingError(
        f"the Python module ncu_report (Nsight Compute's report reader) is not importable{where}",
        "pip install ncu-report, or install Nsight Compute and put its ncu on PATH "
        "(its copy lives in <install>/extras/python)",
    )


def _describe_empty(path: Path) -> ReportError:
    """The error for a file that ``ncu_report`` loaded but found no profiled kernel in."""
    size_bytes = path.stat().st_size
    if size_bytes == 0:
        return ReportError(
            f"{path} is empty (0 bytes), not an Nsight Compute report",
            "profile again with `ncu --set full -o <name> ...`; the run that wrote this file may have failed",
        )
    with path.open("rb") as handle:
        head = handle.read(len(NCU_REPORT_MAGIC))
    if head != NCU_REPORT_MAGIC:
        return ReportError(
            f"{path} is not an Nsight Compute report (ncu_report found no data in it)",
            "pass a .ncu-rep file written by `ncu -o`; CSV or text output from ncu cannot be read here",
        )
    return ReportError(
        f"{path} is an Nsight Compute report with no profiled kernels (or it is truncated)",
        "check the ncu filters (-k/--kernel-name, -c, --launch-skip) matched a kernel and that ncu finished",
    )


class ReportActions(list):
    """The actions of a report, holding the report context and ranges alive.

    Nsight Compute's own ``ncu_report`` (SWIG, in ``extras/python``) frees an action's data when its report context
    is collected; reading such an action then crashes the interpreter (seen on an H200 with ncu 2025.3.1). Keep
    this list alive while its actions are read.
    """

    keep_alive: Any = None


def load_actions(path: str | os.PathLike[str]) -> list[Any]:
    """Load every profiled action (kernel launch) of an Nsight Compute report, in report order.

    Args:
        path: the ``.ncu-rep`` file.

    Returns:
        ``ncu_report`` ``IAction`` objects of all ranges, range by range, in the order ncu recorded them.

    Raises:
        ReportError: the file is missing, is a directory, cannot be read, is not an Nsight Compute report,
            holds no profiled kernel, or is only partly readable (a launch without a name or metrics: truncated).
        ToolMissingError: ``ncu_report`` is not available (see :func:`import_ncu_report`).
    """
    report_path = Path(path)
    if not report_path.exists():
        raise ReportError(
            f"Nsight Compute report {report_path} does not exist",
            "check the path; kernelpilot writes reports as <run>/<version>/profile.ncu-rep",
        )
    if not report_path.is_file():
        raise ReportError(f"{report_path} is not a file", "pass the .ncu-rep file itself, not a folder")
    if not os.access(report_path, os.R_OK):
        raise ReportError(f"{report_path} is not readable", "fix the file's permissions")
    ncu_report = import_ncu_report()
    try:
        context = ncu_report.load_report(str(report_path))
        ranges = [context.range_by_idx(r) for r in range(context.num_ranges())]
        actions = ReportActions(a for rng in ranges for a in (rng.action_by_idx(i) for i in range(rng.num_actions())))
        actions.keep_alive = (context, ranges)
    except Exception as exc:  # ncu_report is a SWIG binding: any failure inside it means an unreadable report
        raise ReportError(
            f"ncu_report could not read {report_path}: {exc}",
            "the file may be corrupt or from a newer Nsight Compute; open it in the Nsight Compute GUI, "
            "or upgrade ncu-report",
        ) from exc
    if not actions:
        raise _describe_empty(report_path)
    unreadable = [i for i, action in enumerate(actions) if not _readable(action)]
    if unreadable:
        which = ", ".join(map(str, unreadable[:10])) + (" …" if len(unreadable) > 10 else "")
        raise ReportError(
            f"{report_path} is only partly readable: launch {which} of {len(actions)} has no kernel name or no "
            f"metrics ({report_path.stat().st_size} bytes; the file is truncated or corrupt)",
            "profile the kernel again (`kernelpilot profile KERNEL`, or ncu --set full -o NAME ...); a report copied "
            "while ncu was still writing it is incomplete",
        )
    return actions


def _readable(action: Any) -> bool:
    """True when ``ncu_report`` read a launch: it has a kernel name and at least one metric (a truncated report
    loads with empty launches: no name, zero metrics)."""
    try:
        return bool(action.name()) and len(action.metric_names()) > 0
    except Exception:  # noqa: BLE001 - a SWIG call failing on a damaged launch: unreadable
        return False
