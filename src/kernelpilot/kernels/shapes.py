"""Shapes the author cannot pick: the shapes correctness runs at besides the declared one (docs/measuring.md,
"Shapes the author cannot pick").

A kernel right only at the shapes its author chose — no bounds mask, a dimension hard-coded, a tail loop missing,
a fast path keyed on a power of two — passes any check whose shapes the author picks, and halving every dimension
keeps a power of two a power of two and a multiple of a block a multiple of it (issue 24). So kernelpilot draws its
own shapes on every run, with a generator seeded from :mod:`secrets` (a kernel file cannot predict them; a search
seeds one per config from a secret drawn for the run, :func:`shape_rng`, so that its compile pool builds a config's
drawn shapes while the config is being timed, before its audit runs them):

- **smaller**: every integer dimension ``d ≥ 2`` becomes an odd prime in ``[⌈d/4⌉, ⌊d/2⌋]`` that is none of the
  tunables' values (so it is a multiple of no block, no power of two, no vector width); where that range holds no
  prime, the largest odd number in it; ``d = 2, 3`` becomes 1;
- **larger**: every integer dimension ``d ≥ 16`` becomes ``d + r``, ``r`` a random odd number in
  ``[1, min(63, d/16)]``, while the product of the growths stays under :data:`MAX_GROWTH` (later dimensions take
  ``d − r`` once it would not): the declared size with a ragged tail, a little past it — a kernel that hard-codes
  the size, skips the tail, or covers the declared size in one tile and nothing beyond fails here.

The smaller shape fits wherever the declared one fits; the larger one needs at most 25 % more memory. ``CHECK_SHAPES`` adds to
them; it never replaces them.

**A declared domain** (``SHAPE_RULES``) is how an honest kernel that is right only at some sizes says so (a tiled
GEMM without bounds checks, an attention kernel whose head dimension is a ``tl.arange`` length): per dimension, an
int ``k`` or a tunable expression (``"BM"``, ``"BM * TM"``, evaluated over the config being checked): the dimension
must be a multiple of it; ``"<= EXPR"``: at most that (a row read in one block of a tunable size); ``">= EXPR"``:
at least that; ``"power_of_two"``, or ``"power_of_two >= EXPR"`` (a power of two at least that: Triton's
fused-attention tutorial asserts ``BLOCK_N <= HEAD_DIM``, so its head dimension is ``"power_of_two >= BLOCK_N"``).
Drawn shapes stay inside the declared domain — a multiple ``k·p``
with ``p`` an odd prime (so a multiple of ``k`` and of nothing above it), a power of two half the declared one
while that is ≥ 16 — and the restriction is a claim recorded with every verdict (``domain`` notes), never a way to
pick the shapes: the values are still drawn, not chosen. A dimension set to a bool or a non-integer, and one the
rules fix with ``"fixed"``, is kept as declared.

Raises nothing at import; :func:`parse_rules` raises ContractError for a malformed ``SHAPE_RULES``.
"""

from __future__ import annotations

import json
import math
import random
import secrets
from pathlib import Path
from typing import Any, Protocol

from kernelpilot.errors import ContractError

__all__ = ["POWER_OF_TWO", "FIXED", "ShapeDomain", "derived_shapes", "domain_notes", "parse_rules", "is_prime",
           "shape_rng"]

POWER_OF_TWO = "power_of_two"
FIXED = "fixed"
#: A power-of-two dimension is halved while the half is at least this (``tl.dot`` needs 16 along K; smaller
#: powers of two are rarely what such a kernel supports).
MIN_POWER_OF_TWO = 16
#: Largest ragged tail added to (or cut off) the declared size for the "larger" shape.
MAX_TAIL = 63
#: The larger shape holds at most this many times the declared shape's elements (product over its dimensions).
MAX_GROWTH = 1.25

