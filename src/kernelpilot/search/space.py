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

import ast
import math
import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kernelpilot.errors import SearchError
from kernelpilot.search.model import config_key

if TYPE_CHECKING:
    from kernelpilot.hardware.specs import GpuSpec
    from kernelpilot.kernels.contract import KernelFile

__all__ = ["LIMIT_NAMES", "MAX_THREADS_PER_BLOCK_DEFAULT", "THREADS_PER_WARP_DEFAULT", "SearchSpace", "limits_from_spec"]

#: Threads per warp when neither the limits nor the spec say otherwise (NVIDIA; AMD CDNA wavefronts are 64).
THREADS_PER_WARP_DEFAULT = 32
#: Threads per block when the spec does not say (every NVIDIA GPU since Fermi; AMD GPUs too).
MAX_THREADS_PER_BLOCK_DEFAULT = 1024

#: Device-limit names constraints may use; :func:`limits_from_spec` gives those the spec has.
LIMIT_NAMES: tuple[str, ...] = (
    "max_threads_per_block",
    "threads_per_warp",
    "max_shared_mem_per_block_bytes",
    "max_shared_mem_per_sm_bytes",
    "max_registers_per_thread",
    "registers_per_sm",
    "max_warps_per_sm",
    "max_blocks_per_sm",
    "sm_count",
)

_CALLS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
           ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)
_UNARYOPS = (ast.UAdd, ast.USub, ast.Not, ast.Invert)
_CMPOPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_ALLOWED_TEXT = ("tunable and device-limit names, numbers, + - * / // % ** & | ^ << >>, comparisons "
                 "(== != < <= > >=), and/or/not, and calls to min/max/abs")
_SYNTAX_NAMES = {"Attribute": "attribute access", "Subscript": "indexing", "Lambda": "a lambda",
                 "IfExp": "a conditional expression", "NamedExpr": "an assignment expression",
                 "ListComp": "a comprehension", "GeneratorExp": "a comprehension", "SetComp": "a comprehension",
                 "DictComp": "a comprehension", "List": "a list", "Tuple": "a tuple", "Set": "a set",
                 "Dict": "a dict", "JoinedStr": "an f-string", "Await": "await", "Yield": "yield", "Starred": "*"}
_AUTO_THREADS = "num_warps * threads_per_warp <= max_threads_per_block"


def limits_from_spec(spec: GpuSpec) -> dict[str, float]:
    """Device limits, as constraint constants, from a GPU spec sheet.

    Args:
        spec: a :class:`kernelpilot.hardware.specs.GpuSpec` (datasheet values, then measured ones, are read).

    Returns:
        ``max_threads_per_block`` (the spec's value, else 1024), ``threads_per_warp`` (the spec's
        ``threads_per_warp`` or ``warp_size``, else 64 for AMD ``gfx9*`` targets, else 32), and when the spec has
        them: ``max_shared_mem_per_block_bytes`` (``shared_mem_per_block_kb`` * 1024),
        ``max_shared_mem_per_sm_bytes`` (``shared_mem_per_sm_kb`` * 1024), ``max_registers_per_thread``,
        ``registers_per_sm``, ``max_warps_per_sm``, ``max_blocks_per_sm``, ``sm_count``. Missing values are
        omitted, never guessed (beyond the two defaults above).

    Raises:
        Nothing.
    """

    def value(*metrics: str) -> float | None:
        for metric in metrics:
            for table in (spec.values, spec.measured):
                if metric in table:
                    return float(table[metric].value)
        return None

    limits: dict[str, float] = {}
    threads = value("max_threads_per_block")
    limits["max_threads_per_block"] = threads if threads is not None else MAX_THREADS_PER_BLOCK_DEFAULT
    warp = value("threads_per_warp", "warp_size")
    if warp is None:
        wave64 = (spec.vendor or "").upper() == "AMD" and (spec.arch or "").startswith("gfx9")
        warp = 64 if wave64 else THREADS_PER_WARP_DEFAULT
    limits["threads_per_warp"] = warp
    for name, metrics, scale in (
        ("max_shared_mem_per_block_bytes", ("shared_mem_per_block_kb",), 1024),
        ("max_shared_mem_per_sm_bytes", ("shared_mem_per_sm_kb",), 1024),
        ("max_registers_per_thread", ("max_registers_per_thread",), 1),
        ("registers_per_sm", ("registers_per_sm",), 1),
        ("max_warps_per_sm", ("max_warps_per_sm",), 1),
        ("max_blocks_per_sm", ("max_blocks_per_sm",), 1),
        ("sm_count", ("sm_count",), 1),
    ):
        found = value(*metrics)
        if found is not None:
            limits[name] = found * scale
    # Whole numbers as ints, so constraint arithmetic stays exact and messages read naturally.
    return {k: int(v) if float(v).is_integer() else v for k, v in limits.items()}


