"""The search space: a kernel's TUNABLES, its CONSTRAINTS and the device's limits, solved once.

A config is valid when every tunable takes one of its listed values and every constraint holds. Constraints are
Python expressions over tunable names and device-limit names (``BLOCK_M * BLOCK_K * 2 * num_stages <=
max_shared_mem_per_block_bytes``); they are parsed with :mod:`ast` and only a small, side-effect-free subset is
accepted (numbers, names, arithmetic, comparisons, ``and``/``or``/``not``, ``min``/``max``/``abs``), so a kernel
file cannot smuggle code into the search. The valid configs are found by python-constraint2's backtracking
solver (import name ``constraint``; the solver Kernel Tuner uses) and kept in a fixed order: lexicographic in
the order of the tunables and of their values, so index 0 is every tunable's first value when that is valid.

Device limits become named constants (:func:`limits_from_spec`), and one constraint is added automatically:
with a ``num_warps`` tunable and a ``max_threads_per_block`` limit,
``num_warps * threads_per_warp <= max_threads_per_block``. A constraint that names a known device limit
(:data:`LIMIT_NAMES`) which the limits do not give (no spec, e.g. on the CPU) cannot be checked; it is
skipped and listed in :attr:`SearchSpace.skipped` rather than refused.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kernelpilot.errors import SearchError
from kernelpilot.search.constraints import (  # re-exported: the limits keep their old import path
    AUTO_THREADS_CONSTRAINT,
    LIMIT_NAMES,
    MAX_THREADS_PER_BLOCK_DEFAULT,
    THREADS_PER_WARP_DEFAULT,
    Constraint,
    limits_from_spec,
    mentions,
    parse_constraint,
)
from kernelpilot.search.model import config_key

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile

__all__ = ["LIMIT_NAMES", "MAX_THREADS_PER_BLOCK_DEFAULT", "THREADS_PER_WARP_DEFAULT", "SearchSpace", "limits_from_spec"]


class SearchSpace:
    """All valid configs of a kernel: TUNABLES x values, filtered by constraints and device limits.

    Args:
        tunables: name -> candidate values; the order of names and of values is kept and defines the space's
            order (and what "adjacent" means for :meth:`neighbours`).
        constraints: Python expressions over tunable names and limit names that every config must satisfy.
        limits: device limits as named constants (see :func:`limits_from_spec` and :data:`LIMIT_NAMES`), or None.
        source: where the tunables came from (a kernel file), used in error messages.

    Raises:
        SearchError: empty tunables, a tunable with no values or repeated values, a constraint that is not a
            Python expression, uses forbidden syntax, or names something that is neither a tunable nor a limit
            (the message names it and lists the tunables).

    Attributes:
        tunables: the tunables as given (copied).
        names: the tunable names, in order.
        limits: the limits as given (copied; may be empty).
        constraints: the checked constraints' texts, the kernel's first, then the automatic ones.
        skipped: ``(expression, reason)`` for constraints that name a known device limit the limits lack.
    """

    def __init__(self, tunables: dict[str, list[Any]], constraints: Iterable[str] | None = None,
                 limits: dict[str, float] | None = None, *, source: str = "") -> None:
        where = f"{source}: " if source else ""
        if not isinstance(tunables, dict) or not tunables:
            raise SearchError(f"{where}the search space needs at least one tunable, got {tunables!r}",
                              "give TUNABLES as a dict of name -> list of candidate values")
        self.tunables: dict[str, list[Any]] = {}
        for name, values in tunables.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise SearchError(f"{where}tunable name {name!r} is not a Python identifier",
                                  "name tunables like Triton meta-parameters, e.g. BLOCK_M or num_warps")
            values = list(values) if isinstance(values, (list, tuple)) else values
            if not isinstance(values, list) or not values:
                raise SearchError(f"{where}tunable `{name}` has no candidate values ({tunables[name]!r})",
                                  "give each tunable a non-empty list of values")
            for i, v in enumerate(values):
                if any(v == w for w in values[:i]):
                    raise SearchError(f"{where}tunable `{name}` lists {v!r} twice: {values}",
                                      "list each candidate value once")
            self.tunables[name] = values
        self.names: tuple[str, ...] = tuple(self.tunables)
        self.limits: dict[str, float] = dict(limits or {})
        self.source = source
        self.skipped: list[tuple[str, str]] = []
        self._checks: list[Constraint] = []
        for i, text in enumerate(constraints or []):
            self._add(text, f"{where}CONSTRAINTS[{i}]", auto=False)
        if "num_warps" in self.tunables and "max_threads_per_block" in self.limits:
            self.limits.setdefault("threads_per_warp", THREADS_PER_WARP_DEFAULT)
            self._add(AUTO_THREADS_CONSTRAINT, "device limit", auto=True)
        self.constraints: list[str] = [c.text for c in self._checks]
        self._coords: list[tuple[int, ...]] | None = None
        self._position: dict[tuple[int, ...], int] | None = None
        self._array: Any = None
        self._key_position: dict[str, int] | None = None

    # ----------------------------------------------------------------------------------------------- building

    @classmethod
    def from_kernel(cls, kf: KernelFile, limits: dict[str, float] | None = None) -> SearchSpace:
        """The search space of a loaded kernel file: its ``TUNABLES`` and ``CONSTRAINTS``, plus device limits.

        Args:
            kf: a :class:`kernelpilot.kernels.contract.KernelFile` (``tunables``, ``constraints``, ``path``).
            limits: device limits (:func:`limits_from_spec`), or None when the GPU is unknown.

        Returns:
            The space (solved lazily, on first use).

        Raises:
            SearchError: as :class:`SearchSpace`; messages name the kernel file.
        """
        return cls(kf.tunables, list(kf.constraints or []), limits, source=str(kf.path) if kf.path else "")

    def _add(self, text: str, label: str, *, auto: bool) -> None:
        check, skipped = parse_constraint(text, label, self.names, self.limits, auto=auto)
        if check is None:
            self.skipped.append((text.strip(), skipped))
        else:
            self._checks.append(check)

    # ------------------------------------------------------------------------------------------------ solving

    def _solve(self) -> list[tuple[int, ...]]:
        if self._coords is not None:
            return self._coords
        import constraint as csp  # python-constraint2

        if any(not c.names and not c.holds(()) for c in self._checks):
            coords: list[tuple[int, ...]] = []
        else:
            problem = csp.Problem()
            for name in self.names:
                problem.addVariable(name, list(range(len(self.tunables[name]))))
            for check in self._checks:
                if not check.names:
                    continue
                tables = [self.tunables[n] for n in check.names]

                def predicate(*idx: int, _check: Constraint = check, _tables: list = tables) -> bool:
                    return _check.holds(t[i] for t, i in zip(_tables, idx))

                problem.addConstraint(csp.FunctionConstraint(predicate), list(check.names))
            coords = sorted(tuple(s) for s in problem.getSolutionsOrderedList(list(self.names)))
        self._coords = coords
        self._position = {c: i for i, c in enumerate(coords)}
        return coords

    def _to_config(self, coords: tuple[int, ...]) -> dict[str, Any]:
        return {n: self.tunables[n][i] for n, i in zip(self.names, coords)}

    def _coords_of(self, config: dict[str, Any]) -> tuple[int, ...] | None:
        """The value indices of ``config`` in tunable order, or None if it is not in the product space."""
        if not isinstance(config, dict) or len(config) != len(self.names):
            return None
        out = []
        for name in self.names:
            if name not in config:
                return None
            value = config[name]
            for i, candidate in enumerate(self.tunables[name]):
                if candidate == value and isinstance(candidate, bool) == isinstance(value, bool):
                    out.append(i)
                    break
            else:
                return None
        return tuple(out)

    def _require_coords(self, config: dict[str, Any]) -> tuple[int, ...]:
        coords = self._coords_of(config)
        if coords is None:
            raise SearchError(f"{self.source + ': ' if self.source else ''}config {config!r} is not in the space: "
                              f"{self.why_invalid(config)}", f"tunables: {self.describe()}")
        return coords

    # ------------------------------------------------------------------------------------------------ queries

    def configs(self) -> list[dict[str, Any]]:
        """All valid configs, lexicographic in the order of the tunables and of their values.

        Returns:
            A new list of new dicts (the solution is computed once and cached; callers may mutate the result).

        Raises:
            SearchError: a constraint raised something other than an ArithmeticError for some config.
        """
        return [self._to_config(c) for c in self._solve()]

    @property
    def size(self) -> int:
        """The number of valid configs (solves the space on first use)."""
        return len(self._solve())

    @property
    def total_size(self) -> int:
        """The number of configs before constraints: the product of the tunables' value counts."""
        return math.prod(len(v) for v in self.tunables.values())

    def __len__(self) -> int:
        return self.size

    def describe(self) -> str:
        """The tunables and their values in one line, for messages (``BLOCK=[32, 64], num_warps=[4, 8]``)."""
        return ", ".join(f"{n}={v}" for n, v in self.tunables.items())

    def why_invalid(self, config: dict[str, Any]) -> str | None:
        """Why ``config`` is not a valid config, or None when it is valid.

        Args:
            config: tunable name -> value.

        Returns:
            None when valid; otherwise one sentence naming the first problem found: a missing tunable, an
            unknown tunable, a value not among the tunable's candidates, or the first constraint broken (with the
            values it saw).

        Raises:
            SearchError: a constraint raised something other than an ArithmeticError.
        """
        if not isinstance(config, dict):
            return f"a config must be a dict of tunable -> value, got {type(config).__name__}"
        for key in config:
            if key not in self.tunables:
                return f"`{key}` is not a tunable (tunables: {', '.join(self.names)})"
        for name in self.names:
            if name not in config:
                return f"tunable `{name}` is missing"
            value = config[name]
            if not any(c == value and isinstance(c, bool) == isinstance(value, bool) for c in self.tunables[name]):
                return f"{name}={value!r} is not one of {self.tunables[name]}"
        for check in self._checks:
            if not check.holds(config[n] for n in check.names):
                seen = ", ".join(f"{n}={config[n]!r}" for n in check.names)
                consts = ", ".join(f"{n}={self.limits[n]!r}" for n in self.limits if mentions(check.text, n))
                shown = "; ".join(s for s in (seen, consts) if s)
                kind = "device limit" if check.auto else "constraint"
                return f"breaks the {kind} `{check.text}`" + (f" ({shown})" if shown else "")
        return None

    def is_valid(self, config: dict[str, Any]) -> bool:
        """True when every tunable is set to one of its values (and nothing else is set) and all constraints hold.

        Raises:
            SearchError: a constraint raised something other than an ArithmeticError.
        """
        return self.why_invalid(config) is None

    def index(self, config: dict[str, Any]) -> int:
        """The position of a valid config in :meth:`configs`.

        Raises:
            SearchError: the config is not valid (the message says why).
        """
        self._solve()
        coords = self._coords_of(config)
        position = None if coords is None else self._position.get(coords)  # type: ignore[union-attr]
        if position is None:
            raise SearchError(f"config {config!r} is not a valid config of this space: {self.why_invalid(config)}",
                              f"tunables: {self.describe()}; constraints: {self.constraints or 'none'}")
        return position

    def __contains__(self, config: object) -> bool:
        if not isinstance(config, dict):
            return False
        self._solve()
        coords = self._coords_of(config)
        return coords is not None and coords in self._position  # type: ignore[operator]

    def neighbours(self, config: dict[str, Any], *, adjacent: bool = True) -> list[dict[str, Any]]:
        """Valid configs that differ from ``config`` in exactly one tunable.

        Args:
            config: a config in the product space (it need not satisfy the constraints itself).
            adjacent: True: only the value one position down or up in that tunable's list; False: any other value.

        Returns:
            The neighbours, tunable by tunable in tunable order, values in list order.

        Raises:
            SearchError: ``config`` misses a tunable, sets an unknown one, or uses a value not listed.
        """
        self._solve()
        coords = self._require_coords(config)
        out = []
        for t, name in enumerate(self.names):
            count = len(self.tunables[name])
            options = [coords[t] - 1, coords[t] + 1] if adjacent else range(count)
            for j in options:
                if j == coords[t] or not 0 <= j < count:
                    continue
                candidate = coords[:t] + (j,) + coords[t + 1:]
                if candidate in self._position:  # type: ignore[operator]
                    out.append(self._to_config(candidate))
        return out

    def steps(self, config: dict[str, Any]) -> list[dict[str, Any]]:
        """Valid configs one step from ``config`` in one tunable: for each tunable and each direction (down, then
        up its value list), the valid config that has that tunable's next value and changes the other tunables as
        little as possible (fewest changed, then the smallest sum of value-position steps, then space order). Unlike
        :meth:`neighbours`, a step whose one-tunable change breaks a constraint moves the others too: in a config
        list whose ``num_warps``/``num_stages`` come in listed pairs, a step in stages takes its pair's warps.

        Returns:
            The steps, tunable by tunable, without duplicates and without ``config`` itself.

        Raises:
            SearchError: ``config`` misses a tunable, sets an unknown one, or uses a value not listed.
        """
        import numpy as np

        here = np.asarray(self._require_coords(config))
        table = self._table()
        out: list[dict[str, Any]] = []
        seen = {config_key(config)}
        if not len(table):
            return out
        gap = np.abs(table - here)
        for t in range(len(self.names)):
            others = np.delete(gap, t, axis=1)
            differ, distance = (others > 0).sum(axis=1), others.sum(axis=1)
            for j in (here[t] - 1, here[t] + 1):
                rows = np.flatnonzero(table[:, t] == j)
                if not len(rows):
                    continue
                best = rows[np.lexsort((rows, distance[rows], differ[rows]))[0]]
                step = self._to_config(tuple(int(x) for x in table[best]))
                if config_key(step) not in seen:
                    seen.add(config_key(step))
                    out.append(step)
        return out

    def sample(self, rng: random.Random, k: int) -> list[dict[str, Any]]:
        """``k`` distinct valid configs drawn uniformly without replacement (all of them, shuffled, if ``k >= size``).

        Args:
            rng: the random source (seed it for reproducible samples).
            k: how many configs (negative counts as 0).

        Returns:
            The configs, in the order drawn.
        """
        coords = self._solve()
        return [self._to_config(c) for c in rng.sample(coords, max(0, min(k, len(coords))))]

    def nearest(self, config: dict[str, Any], *, exclude: Iterable[dict[str, Any]] | set[str] = ()
                ) -> dict[str, Any] | None:
        """The valid config closest to ``config``, skipping those in ``exclude``.

        Closeness: fewest tunables that differ, then the smallest sum over tunables of the distance between value
        positions, then space order. ``config`` itself is returned when it is valid and not excluded.

        Args:
            config: a config in the product space (it may break constraints).
            exclude: configs (dicts) or their :func:`kernelpilot.search.model.config_key` strings to skip.

        Returns:
            The nearest valid config not excluded, or None when every valid config is excluded.

        Raises:
            SearchError: ``config`` is not in the product space (unknown tunable or value).
        """
        import numpy as np

        target = np.asarray(self._require_coords(config))
        coords = self._solve()
        if not coords:
            return None
        table = self._table()
        keys = self._keys()
        skip = np.zeros(len(coords), dtype=bool)
        for item in exclude:
            position = keys.get(item if isinstance(item, str) else config_key(item))
            if position is not None:
                skip[position] = True
        gap = np.abs(table - target)
        differ = (gap > 0).sum(axis=1)
        distance = gap.sum(axis=1)
        order = np.lexsort((np.arange(len(coords)), distance, differ))  # last key is primary
        for position in order:
            if not skip[position]:
                return self._to_config(coords[int(position)])
        return None

    def _table(self) -> Any:
        """The valid configs' value positions as an int array (size x tunables), built once."""
        if self._array is None:
            import numpy as np

            self._array = np.asarray(self._solve(), dtype=np.int64).reshape(-1, len(self.names))
        return self._array

    def _keys(self) -> dict[str, int]:
        """config_key -> position of every valid config, built once."""
        if self._key_position is None:
            self._key_position = {config_key(self._to_config(c)): i for i, c in enumerate(self._solve())}
        return self._key_position

    def __repr__(self) -> str:
        solved = f"{len(self._coords)} valid of " if self._coords is not None else ""
        return f"SearchSpace({solved}{self.total_size} configs; {self.describe()}; constraints={self.constraints})"
