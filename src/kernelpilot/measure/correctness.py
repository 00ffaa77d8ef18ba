"""Correctness: the kernel against a higher-precision reference, on fresh inputs, with dtype-aware tolerances.

Rules (docs/measuring.md, "Correctness"):

- the reference runs on float64 copies of the floating inputs where it can (falls back to the native dtype,
  and says so);
- outputs are filled with NaN (integers with a sentinel) before every kernel run, so unwritten elements fail;
  in-place outputs (``setup()["inplace"]``, e.g. RoPE's q and k) hold inputs: they are restored to their pristine
  values before every kernel run instead, and the reference sees those pristine values;
- every seed draws fresh inputs (3 seeds by default); NaN or Inf where the reference is finite never passes;
- per output: relative L2 error ``‖out − ref‖ / ‖ref‖ <= rtol`` and elementwise
  ``|out − ref| <= atol · scale + rtol · |ref|`` with ``scale = rms(ref)`` (1 when the reference is all zero):
  the absolute tolerance follows the output's magnitude, so tiny outputs cannot pass just by being under atol
  (KernelBench's zero outputs passed 4 of 60 problems that way);
- the kernel runs twice on the first seed's inputs; a bitwise difference is reported as non-deterministic
  (a moving error between runs points to a race).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelpilot.kernels.contract import Case, Config, KernelFile, Shape, make_case, run_kernel

if TYPE_CHECKING:
    import torch

# (atol, rtol) by output dtype; docs/measuring.md "Correctness" (fp32 1e-5/1e-3, fp16/bf16 1e-2/1e-2).
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-8, 1e-6),
    "float32": (1e-5, 1e-3),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}
DEFAULT_SEEDS = (0, 1, 2)


class OutputCheck(BaseModel):
    """The comparison of one output tensor with the reference, for one seed.

    Errors are in the output's units; ``scale`` is the reference's RMS used to scale ``atol``.
    """

    name: str
    dtype: str
    shape: list[int]
    n_elements: int
    n_nonfinite: int
    n_mismatched: int
    rel_l2_error: float | None
    max_abs_error: float | None
    atol: float
    rtol: float
    scale: float
    first_bad_index: list[int] | None = None
    first_bad_values: tuple[float, float] | None = None
    passed: bool
    reason: str


class SeedCheck(BaseModel):
    """All outputs for one seed; ``error`` holds the exception text when the kernel or reference raised."""

    seed: int
    passed: bool
    outputs: list[OutputCheck] = []
    error: str | None = None


class CorrectnessResult(BaseModel):
    """The verdict over all seeds: passed only when every seed passed."""

    passed: bool
    summary: str
    shape: dict[str, Any]
    config: dict[str, Any]
    device: str
    reference_dtype: str
    deterministic: bool | None
    seeds: list[SeedCheck]
    rule: str = ("elementwise |out-ref| <= atol*rms(ref) + rtol*|ref| and ||out-ref||/||ref|| <= rtol; "
                 "outputs NaN-filled before each run; NaN never passes")


def tolerance_for(dtype: torch.dtype, kf: KernelFile | None = None) -> tuple[float, float]:
    """(atol, rtol) for an output dtype; the kernel/ref file's ``atol``/``rtol`` override the table.

    Integer outputs must match exactly (0, 0).
    """
    import torch

    atol, rtol = TOLERANCES.get(str(dtype).removeprefix("torch."), (0.0, 0.0) if not dtype.is_floating_point else (1e-1, 1e-1))
    if kf is not None:
        atol = kf.atol if kf.atol is not None else atol
        rtol = kf.rtol if kf.rtol is not None else rtol
    return float(atol), float(rtol)


def poison(t: torch.Tensor) -> None:
    """Fill an output with NaN (floats) or the dtype's minimum (integers) so unwritten elements show."""
    import torch

    if t.dtype.is_floating_point or t.dtype.is_complex:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).min)


def _upcast(value: Any) -> Any:
    import torch
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
        return value.detach().to(torch.float64).clone()
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return value


def _clone(value: Any) -> Any:
    import torch
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _collect_reference(result: Any, ref_inputs: dict[str, Any], outputs: list[str]) -> dict[str, torch.Tensor]:
    import torch
    if result is None:
        return {name: ref_inputs[name] for name in outputs}
    if isinstance(result, torch.Tensor):
        result = (result,)
    if isinstance(result, dict):
        missing = [n for n in outputs if n not in result]
        if missing:
            raise ValueError(f"reference returned a dict without {missing}")
        return {n: result[n] for n in outputs}
    result = tuple(result)
    if len(result) != len(outputs):
        raise ValueError(f"reference returned {len(result)} values for {len(outputs)} outputs {outputs}")
    return dict(zip(outputs, result))