class _Constraint:
    """One parsed, checked constraint: its text, where it came from, the tunables it reads and its predicate."""

    def __init__(self, text: str, label: str, names: tuple[str, ...], fn: Callable[..., Any], auto: bool) -> None:
        self.text = text
        self.label = label
        self.names = names
        self._fn = fn
        self.auto = auto

    def holds(self, values: Iterable[Any]) -> bool:
        """Whether the constraint holds for these values of :attr:`names` (an ArithmeticError counts as broken).

        Raises:
            SearchError: the expression raised anything else (e.g. comparing a string with a number).
        """
        args = tuple(values)
        try:
            return bool(self._fn(*args))
        except ArithmeticError:  # 1 / 0, overflow: the config cannot satisfy it
            return False
        except Exception as exc:
            shown = ", ".join(f"{n}={v!r}" for n, v in zip(self.names, args))
            raise SearchError(
                f"{self.label}: `{self.text}` raised {type(exc).__name__}: {exc} at {shown}",
                "constraints must evaluate to True/False for every combination of the tunables' values",
            ) from exc


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
        self._checks: list[_Constraint] = []
        for i, text in enumerate(constraints or []):
            self._add(text, f"{where}CONSTRAINTS[{i}]", auto=False)
        if "num_warps" in self.tunables and "max_threads_per_block" in self.limits:
            self.limits.setdefault("threads_per_warp", THREADS_PER_WARP_DEFAULT)
            self._add(_AUTO_THREADS, "device limit", auto=True)
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
        path = getattr(kf, "path", "")
        return cls(kf.tunables, list(getattr(kf, "constraints", []) or []), limits, source=str(path) if path else "")

    def _add(self, text: str, label: str, *, auto: bool) -> None:
        if not isinstance(text, str) or not text.strip():
            raise SearchError(f"{label}: a constraint must be a non-empty string, got {text!r}",
                              f"write constraints as Python expressions over the tunables ({', '.join(self.names)})")
        text = text.strip()
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as exc:
            raise SearchError(f"{label}: `{text}` is not a Python expression ({exc.msg})",
                              f"constraints may use {_ALLOWED_TEXT}") from exc
        used: list[str] = []
        self._check_node(tree.body, text, label, used)
        missing = [n for n in used if n not in self.tunables and n not in self.limits]
        unknown = [n for n in missing if n not in LIMIT_NAMES]
        if unknown:
            given = ", ".join(sorted(self.limits)) or "none given"
            raise SearchError(
                f"{label}: `{text}` names `{unknown[0]}`, which is neither a tunable nor a device limit",
                f"tunables: {', '.join(self.names)}; device limits: {given} "
                f"(known limit names: {', '.join(LIMIT_NAMES)})",
            )
        if missing:
            self.skipped.append((text, f"device limit {', '.join(missing)} unknown (no GPU spec gives it)"))
            return
        names = tuple(n for n in self.names if n in used)
        constants = {n: self.limits[n] for n in used if n not in self.tunables}
        fn_tree = ast.Expression(ast.Lambda(
            args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names], kwonlyargs=[],
                               kw_defaults=[], defaults=[]),
            body=tree.body,
        ))
        ast.fix_missing_locations(fn_tree)
        scope: dict[str, Any] = {"__builtins__": {}, **_CALLS, **constants}
        fn = eval(compile(fn_tree, label, "eval"), scope)
        # A constraint over limits alone is kept too: when it breaks, no config is valid and why_invalid says so.
        self._checks.append(_Constraint(text, label, names, fn, auto))

    def _check_node(self, node: ast.AST, text: str, label: str, used: list[str]) -> None:
        def refuse(what: str) -> SearchError:
            return SearchError(f"{label}: `{text}` uses {what} (`{ast.unparse(node)}`), which constraints may not",
                               f"constraints may use {_ALLOWED_TEXT}")

        if isinstance(node, ast.Name):
            if node.id not in used:
                used.append(node.id)
            return
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)):
                return
            raise refuse(f"a {type(node.value).__name__} constant")
        children: list[ast.AST]
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _BINOPS):
                raise refuse(f"the operator {type(node.op).__name__}")
            children = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, _UNARYOPS):
                raise refuse(f"the operator {type(node.op).__name__}")
            children = [node.operand]
        elif isinstance(node, ast.BoolOp):
            children = list(node.values)
        elif isinstance(node, ast.Compare):
            bad = [op for op in node.ops if not isinstance(op, _CMPOPS)]
            if bad:
                raise refuse(f"the comparison {type(bad[0]).__name__}")
            children = [node.left, *node.comparators]
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _CALLS:
                raise refuse("a call to something other than min/max/abs")
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args) or not node.args:
                raise refuse("keyword, starred or missing arguments")
            children = list(node.args)
        else:
            raise refuse(_SYNTAX_NAMES.get(type(node).__name__, f"{type(node).__name__} syntax"))
        for child in children:
            self._check_node(child, text, label, used)

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

                def predicate(*idx: int, _check: _Constraint = check, _tables: list = tables) -> bool:
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
                consts = ", ".join(f"{n}={self.limits[n]!r}" for n in self.limits if _mentions(check.text, n))
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


def _mentions(text: str, name: str) -> bool:
    try:
        return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(ast.parse(text, mode="eval")))
    except SyntaxError:
        return False