_HINT = ('e.g. SHAPE_RULES = {"M": "BM", "N": "<= BLOCK_N", "K": 16, "D": "power_of_two >= BLOCK_D", "H": "fixed", '
         '"S": ">= 128"} (a multiple of the config\'s BM, at most BLOCK_N, a multiple of 16, a power of two at least '
         "BLOCK_D, kept as declared, at least 128)")


def parse_rules(rules: Any, path: str | Path = "SHAPE_RULES") -> dict[str, int | str]:
    """Validate a kernel file's ``SHAPE_RULES``: a dict from dimension name to a positive int, a tunable expression
    (a non-empty string other than the two keywords), ``"<= EXPR"``, ``">= EXPR"``, :data:`POWER_OF_TWO` (alone or
    followed by ``>= EXPR``) or :data:`FIXED`.

    Raises:
        ContractError: not a dict, a key that is not a string, or a value of another kind (the message names it).
    """
    if rules is None:
        return {}
    if not isinstance(rules, dict):
        raise ContractError(f"{path}: SHAPE_RULES must be a dict of dimension -> rule", _HINT)
    out: dict[str, int | str] = {}
    for name, rule in rules.items():
        ok = isinstance(name, str) and (
            (isinstance(rule, int) and not isinstance(rule, bool) and rule >= 1)
            or (isinstance(rule, str) and rule.strip() != ""))
        if not ok:
            raise ContractError(f"{path}: SHAPE_RULES[{name!r}] = {rule!r} is not a positive int, a tunable "
                                "expression, 'power_of_two' or 'fixed'", _HINT)
        out[name] = rule.strip() if isinstance(rule, str) else rule
        _power_of_two_bound(out[name], name, path)  # a malformed "power_of_two ..." is refused here, when read
    return out


def _power_of_two_bound(rule: int | str | None, name: str, path: str | Path) -> str | None:
    """The EXPR of a ``"power_of_two >= EXPR"`` rule, or None for any other rule. Raises ContractError for
    ``"power_of_two"`` followed by anything but ``>= EXPR``."""
    if not isinstance(rule, str) or not rule.startswith(POWER_OF_TWO) or rule == POWER_OF_TWO:
        return None
    rest = rule[len(POWER_OF_TWO):].strip()
    if not (rest.startswith(">=") and rest[2:].strip()):
        raise ContractError(f"{path}: SHAPE_RULES[{name!r}] = {rule!r}: after 'power_of_two' only '>= EXPR' may "
                            "follow", _HINT)
    return rest[2:].strip()


def is_prime(n: int) -> bool:
    """True when ``n`` is a prime (trial division; ``n`` up to ~10^12 in well under a millisecond)."""
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % f for f in range(3, math.isqrt(n) + 1, 2))


def _multiple(rule: int | str, config: dict[str, Any], name: str, path: str | Path) -> int:
    """The divisor a rule asks for, at ``config``."""
    if isinstance(rule, int):
        return rule
    try:
        value = _eval(rule, config)
    except Exception as exc:  # a name that is not a tunable, a syntax error
        raise ContractError(f"{path}: SHAPE_RULES[{name!r}] = {rule!r} cannot be evaluated over the config "
                            f"{config}: {exc}", _HINT) from exc
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ContractError(f"{path}: SHAPE_RULES[{name!r}] = {rule!r} gives {value!r} at {config}, not a positive "
                            "int", _HINT)
    return value


def _eval(expr: str, names: dict[str, Any]) -> Any:
    """Integer arithmetic (``+ - * // %``, parentheses, ints, names from ``names``) over a config; nothing else."""
    import ast
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod}

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"{ast.dump(node)[:60]} is not integer arithmetic over the config's tunables")

    return ev(ast.parse(expr, mode="eval"))