def reference_outputs(kf: KernelFile, inputs: dict[str, Any], outputs: list[str]) -> tuple[dict[str, torch.Tensor], str]:
    """Run the reference on float64 copies of the inputs (native copies if that fails).

    Returns:
        (output name -> reference tensor, the precision used: ``"float64"`` or ``"native (...)"``).

    Raises:
        Exception: whatever the reference raises in its native dtype.
    """
    ref_inputs = {k: _upcast(v) for k, v in inputs.items()}
    try:
        return _collect_reference(kf.reference(**ref_inputs), ref_inputs, outputs), "float64"
    except Exception as exc:  # some ops have no float64 kernel; fall back and say so
        note = f"native (float64 failed: {type(exc).__name__}: {exc})"
    ref_inputs = {k: _clone(v) for k, v in inputs.items()}
    return _collect_reference(kf.reference(**ref_inputs), ref_inputs, outputs), note


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> OutputCheck:
    """Compare one output with its reference (see the module docstring for the rule).

    Args:
        out: the kernel's output, any dtype.
        ref: the reference, same number of elements (upcast to float64 for the comparison).
    """
    import torch

    base = dict(name=name, dtype=str(out.dtype).removeprefix("torch."), shape=list(out.shape),
                n_elements=out.numel(), atol=atol, rtol=rtol)
    if ref.numel() != out.numel():
        return OutputCheck(**base, n_nonfinite=0, n_mismatched=out.numel(), rel_l2_error=None, max_abs_error=None,
                           scale=0.0, passed=False,
                           reason=f"shape mismatch: kernel {list(out.shape)} vs reference {list(ref.shape)}")
    try:  # on the output's device: a 64 M-element comparison on the host costs seconds per seed
        return _compare(base, out, ref, atol, rtol, out.device)
    except torch.OutOfMemoryError:
        return _compare(base, out, ref, atol, rtol, torch.device("cpu"))


def _compare(base: dict[str, Any], out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
             device: torch.device) -> OutputCheck:
    import torch
    o = out.detach().reshape(-1).to(device=device, dtype=torch.float64)
    r = ref.detach().reshape(-1).to(device=device, dtype=torch.float64)
    ref_finite = torch.isfinite(r)
    bad_nonfinite = ~torch.isfinite(o) & ref_finite
    n_nonfinite = int(bad_nonfinite.sum())
    scale = float(torch.sqrt(torch.mean(r[ref_finite] ** 2))) if bool(ref_finite.any()) else 0.0
    scale = scale if scale > 0 else 1.0
    diff = (o - r).abs()
    diff = torch.where(ref_finite, diff, torch.where(o.eq(r) | (o.isnan() & r.isnan()), 0.0, float("inf")))
    allowed = atol * scale + rtol * r.abs()
    mismatch = ~(diff <= allowed)  # NaN differences count as mismatches
    n_mismatched = int(mismatch.sum())
    finite_both = ref_finite & torch.isfinite(o)
    ref_norm = float(torch.linalg.vector_norm(r[ref_finite]))
    err_norm = float(torch.linalg.vector_norm((o - r)[finite_both]))
    rel_l2 = err_norm / ref_norm if ref_norm > 0 else err_norm
    max_abs = float(diff[finite_both].max()) if bool(finite_both.any()) else None
    first_idx, first_vals = None, None
    if n_mismatched:
        flat = int(torch.nonzero(mismatch)[0])
        first_idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(out.shape))] if out.dim() else []
        first_vals = (float(o[flat]), float(r[flat]))
    if n_nonfinite:
        passed, reason = False, f"{n_nonfinite} of {out.numel()} elements are NaN/Inf where the reference is finite " \
                                "(unwritten or overflowed)"
    elif n_mismatched:
        passed, reason = False, f"{n_mismatched} of {out.numel()} elements outside atol*rms(ref) + rtol*|ref|"
    elif rel_l2 > rtol:
        passed, reason = False, f"relative L2 error {rel_l2:.3g} > rtol {rtol:g}"
    else:
        passed, reason = True, f"relative L2 error {rel_l2:.3g} <= {rtol:g}; every element within tolerance"
    return OutputCheck(**base, n_nonfinite=n_nonfinite, n_mismatched=n_mismatched, rel_l2_error=rel_l2,
                       max_abs_error=max_abs, scale=scale, first_bad_index=first_idx, first_bad_values=first_vals,
                       passed=passed, reason=reason)


