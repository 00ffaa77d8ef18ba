"""Count the house's loose ends in src/kernelpilot (issue 28): ``Any``-typed parameters, ``getattr`` capability
probes, the device's loose strings (``device == "cuda"`` tests, lines naming ``interpreted``), and the
package-level import graph against the target layer order.

No GPU, no import of kernelpilot: the source is read with :mod:`ast` only, so the numbers are the same on every
machine and at every commit the script is run on.

Usage::

    python3 scripts/house_counts.py            # text report
    python3 scripts/house_counts.py --json     # the same numbers as one JSON object
    python3 scripts/house_counts.py --root path/to/src/kernelpilot

What is counted (each rule is the issue's own wording, made exact here):

- **Any parameters**: every annotated parameter of a ``def`` / ``async def`` (positional, keyword-only, ``*args``,
  ``**kwargs``). ``bare``: the annotation is ``Any`` (or ``typing.Any``, or the string ``"Any"``). ``optional``:
  ``Optional[Any]``, ``Any | None``, ``Union[Any, None]``. ``container``: any other annotation with ``Any`` inside
  (``dict[str, Any]``, ``Callable[..., Any]``).
- **Capability probes**: ``getattr(x, "literal", default)`` and ``hasattr(x, "literal")`` where ``literal`` is a
  name some kernelpilot class defines (method, property, class attribute; not a dunder, not an UPPER contract name)
  and ``x`` is neither a module (bound by ``import m``, ``from kernelpilot.p import m`` of a module, or named
  ``module``/``mod``/``*_module``: a kernel file is a module) nor a caught exception (``exc``, ``e``, ``err``).
  Every other literal ``getattr``/``hasattr`` on a non-module is listed apart (duck typing on tensors, Triton
  internals, ``getattr`` without a default).
- **Device string tests**: a comparison ``==`` / ``!=`` with the string literal ``"cuda"`` or ``"cpu"`` on one side
  and, on the other, an expression whose source text names the device as it travels as a string (``dev``,
  ``device``, ``here``, ``mode`` in it: ``ctx.device == "cuda"``, ``device_kind(d) != "cuda"``,
  ``detect_device() == "cpu"``, ``info.mode == "cuda"``); a torch ``device.type`` is a torch object, not counted.
  ``src/kernelpilot/target.py``, where the strings are turned into a :class:`~kernelpilot.target.Target`, is
  counted apart (``in_target_module``).
- **Interpreted lines**: lines of ``.py`` files that contain the word ``interpreted`` (``\binterpreted\b``);
  those of ``src/kernelpilot/target.py``, where the flag now lives, are counted apart.
- **Import graph**: nodes are the top-level packages and top-level modules of kernelpilot (``kernelpilot`` itself is
  the node ``__init__``). Each edge has kinds: ``module`` (runs at import, class bodies included), ``function``
  (inside a function body), ``type_checking`` (under ``if TYPE_CHECKING:``), ``importlib``
  (``importlib.import_module("kernelpilot....")`` with a string literal or f-string prefix, and
  ``"kernelpilot.x.y:function"`` strings that workers and the back-end registry import by name). The knot is the
  strongly connected components over all kinds; module pairs against :data:`TARGET_ORDER` are listed module by module.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "kernelpilot"

#: The target layer order, bottom first; a node may import nodes of its own layer or of lower layers only.
#: Derived from docs/DESIGN.md "Layers, bottom up" and issue 28, which names these directions as wrong:
#: options → profile, hardware; kernels → backends, measure; profile → search; report → app, versions;
#: app → versions. So options sits with the words, kernels below backends and measure, report below app, app
#: below versions (as in DESIGN.md); measure below hardware (DESIGN.md; hardware/ceilings.py measures).
#: Packages DESIGN.md does not place (inductor, workload, store, dispatch, experience, agents, skill,
#: examples) go where their own imports put them with the fewest pairs against the order.
TARGET_ORDER: tuple[tuple[str, ...], ...] = (
    ("errors", "facts", "fmt", "procguard", "childproc", "sqlitefile", "target", "__init__"),  # words
    ("options", "progress"),                                                  # words
    ("records",),                                                             # run folders, evaluation records
    ("kernels",),                                                             # the language-neutral contract
    ("backends",),                                                            # Triton, CUDA C++, KernelBench
    ("measure",),                                                             # correctness, timing, screen
    ("hardware",),                                                            # spec sheets, ceilings, roofline
    ("profile", "workload"),                                                  # static, ncu; shapes
    ("bundle", "store", "dispatch"),                                          # shipped configs, lookup
    ("search", "experience", "inductor"),                                     # space, strategies, runners
    ("engine",),                                                              # the one evaluation pipeline
    ("report",),                                                              # markdown, html
    ("app",),                                                                 # the campaigns
    ("versions",),                                                            # session
    ("api", "loop"),
    ("cli", "agents", "examples", "skill"),                                   # front ends
)

#: Names of a caught exception: ``getattr(exc, "failure", ...)`` reads an error's fields, not a protocol's.
EXCEPTION_NAMES = frozenset({"exc", "e", "err", "error"})

#: A ``"package.module:function"`` string: a worker or registry imports the module by this name.
WORKER_TARGET = re.compile(r"^[A-Za-z_]\w*(\.\w+)+:\w+$")

KINDS = ("module", "function", "type_checking", "importlib")


# ----------------------------------------------------------------------------------------------- Any parameters

def _is_any(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any")


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _unstring(node: ast.expr) -> ast.expr:
    """A string annotation (``"Any"``, ``"dict[str, Any]"``) parsed to its expression; others as they are."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return node
    return node


