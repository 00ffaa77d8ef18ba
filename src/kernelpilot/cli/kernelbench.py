"""``kernelpilot kernelbench run PROBLEMS SOLUTIONS``: a folder of KernelBench solutions checked and timed, each in
its own isolated worker, with fast_p (docs/kernelbench.md).

The command calls one :mod:`kernelpilot.api` function (:func:`kernelpilot.api.kernelbench.kernelbench_run`) and
prints its result (``--json``: the same object); progress goes to stderr. It exits 0 when every pair was evaluated
(incorrect or refused solutions are results, not errors), 1 with ``error:``/``hint:`` when the run could not be made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from kernelpilot.cli.common import JsonOpt, out, run_command, table

#: ``kernelpilot kernelbench``: the group of the KernelBench commands.
kernelbench_app = typer.Typer(no_args_is_help=True, help="KernelBench folders: problems (Model, get_inputs, "
                              "get_init_inputs) and solutions (ModelNew) in KernelBench's naming.")


def _x(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _ran(r: Any) -> None:
    from kernelpilot.fmt import format_duration_ns

    t = table("level", "id", "problem", "sample", "status", "solution", "eager", "compile", "vs eager",
              "vs compile")
    for row in r.rows:
        d = row.durations_ns
        t.add_row(str(row.level), str(row.problem_id), row.problem, str(row.sample_id),
                  row.status + (f" ({row.failure})" if row.status == "incorrect" else ""),
                  *(format_duration_ns(d[k]) if d.get(k) is not None else "-" for k in ("solution", "eager", "compile")),
                  _x(row.speedup_vs_eager) + (" (>10x: flagged)" if row.excessive_speedup else ""),
                  _x(row.speedup_vs_compile))
    out.print(t)
    for base in ("eager", "compile"):
        vals = ", ".join(f"fast_{p}={'not measured' if v is None else f'{v:.3f}'}" for p, v in r.fast_p[base].items())
        out.print(f"fast_p vs {base}: {vals}", markup=False)
    out.print(f"{r.n_correct}/{r.n_problems} correct on {r.device or '-'}"
              + ("" if r.measured else " (nothing timed: no GPU)"), markup=False)
    for path, why in r.unpaired_solutions.items():
        out.print(f"unpaired solution {path}: {why}", markup=False)
    if r.unpaired_problems:
        out.print(f"{len(r.unpaired_problems)} problem(s) without a solution (listed in kernelbench.json)",
                  markup=False)
    for note in r.notes:
        out.print(f"note: {note}", markup=False)
    out.print("wrote " + ", ".join(r.files.values()), markup=False)


@kernelbench_app.command("run")
def run_cmd(problems: Path = typer.Argument(..., help="KernelBench's problems: its KernelBench/ folder (level1/, "
                                            "level2/ ... inside) or one level folder."),
            solutions: Path = typer.Argument(..., help="The solutions: level_{N}_problem_{id}_sample_{k}_kernel.py, "
                                             "or named like the problem file (19_ReLU.py)."),
            output: Optional[Path] = typer.Option(None, "--out", help="Folder for kernelbench.json, kernelbench.csv "
                                                  "and report.html (default: kernelbench-out)."),
            level: Optional[int] = typer.Option(None, "--level", help="Only this level."),
            timeout_s: float = typer.Option(300.0, "--timeout-s", help="Seconds one solution may take before its "
                                            "worker is killed (status timeout)."),
            fresh_baselines: bool = typer.Option(False, "--fresh-baselines", help="Time torch.compile again, not "
                                                 "from the baseline cache."),
            quiet: bool = typer.Option(False, "--quiet", help="No progress on stderr."),
            as_json: bool = JsonOpt) -> None:
    """Check (and on a GPU time against eager and torch.compile) every solution in its own worker; fast_p."""
    from kernelpilot import api
    from kernelpilot.cli.progress import Reporter

    log = Reporter(quiet=quiet)
    run_command(as_json, lambda: api.kernelbench_run(problems, solutions, out=output, level=level,
                                                     timeout_s=timeout_s, fresh_baselines=fresh_baselines, log=log),
                _ran, progress=log)


def register(app: typer.Typer) -> None:
    """Add the ``kernelbench`` group to ``app``."""
    app.add_typer(kernelbench_app, name="kernelbench")
