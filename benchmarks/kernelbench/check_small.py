"""Check every KernelBench solution in benchmarks/kernelbench/solutions on the CPU, under the Triton interpreter, on
its problem scaled down.

KernelBench's level 1 and 2 problems have sizes (up to 1.9e9 elements) far beyond what the interpreter can run, so
each solution is checked against a temporary copy of its problem whose module-level integer size constants are
scaled down (:func:`scale_source`), then ``kernelpilot check SOLUTION --ref SMALL_PROBLEM --json`` runs in a fresh
process with ``TRITON_INTERPRET=1``. The problem files are read from the KernelBench checkout (never copied into the
repository); a solution is paired with its problem by KernelBench's naming,
``level_{L}_problem_{ID}_sample_{S}_kernel.py`` (``scripts/eval_from_generations.py``).

Usage (from the repository root)::

    PYTHONPATH=$PWD/src python3 benchmarks/kernelbench/check_small.py [--problems DIR] [--solutions DIR]
        [--budget ELEMENTS] [--only SUBSTRING] [--json OUT.json]

Prints one row per solution: the solution, its problem, the scaled sizes, the status (``passed``, or the failure
status kernelpilot gave: ``incorrect``, ``kernel_not_launched``, ``error (...)``) and whether the status is the
expected one (``EXPECTED`` below: the wrong and the library-calling solutions must be refused by name).
Exit status 1 when a status differs from the expected one.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PROBLEMS = ROOT / "third_party" / "KernelBench" / "KernelBench"
DEFAULT_SOLUTIONS = Path(__file__).resolve().parent / "solutions"
#: KernelBench's name of a generated solution (scripts/eval_from_generations.py: fetch_kernel_from_disk).
SOLUTION_NAME = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
#: The status each negative example must get; every other solution must pass.
EXPECTED = {"level_1_problem_21_sample_1_kernel.py": "incorrect",
            "level_1_problem_19_sample_2_kernel.py": "kernel_not_launched"}
#: Sizes set by hand where the scaled-down ones would hide a path of the solution: a row longer than the kernel's
#: block, so that the loop over a row's blocks runs more than once and ends on a partial block.
OVERRIDES = {
    "level1/23_Softmax.py": {"batch_size": 3, "dim": 9001},  # block 4096: 3 blocks, the last partial
    "level1/24_LogSoftmax.py": {"batch_size": 3, "dim": 9001},
    "level1/47_Sum_reduction_over_a_dimension.py": {"batch_size": 3, "dim1": 70, "dim2": 131},  # 32 x 128 tiles
    "level1/48_Mean_reduction_over_a_dimension.py": {"batch_size": 3, "dim1": 70, "dim2": 131},
    "level2/14_Gemm_Divide_Sum_Scaling.py": {"batch_size": 5, "input_size": 2100, "hidden_size": 300},
    "level2/45_Gemm_Sigmoid_LogSumExp.py": {"batch_size": 5, "input_size": 9, "hidden_size": 11,
                                           "output_size": 2051},
}
#: Integer constants at or below this are kept as they are (a dimension index, a kernel size, a group count).
KEEP_AT_MOST = 8


def find_problem(problems: Path, level: int, problem_id: int) -> Path:
    """The problem file ``level{level}/{problem_id}_*.py`` under ``problems``. Raises FileNotFoundError."""
    matches = sorted((problems / f"level{level}").glob(f"{problem_id}_*.py"))
    if not matches:
        raise FileNotFoundError(f"no problem {problem_id} in {problems / f'level{level}'}")
    return matches[0]


def _int_constants(tree: ast.Module) -> list[tuple[ast.Assign, str, int | tuple]]:
    """Module-level ``NAME = <expression>`` assignments whose value is an int or a tuple of ints, with that value,
    evaluated in order (an expression may use earlier constants, e.g. ``M = 16384 * 4``, ``shape = (dim, dim)``)."""
    env: dict[str, object] = {}
    found = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        try:
            value = eval(compile(ast.Expression(node.value), "<const>", "eval"), {"__builtins__": {}}, dict(env))
        except Exception:  # noqa: BLE001 - not a constant expression (a call, a name not defined yet)
            continue
        env[node.targets[0].id] = value
        if _is_int(value) or (isinstance(value, tuple) and value and all(_is_int(v) for v in value)):
            found.append((node, node.targets[0].id, value))
    return found


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def split_unpacking(source: str) -> str:
    """``a, b, c = 16, 32, 32`` at module level rewritten as three assignments (one a line), so that each size can
    be scaled on its own; other lines unchanged."""
    lines = source.splitlines(keepends=True)
    for node in sorted(ast.parse(source).body, key=lambda n: -n.lineno):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
                and isinstance(node.value, ast.Tuple) and len(node.targets[0].elts) == len(node.value.elts)
                and all(isinstance(t, ast.Name) for t in node.targets[0].elts)):
            new = [f"{t.id} = {ast.unparse(v)}\n" for t, v in zip(node.targets[0].elts, node.value.elts)]
            lines[node.lineno - 1:node.end_lineno] = new
    return "".join(lines)


def scale_source(source: str, budget: int, overrides: dict[str, int] | None = None
                 ) -> tuple[str, dict[str, tuple]]:
    """The problem's source with its large module-level integer constants scaled down.

    Every integer constant above ``KEEP_AT_MOST`` (also one inside a tuple constant such as ``input_shape =
    (32768,)``) is capped at ``cap = max(KEEP_AT_MOST + 1, budget ** (1 / k))`` (``k`` = the number of such
    integers, so that their product stays near ``budget`` elements); an odd integer stays odd (e.g. 4095), so that
    masks of non-power-of-two sizes are still exercised. ``a, b = 16, 32`` is split first
    (:func:`split_unpacking`). The assignment is replaced by ``NAME = NEW`` on one line;
    other lines are unchanged. ``overrides`` (name -> value) wins over the rule. A tuple that is written from
    other names (``bias_shape = (out_features,)``) is rewritten with the scaled values, which are the same.

    Returns (the new source, {name: (old, new)}).
    """
    overrides = overrides or {}
    source = split_unpacking(source)
    tree = ast.parse(source)
    consts = _int_constants(tree)
    n_large = sum(1 for node, name, v in consts
                  if not any(isinstance(e, ast.Name) for e in ast.walk(node.value))  # counted where written
                  and (name in overrides or any(x > KEEP_AT_MOST for x in (v if isinstance(v, tuple) else (v,)))))
    if not n_large:
        return source, {}
    cap = max(KEEP_AT_MOST + 1, int(budget ** (1.0 / n_large)))

    def small(x: int) -> int:
        if x <= KEEP_AT_MOST:
            return x
        new = min(x, cap)
        return new - 1 if x % 2 == 1 and new % 2 == 0 else new

    lines = source.splitlines(keepends=True)
    changes: dict[str, tuple] = {}
    for node, name, value in sorted(consts, key=lambda t: -t[0].lineno):
        if name in overrides:
            new = overrides[name]
        elif isinstance(value, tuple):
            new = tuple(small(x) for x in value)
            if new == value or any(isinstance(e, ast.Name) for e in ast.walk(node.value)):
                continue  # unchanged, or written from names that are scaled themselves
        else:
            new = small(value)
        if new == value:
            continue
        changes[name] = (value, new)
        first, last = node.lineno - 1, node.end_lineno - 1
        lines[first:last + 1] = [f"{name} = {new!r}  # scaled down from {value!r} for the interpreter\n"]
    return "".join(lines), changes


def check_one(solution: Path, small_problem: Path, timeout_s: int) -> dict:
    """``kernelpilot check SOLUTION --ref SMALL_PROBLEM --json`` in a fresh interpreter-mode process. Returns
    {"status": "passed" | failure status | "error", "detail": str, "report": dict | None}."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT / "src"))
    try:
        proc = subprocess.run([sys.executable, "-m", "kernelpilot.cli", "check", str(solution), "--ref",
                               str(small_problem), "--json"], capture_output=True, text=True, env=env,
                              timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "detail": f"over {timeout_s} s", "report": None}
    text = proc.stdout.strip()
    try:
        report = json.loads(text[text.index("{"):]) if "{" in text else None
    except json.JSONDecodeError:
        report = None
    if report is None:
        return {"status": "error", "detail": (proc.stderr or proc.stdout).strip()[-400:], "report": None}
    if report.get("passed"):
        return {"status": "passed", "detail": report.get("summary", ""), "report": report}
    # `check --json` has no failure status field: a seed's error names the exception, a seed without one failed on
    # its values (kernelpilot's failure statuses: search/failures.py classify_exception).
    err = " ".join(str(s.get("error") or "") for s in report.get("seeds", []) if s.get("error"))
    if "error" in report and "message" in report:  # the command failed before checking (a typed error)
        return {"status": f"error ({report['error']})", "detail": str(report["message"])[:300], "report": report}
    if "KernelNotLaunched" in err:
        status = "kernel_not_launched"
    elif err or not report.get("seeds"):
        status = f"error ({report.get('failed_stage')})"
    else:
        status = "incorrect"
    return {"status": status, "detail": (report.get("summary") or err)[:300], "report": report}


