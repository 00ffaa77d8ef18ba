"""Read a CUDA C++ kernel file's source: the ``extern "C" void solve(...)`` signature, the ``__global__`` kernels,
local ``#include "..."`` files and ``// kernelpilot: NAME = value`` directives (pure text; no compiler runs).

The contract (docs/cuda.md, compatible with the seed workflows' ``solve`` ABI): pointer parameters of a supported
element type are buffers (``const`` pointee: an input; otherwise an output), integer scalars are problem dimensions
(``--shape N=...``), floating scalars are values a sidecar ``setup()`` must supply. Comments are stripped before
parsing (string and character literals are kept intact); a default argument, an unsupported type, a missing or
duplicated ``solve``, or a ``solve`` not declared ``extern "C"`` is a :class:`~kernelpilot.errors.ContractError`
naming the parameter and saying what to write.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kernelpilot.errors import ContractError

__all__ = ["eval_expr", "BUFFER_TYPES", "INT_TYPES", "FLOAT_TYPES", "Param", "Signature", "directives", "global_kernels",
           "local_includes", "parse_solve", "strip_comments"]

#: Pointee type (whitespace-normalized, no ``const``) -> torch dtype name of the buffer.
BUFFER_TYPES: dict[str, str] = {
    "float": "float32", "double": "float64", "half": "float16", "__half": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16",
    "int": "int32", "signed int": "int32", "unsigned": "int32", "unsigned int": "int32", "int32_t": "int32",
    "uint32_t": "int32", "long": "int64", "long int": "int64", "long long": "int64", "long long int": "int64",
    "unsigned long": "int64", "unsigned long long": "int64", "int64_t": "int64", "uint64_t": "int64",
    "size_t": "int64", "short": "int16", "short int": "int16", "unsigned short": "int16", "int16_t": "int16",
    "uint16_t": "int16", "char": "int8", "signed char": "int8", "int8_t": "int8", "unsigned char": "uint8",
    "uint8_t": "uint8", "bool": "bool",
}
#: Integer scalar type -> ctypes type name (``ctypes.<name>``).
INT_TYPES: dict[str, str] = {
    "int": "c_int", "signed int": "c_int", "int32_t": "c_int32", "unsigned": "c_uint", "unsigned int": "c_uint",
    "uint32_t": "c_uint32", "long": "c_long", "long int": "c_long", "unsigned long": "c_ulong",
    "long long": "c_longlong", "long long int": "c_longlong", "unsigned long long": "c_ulonglong",
    "int64_t": "c_int64", "uint64_t": "c_uint64", "size_t": "c_size_t", "short": "c_short",
    "unsigned short": "c_ushort", "int16_t": "c_int16", "uint16_t": "c_uint16", "char": "c_byte",
    "signed char": "c_byte", "unsigned char": "c_ubyte", "int8_t": "c_int8", "uint8_t": "c_uint8",
}
#: Floating scalar type -> ctypes type name.
FLOAT_TYPES: dict[str, str] = {"float": "c_float", "double": "c_double"}

_QUALIFIERS = {"__restrict__", "__restrict", "restrict", "volatile", "struct", "register"}


@dataclass(frozen=True)
class Param:
    """One parameter of ``solve``.

    Attributes:
        name: the parameter's name (the key of the input in ``setup()`` and ``reference(**kwargs)``).
        kind: ``"buffer"`` (a pointer: a device tensor), ``"int"`` (a dimension) or ``"float"`` (a scalar value).
        ctype: the element type as written, normalized (``"float"``, ``"unsigned int"``, ``"__nv_bfloat16"``).
        dtype: torch dtype name of a buffer (``"float32"``), else "".
        const: a buffer whose pointee is ``const`` (an input); False for outputs and scalars.
        ctypes_name: the ctypes type the value is passed as (``"c_void_p"`` for buffers, ``"c_int"``, ...).
    """

    name: str
    kind: Literal["buffer", "int", "float"]
    ctype: str
    dtype: str = ""
    const: bool = False
    ctypes_name: str = "c_void_p"

    @property
    def is_output(self) -> bool:
        """A buffer ``solve`` may write (non-``const`` pointee)."""
        return self.kind == "buffer" and not self.const


@dataclass(frozen=True)
class Signature:
    """The parsed ``solve``: its parameters in order, and the line it starts on (1-based)."""

    params: tuple[Param, ...]
    line: int

    @property
    def buffers(self) -> list[Param]:
        """Pointer parameters, in order."""
        return [p for p in self.params if p.kind == "buffer"]

    @property
    def outputs(self) -> list[str]:
        """Names of the non-``const`` buffers."""
        return [p.name for p in self.params if p.is_output]

    @property
    def dims(self) -> list[str]:
        """Names of the integer scalars (the problem's dimensions)."""
        return [p.name for p in self.params if p.kind == "int"]


def strip_comments(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments replaced by spaces (newlines kept, so line numbers stay), string and
    character literals left intact."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _split_params(text: str) -> list[str]:
    """Top-level comma-separated pieces of a parameter list (commas inside <> () [] kept)."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _param(raw: str, path: Path, index: int) -> Param:
    """One parameter declaration -> :class:`Param` (raises ContractError with what to write)."""
    text = " ".join(raw.split())
    where = f"{path}: solve parameter {index + 1} `{text}`"
    if "=" in text:
        raise ContractError(f"{where} has a default argument: kernelpilot calls solve with every argument",
                            "remove the default value (`int N = 1024` -> `int N`); give the value with --shape N=1024")
    if "[" in text or "&" in text or "(" in text:
        raise ContractError(f"{where}: arrays, references and function pointers are not supported",
                            "pass buffers as pointers (`const float* x`) and dimensions as integers (`int N`)")
    m = re.fullmatch(r"(.*?)([A-Za-z_]\w*)", text)
    if not m or not m.group(1).strip():
        raise ContractError(f"{where}: cannot read a type and a name", "write `const float* x`, `float* y`, `int N`")
    name, decl = m.group(2), m.group(1)
    stars = decl.count("*")
    head = decl.split("*", 1)[0]  # the pointee's words: `const float`, `float const`
    words = [w for w in head.replace("const", " const ").split() if w not in _QUALIFIERS]
    const = "const" in words
    base = " ".join(w for w in words if w != "const")
    if stars > 1:
        raise ContractError(f"{where}: pointers to pointers are not supported", "pass one flat buffer per array")
    if stars == 1:
        if base not in BUFFER_TYPES:
            raise ContractError(f"{where}: buffers of `{base}` are not supported",
                                f"use one of: {', '.join(sorted(set(BUFFER_TYPES)))}")
        return Param(name, "buffer", base, BUFFER_TYPES[base], const, "c_void_p")
    if base in INT_TYPES:
        return Param(name, "int", base, "", False, INT_TYPES[base])
    if base in FLOAT_TYPES:
        return Param(name, "float", base, "", False, FLOAT_TYPES[base])
    raise ContractError(f"{where}: scalar type `{base}` is not supported",
                        "use integer dimensions (int, long, size_t, unsigned ...) or float/double scalars")


_SOLVE = re.compile(r"\bsolve\s*\(")


def parse_solve(source: str, path: str | Path = "kernel.cu") -> Signature:
    """Parse the ``extern "C" void solve(...)`` of a CUDA source (see the module docstring).

    Args:
        source: the ``.cu`` text. path: the file, for messages.

    Returns:
        The :class:`Signature` (parameters in order; zero parameters is refused).

    Raises:
        ContractError: no ``solve``, several definitions, not ``void``, not ``extern "C"``, no parameters or no
            output buffer, a default argument, or an unsupported parameter type (each message names the piece).
    """
    path = Path(path)
    text = strip_comments(source)
    found = []
    for m in _SOLVE.finditer(text):
        before = text[max(0, m.start() - 200):m.start()]
        if not re.search(r"\bvoid\s+(?:__host__\s+)?$", before):
            if re.search(r"[A-Za-z_]\w*\s+$", before) and not re.search(r"(?:return|=|\.|->)\s*$", before):
                raise ContractError(f"{path}: `solve` must return void", 'declare extern "C" void solve(...)')
            continue  # a call of solve, not a declaration
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        tail = text[j:j + 200].lstrip()
        found.append((m, text[m.end():j - 1], tail.startswith("{")))
    if not found:
        raise ContractError(f"{path}: no `solve` function found",
                            'define extern "C" void solve(const float* x, float* y, int N) that launches the kernels')
    defs = [f for f in found if f[2]] or found
    if len(defs) > 1:
        raise ContractError(f"{path}: `solve` is defined {len(defs)} times", "keep one definition of solve")
    m, params_text, _ = defs[0]
    line = text.count("\n", 0, m.start()) + 1
    prefix = text[:m.start()]
    if not re.search(r'extern\s+"C"', prefix):
        raise ContractError(f'{path}:{line}: `solve` is not declared extern "C" (its symbol would be C++-mangled)',
                            'write extern "C" void solve(...)')
    raw = [p for p in _split_params(params_text) if p.strip() and p.strip() != "void"]
    if not raw:
        raise ContractError(f"{path}:{line}: `solve` takes no parameters: nothing to check",
                            "pass the input and output buffers: solve(const float* x, float* y, int N)")
    params = tuple(_param(p, path, i) for i, p in enumerate(raw))
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ContractError(f"{path}:{line}: `solve` repeats a parameter name", "give every parameter its own name")
    sig = Signature(params, line)
    if not sig.outputs:
        raise ContractError(f"{path}:{line}: `solve` has no output buffer (every pointer is const)",
                            "the buffers solve writes must be non-const pointers (`float* y`)")
    return sig


_GLOBAL = re.compile(r"__global__\b(?P<head>[^;{(]*?)\b(?P<name>[A-Za-z_]\w*)\s*\(")


def global_kernels(source: str) -> list[str]:
    """Names of the ``__global__`` functions defined in ``source`` (templates included, in order, each once):
    CUPTI's activity records name a kernel by its demangled name (``add(float const*, float*, int)``, or
    ``sgemm<128, 8>(...)`` for a template), which starts with this name."""
    text = strip_comments(source)
    while (m := re.search(r"__launch_bounds__\s*\(|__cluster_dims__\s*\(", text)) is not None:
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        text = text[:m.start()] + " " + text[j:]
    names: list[str] = []
    for m in _GLOBAL.finditer(text):
        name = m.group("name")
        if name not in ("__launch_bounds__", "void") and name not in names:
            names.append(name)
    return names


def local_includes(path: Path, include_dirs: list[Path] | None = None, _seen: set[Path] | None = None) -> list[Path]:
    """Every file ``path`` includes with ``#include "..."`` that exists beside it (or in ``include_dirs``), and every
    ``#include <...>`` found in ``include_dirs`` (the kernel's own ``-I`` folders; the compiler's system folders are
    not searched), recursively, each once: their contents go into the build key and the source hash. (The build
    cache does not rely on this reading: it re-hashes nvcc's own dependency list, docs/cuda.md.)"""
    seen = _seen if _seen is not None else set()
    out: list[Path] = []
    try:
        text = strip_comments(path.read_text(errors="replace"))
    except OSError:
        return out
    for quote, inc in re.findall(r'^\s*#\s*include\s*(["<])([^">]+)[">]', text, flags=re.M):
        for folder in [path.parent, *(include_dirs or [])] if quote == '"' else list(include_dirs or []):
            cand = (folder / inc).resolve()
            if cand.is_file():
                if cand not in seen:
                    seen.add(cand)
                    out.append(cand)
                    out += local_includes(cand, include_dirs, seen)
                break
    return out


def directives(source: str) -> dict[str, Any]:
    """``// kernelpilot: NAME = <Python literal>`` lines of ``source`` (``TUNABLES``, ``SHAPE``, ``CONSTRAINTS``,
    ``DEFAULT_CONFIG``, ``COMPUTE_UNIT``, ``atol``...) as a dict.

    Raises:
        ContractError: a value that is not a Python literal (the message names the line).
    """
    out: dict[str, Any] = {}
    for lineno, line in enumerate(source.splitlines(), 1):
        m = re.match(r"\s*//\s*kernelpilot\s*:\s*([A-Za-z_]\w*)\s*=\s*(.+?)\s*$", line)
        if not m:
            continue
        try:
            out[m.group(1)] = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError) as exc:
            raise ContractError(f"line {lineno}: `// kernelpilot: {m.group(1)} = ...` is not a Python literal ({exc})",
                                '// kernelpilot: TUNABLES = {"BLOCK_SIZE": [128, 256]}') from None
    return out


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.IfExp, ast.Compare,
            ast.BoolOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div, ast.Mod, ast.Pow, ast.USub, ast.UAdd,
            ast.And, ast.Or, ast.Not, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq, ast.Call)


def eval_expr(value: Any, config: dict[str, Any]) -> int | None:
    """An integer given as a number, a callable of the config (``fn(**config)``) or an arithmetic expression over
    tunable names (``"(BM // TM) * (BN // TN)"``; ``min``/``max`` allowed); None for None.

    Raises:
        ValueError: an expression with anything else (attributes, other calls), or an unknown name.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value)
    if callable(value):
        return int(value(**config))
    tree = ast.parse(str(value), mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Name) and node.func.id in ("min", "max"))):
            raise ValueError(f"{value!r}: only arithmetic over tunable names is allowed")
    return int(eval(compile(tree, "<expr>", "eval"), {"__builtins__": {}, "min": min, "max": max}, dict(config)))
