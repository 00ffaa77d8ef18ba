"""The KernelBench folder command's Python API (``kernelpilot kernelbench run PROBLEMS/ SOLUTIONS/``; issue 27,
docs/kernelbench.md): every solution of a folder checked (and, on a GPU, timed against PyTorch eager and
torch.compile) in its own isolated worker, with KernelBench's fast_p; :func:`kernelbench_frame` reads the table back
as a pandas DataFrame."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kernelpilot.app.kernelbench_run import KernelBenchResult, KernelBenchRow, run_kernelbench
from kernelpilot.options import at_least, positive

__all__ = ["KernelBenchResult", "KernelBenchRow", "kernelbench_frame", "kernelbench_run"]


def kernelbench_run(problems: str | Path, solutions: str | Path, *, out: str | Path | None = None,
                    level: int | None = None, timeout_s: float = 300.0, fresh_baselines: bool = False,
                    log: Callable[[str], None] = lambda _m: None) -> KernelBenchResult:
    """Evaluate a folder of KernelBench solutions (:func:`kernelpilot.app.kernelbench_run.run_kernelbench`).

    Args:
        problems: KernelBench's problems: its ``KernelBench/`` folder (``level1/``, ``level2/`` ... inside) or one
            level folder.
        solutions: the solution files, named ``level_{N}_problem_{id}_sample_{k}_kernel.py`` (KernelBench's
            generation scripts) or like their problem file (``19_ReLU.py``); searched recursively.
        out: the folder for ``kernelbench.json``, ``kernelbench.csv`` and ``report.html`` (default
            ``kernelbench-out``; created).
        level: only this level's problems (and solutions).
        timeout_s: seconds one solution may take (its import, its check, its timing with both baselines) before
            its worker is killed and the row is ``timeout``.
        fresh_baselines: time torch.compile again instead of reusing the baseline cache
            (:mod:`kernelpilot.measure.baseline_cache`).

    Returns:
        :class:`KernelBenchResult`: one row per solution (status by name, durations in ns, speedups), fast_p for
        p = 0, 1, 1.5, 2 over eager and torch.compile (null when not measured: no GPU), what was left unpaired.

    Raises:
        OptionError: a folder missing, no problem file, no solution that pairs, ``level`` < 1, ``timeout_s`` not
            positive.
        OSError: ``out`` cannot be written.
    """
    at_least("--level", level, 1, "the KernelBench level")
    positive("--timeout-s", timeout_s, "300")
    return run_kernelbench(Path(problems), Path(solutions), Path(out) if out is not None else Path("kernelbench-out"),
                           level=level, timeout_s=timeout_s, fresh_baselines=fresh_baselines, log=log)


def kernelbench_frame(path: str | Path) -> Any:
    """The table of a ``kernelbench run`` as a pandas DataFrame: ``path`` is its ``kernelbench.json``,
    ``kernelbench.csv`` or the ``--out`` folder holding them. Columns as the CSV's
    (:data:`kernelpilot.app.kernelbench_run.CSV_COLUMNS`: ``status``, ``correct``, ``solution_ns``, ``eager_ns``,
    ``compile_ns``, ``speedup_vs_eager`` ...; NaN where not measured).

    Raises:
        MissingDependencyError: pandas is not installed. OptionError: no such file. RecordError: the JSON is not a
            kernelbench run's.
    """
    from pydantic import ValidationError

    from kernelpilot.errors import OptionError, RecordError
    from kernelpilot.records.frames import _pandas

    pd = _pandas()
    p = Path(path)
    if p.is_dir():
        p = p / "kernelbench.json"
    if not p.is_file():
        raise OptionError(f"{p}: no such file", "give the kernelbench.json or kernelbench.csv of a kernelbench run, "
                          "or its --out folder")
    if p.suffix == ".csv":
        return pd.read_csv(p)
    try:
        return KernelBenchResult.model_validate_json(p.read_text()).to_dataframe()
    except (ValidationError, ValueError) as exc:
        raise RecordError(f"{p}: not a kernelbench run's result ({str(exc).splitlines()[0]})",
                          "run kernelpilot kernelbench run PROBLEMS SOLUTIONS --out DIR again") from exc
