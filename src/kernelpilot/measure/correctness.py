"""Correctness: the kernel against a higher-precision reference, on fresh inputs and shapes it did not choose.

Rules (docs/measuring.md, "Correctness"); the kernel file is treated as an adversary:

- the reference runs on float64 copies of the floating inputs where it can (falls back to the native dtype,
  and says so); what it returns must not share memory with any tensor the kernel sees;
- every tensor's role is observed by running the reference once per check, at the check's shape
  (:func:`observe_case_roles`, :mod:`kernelpilot.kernels.roles`); the declarations are claims checked against it;
- pure outputs written in full are filled with NaN (integers with a sentinel) before every kernel run, so
  unwritten elements fail; every other written tensor (in-place, written in part, e.g. RoPE's q and k) is restored
  to its pristine value instead; the reference may return its outputs, write them in place, or both;
- no output may share memory with another input; inputs that are not outputs must be bitwise unchanged by the
  kernel after every run (``aliasing`` / ``inputs`` stages), and the reference's results are fetched after the
  kernel's last run before each comparison;
- every seed draws fresh inputs (3 seeds by default); each output is compared per element and per row
  (:mod:`kernelpilot.measure.compare`); NaN or Inf where the reference is finite never passes;
- the kernel runs a second time on the first seed's inputs: that run must pass too (a kernel that only works
  once, or leaves the poison on its second call, fails), and a bitwise difference is reported as
  non-deterministic;
- the check repeats at shapes the author did not pick, drawn per run to break divisibility (``shapes`` stage:
  :func:`kernelpilot.kernels.shapes.derived_shapes`), on a new seed;
- :func:`recheck` runs after timing: values no call has seen (drawn as every timed launch's are) are written into the
  *same* tensors (same pointers), the outputs keep what timing left, and one more run must match (results cached by
  pointer, work done in ``setup``, a kernel that stops working after some calls all fail there); every timed
  launch itself sees refreshed inputs and poisoned outputs (:meth:`kernelpilot.kernels.contract.Case.refresh`);
- a file's own ``atol``/``rtol`` are shown when they loosen the dtype's; past the caps they fail, and
  ``strict`` refuses any loosening and a derived shape ``setup`` would not build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from kernelpilot.errors import ContractError
from kernelpilot.target import Target
from kernelpilot.kernels.contract import Case, Config, KernelFile, Shape, make_case, run_kernel
from kernelpilot.kernels.case import poison_tensor
from kernelpilot.kernels.role_claims import check_claims, record_kernel_writes, same_bits
from kernelpilot.kernels.roles import ReferenceFailed, RoleReport, observe_roles
from kernelpilot.measure.memory import CHUNK_ELEMENTS, bits_equal, keep_copy, release_cached
from kernelpilot.measure.memory import bitwise_equal as bitwise_equal  # noqa: PLC0414 - re-exported
from kernelpilot.measure.refproc import pristine_copies
from kernelpilot.measure.reference_run import reference_outputs_local
from kernelpilot.kernels.roles import shares_memory as shares_memory  # noqa: PLC0414 - re-exported
from kernelpilot.measure.compare import (  # noqa: F401 - re-exported: the comparison is part of this API
    TOLERANCES, OutputCheck, Tolerance, compare, tolerance_for)

if TYPE_CHECKING:
    import torch

DEFAULT_SEEDS = (0, 1, 2)
#: The seed of the derived-shape check and the first seed of :func:`recheck` (never one of the default seeds).
FRESH_SEED = 1000

#: Which step caught a failure: the comparison (``check``), memory shared between tensors (``aliasing``), inputs
#: the kernel modified (``inputs``), a shape the author did not pick (``shapes``), the re-check after timing
#: (``recheck``), a tolerance past the caps or refused under ``strict`` (``tolerance``).
Stage = Literal["check", "aliasing", "inputs", "shapes", "recheck", "tolerance"]


class SeedCheck(BaseModel):
    """All outputs for one seed at one shape; ``error`` holds why it failed outside the comparison (the kernel or
    reference raised, memory shared, an input modified) and ``stage`` which step failed."""

    seed: int
    passed: bool
    outputs: list[OutputCheck] = []
    error: str | None = None
    stage: Stage = "check"
    shape: dict[str, Any] = {}


class CorrectnessResult(BaseModel):
    """The verdict over all seeds and shapes: passed only when every one passed.

    ``failed_stage`` names the step that failed (None when passed); ``shapes_checked`` every shape run;
    ``notes`` what was loosened or skipped (shown in every report, refused under ``strict``).
    """

    passed: bool
    summary: str
    shape: dict[str, Any]
    config: dict[str, Any]
    device: str
    reference_dtype: str
    deterministic: bool | None
    seeds: list[SeedCheck]
    failed_stage: Stage | None = None
    shapes_checked: list[dict[str, Any]] = []
    tolerances: dict[str, Tolerance] = {}
    notes: list[str] = []
    roles: RoleReport | None = None
    rule: str = ("elementwise |out-ref| <= atol*rms(row) + rtol*|ref|, per-row and whole relative L2 <= rtol; "
                 "outputs NaN-filled before each run; NaN never passes; no aliasing; inputs unchanged; "
                 "second run, derived shapes and fresh values in the same tensors must pass too")


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _clone(value: Any) -> Any:
    return value.detach().clone() if _is_tensor(value) else value


def reference_outputs(kf: KernelFile, inputs: dict[str, Any], outputs: list[str],
                      blank: tuple[str, ...] | list[str] = ()) -> tuple[dict[str, torch.Tensor], str]:
    """Run the reference on float64 copies of the inputs (native copies if that fails): in the reference process
    that serves this worker (:mod:`kernelpilot.measure.refproc`: a process that never ran the kernel), else here.
    ``blank``: pure outputs (observed written in full, never read): the reference gets zeros of their dtype and
    shape, made where it runs (never copied from the worker's tensor, whose leftover contents would also defeat
    the reference process's content cache).

    Returns:
        (output name -> reference tensor, the precision used: ``"float64"`` or ``"native (...)"``).

    Raises:
        Exception: whatever the reference raises in its native dtype (from the reference process: an exception
            of the same type name and message); ReferenceServerError when that process died.
    """
    from kernelpilot.measure.refproc import serving

    server = serving(kf)
    if server is not None:
        return server.outputs(inputs, outputs, blank)
    return reference_outputs_local(kf.reference, inputs, outputs, blank)


def observe_case_roles(kf: KernelFile, case: Case, *, derived: bool = False) -> RoleReport | None:
    """The ``roles`` stage: observe every tensor's role on ``case`` (:func:`kernelpilot.kernels.roles.observe_roles`,
    the reference only, at the case's shape), check the declarations against it, and make ``case`` follow it
    (:meth:`Case.apply_roles`); ``derived``: a derived shape, where a ``partial`` claim's share of the bytes is not
    judged (:func:`kernelpilot.kernels.roles.check_claims`). Observed once per kernel file and shape in a process: the report is kept in
    ``kf.extras["roles_by_shape"]`` and ``kf.extras["roles"]`` (later :func:`make_case` calls follow it).

    Returns:
        A copy of the report for this check (its ``kernel_written_fraction`` fields are this check's); None when
        the reference raises on the case's own values (the check then records that failure; the case keeps the
        declared roles).

    Raises:
        RoleMismatch: a declaration contradicts the observation (:func:`kernelpilot.kernels.roles.check_claims`).
    """
    from kernelpilot.kernels.case import shape_key

    cache = kf.extras.setdefault("roles_by_shape", {})
    key = shape_key(case.shape)
    if key not in cache:
        try:
            report = observe_roles(kf, case)  # the declarations stay in case.declared when cached roles were applied
        except ReferenceFailed:
            return None
        report.notes = check_claims(report, kf.path, judge_partial=not derived)
        cache[key] = report
        kf.extras["roles"] = report
        release_cached(case)
    report = cache[key].model_copy(deep=True)
    case.apply_roles(report)
    return report


def observed_roles_at(kf: KernelFile, shape: Shape, device: str) -> RoleReport | None:
    """The roles observed at ``shape`` on ``device`` (:func:`observe_case_roles` on a fresh case, seed 0), once per
    kernel file and shape in a process (later calls return the kept report). For the speed-of-light floor, which
    counts the observed bytes (:func:`kernelpilot.kernels.workload.minimum_bytes`), and for the ``roles`` stage.

    Returns:
        The report, or None when ``setup`` or the reference raises at the shape (the check records why).

    Raises:
        RoleMismatch: a declaration contradicts the observation.
    """
    from kernelpilot.kernels.case import shape_key

    kept = kf.extras.get("roles_by_shape", {}).get(shape_key(shape))
    if kept is not None:
        return kept
    try:
        case = make_case(kf, shape, 0, device)
    except ContractError:
        return None
    return observe_case_roles(kf, case)


def aliasing_problem(case: Case) -> str | None:
    """Why the case's outputs share memory with another input (None when they do not)."""
    for out in case.outputs:
        for name, value in case.inputs.items():
            if name != out and _is_tensor(value) and shares_memory(case.inputs[out], value):
                return (f"output {out!r} shares memory with input {name!r}: the kernel could read what it writes "
                        "(setup must give every output its own tensor)")
    return None


def _reference_aliasing(refs: dict[str, torch.Tensor], case: Case) -> str | None:
    for out, ref in refs.items():
        if not _is_tensor(ref):
            continue
        for name, value in case.inputs.items():
            if _is_tensor(value) and shares_memory(ref, value):
                return (f"reference output {out!r} shares memory with the kernel's tensor {name!r}: it would "
                        "compare the kernel with itself (the reference runs on copies and must return its own)")
    return None


def _run_poisoned(kf: KernelFile, case: Case, config: Config, device: str, poison_outputs: bool = True) -> None:
    """Restore the in-place tensors, NaN-fill the other outputs (unless ``poison_outputs`` is False: they keep
    what the last launch wrote), launch once and wait."""
    case.restore()
    for name in case.outputs:
        if name not in case.inplace and poison_outputs:
            poison_tensor(case.inputs[name], finite=name in case.declared.get("inplace", ()))
    run_kernel(kf, case.inputs, config)
    if Target.from_device(device).is_gpu:
        import torch

        torch.cuda.synchronize()


def _mutated(before: dict[str, torch.Tensor], case: Case) -> str | None:
    for name, saved in before.items():
        if not bitwise_equal(saved, case.inputs[name]):
            changed = int((~same_bits(saved, case.inputs[name])).sum())
            seen = ""
            if case.roles is not None and name in case.roles.tensors:
                t = case.roles.tensors[name]
                t.kernel_written_fraction = changed / max(t.numel, 1)
                seen = (f" (observed by running the reference: {t.role}, "
                        f"{'read' if t.read else 'not read'}, never written; declared {t.declared})")
            return (f"the kernel modified input {name!r} ({changed} of {saved.numel()} elements), which the "
                    f"reference does not write{seen} (declare it in setup()['outputs'] and ['inplace'] if the reference "
                    "writes it too, or in ['scratch'] if it is a workspace the reference never reads)")
    return None


def _compare_all(kf: KernelFile, case: Case, got: dict[str, torch.Tensor], refs: dict[str, torch.Tensor]
                 ) -> list[OutputCheck]:
    out = []
    for name in case.outputs:
        tol = tolerance_for(case.inputs[name].dtype, kf)
        out.append(compare(name, got[name], refs[name], tol.atol, tol.rtol, device=case.inputs[name].device))
    return out


def _fail(seed: int, shape: Shape, stage: Stage, error: str) -> SeedCheck:
    return SeedCheck(seed=seed, passed=False, error=error, stage=stage, shape=shape)


def run_and_compare(kf: KernelFile, case: Case, config: Config, device: str, stage: Stage = "check", *,
                    second_run: bool = False, poison_outputs: bool = True,
                    watch_inputs: bool = True) -> tuple[SeedCheck, str, bool | None]:
    """Run the kernel once on ``case`` (poisoned outputs) and compare with the reference on the same values.

    Returns (the check, the reference precision, bitwise determinism of a second run or None). With
    ``second_run`` the kernel runs again on the same inputs; that run must pass the comparison too. With
    ``poison_outputs`` False the outputs keep what the previous launch wrote (a kernel that skips work when its
    outputs already hold a result then returns a stale one). ``watch_inputs``: also record which tensors the kernel
    wrote, for the role claims (:func:`~kernelpilot.kernels.role_claims.record_kernel_writes`: once per check, on
    the first seed).

    After every kernel run, the first and the second, the inputs that are not outputs must equal kernelpilot's
    pristine copy bit for bit (stage ``inputs``): a kernel that modifies an input only from its second call on, or
    only at some seeds or shapes, fails, and so does one that writes the pristine copy itself (memory outside its
    tensors), since the two then differ. The reference's results are fetched after the kernel's last run before
    each comparison, so no kernel run happens while they wait in the worker's memory (on the GPU for a large
    problem with room: :func:`kernelpilot.measure.staging.big_results_place`).
    """
    import torch

    seed, shape = case.seed, case.shape
    problem = aliasing_problem(case)
    if problem:
        return _fail(seed, shape, "aliasing", problem), "", None
    blank = [n for n in case.outputs if n not in case.inplace]
    pristine = pristine_copies(kf, case, blank)
    watched = {k: pristine[k] for k, v in case.inputs.items()
               if _is_tensor(v) and k not in case.outputs and k not in case.scratch}
    try:
        _run_poisoned(kf, case, config, device, poison_outputs)
    except Exception as exc:
        return _fail(seed, shape, stage, f"kernel raised {type(exc).__name__}: {exc}"), "", None
    if watch_inputs:
        record_kernel_writes(case, pristine)
    problem = _mutated(watched, case)
    if problem:
        return _fail(seed, shape, "inputs", problem), "", None
    # the first run's result: kept (on the host when large) only where a second run follows
    first = {n: (keep_copy(case.inputs[n]) if second_run else case.inputs[n]) for n in case.outputs}
    try:
        refs, precision = reference_outputs(kf, pristine, case.outputs, blank)
    except Exception as exc:
        domain = " (at a shape kernelpilot drew: a problem defined at some sizes only declares them in SHAPE_RULES)"
        return _fail(seed, shape, stage, f"reference raised {type(exc).__name__}: {exc}"
                     + (domain if stage == "shapes" else "")), "", None
    problem = _reference_aliasing(refs, case)
    if problem:
        return _fail(seed, shape, "aliasing", problem), precision, None
    checks = _compare_all(kf, case, first, refs)
    deterministic = None
    if second_run and all(c.passed for c in checks):
        del refs  # not kept across the second run: fetched again after it (views of a large buffer: freed)
        try:
            _run_poisoned(kf, case, config, device)
        except Exception as exc:
            return _fail(seed, shape, stage, f"second run raised {type(exc).__name__}: {exc}"), precision, False
        problem = _mutated(watched, case)
        if problem:
            return _fail(seed, shape, "inputs", f"second run: {problem}"), precision, False
        try:
            refs, _ = reference_outputs(kf, pristine, case.outputs, blank)
        except Exception as exc:
            return _fail(seed, shape, stage, f"reference raised {type(exc).__name__}: {exc}"), precision, None
        again = _compare_all(kf, case, {n: case.inputs[n] for n in case.outputs}, refs)
        if not all(c.passed for c in again):
            bad = next(c for c in again if not c.passed)
            return SeedCheck(seed=seed, passed=False, outputs=again, stage=stage, shape=shape,
                             error=f"second run on the same inputs: {bad.name}: {bad.reason}"), precision, False
        deterministic = all(bits_equal(first[n], case.inputs[n]) for n in case.outputs)
    return SeedCheck(seed=seed, passed=all(c.passed for c in checks), outputs=checks, stage=stage,
                     shape=shape), precision, deterministic


def check_seed(kf: KernelFile, shape: Shape, config: Config, seed: int, device: str, *,
               test_determinism: bool = False, stage: Stage = "check") -> tuple[SeedCheck, str, bool | None]:
    """Check one seed at one shape (fresh inputs from ``setup``); see :func:`run_and_compare` (the first seed,
    ``test_determinism``, also runs twice and watches the inputs)."""
    return run_and_compare(kf, make_case(kf, shape, seed, device), config, device, stage, second_run=test_determinism,
                           watch_inputs=test_determinism)


def recheck(kf: KernelFile, case: Case, config: Config, device: str, seed: int = FRESH_SEED) -> SeedCheck:
    """After timing: give the case's own tensors values no call has seen and run once more with the outputs as the
    last timed launch left them; it must match the reference (stage ``recheck``). The pointers the kernel saw
    while timed stay the same. (Unwritten elements are the pre-check's poison's business: a poisoned second
    phase here added a launch and a float64 reference per evaluation and caught nothing the first phase missed.)

    The values are one more draw of :func:`kernelpilot.kernels.case.draw_values`, the function that gave every
    timed launch its values (``setup`` at an unpredictable seed, floating tensors scaled by a factor never used
    before), so the re-check is indistinguishable from a timed launch, structure ``setup`` builds is kept, and a
    result cached by pointer or content, work stashed in ``setup``, or a kernel that stops working after some
    calls fail here. The in-place tensors' pristine copies take the new values (the run restores from them).

    Args:
        seed: unused, kept for callers: the values' ``setup`` seed is drawn unpredictably (a kernel that knew it
            could prepare the answer) and named in the failure message, which makes the failure reproducible.
    """
    from kernelpilot.kernels.case import draw_values

    import torch

    source = draw_values(case).text
    for name, saved in case.pristine.items():
        saved.copy_(case.inputs[name])
    previous = {n: keep_copy(case.inputs[n]) for n in case.outputs if isinstance(case.inputs.get(n), torch.Tensor)
                and n not in case.pristine}
    check, _, _ = run_and_compare(kf, case, config, device, "recheck", poison_outputs=False, watch_inputs=False)
    del seed
    if not check.passed:
        why = check.error or next((o.reason for o in check.outputs if not o.passed), "")
        failed = [o.name for o in check.outputs if not o.passed and o.name in previous]
        what = STALE_NOTE if check.error or not failed else _stale_or_recomputed(kf, case, failed, previous)
        check = check.model_copy(update={"stage": "recheck" if check.stage == "check" else check.stage,
                                         "error": f"with the outputs still holding the previous result, on "
                                                  f"{source}: {why} ({what})"})
    return check


def _stale_or_recomputed(kf: KernelFile, case: Case, failed: list[str], previous: dict[str, Any]) -> str:
    """:data:`STALE_NOTE` when some element of a failing output still holds its previous value where that value is
    wrong for the new inputs (a result cached, or left, from before: part of a row counts), else
    :data:`RECOMPUTED_NOTE` (every wrong element was written anew). The reference is asked again (its process
    caches by content); when it cannot answer, stale is assumed (the old wording). Raises nothing."""
    import torch

    try:
        refs, _ = reference_outputs(kf, case.inputs, failed)
        for n in failed:  # in chunks: the previous result may be in host memory, the reference too (large outputs)
            out, prev, ref = (t.detach().reshape(-1) for t in (case.inputs[n], previous[n], refs[n]))
            for a in range(0, out.numel(), CHUNK_ELEMENTS):
                o = out[a:a + CHUNK_ELEMENTS]
                p = prev[a:a + CHUNK_ELEMENTS].to(o.device)
                r = ref[a:a + CHUNK_ELEMENTS].to(o.device, torch.float64)
                if bool(((o == p) & ~torch.isclose(p.to(torch.float64), r, rtol=1e-3, atol=1e-6)).any()):
                    return STALE_NOTE
    except Exception:  # noqa: BLE001 - no second reference: keep the stricter reading
        return STALE_NOTE
    return RECOMPUTED_NOTE


#: The re-check's words for a failing output left as the previous result (or a launch that failed outright).
STALE_NOTE = "the failing outputs still hold the previous result"
#: ... and for one the launch wrote anew but wrong: the kernel's own miss at fresh values, not a cached result.
RECOMPUTED_NOTE = ("the outputs were written anew, wrong at these values: not a stale result but a wrong one the "
                   "check's seeds did not draw")


def _tolerance_notes(kf: KernelFile, case: Case, strict: bool) -> tuple[dict[str, Tolerance], str | None, list[str]]:
    tols = {n: tolerance_for(case.inputs[n].dtype, kf) for n in case.outputs}
    notes = [f"{n}: tolerance loosened by the kernel file to atol={t.atol:g}, rtol={t.rtol:g} (dtype: "
             f"{t.default_atol:g}/{t.default_rtol:g})" for n, t in tols.items() if t.loosened]
    over = [n for n, t in tols.items() if t.over_cap]
    if over:
        return tols, (f"tolerance of {over[0]!r} (atol={tols[over[0]].atol:g}, rtol={tols[over[0]].rtol:g}) exceeds "
                      "the caps atol<=0.1, rtol<=0.1: a check that loose proves nothing"), notes
    if strict and notes:
        return tols, f"--strict refuses loosened tolerances: {notes[0]}", notes
    return tols, None, notes


def check_correctness(kf: KernelFile, shape: Shape, config: Config, device: str,
                      seeds: tuple[int, ...] = DEFAULT_SEEDS, *, strict: bool = False,
                      other_shapes: bool = True) -> CorrectnessResult:
    """Check the kernel at ``shape`` with ``config`` over fresh inputs for each seed, then at the derived shapes.

    Args:
        device: ``"cuda"`` or ``"cpu"`` (the Triton interpreter).
        seeds: one fresh input set per seed (3 by default).
        strict: refuse loosened tolerances and skipped derived shapes.
        other_shapes: also check at :func:`kernelpilot.kernels.shapes.derived_shapes` (seed :data:`FRESH_SEED`).

    Returns:
        A :class:`CorrectnessResult`; kernel or reference exceptions are recorded in it, not raised.

    Raises:
        ContractError: ``setup`` broke the contract at ``shape``; RoleMismatch (a ContractError): a declared role
            contradicts the observed one (:func:`observe_case_roles`, run once per file and shape).
    """
    from kernelpilot.kernels.shapes import derived_shapes

    results: list[SeedCheck] = []
    precision, deterministic = "", None
    first = make_case(kf, shape, seeds[0] if seeds else 0, device)  # the first seed's inputs, checked below too
    roles = observe_case_roles(kf, first)  # RoleMismatch (a ContractError) when a declaration is contradicted
    tols, refusal, notes = _tolerance_notes(kf, first, strict)
    notes = [*(roles.notes if roles is not None else []), *notes]
    shapes_checked = [dict(shape)]
    if refusal:
        results.append(_fail(seeds[0] if seeds else 0, shape, "tolerance", refusal))
    for i, seed in enumerate(seeds if not refusal else ()):
        check, prec, det = (run_and_compare(kf, first, config, device, second_run=True, watch_inputs=True) if i == 0
                            else check_seed(kf, shape, config, seed, device))
        first = None  # one case's tensors alive at a time (a full-shape set can be gigabytes)
        results.append(check)
        precision = precision or prec
        deterministic = det if i == 0 else deterministic
        if not check.passed:
            break
    if other_shapes and results and all(r.passed for r in results):
        extra, extra_notes = derived_shapes(kf, shape, config)
        notes += extra_notes
        for other in extra:
            try:
                case = make_case(kf, other, FRESH_SEED, device)
            except ContractError as exc:
                notes.append(f"derived shape {other} not checked: {exc.message.splitlines()[0][:200]}")
                continue
            observe_case_roles(kf, case, derived=True)  # a tensor written in full at one shape may be written in part at another
            check, _, _ = run_and_compare(kf, case, config, device, "shapes", watch_inputs=False)
            shapes_checked.append(dict(other))
            results.append(check if check.passed or check.stage != "check" else check.model_copy(update={"stage": "shapes"}))
            if not check.passed:
                break
        skipped = [n for n in notes if "not checked" in n]
        if strict and skipped and all(r.passed for r in results):
            results.append(_fail(FRESH_SEED, shape, "tolerance", f"--strict refuses: {skipped[0]}"))
    return _result(kf, shape, config, device, results, precision, deterministic, shapes_checked, tols, notes, roles)


def _result(kf: KernelFile, shape: Shape, config: Config, device: str, results: list[SeedCheck], precision: str,
            deterministic: bool | None, shapes_checked: list[Shape], tols: dict[str, Tolerance],
            notes: list[str], roles: RoleReport | None = None) -> CorrectnessResult:
    passed = bool(results) and all(r.passed for r in results)
    if passed:
        worst = max((o.rel_l2_error or 0.0) for r in results for o in r.outputs)
        summary = (f"PASS on {sum(1 for r in results if r.shape == shape)} seeds and {len(shapes_checked)} "
                   f"shape(s); worst relative L2 error {worst:.3g}")
        if deterministic is False:
            summary += "; WARNING: two runs on the same inputs differ bitwise (race or atomics)"
    else:
        bad = next(r for r in results if not r.passed)
        why = bad.error or next(o.reason for o in bad.outputs if not o.passed)
        where = f" at shape {bad.shape}" if bad.stage == "shapes" else ""
        summary = f"FAIL ({bad.stage}) on seed {bad.seed}{where}: {why}"
        limits = kf.backend.limitations(kf) if kf.backend is not None else None
        if limits and bad.stage in ("check", "shapes"):  # not a verdict on the kernel: the emulation is inexact
            summary += f" — {limits}"
    if notes:
        summary += "; " + "; ".join(notes)
    return CorrectnessResult(passed=passed, summary=summary, shape=shape, config=config, device=device,
                             reference_dtype=precision or "not run", deterministic=deterministic, seeds=results,
                             failed_stage=None if passed else next(r.stage for r in results if not r.passed),
                             shapes_checked=shapes_checked, tolerances=tols, notes=notes, roles=roles)
