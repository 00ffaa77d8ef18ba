"""Shape rules of a workload bundle (``kernelpilot-bundle/2``): how a value of the launch (a grid dimension, a scalar
parameter, a compile-time constant, an input's size) follows from the dispatch keys of the call, fitted at export on
the shapes the exporter ran and evaluated at load on the call's shape. Standard library only: :mod:`load` uses it.

A rule is a small JSON object over the dispatch keys (``env`` maps each key to the call's integer value):

- ``{"const": v}``: always ``v``;
- ``{"var": K}``: the key's value; ``{"mul": [K1, K2]}``: their product;
- ``{"cdiv": [rule, c]}``: ``ceil(rule / c)`` (a grid of tiles of ``c``);
- ``{"tiles": [[K1, c1], [K2, c2]]}``: ``ceil(K1 / c1) * ceil(K2 / c2)`` (a 2-D tiling flattened into one grid
  dimension, as a matmul's ``cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)``);
- ``{"scale": [rule, c]}``: ``rule * c`` (a tiling over a key times the tile count of a size that is no key, e.g.
  ``cdiv(M, BLOCK_M) * 16`` when N is fixed); ``c`` is read off one sample and checked at all;
- ``{"pow2": K}``: the smallest power of two ``>= K`` (``triton.next_power_of_2``);
- ``{"le": [K, c]}`` / ``{"gt": [K, c]}``: ``K <= c`` / ``K > c`` (a shape-dependent ``tl.constexpr`` flag).

:func:`fit` returns the first rule of a fixed candidate order that gives every observed value at every sampled shape
(observed, not declared: the kernel's ``run_kernel`` is never read, only what its launches were); nothing fits ->
None, and export refuses the bucket by name. :func:`triton_spec` is Triton's specialization of an integer argument
(read in Triton 3.9, ``native_specialize_impl``), so a load picks the binary Triton itself would have compiled.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Iterable, Optional

__all__ = ["POW2_DIVISORS", "evaluate", "fit", "int_type", "lookup_functions", "rule_text", "triton_spec"]

#: Tile sizes tried as ``c`` of ``cdiv`` after the config's own integers: powers of two up to 2**20.
POW2_DIVISORS = tuple(1 << i for i in range(21))

_LOOKUP: list[Any] = []


def lookup_functions() -> Any:
    """:mod:`kernelpilot.dispatch.lookup` (``find_bucket``, ``miss_message``), the one shape -> bucket rule, loaded
    from its file without running ``kernelpilot/dispatch/__init__.py`` (which imports pydantic): that module imports
    nothing, by its own contract, so it can be loaded alone. Raises ImportError if the file is missing."""
    if not _LOOKUP:
        path = Path(__file__).resolve().parent.parent / "dispatch" / "lookup.py"
        spec = importlib.util.spec_from_file_location("kernelpilot_bundle_dispatch_lookup", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOOKUP.append(module)
    return _LOOKUP[0]


def _pow2(v: int) -> int:
    return 1 if v <= 1 else 1 << (int(v) - 1).bit_length()


def evaluate(rule: Any, env: dict[str, int]) -> Any:
    """The value of ``rule`` at the shape ``env`` (dispatch key -> int).

    Raises:
        KeyError: a key the rule names is not in ``env``. ValueError: not a rule (unknown form, bad operand).
    """
    if not isinstance(rule, dict) or len(rule) != 1:
        raise ValueError(f"not a shape rule: {rule!r}")
    (form, arg), = rule.items()
    if form == "const":
        return arg
    if form == "var":
        return int(env[arg])
    if form == "mul":
        return int(env[arg[0]]) * int(env[arg[1]])
    if form == "cdiv":
        c = int(arg[1])
        if c < 1:
            raise ValueError(f"cdiv by {c}")
        return -(-int(evaluate(arg[0], env)) // c)
    if form == "tiles":
        (k1, c1), (k2, c2) = arg
        if int(c1) < 1 or int(c2) < 1:
            raise ValueError(f"tiles by {c1}, {c2}")
        return -(-int(env[k1]) // int(c1)) * -(-int(env[k2]) // int(c2))
    if form == "scale":
        return int(evaluate(arg[0], env)) * int(arg[1])
    if form == "pow2":
        return _pow2(int(env[arg]))
    if form == "le":
        return int(env[arg[0]]) <= int(arg[1])
    if form == "gt":
        return int(env[arg[0]]) > int(arg[1])
    raise ValueError(f"unknown shape rule form {form!r}")


def rule_text(rule: Any) -> str:
    """A rule as a short expression (``cdiv(N, 1024)``) for messages and tables. Raises nothing."""
    if not isinstance(rule, dict) or len(rule) != 1:
        return repr(rule)
    (form, arg), = rule.items()
    if form == "const":
        return repr(arg)
    if form == "var":
        return str(arg)
    if form == "mul":
        return f"{arg[0]}*{arg[1]}"
    if form == "cdiv":
        return f"cdiv({rule_text(arg[0])}, {arg[1]})"
    if form in ("le", "gt"):
        return f"{arg[0]} {'<=' if form == 'le' else '>'} {arg[1]}"
    if form == "tiles":
        return f"cdiv({arg[0][0]}, {arg[0][1]})*cdiv({arg[1][0]}, {arg[1][1]})"
    if form == "scale":
        return f"{rule_text(arg[0])}*{arg[1]}"
    return f"{form}({arg})"


def _candidates(keys: list[str], values: list[Any], divisors: Iterable[int]) -> Iterable[dict[str, Any]]:
    """Rules to try, in the fixed order that decides between rules agreeing on every sample: a constant, one key,
    a product of two, a key rounded up to a power of two, a ceil-division by the config's integers then by powers
    of two; for booleans, thresholds at the config's integers and at the sampled values."""
    first = values[0]
    yield {"const": first}
    if all(isinstance(v, bool) for v in values):
        for c in dict.fromkeys(divisors):  # the config's integers first, then powers of two, then sampled values
            for k in keys:
                yield {"le": [k, c]}
                yield {"gt": [k, c]}
        return
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return
    terms: list[dict[str, Any]] = [{"var": k} for k in keys]
    terms += [{"mul": [a, b]} for i, a in enumerate(keys) for b in keys[i:]]
    yield from terms
    for k in keys:
        yield {"pow2": k}
    seen: set[int] = {1}
    for c in divisors:
        if c > 1 and c not in seen:
            seen.add(c)
            for t in terms:
                yield {"cdiv": [t, c]}
    tiles = [c for c in dict.fromkeys([1, *divisors]) if c <= 1024]
    for i, k1 in enumerate(keys):
        for k2 in keys[i + 1:]:
            for c1 in tiles:
                for c2 in tiles:
                    yield {"tiles": [[k1, c1], [k2, c2]]}