def classify_annotation(node: ast.expr | None) -> str | None:
    """``"bare"``, ``"optional"``, ``"container"`` or None (no ``Any`` in the annotation, or no annotation)."""
    if node is None:
        return None
    node = _unstring(node)
    if _is_any(node):
        return "bare"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [_unstring(node.left), _unstring(node.right)]
        if any(_is_any(s) for s in sides) and any(_is_none(s) for s in sides):
            return "optional"
    if isinstance(node, ast.Subscript):
        head = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", "")
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        inner = [_unstring(e) for e in inner]
        if head == "Optional" and len(inner) == 1 and _is_any(inner[0]):
            return "optional"
        if head == "Union" and len(inner) == 2 and any(map(_is_any, inner)) and any(map(_is_none, inner)):
            return "optional"
    for sub in ast.walk(node):
        sub = _unstring(sub) if isinstance(sub, ast.Constant) else sub
        if any(_is_any(s) for s in ast.walk(sub)):
            return "container"
    return None


def any_parameters(tree: ast.AST) -> list[tuple[int, str, str, str]]:
    """``(line, function, parameter, kind)`` for each parameter annotated with ``Any`` somewhere."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                  *([a.kwarg] if a.kwarg else [])]
        for p in params:
            kind = classify_annotation(p.annotation)
            if kind:
                found.append((p.lineno, node.name, p.arg, kind))
    return found


# ---------------------------------------------------------------------------------------------- getattr probes

def _module_names(tree: ast.AST, modules: set[str], package: str) -> set[str]:
    """Names in a file bound to modules: ``import m`` (as ``m``'s first part), ``import m as n``, and
    ``from kernelpilot.p import m`` / ``from . import m`` where the target is a kernelpilot module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, package)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    names.add(alias.asname or alias.name)
    return names


def _looks_like_module(target: ast.expr, module_names: set[str]) -> bool:
    """A name bound by an import, or an expression named like a loaded module (``module``, ``mod``,
    ``x.module``, ``kernel_module``): a kernel file is a module, and reading its contract names is not a probe."""
    if isinstance(target, ast.Name):
        return target.id in module_names or target.id in ("module", "mod") or target.id.endswith("_module")
    return isinstance(target, ast.Attribute) and (target.attr == "module" or target.attr.endswith("_module"))


