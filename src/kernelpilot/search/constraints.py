"""Search-space constraints and device limits: the safe expression subset, its parser and the limits it may name.

Constraints are Python expressions over tunable names and device-limit names; they are parsed with :mod:`ast` and
only a small, side-effect-free subset is accepted (numbers, names, arithmetic, comparisons, ``and``/``or``/``not``,
``min``/``max``/``abs``), so a kernel file cannot smuggle code into the search. The accepted expression is compiled
to a lambda over the tunables it reads, with the limits as constants and no builtins. Used by
:class:`kernelpilot.search.space.SearchSpace`, which re-exports :data:`LIMIT_NAMES`, the two defaults and
:func:`limits_from_spec`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kernelpilot.errors import SearchError

if TYPE_CHECKING:
    from kernelpilot.hardware.specs import GpuSpec

__all__ = ["LIMIT_NAMES", "MAX_THREADS_PER_BLOCK_DEFAULT", "THREADS_PER_WARP_DEFAULT", "AUTO_THREADS_CONSTRAINT",
           "Constraint", "limits_from_spec", "parse_constraint", "mentions"]

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
#: The constraint added when the space has ``num_warps`` and the limits give ``max_threads_per_block``.
AUTO_THREADS_CONSTRAINT = "num_warps * threads_per_warp <= max_threads_per_block"


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


class Constraint:
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



def parse_constraint(text: str, label: str, names: Sequence[str], limits: Mapping[str, float], *,
                     auto: bool = False) -> tuple[Constraint | None, str]:
    """Parse and check one constraint expression and compile it to a predicate over the tunables it reads.

    Args:
        text: a Python expression over tunable names and device-limit names (``BLOCK_M * num_stages <= 8``).
        label: where it came from (``kernel.py: CONSTRAINTS[0]``), used in messages and as the code's filename.
        names: the tunable names, in the space's order.
        limits: device limits as named constants (:func:`limits_from_spec`).
        auto: True for a constraint kernelpilot adds itself (the threads-per-block limit).

    Returns:
        ``(constraint, "")``, or ``(None, reason)`` when the expression names a known device limit
        (:data:`LIMIT_NAMES`) that ``limits`` lacks: it cannot be checked and is skipped, not refused.

    Raises:
        SearchError: not a non-empty string, not a Python expression, syntax outside the allowed subset (numbers,
            names, arithmetic, comparisons, and/or/not, min/max/abs), or a name that is neither a tunable nor a
            limit (the message names it and lists the tunables and limits).
    """
    if not isinstance(text, str) or not text.strip():
        raise SearchError(f"{label}: a constraint must be a non-empty string, got {text!r}",
                          f"write constraints as Python expressions over the tunables ({', '.join(names)})")
    text = text.strip()
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise SearchError(f"{label}: `{text}` is not a Python expression ({exc.msg})",
                          f"constraints may use {_ALLOWED_TEXT}") from exc
    used: list[str] = []
    _check_node(tree.body, text, label, used)
    missing = [n for n in used if n not in names and n not in limits]
    unknown = [n for n in missing if n not in LIMIT_NAMES]
    if unknown:
        given = ", ".join(sorted(limits)) or "none given"
        raise SearchError(
            f"{label}: `{text}` names `{unknown[0]}`, which is neither a tunable nor a device limit",
            f"tunables: {', '.join(names)}; device limits: {given} "
            f"(known limit names: {', '.join(LIMIT_NAMES)})",
        )
    if missing:
        return None, f"device limit {', '.join(missing)} unknown (no GPU spec gives it)"
    read = tuple(n for n in names if n in used)
    constants = {n: limits[n] for n in used if n not in names}
    fn_tree = ast.Expression(ast.Lambda(
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in read], kwonlyargs=[],
                           kw_defaults=[], defaults=[]),
        body=tree.body,
    ))
    ast.fix_missing_locations(fn_tree)
    scope: dict[str, Any] = {"__builtins__": {}, **_CALLS, **constants}
    fn = eval(compile(fn_tree, label, "eval"), scope)
    # A constraint over limits alone is kept too: when it breaks, no config is valid and why_invalid says so.
    return Constraint(text, label, read, fn, auto), ""


def _check_node(node: ast.AST, text: str, label: str, used: list[str]) -> None:
    """Walk ``node``, refusing any syntax outside the allowed subset; collect the names it reads into ``used``."""
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
        _check_node(child, text, label, used)



def mentions(text: str, name: str) -> bool:
    """Whether the expression ``text`` reads the name ``name`` (False when ``text`` does not parse). Raises nothing."""
    try:
        return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(ast.parse(text, mode="eval")))
    except SyntaxError:
        return False