def fit(envs: list[dict[str, int]], values: list[Any], keys: list[str], divisors: Iterable[int] = ()
        ) -> Optional[dict[str, Any]]:
    """The first candidate rule giving ``values[i]`` at ``envs[i]`` for every sample, or None.

    Args:
        envs: the sampled shapes (dispatch key -> int), one per observation.
        values: what was observed at each (an int, bool, float or string).
        keys: the dispatch keys the rule may use. divisors: integers tried first as tiles and thresholds (the
            config's integer values), before the powers of two and the sampled key values.

    Returns:
        The rule (``{"const": v}`` when every value is equal), or None when no candidate fits every sample.
    """
    if not values:
        return None
    extra = sorted({int(e[k]) for e in envs for k in keys} | {int(e[k]) - 1 for e in envs for k in keys})
    divs = [int(d) for d in divisors if isinstance(d, int) and not isinstance(d, bool) and d > 0]
    tried = []
    for rule in _candidates(keys, values, [*divs, *POW2_DIVISORS, *extra] if isinstance(values[0], bool)
                            else [*divs, *POW2_DIVISORS]):
        tried.append(rule)
        try:
            if all(_same(evaluate(rule, e), v) for e, v in zip(envs, values)):
                return rule
        except (KeyError, ValueError, TypeError):
            continue
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    for rule in tried[1:]:  # last: a candidate times a constant read off the first sample where it is not 0
        try:
            base = [int(evaluate(rule, e)) for e in envs]
        except (KeyError, ValueError, TypeError):
            continue
        i = next((j for j, b in enumerate(base) if b), None)
        if i is None or values[i] % base[i] or values[i] // base[i] < 2:
            continue
        c = values[i] // base[i]
        if all(b * c == v for b, v in zip(base, values)):
            return {"scale": [rule, c]}
    return None


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b or (isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool)
                                             and not isinstance(b, bool) and a == b)


def int_type(value: int) -> str:
    """Triton's type for a Python int argument (Triton 3.9): ``i32`` within int32, ``i64`` within int64, else
    ``u64``. Raises nothing."""
    if -(2 ** 31) <= value < 2 ** 31:
        return "i32"
    if -(2 ** 63) <= value < 2 ** 63:
        return "i64"
    return "u64"


def triton_spec(value: int) -> tuple[str, Any]:
    """How Triton 3.9 specializes an int argument: ``("constexpr", 1)`` for 1, else ``(type, 16 or 1)``: its type
    (:func:`int_type`) and 16 when the value is divisible by 16 (``tt.divisibility``). Raises nothing."""
    if value == 1:
        return "constexpr", 1
    return int_type(value), 16 if value % 16 == 0 else 1