def class_attributes(tree: ast.AST) -> set[str]:
    """Names a kernelpilot class defines: methods, properties, and class-level (annotated) assignments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
            elif isinstance(item, ast.Assign):
                names.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return names


def capability_probes(tree: ast.AST, module_names: set[str]) -> list[tuple[int, str, str, bool, str]]:
    """``(line, call, attribute, has_default, target)`` for ``getattr``/``hasattr`` with a literal attribute name
    on a non-module; ``has_default`` is True for ``getattr`` with three arguments and for ``hasattr``;
    ``target`` is the first argument's source text."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2):
            continue
        target, attr = node.args[0], node.args[1]
        if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
            continue
        if _looks_like_module(target, module_names):
            continue
        has_default = node.func.id == "hasattr" or len(node.args) == 3
        found.append((node.lineno, node.func.id, attr.value, has_default, ast.unparse(target)))
    return found


# ------------------------------------------------------------------------------------------------ device strings

#: The module where device strings become a Target: its own comparisons are the conversion, counted apart.
TARGET_MODULE = "kernelpilot.target"

#: Source text naming the device as a string (see the module docstring, "Device string tests").
DEVICE_WORDS = re.compile(r"dev|here|mode")

INTERPRETED_WORD = re.compile(r"\binterpreted\b")


def device_string_tests(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, source)`` of each ``==`` / ``!=`` of a device-naming expression with ``"cuda"`` or ``"cpu"``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            if not isinstance(op, (ast.Eq, ast.NotEq)):
                continue
            pair = operands[i], operands[i + 1]
            literal = [x for x in pair if isinstance(x, ast.Constant) and x.value in ("cuda", "cpu")]
            other = [x for x in pair if not (isinstance(x, ast.Constant) and x.value in ("cuda", "cpu"))]
            if len(literal) != 1 or len(other) != 1:
                continue
            if isinstance(other[0], ast.Attribute) and other[0].attr == "type":
                continue  # a torch.device's type
            if DEVICE_WORDS.search(ast.unparse(other[0])):
                found.append((node.lineno, ast.unparse(node)))
    return found


# ------------------------------------------------------------------------------------------------ import graph

def _from_base(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    anchor = package.split(".")
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_statements(tree: ast.AST) -> list[tuple[ast.AST | str, str]]:
    """Each import statement with its kind (see :data:`KINDS`), and for kind ``importlib`` the dotted name a string
    names: ``importlib.import_module("kernelpilot.x")`` (an f-string counts up to its first placeholder) and a
    ``"kernelpilot.x.y:function"`` worker target, which a worker imports by name."""
    found: list[tuple[ast.AST | str, str]] = []

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "type_checking")
            for child in node.orelse:
                visit(child, kind)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "module":
            kind = "function"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, kind))
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value, "importlib"))
            elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                found.append((str(arg.values[0].value).rstrip("."), "importlib"))
            return
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and WORKER_TARGET.match(node.value):
            found.append((node.value.partition(":")[0], "importlib"))
        for child in ast.iter_child_nodes(node):
            visit(child, kind)

    visit(tree, "module")
    return found


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id in ("import_module", "__import__")) or (
        isinstance(func, ast.Attribute) and func.attr == "import_module")


def module_map(root: Path) -> dict[str, Path]:
    """Dotted module name -> file for every ``.py`` under ``root`` (a package is its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _deepest(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(name: str, path: Path, tree: ast.AST, modules: dict[str, Path]) -> list[tuple[str, str]]:
    """``(target module, kind)`` for each kernelpilot module ``name`` imports (not itself)."""
    top = name.split(".")[0]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, str]] = []
    for node, kind in _import_statements(tree):
        targets: list[str] = []
        if isinstance(node, str):
            targets = [_deepest(node, modules) or ""] if node.split(".")[0] == top else []
        elif isinstance(node, ast.Import):
            targets = [_deepest(a.name, modules) or "" for a in node.names if a.name.split(".")[0] == top]
        else:
            base = _from_base(node, package)
            if base.split(".")[0] != top:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else (_deepest(base, modules) or ""))
        out.extend((t, kind) for t in targets if t and t != name)
    return out


def node_of(module: str) -> str:
    """The graph node of a dotted module: its top-level package or module under kernelpilot."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one node, in discovery order (Tarjan's algorithm, iterative:
    the module-level graph of tests/test_layout.py has hundreds of nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    members.add(top)
                    if top == node:
                        break
                if len(members) > 1:
                    out.append(frozenset(members))
    return out


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """:func:`strongly_connected` as sorted lists, largest first."""
    return sorted((sorted(c) for c in strongly_connected(graph)), key=lambda c: (-len(c), c))


