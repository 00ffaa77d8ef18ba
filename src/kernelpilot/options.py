"""Checks of command options before any work starts: each bad value is an :class:`~kernelpilot.errors.OptionError`
naming the option and the value given, with a hint (the command line prints ``error:``/``hint:`` and exits 2).

Every command's API function calls the checks for the options it takes, so the Python API refuses the same values
as the command line: a negative or zero time limit, a negative cap, zero seeds, a kernel path that is a folder, a
``--shape`` value of the wrong type (``N=abc`` where ``SHAPE`` holds a number), an arch no spec or occupancy model
knows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kernelpilot.errors import ContractError, OptionError

__all__ = ["check_arch", "check_kernel_path", "check_shape_values", "known_archs", "positive", "at_least"]


def positive(option: str, value: float | None, example: str = "") -> None:
    """Refuse a ``value`` that is not a finite number > 0 (None passes: the option was not given).

    Raises:
        OptionError: ``value`` is zero, negative, NaN or infinite (the message names ``option``).
    """
    if value is None:
        return
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise OptionError(f"{option} {value} is not a positive number", f"e.g. {option} {example or '60'}")


def at_least(option: str, value: int | None, low: int, what: str) -> None:
    """Refuse an integer ``value`` below ``low`` (None passes).

    Raises:
        OptionError: ``value < low``; the hint says what the option counts (``what``).
    """
    if value is not None and value < low:
        raise OptionError(f"{option} {value} is below {low}", f"give {what} ({low} or more)")


def check_kernel_path(path: str | Path | None, what: str = "kernel file") -> None:
    """Refuse a path that is a folder (a missing file is left to the contract's own "not found" error).

    Raises:
        ContractError: ``path`` is a directory; the hint lists the ``.py`` files in it, if any.
    """
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        found = sorted(q.name for q in p.glob("*.py"))[:6]
        inside = f" (in it: {', '.join(found)})" if found else " (it holds no .py file)"
        raise ContractError(f"{p} is a folder, not a {what}",
                            f"pass the .py {what} itself{inside}")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "other"


def check_shape_values(overrides: dict[str, Any] | None, defaults: dict[str, Any], where: str = "") -> None:
    """Refuse ``--shape`` values whose type cannot be what the kernel file's ``SHAPE`` holds there: a word where
    the default is a number (``N=abc`` for ``N: 4096``), a fraction where it is a whole number, anything but
    true/false where it is a flag. Names not in ``defaults`` are left to the contract's own check.

    Args:
        overrides: the ``--shape`` values (name -> value as parsed). defaults: the kernel file's SHAPE (its
            CPU_SHAPE merged in). where: the kernel file, for the message.

    Raises:
        OptionError: a value of the wrong type (the message names the option, the value and the default).
    """
    for name, value in (overrides or {}).items():
        if name not in defaults:
            continue
        want, got = _kind(defaults[name]), _kind(value)
        ok = (want == "other" or want == got or (want == "float" and got == "int"))
        if not ok:
            words = {"int": "a whole number", "float": "a number", "bool": "true or false"}
            src = f" in {Path(where).name}'s SHAPE" if where else " in SHAPE"
            raise OptionError(f"--shape {name}={value}: `{name}` is {words[want]}{src} "
                              f"(default {defaults[name]!r}), not {value!r}",
                              f"e.g. --shape {name}={defaults[name]}")


def known_archs() -> list[str]:
    """The arch names kernelpilot knows: the compute capability of every GPU spec file and every arch of the
    occupancy model (``sm_70``, ``sm_80``, ``sm_89``, ``sm_90``, ``sm_100`` ...), sorted by capability."""
    from kernelpilot.hardware.specs import list_specs
    from kernelpilot.backends.binary.occupancy import ARCH_LIMITS

    caps: set[tuple[int, int]] = set(ARCH_LIMITS)
    for spec in list_specs():
        cc = getattr(spec, "compute_capability", None)
        if cc:
            major, _, minor = str(cc).partition(".")
            if major.isdigit() and minor.isdigit():
                caps.add((int(major), int(minor)))
    return [f"sm_{a}{b}" for a, b in sorted(caps)]


def check_arch(arch: str | None) -> None:
    """Refuse an ``--arch`` that is not an arch name, or one no spec or occupancy model knows (None passes: the
    arch of this GPU, else sm_90, is used).

    Raises:
        OptionError: the message names the value and lists :func:`known_archs`.
    """
    if arch is None:
        return
    from kernelpilot.backends.binary.arch import parse_arch

    known = known_archs()
    try:
        major, minor = parse_arch(arch)
    except ContractError:
        raise OptionError(f"--arch {arch!r} is not a GPU architecture name",
                          f"use one of {', '.join(known)} (sm_90: H100/H200)") from None
    if f"sm_{major}{minor}" not in known:
        raise OptionError(f"--arch {arch}: no GPU kernelpilot knows has compute capability {major}.{minor}",
                          f"use one of {', '.join(known)} (sm_90: H100/H200)")
