"""``@triton.autotune`` kernels: find the autotuner in a kernel file and read its configs as the search space."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpilot.backends.triton.config import autotune_config_dict
from kernelpilot.errors import ContractError


def autotuner_of(obj: Any) -> Any | None:
    """The ``Autotuner`` in ``obj`` or under its decorators (``@triton.heuristics`` above ``@triton.autotune``
    wraps it: each Triton decorator keeps the one below as ``.fn``), or None."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return None
    for _ in range(8):  # a chain of decorators; never a cycle in practice, bounded anyway
        if isinstance(obj, Autotuner):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def find_autotuner(module: ModuleType) -> tuple[str, Any] | None:
    """The module-level ``@triton.autotune`` kernel of a kernel file, as (attribute name, Autotuner), or None.

    A kernel whose ``@triton.autotune`` sits under another Triton decorator counts (see :func:`autotuner_of`).

    Raises:
        ContractError: more than one autotuned kernel (the search would not know which to tune).
    """
    found = []
    for name, value in vars(module).items():
        if not isinstance(value, (type, ModuleType)) and (tuner := autotuner_of(value)) is not None:
            if all(t is not tuner for _, t in found):
                found.append((name, tuner))
    if len(found) > 1:
        raise ContractError(f"{module.__file__}: several @triton.autotune kernels ({', '.join(n for n, _ in found)})",
                            "define TUNABLES explicitly, or keep one autotuned kernel per file")
    return found[0] if found else None


def autotune_space(tuner: Any, path: Path) -> tuple[dict[str, list[Any]], str]:
    """The search space of an autotuned kernel: every value each key takes in its configs, and a constraint that
    admits exactly the listed combinations (``(A == 1 and B == 2) or (...)``).

    A key whose values are all numbers lists them in increasing order, whatever order the configs have them in: a
    tunable's list order is what "up" and "down" mean to the card's moves, to the neighbours of the ``auto``
    strategy's steps and to the nearest valid config (:class:`~kernelpilot.search.space.SearchSpace`). Triton's
    matmul tutorial lists ``BLOCK_SIZE_M`` 128 before 64, so in the order of first appearance "BLOCK_SIZE_M up" was
    a smaller tile. Other keys keep the order of their first appearance.

    Raises:
        ContractError: the autotuner has no configs, or its configs do not all set the same keys.
    """
    configs = [autotune_config_dict(c) for c in getattr(tuner, "configs", [])]
    if not configs:
        raise ContractError(f"{path}: the @triton.autotune kernel lists no configs", "give configs=[triton.Config(...)]")
    keys = list(configs[0])
    if any(list(c) != keys for c in configs):
        raise ContractError(f"{path}: the autotune configs do not all set the same keys ({keys} vs others)",
                            "give every triton.Config the same meta-parameters and num_warps/num_stages")
    return listed_space(configs)


def listed_space(configs: list[dict[str, Any]]) -> tuple[dict[str, list[Any]], str]:
    """The tunables and the constraint of a config list whose configs all set the same keys: each key's values
    (numbers in increasing order, see :func:`autotune_space`) and ``(A == 1 and B == 2) or (...)``, admitting
    exactly the listed combinations. Raises IndexError for an empty list."""
    keys = list(configs[0])
    tunables = {k: _ordered(list(dict.fromkeys(c[k] for c in configs))) for k in keys}
    combos = " or ".join("(" + " and ".join(f"{k} == {c[k]!r}" for k in keys) + ")" for c in configs)
    return tunables, combos


def _ordered(values: list[Any]) -> list[Any]:
    """``values`` in increasing order when every one is a number (bools excluded), else as given."""
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return sorted(values) if numbers else values