def layer_of(node: str, order: tuple[tuple[str, ...], ...] = TARGET_ORDER) -> int | None:
    for rank, layer in enumerate(order):
        if node in layer:
            return rank
    return None


# ---------------------------------------------------------------------------------------------------- report

def count(root: Path = ROOT) -> dict:
    """Every number the script prints, as one JSON-ready dict (see the module docstring for the rules)."""
    modules = module_map(root)
    names = set(modules)
    any_params: list[dict] = []
    probes: list[dict] = []
    pairs: dict[tuple[str, str], set[str]] = defaultdict(set)
    device_tests: list[dict] = []
    interpreted_lines = [0, 0]  # outside, inside the target module
    rel = root.parent
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for name, path in modules.items()}
    own_attributes: set[str] = set().union(*(class_attributes(t) for t in trees.values()))
    for name, path in modules.items():
        tree = trees[name]
        where = str(path.relative_to(rel))
        for line, text in sorted(device_string_tests(tree)):
            device_tests.append({"where": f"{where}:{line}", "test": text, "in_target_module": name == TARGET_MODULE})
        named = sum(bool(INTERPRETED_WORD.search(t)) for t in path.read_text(encoding="utf-8").splitlines())
        interpreted_lines[name == TARGET_MODULE] += named
        for line, func, param, kind in any_parameters(tree):
            any_params.append({"where": f"{where}:{line}", "function": func, "parameter": param, "kind": kind})
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = capability_probes(tree, _module_names(tree, names, package))
        for line, call, attr, has_default, target in sorted(found):
            capability = (has_default and not attr.startswith("__") and not attr.isupper() and attr in own_attributes
                          and target not in EXCEPTION_NAMES)
            probes.append({"where": f"{where}:{line}", "call": call, "target": target, "attribute": attr,
                           "has_default": has_default, "kernelpilot_attribute": capability})
        for target, kind in imported_modules(name, path, tree, modules):
            pairs[(name, target)].add(kind)
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (src, dst), kinds in pairs.items():
        if node_of(src) != node_of(dst):
            edges[(node_of(src), node_of(dst))] |= kinds
    nodes = sorted({node_of(m) for m in modules})
    graph_all = {n: set() for n in nodes}
    graph_run = {n: set() for n in nodes}
    for (a, b), kinds in edges.items():
        graph_all[a].add(b)
        if kinds - {"type_checking"}:
            graph_run[a].add(b)
    against = []
    for (src, dst), kinds in sorted(pairs.items()):
        la, lb = layer_of(node_of(src)), layer_of(node_of(dst))
        if la is not None and lb is not None and lb > la:
            against.append({"importer": src, "imported": dst, "kinds": sorted(kinds)})
    packages = sorted(n for n in nodes if (root / n).is_dir())
    knot = components(graph_all)
    by_kind = {k: sum(1 for ks in pairs.values() if k in ks) for k in KINDS}
    return {
        "root": str(root),
        "any_parameters": {
            "bare": sum(p["kind"] == "bare" for p in any_params),
            "optional": sum(p["kind"] == "optional" for p in any_params),
            "container": sum(p["kind"] == "container" for p in any_params),
            "list": any_params,
        },
        "capability_probes": {
            "count": sum(p["kernelpilot_attribute"] for p in probes),
            "list": [p for p in probes if p["kernelpilot_attribute"]],
            "other_getattr_hasattr": sum(not p["kernelpilot_attribute"] for p in probes),
            "other_list": [p for p in probes if not p["kernelpilot_attribute"]],
        },
        "device_string_tests": {
            "count": sum(not d["in_target_module"] for d in device_tests),
            "in_target_module": sum(d["in_target_module"] for d in device_tests),
            "list": device_tests,
        },
        "interpreted_lines": interpreted_lines[0],
        "interpreted_lines_in_target_module": interpreted_lines[1],
        "imports": {
            "module_pairs_by_kind": by_kind,
            "node_edges": {f"{a} -> {b}": sorted(k) for (a, b), k in sorted(edges.items())},
            "packages": packages,
            "nodes": nodes,
            "unplaced_nodes": [n for n in nodes if layer_of(n) is None],
            "knot": knot,
            "knot_runtime_only": components(graph_run),
            "packages_in_largest_knot": sum(n in packages for n in (knot[0] if knot else [])),
            "target_order": [list(layer) for layer in TARGET_ORDER],
            "module_pairs_against_order": against,
            "node_pairs_against_order": sorted({f"{node_of(p['importer'])} -> {node_of(p['imported'])}"
                                                for p in against}),
        },
    }