def _odd_prime(lo: int, hi: int, avoid: set[int], rng: secrets.SystemRandom) -> int | None:
    """A random odd prime in ``[lo, hi]`` not in ``avoid`` (None when there is none)."""
    lo, hi = max(lo, 3), max(hi, 0)
    if hi < lo:
        return None
    tries = [rng.randrange(lo, hi + 1) for _ in range(64)]
    for start in tries:
        for n in range(start | 1, hi + 1, 2):  # the first odd prime at or after a random point
            if n not in avoid and is_prime(n):
                return n
    primes = [n for n in range(lo | 1, hi + 1, 2) if n not in avoid and is_prime(n)] if hi - lo < 4096 else []
    return rng.choice(primes) if primes else None


def _smaller(d: int, rule: int | str | None, k: int, avoid: set[int], rng: secrets.SystemRandom,
             least: int = 1) -> int:
    """The smaller shape's value of a dimension ``d`` (see the module docstring), never under ``least``."""
    if rule == POWER_OF_TWO:
        return d // 2 if d // 2 >= max(MIN_POWER_OF_TWO, least) and d & (d - 1) == 0 else d
    units = d // k  # the dimension in multiples of k (k = 1 without a rule)
    if units < 2:
        return d
    if units <= 3:
        return k if k >= least else d
    p = _odd_prime(max(-(-units // 4), -(-least // k)), units // 2, avoid if k == 1 else set(), rng)
    if p is None:
        hi = units // 2
        p = hi if hi % 2 else hi - 1
        if k * p < least:
            return d
    return k * max(p, 1)


def _lower_bound(rule: int | str | None, config: dict[str, Any], name: str,
                 path: str | Path) -> tuple[int | str | None, int]:
    """``(rule, least)``: a ``">= EXPR"`` rule is no other rule with ``least`` its value at ``config``; a
    ``"power_of_two >= EXPR"`` rule is :data:`POWER_OF_TWO` with that ``least``; any other rule is itself with 1.
    Raises ContractError for an EXPR that is not a positive int at ``config`` (or as :func:`_power_of_two_bound`)."""
    if isinstance(rule, str) and rule.startswith(">="):
        return None, _multiple(rule[2:].strip(), config, name, path)
    expr = _power_of_two_bound(rule, name, path)
    return (rule, 1) if expr is None else (POWER_OF_TWO, _multiple(expr, config, name, path))


def _near(d: int, rule: int | str | None, k: int, rng: secrets.SystemRandom, room: float) -> int:
    """``d`` plus a ragged odd tail (in units of ``k``) when the growth fits in ``room``, else minus one."""
    if rule == POWER_OF_TWO or d < 16:
        return d
    units = d // k
    most = min(MAX_TAIL, units // 16)
    if most < 1:
        return d
    r = rng.randrange(1, most + 1) | 1
    r = min(r, most if most % 2 else most - 1) or 1
    return k * (units + r) if (units + r) / units <= room else k * (units - r)


class ShapeDomain(Protocol):
    """What :func:`derived_shapes` and :func:`domain_notes` read of a kernel file
    (:class:`~kernelpilot.kernels.contract.KernelFile` has them all)."""

    path: str | Path
    shape_rules: dict[str, Any] | None
    default_config: dict[str, Any] | None
    tunables: dict[str, list[Any]] | None
    check_shapes: list[dict[str, Any]] | None


def shape_rng(seed: str | None, config: dict[str, Any]) -> random.Random | None:
    """The generator :func:`derived_shapes` draws ``config``'s shapes with in a run whose secret is ``seed`` (a
    :func:`secrets.token_hex` drawn per run: the same shapes in the parent's compile pool and in the worker's
    audit); None without a seed (a fresh :class:`secrets.SystemRandom` then). ``config`` is keyed by its items,
    sorted, so the order of its keys does not matter. Raises nothing."""
    if seed is None:
        return None
    return random.Random(f"{seed}|{json.dumps(config, sort_keys=True, default=str)}")


def derived_shapes(kf: ShapeDomain, shape: dict[str, Any], config: dict[str, Any] | None = None,
                   rng: random.Random | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The shapes correctness also runs at, drawn for this run, then ``CHECK_SHAPES`` (each merged over ``shape``);
    and notes for the record (the declared domain, a dimension left as declared).

    Args:
        kf: the kernel file (``shape_rules``, ``tunables``, ``check_shapes``, ``path`` are read).
        shape: the checked shape (name -> value; integer dimensions vary, others are kept).
        config: the config being checked (its values evaluate the rules' tunable expressions; default
            ``kf.default_config``).
        rng: a generator (a search's :func:`shape_rng`; tests pass a seeded ``random.Random``); default a fresh
            :class:`secrets.SystemRandom`.

    Returns:
        (shapes, each different from ``shape`` and from each other, in order smaller, larger, CHECK_SHAPES; notes).

    Raises:
        ContractError: ``SHAPE_RULES`` names an expression that does not evaluate to a positive int at ``config``.
    """
    rng = rng or secrets.SystemRandom()
    rules = kf.shape_rules or {}
    config = dict(config if config is not None else kf.default_config or {})
    avoid = {int(v) for vals in (kf.tunables or {}).values() for v in vals
             if isinstance(v, int) and not isinstance(v, bool)}
    small, near = dict(shape), dict(shape)
    room = MAX_GROWTH
    for name, d in shape.items():
        rule = rules.get(name)
        if isinstance(d, bool) or not isinstance(d, int) or d < 2 or rule == FIXED:
            continue
        bound = None
        if isinstance(rule, str) and rule.startswith("<="):  # an upper bound, not a divisor
            bound = _multiple(rule[2:].strip(), config, name, kf.path)
            rule = None
        rule, least = _lower_bound(rule, config, name, kf.path)
        k = 1 if rule in (None, POWER_OF_TWO) else _multiple(rule, config, name, kf.path)
        if d % k:  # the declared shape itself is outside the declared domain: vary it freely
            k = 1
        if d < least:  # likewise under its lower bound
            least = 1
        small[name] = _smaller(d, rule, k, avoid, rng, least)
        near[name] = _near(d, rule, k, rng, room if bound is None else min(room, bound / d))
        if near[name] < least:  # the tail cut off instead of added (no room to grow) went under the bound
            near[name] = d
        room /= max(near[name] / d, 1.0)
    out: list[dict[str, Any]] = []
    for s in (small, near, *({**shape, **c} for c in (kf.check_shapes or []))):
        if s != shape and s not in out:
            out.append(s)
    notes = domain_notes(kf, config)
    if not out:
        notes.append("no integer dimension to vary: no derived shape checked")
    return out, notes


def domain_notes(kf: ShapeDomain, config: dict[str, Any] | None = None) -> list[str]:
    """What the file's ``SHAPE_RULES`` restrict, in words, for every verdict (a claim the drawn shapes respect and
    the record keeps): e.g. ``"declared domain: M a multiple of BM (=64); D a power of two"``; empty without rules."""
    rules = kf.shape_rules or {}
    if not rules:
        return []
    config = dict(config if config is not None else kf.default_config or {})
    parts = []
    for name, rule in rules.items():
        if rule == POWER_OF_TWO:
            parts.append(f"{name} a power of two")
        elif isinstance(rule, str) and rule.startswith(POWER_OF_TWO):
            parts.append(f"{name} a power of two {rule[len(POWER_OF_TWO):].strip()}")
        elif isinstance(rule, str) and rule.startswith("<="):
            parts.append(f"{name} at most {rule[2:].strip()}")
        elif isinstance(rule, str) and rule.startswith(">="):
            parts.append(f"{name} at least {rule[2:].strip()}")
        elif rule == FIXED:
            parts.append(f"{name} as declared")
        elif isinstance(rule, int):
            parts.append(f"{name} a multiple of {rule}")
        else:
            try:
                parts.append(f"{name} a multiple of {rule} (={_multiple(rule, config, name, kf.path)})")
            except ContractError:
                parts.append(f"{name} a multiple of {rule}")
    return ["declared domain (SHAPE_RULES; correct only there): " + "; ".join(parts)]
