"""Candidates from elsewhere: torch.compile's own kernel competes with the search's best (issue 25).

After an ``optimize`` search on a GPU, the baselines say how fast PyTorch eager and torch.compile run the reference.
When torch.compile beat the search's best by more than :data:`MARGIN`, Inductor generated a faster kernel for the
same reference on the same GPU: :func:`inductor_candidate` imports it (:func:`kernelpilot.inductor.importer.
import_inductor`: Inductor's Triton kernels as a kernel file in kernelpilot's contract, their launch parameters as
TUNABLES), searches that file's space with ``tune`` (the ``auto`` strategy: every check of every kernel, its own
budget :data:`CANDIDATE_BUDGET_S`), and returns the candidate's best beside the decision: it replaces the search's
best only when faster beyond noise on the samples both were timed with in this run (the one decision rule,
:func:`kernelpilot.search.stats.decide`). Everything lands in ``RUN/inductor/`` (the imported file, ``import.json``,
the tune folder) and the choice in run.json's ``final`` (:class:`FinalChoice`): the final is the fastest correct
candidate, with where it came from.

Where the default compile generated no Triton kernel because a GEMM went to cuBLAS (``extern_kernels.mm``), the
candidate is captured again with Inductor's GEMM choices limited to its Triton templates (mode
``max-autotune-triton``: max-autotune with ``max_autotune_gemm_backends="TRITON"`` and the persistent TMA template
on), both captures kept in
``RUN/inductor/``. Where there is still no Triton kernel, ``final.inductor.status`` says so and the search's best
stays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel

__all__ = ["CANDIDATE_BUDGET_S", "MARGIN", "CandidateOutcome", "FinalChoice", "decide_final", "inductor_candidate",
           "paired_ratios", "search_final", "standings"]

#: torch.compile must beat the search's best by more than this (relative) before its kernel is imported: the two
#: were timed separately (the baseline once, after the search), and 2 % is above the spread of two such timings of
#: one kernel on the H100 (docs/search.md); below it the search's best is as good.
MARGIN = 0.02
#: Seconds of search for the imported kernel's space (Inductor's launch parameters: a few dozen configs).
CANDIDATE_BUDGET_S = 90.0


class CandidateOutcome(BaseModel):
    """What became of the Inductor candidate.

    Attributes:
        status: ``imported`` (searched; ``duration_ns`` its best), ``no_triton_kernel`` (torch.compile used library
            calls only, e.g. cuBLAS), ``failed`` (the import or its search failed: ``message``), ``not_needed``
            (torch.compile was not faster than the search's best beyond :data:`MARGIN`), ``not_supported`` (a
            KernelBench solution: the converted file would need the pair's setup).
        kernel: the imported kernel file (relative to the run folder). config / duration_ns: its best.
        samples_ns: the best's timing samples (ns). tune_folder: the search's folder (relative).
        torch_compile_ns: the baseline it was imported for. message: why, for the other statuses.
        space_size / evaluations / stopped: the imported kernel's space (configs after its constraints), how many
            evaluations its search made and why it ended (its ``tune.json``'s ``space_size``,
            ``evaluations_total``, ``stopped``), so a record says whether the budget cut the search or the space
            was spent; None / "" where no search ran.
    """

    status: str
    kernel: str | None = None
    config: dict[str, Any] = {}
    duration_ns: float | None = None
    samples_ns: list[float] = []
    tune_folder: str | None = None
    torch_compile_ns: float | None = None
    message: str = ""
    space_size: int | None = None
    evaluations: int | None = None
    stopped: str = ""


class FinalChoice(BaseModel):
    """run.json's ``final``: the fastest correct candidate and where it came from.

    Attributes:
        source: ``search`` (a version of this run) or ``inductor`` (torch.compile's kernel, imported and searched).
        version: the version when ``source`` is ``search``. kernel: the kernel file of the final (relative to the run
            folder for the imported one). config / duration_ns: the final's config and median (ns).
        decision: why (the decision rule's reason, or why no candidate competed).
        inductor: the Inductor candidate's outcome (None when the run had no baselines to compare with).
        vs_torch_compile: torch.compile's median over the final's, both from one round-robin timing
            (:func:`paired_ratios`); None where the final was not timed round-robin with torch.compile.
    """

    source: str
    version: int | None = None
    kernel: str
    config: dict[str, Any]
    duration_ns: float | None
    decision: str
    inductor: CandidateOutcome | None = None
    vs_torch_compile: float | None = None


def torch_compile_ns(baselines_ns: dict[str, float]) -> float | None:
    """torch.compile's median (ns) among the run's baselines (keyed ``torch.compile ...``), or None."""
    return next((v for k, v in baselines_ns.items() if k.startswith("torch.compile")), None)


def search_final(best: Any, kernel: str, why: str, inductor: CandidateOutcome | None = None) -> FinalChoice:
    """The search's best as the final (``best`` an Evaluation with ``index``, ``config``, ``duration_ns``)."""
    return FinalChoice(source="search", version=best.index, kernel=kernel, config=dict(best.config),
                       duration_ns=best.duration_ns, decision=why, inductor=inductor)


def inductor_candidate(kernel: Path, ref: Path | None, shape: dict[str, Any], folder: Path, baseline_ns: float,
                       *, timeout_s: float, budget_s: float = CANDIDATE_BUDGET_S, capture: Path | None = None,
                       log: Any = lambda _m: None) -> CandidateOutcome:
    """Import torch.compile's kernel for ``kernel``'s reference and search its space (see the module docstring).

    Args:
        kernel / ref: the kernel file and its separate reference (None: in the kernel file).
        shape: the run's shape (Inductor's code is specialized to it). folder: ``RUN/inductor`` (created).
        baseline_ns: torch.compile's median that made the import worth it. timeout_s: per config.
        budget_s: seconds for the candidate's search. capture: convert this saved capture (``kernelpilot inductor
            --save-capture``) instead of capturing on the GPU. log: progress lines.

    Returns:
        The :class:`CandidateOutcome` (never raises for the import's or the search's own failures: they are its
        ``failed`` / ``no_triton_kernel`` statuses).
    """
    from kernelpilot.errors import KernelpilotError

    from kernelpilot.kernels.kernelbench import is_solution_file

    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "kernel.py"
    if capture is None and is_solution_file(kernel):
        # the converted file takes setup from the original kernel file; a KernelBench solution has none (its
        # setup is built from the pair by kernelpilot's reader): said as what it is, not as a failed import
        log("Inductor candidate: not imported for a KernelBench solution (the imported file would need the pair's "
            "setup, which only kernelpilot's reader builds)")
        return CandidateOutcome(status="not_supported", torch_compile_ns=baseline_ns,
                                message="KernelBench solution: Inductor's kernel is not imported for a (solution, "
                                        "problem) pair yet; torch.compile's time is reported as the baseline")
    try:
        from kernelpilot.inductor.importer import import_inductor
        from kernelpilot.inductor import NoTritonKernel

        from kernelpilot.inductor.capture import TRITON_GEMM_MODE

        try:
            imported = import_inductor(kernel, out=out, ref=ref, shape=shape, timeout_s=max(timeout_s, 300.0),
                                       from_capture=capture, save_capture=folder / "capture.json" if capture is None
                                       else None)
        except NoTritonKernel as exc:
            first = exc.message.splitlines()[0][:160]
            if capture is not None or "(cuBLAS)" not in exc.message:
                log(f"torch.compile's code has no Triton kernel to import ({first})")
                return CandidateOutcome(status="no_triton_kernel", torch_compile_ns=baseline_ns,
                                        message=exc.message[:500])
            # the default compile called cuBLAS: Inductor's own Triton GEMM templates, autotuned, are the candidate
            log(f"torch.compile's code calls cuBLAS ({first}); capturing Inductor's Triton GEMM templates "
                f"(mode {TRITON_GEMM_MODE})")
            try:
                imported = import_inductor(kernel, out=out, ref=ref, shape=shape, mode=TRITON_GEMM_MODE,
                                           timeout_s=max(timeout_s, 600.0),
                                           save_capture=folder / "capture-triton-gemm.json")
            except NoTritonKernel as again:
                return CandidateOutcome(status="no_triton_kernel", torch_compile_ns=baseline_ns,
                                        message=f"{exc.message[:300]}; with {TRITON_GEMM_MODE}: {again.message[:200]}")
        (folder / "import.json").write_text(imported.model_dump_json(indent=1))
        log(f"imported {len(imported.kernels)} Inductor kernel(s) as {out.name}: {imported.n_configs} configs; "
            f"searching them for up to {budget_s:.0f} s")
        from kernelpilot.app.tune import tune
        from kernelpilot.options import TuneOptions

        res = tune(out, TuneOptions(strategy="auto", budget_s=budget_s, shape=dict(shape), ref=None, use_cache=False,
                                    timeout_s=timeout_s, start=dict(imported.default_config)),
                   out=folder / "tune")
    except KernelpilotError as exc:
        log(f"the Inductor candidate failed: {exc.message.splitlines()[0][:200]}")
        return CandidateOutcome(status="failed", torch_compile_ns=baseline_ns, message=exc.message[:500],
                                kernel=out.name if out.is_file() else None)
    best, searched = res.best, {"space_size": res.space_size, "evaluations": res.evaluations_total,
                                "stopped": res.stopped}
    log(f"Inductor candidate's search: {res.evaluations_total} evaluations of {res.space_size} configs; stopped: "
        f"{res.stopped}")
    if best is None:
        return CandidateOutcome(status="failed", kernel=out.name, tune_folder="tune", torch_compile_ns=baseline_ns,
                                message=f"no config of the imported kernel was correct ({res.failures})", **searched)
    return CandidateOutcome(status="imported", kernel=out.name, config=dict(best.config),
                            duration_ns=best.duration_ns, samples_ns=list(best.samples_ns or []), tune_folder="tune",
                            torch_compile_ns=baseline_ns, **searched)


def paired_ratios(bench: Any) -> list[float]:
    """The kernel's samples over torch.compile's, round by round, from a round-robin benchmark
    (:func:`kernelpilot.report.benchmark.run_benchmark` without a kernel timing: row 0 the kernel, one sample of each
    contender per round); empty for None, a benchmark not timed round-robin (its samples do not pair), or when
    either row has no timing. Drift between two such timings divides out, so two kernels timed in two round-robins
    compare through torch.compile as a common yardstick."""
    if bench is None or not bench.round_robin or not bench.rows:
        return []
    kernel = bench.rows[0].timing
    comp = next((r.timing for r in bench.rows if r.name.startswith("torch.compile")), None)
    if kernel is None or comp is None:
        return []
    return [k / c for k, c in zip(kernel.samples_ns, comp.samples_ns) if c > 0]


def standings(kernel: Path, ref: Path | None, shape: dict[str, Any], config: dict[str, Any], *, interpreted: bool,
              timeout_s: float, log: Any = lambda _m: None) -> Any:
    """``kernel`` at ``config`` with PyTorch eager and torch.compile of its reference (``ref``: a separate reference
    file, or None), timed round-robin in a fresh isolated worker (:func:`kernelpilot.report.benchmark.run_benchmark`
    without a kernel timing) at ``shape``: a :class:`~kernelpilot.report.benchmark.BenchmarkResult`, or None when it
    cannot run (the reason goes to ``log``; never raises for the worker's failures)."""
    from kernelpilot.errors import KernelpilotError
    from kernelpilot.report.benchmark import BenchmarkResult
    from kernelpilot.search.isolated import run_isolated

    try:
        return BenchmarkResult.model_validate_json(run_isolated(
            kernel, "kernelpilot.app.session:_baselines_in_worker", shape, config, ref=ref, interpreted=interpreted,
            timeout_s=max(timeout_s, 300.0)))
    except KernelpilotError as exc:
        log(f"round-robin timing of {kernel.name} not measured: {exc.message.splitlines()[0][:200]}")
        return None


def decide_final(best: Any, kernel: str, cand: CandidateOutcome | None, *, best_ratios: Sequence[float] = (),
                 cand_ratios: Sequence[float] = ()) -> FinalChoice:
    """The final between the search's ``best`` (an accepted version: the candidate is only sought against one) and
    the candidate: the candidate replaces it only when the decision rule says faster beyond noise
    (:func:`kernelpilot.search.stats.decide`: Mann-Whitney U and a bootstrap CI of the ratio of medians) and its
    median is lower. With ``best_ratios`` and ``cand_ratios`` (each kernel's samples over torch.compile's, round by
    round: :func:`paired_ratios`) the rule runs on those, drift-free, and ``vs_torch_compile`` is recorded; else on
    the samples each was timed with (in the search, in the candidate's tune). Raises nothing."""
    import statistics

    from kernelpilot.search.stats import decide

    vs = lambda r: 1 / statistics.median(r) if r else None  # noqa: E731
    if cand is None or cand.status != "imported" or cand.duration_ns is None:
        why = "the search's best (" + (cand.status.replace("_", " ") if cand else "no candidate") + ")"
        return search_final(best, kernel, why, cand).model_copy(update={"vs_torch_compile": vs(best_ratios)})
    if best_ratios and cand_ratios:
        d = decide(list(cand_ratios), list(best_ratios))
        lower = statistics.median(cand_ratios) < statistics.median(best_ratios)
        basis = "each over torch.compile, round-robin"
    else:
        d = decide(cand.samples_ns or [cand.duration_ns], best.samples_ns or [best.duration_ns])
        lower, basis = cand.duration_ns < best.duration_ns, "samples of the search and of the candidate's tune"
    if lower and d.replace:
        return FinalChoice(source="inductor", kernel=f"inductor/{cand.kernel}", config=cand.config,
                           duration_ns=cand.duration_ns, decision=f"Inductor's kernel: {d.reason} ({basis})",
                           inductor=cand, vs_torch_compile=vs(cand_ratios))
    return search_final(best, kernel, f"the search's best: the imported Inductor kernel is not faster beyond noise "
                                      f"({d.reason}; {basis})", cand).model_copy(
        update={"vs_torch_compile": vs(best_ratios)})