def render(result: dict) -> str:
    """The text report of :func:`count`'s result."""
    a, p, g = result["any_parameters"], result["capability_probes"], result["imports"]
    lines = [f"root: {result['root']}",
             f"Any parameters: bare {a['bare']}, optional {a['optional']}, container {a['container']} "
             f"(all {a['bare'] + a['optional'] + a['container']})",
             f"capability probes (getattr with default / hasattr of a name a kernelpilot class defines, "
             f"on a non-module): {p['count']} (other literal getattr/hasattr: {p['other_getattr_hasattr']})"]
    lines += [f"  {x['where']}: {x['call']}({x['target']}, {x['attribute']!r}"
              f"{', …' if x['call'] == 'getattr' else ''})"
              for x in p["list"]]
    d = result["device_string_tests"]
    lines.append(f"device string tests (== / != \"cuda\" or \"cpu\" on a device-naming expression), outside "
                 f"kernelpilot/target.py: {d['count']} (in it: {d['in_target_module']})")
    lines += [f"  {x['where']}: {x['test']}" for x in d["list"] if not x["in_target_module"]]
    lines.append(f"lines naming `interpreted` in .py files, outside kernelpilot/target.py: "
                 f"{result['interpreted_lines']} (in it: {result['interpreted_lines_in_target_module']})")
    lines.append("import module pairs by kind: " + ", ".join(f"{k} {v}" for k, v in g["module_pairs_by_kind"].items()))
    lines.append(f"nodes: {len(g['nodes'])} ({len(g['packages'])} packages); unplaced: {g['unplaced_nodes']}")
    lines.append("target order, bottom first:")
    lines += [f"  {i:2d}  {', '.join(layer)}" for i, layer in enumerate(g["target_order"])]
    lines.append(f"knot (all kinds): {len(g['knot'])} component(s); largest holds "
                 f"{g['packages_in_largest_knot']} of {len(g['packages'])} packages")
    lines += [f"  [{len(c)}] {', '.join(c)}" for c in g["knot"]]
    lines.append(f"knot without TYPE_CHECKING edges: {len(g['knot_runtime_only'])} component(s)")
    lines += [f"  [{len(c)}] {', '.join(c)}" for c in g["knot_runtime_only"]]
    lines.append(f"module pairs against the order: {len(g['module_pairs_against_order'])} "
                 f"({len(g['node_pairs_against_order'])} node pairs)")
    lines += [f"  {x['importer']} -> {x['imported']}  [{', '.join(x['kinds'])}]"
              for x in g["module_pairs_against_order"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the counts for ``--root`` (default: this checkout's src/kernelpilot); ``--json`` for JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the kernelpilot package folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = count(args.root.resolve())
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
