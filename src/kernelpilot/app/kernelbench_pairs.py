"""``kernelpilot kernelbench run``, step one: pair each solution file with its problem by KernelBench's naming.

Facts from ScalingIntelligence/KernelBench (commit 423217d, restated in docs/kernelbench.md):

- a problem is ``KernelBench/level{N}/{id}_{Name}.py`` (the id is the number before the first ``_``);
- its generation scripts (``scripts/generate_samples.py``, ``scripts/eval_from_generations.py``) name a solution
  ``level_{N}_problem_{id}_sample_{k}_kernel.py``.

kernelpilot also accepts ``level{N}_problem_{id}...`` (no underscore after ``level``), a name without
``_sample_{k}`` or ``_kernel``, and a solution named like its problem file itself (``19_ReLU.py``, its level taken
from a ``level{N}`` folder above it, else from ``--level``, else from the one problem of that name). Nothing is
imported here: the forms are read with ``ast`` (:mod:`kernelpilot.kernels.kernelbench`). Every ``.py`` file of the
solutions folder is either paired or listed as unpaired with why; every problem without a solution is listed too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelpilot.errors import OptionError
from kernelpilot.kernels.kernelbench import is_problem_file, is_solution_file

__all__ = ["Pair", "Pairing", "Problem", "find_problems", "pair_folder", "solution_key"]

#: KernelBench's generated-solution name (``level_1_problem_19_sample_0_kernel.py``), and the forms kernelpilot
#: also takes (``level1_problem_19.py``, ``level_1_problem_19_sample_2.py``)
SOLUTION_NAME = re.compile(r"^level_?(\d+)_problem_(\d+)(?:_sample_(\d+))?(?:_kernel)?\.py$")
#: a problem file's name: ``{id}_{Name}.py``
PROBLEM_NAME = re.compile(r"^(\d+)_(\w+)\.py$")
LEVEL_DIR = re.compile(r"^level_?(\d+)$")


@dataclass(frozen=True)
class Problem:
    """One KernelBench problem file: ``level`` (None when its folder does not say), ``problem_id`` (the number its
    name starts with), ``name`` (the file's stem) and ``path``."""

    level: int | None
    problem_id: int
    name: str
    path: Path


@dataclass(frozen=True)
class Pair:
    """A solution with its problem; ``sample_id`` from the solution's name (0 when it has none)."""

    problem: Problem
    solution: Path
    sample_id: int


@dataclass
class Pairing:
    """What :func:`pair_folder` found: ``pairs`` (in level, problem, sample order), ``unpaired_solutions`` and
    ``unpaired_problems`` (file path -> why; every file of the solutions folder is in ``pairs`` or here)."""

    pairs: list[Pair] = field(default_factory=list)
    unpaired_solutions: dict[str, str] = field(default_factory=dict)
    unpaired_problems: dict[str, str] = field(default_factory=dict)


def _level_of_dir(path: Path) -> int | None:
    m = LEVEL_DIR.match(path.name)
    return int(m.group(1)) if m else None


def find_problems(problems: Path, level: int | None = None) -> list[Problem]:
    """The problem files under ``problems``: KernelBench's root (``level1/``, ``level2/`` ... inside, or a
    ``KernelBench/`` folder holding them) or one level folder. ``level`` keeps only that level (a level folder whose
    name says no level is taken as ``level``).

    Raises:
        OptionError: ``problems`` is not a folder, or holds no problem file (of ``level``).
    """
    problems = Path(problems)
    if not problems.is_dir():
        raise OptionError(f"{problems}: not a folder", "give KernelBench's problems folder (KernelBench/ or "
                          "KernelBench/level1)")
    if not any(_level_of_dir(d) is not None for d in problems.iterdir() if d.is_dir()) \
            and (problems / "KernelBench").is_dir():
        problems = problems / "KernelBench"  # the repository's root
    level_dirs = sorted((d for d in problems.iterdir() if d.is_dir() and _level_of_dir(d) is not None),
                        key=lambda d: _level_of_dir(d) or 0)
    folders = [(d, _level_of_dir(d)) for d in level_dirs] or [(problems, _level_of_dir(problems) or level)]
    found: list[Problem] = []
    for folder, lvl in folders:
        if level is not None and lvl is not None and lvl != level:
            continue
        for f in sorted(folder.glob("*.py")):
            m = PROBLEM_NAME.match(f.name)
            if m and is_problem_file(f):
                found.append(Problem(level=lvl, problem_id=int(m.group(1)), name=f.stem, path=f.resolve()))
    if not found:
        raise OptionError(f"{problems}: no KernelBench problem file" + (f" of level {level}" if level else ""),
                          "a problem is {id}_{Name}.py defining Model, get_inputs and get_init_inputs, in the folder "
                          "or in its level1/, level2/ ... folders")
    return found


def solution_key(path: Path) -> tuple[int, int, int] | None:
    """(level, problem id, sample id; 0 when the name has no ``_sample_{k}``) read off a solution's name in
    KernelBench's form; None for another name. Raises nothing."""
    m = SOLUTION_NAME.match(Path(path).name)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def pair_folder(problems: Path, solutions: Path, level: int | None = None) -> Pairing:
    """Pair every ``.py`` file under ``solutions`` (recursively) with its problem under ``problems``
    (:func:`find_problems`), by KernelBench's naming (module docstring). A file that is not a solution
    (no ``class ModelNew``), names no problem that exists, names one ambiguously, or is of another level than
    ``level`` is listed in ``unpaired_solutions`` with why; a problem no solution names, in ``unpaired_problems``.

    Raises:
        OptionError: a folder is missing, or no problem file is found.
    """
    solutions = Path(solutions)
    if not solutions.is_dir():
        raise OptionError(f"{solutions}: not a folder", "give the folder of solution files "
                          "(level_{N}_problem_{id}_sample_{k}_kernel.py, or named like the problem file)")
    probs = find_problems(problems, level)
    by_key = {(p.level, p.problem_id): p for p in probs}
    by_name: dict[str, list[Problem]] = {}
    for p in probs:
        by_name.setdefault(p.path.name, []).append(p)
    result = Pairing()
    used: set[Path] = set()
    for f in sorted(solutions.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        if not is_solution_file(f):
            result.unpaired_solutions[str(f)] = "not a KernelBench solution (no top-level class ModelNew)"
            continue
        dir_level = next((lv for d in f.relative_to(solutions).parents if (lv := _level_of_dir(d)) is not None),
                         None)
        key = solution_key(f)
        if key is not None:
            lvl, pid, sample = key
            if level is not None and lvl != level:
                result.unpaired_solutions[str(f)] = f"level {lvl}, not --level {level}"
                continue
            prob = by_key.get((lvl, pid))
            if prob is None:  # a single level folder whose name says no level: match the id alone
                cands = [p for p in probs if p.problem_id == pid and p.level is None]
                prob = cands[0] if len(cands) == 1 else None
            if prob is None:
                result.unpaired_solutions[str(f)] = f"no problem {pid} of level {lvl} under {problems}"
                continue
        else:
            if level is not None and dir_level is not None and dir_level != level:
                result.unpaired_solutions[str(f)] = f"in a level {dir_level} folder, not --level {level}"
                continue
            cands = by_name.get(f.name, [])
            if dir_level is not None or level is not None:
                want = dir_level if dir_level is not None else level
                cands = [p for p in cands if p.level in (want, None)]
            if len(cands) != 1:
                why = "no problem file of that name" if not cands else \
                    f"problem files of that name in levels {sorted(p.level or 0 for p in cands)}: put it in a " \
                    "level{N}/ folder or pass --level"
                result.unpaired_solutions[str(f)] = (
                    f"{why} (a solution is named level_{{N}}_problem_{{id}}_sample_{{k}}_kernel.py, or like its "
                    "problem file)")
                continue
            prob, sample = cands[0], 0
        result.pairs.append(Pair(problem=prob, solution=f.resolve(), sample_id=sample))
        used.add(prob.path)
    for p in probs:
        if p.path not in used:
            result.unpaired_problems[str(p.path)] = "no solution"
    result.pairs.sort(key=lambda x: (x.problem.level or 0, x.problem.problem_id, x.sample_id, str(x.solution)))
    return result