def _sync(device: str) -> None:
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _run_poisoned(kf: KernelFile, case: Case, config: Config, device: str) -> None:
    """Restore the in-place tensors, NaN-fill the other outputs, launch once and wait."""
    case.restore()
    for name in case.outputs:
        if name not in case.inplace:
            poison(case.inputs[name])
    run_kernel(kf, case.inputs, config)
    _sync(device)


def check_seed(kf: KernelFile, shape: Shape, config: Config, seed: int, device: str, *,
               test_determinism: bool = False) -> tuple[SeedCheck, str, bool | None]:
    """Check one seed. Returns (the check, the reference precision used, determinism or None if not tested).

    With ``test_determinism`` the kernel runs a second time on the same inputs (in-place tensors restored first)
    and the outputs are compared bitwise.
    """
    import torch

    case = make_case(kf, shape, seed, device)
    # the reference sees inputs the kernel never touched (in-place tensors: the case's pristine copies)
    pristine = {k: _clone(case.pristine.get(k, v)) for k, v in case.inputs.items()}
    try:
        _run_poisoned(kf, case, config, device)
    except Exception as exc:
        return SeedCheck(seed=seed, passed=False, error=f"kernel raised {type(exc).__name__}: {exc}"), "", None
    first = {n: case.inputs[n].clone() for n in case.outputs}
    try:
        refs, precision = reference_outputs(kf, pristine, case.outputs)
    except Exception as exc:
        return SeedCheck(seed=seed, passed=False, error=f"reference raised {type(exc).__name__}: {exc}"), "", None
    checks = []
    for name in case.outputs:
        atol, rtol = tolerance_for(case.inputs[name].dtype, kf)
        checks.append(compare(name, first[name], refs[name], atol, rtol))
    deterministic = None
    if test_determinism:
        try:
            _run_poisoned(kf, case, config, device)  # restores the in-place inputs first
            deterministic = all(torch.equal(first[n].nan_to_num(), case.inputs[n].nan_to_num()) for n in case.outputs)
        except Exception:
            deterministic = False
    return SeedCheck(seed=seed, passed=all(c.passed for c in checks), outputs=checks), precision, deterministic


def check_correctness(kf: KernelFile, shape: Shape, config: Config, device: str,
                      seeds: tuple[int, ...] = DEFAULT_SEEDS) -> CorrectnessResult:
    """Check the kernel at ``shape`` with ``config`` over fresh inputs for each seed.

    Args:
        device: ``"cuda"`` or ``"cpu"`` (the Triton interpreter).
        seeds: one fresh input set per seed (3 by default).

    Returns:
        A :class:`CorrectnessResult`; kernel or reference exceptions are recorded in it, not raised.

    Raises:
        ContractError: ``setup`` broke the contract.
    """
    results: list[SeedCheck] = []
    precision = ""
    deterministic: bool | None = None
    for i, seed in enumerate(seeds):
        check, prec, det = check_seed(kf, shape, config, seed, device, test_determinism=(i == 0))
        results.append(check)
        precision = precision or prec
        if i == 0:
            deterministic = det
    passed = all(r.passed for r in results)
    if passed:
        worst = max((o.rel_l2_error or 0.0) for r in results for o in r.outputs)
        summary = f"PASS on {len(seeds)} seeds; worst relative L2 error {worst:.3g}"
        if deterministic is False:
            summary += "; WARNING: two runs on the same inputs differ bitwise (race or atomics)"
    else:
        bad = next(r for r in results if not r.passed)
        why = bad.error or next(o.reason for o in bad.outputs if not o.passed)
        summary = f"FAIL on seed {bad.seed}: {why}"
        limits = kf.backend.limitations(kf) if kf.backend is not None else None
        if limits:  # not a verdict on the kernel: the CPU emulation cannot run it exactly
            summary += f" — {limits}"
    return CorrectnessResult(passed=passed, summary=summary, shape=shape, config=config, device=device,
                             reference_dtype=precision or "not run", deterministic=deterministic, seeds=results)