def main(argv: list[str] | None = None) -> int:
    """Run the table (see the module docstring). Returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=Path, default=DEFAULT_PROBLEMS)
    ap.add_argument("--solutions", type=Path, default=DEFAULT_SOLUTIONS)
    ap.add_argument("--budget", type=int, default=8192, help="about how many elements the scaled sizes multiply to")
    ap.add_argument("--only", default="", help="only solutions whose file name contains this")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per check")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    if not (args.problems / "level1").is_dir():
        print(f"no KernelBench problems at {args.problems}: clone ScalingIntelligence/KernelBench into "
              "third_party/KernelBench (ignored by git) or pass --problems DIR", file=sys.stderr)
        return 2
    rows = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="kb_small_") as tmp:
        for sol in sorted(args.solutions.glob("*.py")):
            m = SOLUTION_NAME.match(sol.name)
            if not m or args.only not in sol.name:
                continue
            level, pid, _sample = (int(g) for g in m.groups())
            problem = find_problem(args.problems, level, pid)
            small_source, changes = scale_source(problem.read_text(encoding="utf-8"), args.budget,
                                                 OVERRIDES.get(f"level{level}/{problem.name}"))
            small = Path(tmp) / f"level{level}" / problem.name
            small.parent.mkdir(parents=True, exist_ok=True)
            small.write_text(small_source, encoding="utf-8")
            result = check_one(sol, small, args.timeout)
            expected = EXPECTED.get(sol.name, "passed")
            ok = result["status"] == expected
            failed |= not ok
            sizes = ", ".join(f"{k} {a}->{b}" for k, (a, b) in changes.items())
            rows.append({"solution": sol.name, "problem": f"level{level}/{problem.name}", "sizes": sizes,
                         "status": result["status"], "expected": expected, "ok": ok, "detail": result["detail"]})
            print(f"{sol.name:42s} {problem.name:42s} {result['status']:20s} {'ok' if ok else 'UNEXPECTED'}"
                  f"  [{sizes}]", flush=True)
            if not ok:
                print(f"    {result['detail']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
