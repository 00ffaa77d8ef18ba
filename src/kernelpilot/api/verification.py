"""``kernelpilot verify``: one config through every defence, and the step that refused it (or none).

Every row of the stage table (:data:`kernelpilot.search.stages.STAGES`: config, first launch, timer guard, check
over seeds, derived shapes, timing on refreshed inputs, re-check on unseen values, device activity, speed-of-light
floor), preceded by the static screen and the declared-work check (:data:`kernelpilot.search.stages.LOAD_STAGES`),
in an isolated worker whose timer functions were bound before the kernel file was imported. The answer names the
**stage** that caught the kernel (docs/measuring.md, "The kernel is an adversary"), so an adversarial suite can
assert that each cheat is stopped where it must be.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from kernelpilot.records.evaluation import Evaluation
from kernelpilot.search.isolated import DEFAULT_TIMEOUT_S, IsolatedKernel
from kernelpilot.search.stages import LOAD_STAGES, SUBSETS, stage_of
from kernelpilot.target import Target

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile
    from kernelpilot.search.worker_child import WorkerOptions

__all__ = ["STAGES", "VerifyResult", "accepted_message", "stage_of", "verify"]

#: The steps that can refuse a kernel, in the order they run (read from the stage table); ``none``: accepted;
#: ``failure``: it failed in a way that is not an integrity question (compile error, crash, timeout).
STAGES = (*LOAD_STAGES, *SUBSETS["verify"], "none", "failure")


class VerifyResult(BaseModel):
    """``kernelpilot verify``: whether the config's result can be trusted, and if not which step said so.

    ``evaluation`` is the full record when the kernel got that far; ``screen_flags`` the static screen's
    non-refusing findings; ``records`` the correctness, timing, re-check and activity records (JSON).
    ``stages_run``: the stages that checked the kernel, in order (the loading steps first); ``stages_skipped``:
    stage -> why it checked nothing (``device_activity`` needs a GPU; ``floor``: an interpreted time is not a
    measurement). An accepted kernel with a skipped stage is accepted *by the stages that ran*, and ``message``
    names what was skipped; "every check passed" only when none was."""

    kernel: str
    accepted: bool
    stage: str
    status: str
    message: str
    evaluation: Evaluation | None = None
    screen_flags: list[str] = []
    records: dict[str, Any] = {}
    stages_run: list[str] = []
    stages_skipped: dict[str, str] = {}


def accepted_message(skipped: dict[str, str]) -> str:
    """What an accepted verdict says: ``every check passed`` when no stage was skipped, else ``accepted by the
    stages that ran; skipped: device_activity (needs a GPU ...), ...``. Raises nothing."""
    if not skipped:
        return "every check passed"
    return "accepted by the stages that ran; skipped: " + "; ".join(f"{k} ({why})" for k, why in skipped.items())


def verify(kernel: str | Path, *, shape: dict[str, Any] | None = None, config: dict[str, Any] | None = None,
           ref: str | Path | None = None, strict: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S) -> VerifyResult:
    """Run one config of ``kernel`` through every defence (module docstring). Never raises for the kernel's own
    faults: they are the answer.

    Raises:
        ContractError: the file breaks the contract in a way that is not an integrity question (missing names).
    """
    from kernelpilot.errors import DeclarationError, KernelFailed, ScreenRefused

    def refused(stage: str, status: str, exc: Any) -> VerifyResult:
        ran = list(LOAD_STAGES[:LOAD_STAGES.index(stage) + 1]) if stage in LOAD_STAGES else []
        return VerifyResult(kernel=str(kernel), accepted=False, stage=stage, status=status, message=exc.message,
                            stages_run=ran)

    try:
        with IsolatedKernel(kernel, ref, interpreted=None, timeout_s=timeout_s) as iso:
            return VerifyResult.model_validate_json(
                iso.call("kernelpilot.api.verification:_verify_in_worker", shape, config, strict))
    except ScreenRefused as exc:
        return refused("screen", "screened", exc)
    except DeclarationError as exc:
        return refused("declaration", "declaration", exc)
    except KernelFailed as exc:
        return refused(stage_of(exc.failure), exc.failure, exc)


def _verify_in_worker(kf: KernelFile, opts: WorkerOptions, target: Target, shape: dict[str, Any] | None,
                      config: dict[str, Any] | None, strict: bool) -> str:
    """Worker side of :func:`verify`: the ``verify`` subset of the stage table (every stage) after the declared-work
    check; the VerifyResult as JSON.

    Raises:
        DeclarationError: the declared work is below what the tensors move (stage ``declaration``).
    """
    from kernelpilot.app.context import roofline_at
    from kernelpilot.measure.correctness import observed_roles_at
    from kernelpilot.kernels.contract import resolve_config, resolve_shape
    from kernelpilot.search.stages import StageContext, evaluate

    shp, cfg = resolve_shape(kf, shape), resolve_config(kf, config)
    roles = observed_roles_at(kf, shp, target.torch_device)  # RoleMismatch (a DeclarationError): a role contradicted
    roof, _, _ = roofline_at(kf, shp, target, None, roles)  # DeclarationError: declared work below the tensors'
    wopts = opts.model_copy(update={"shape": shp, "strict": strict,
                                    "floor_ns": roof.floor_ns if roof else None,
                                    "sol_tolerance": roof.sol_tolerance if roof else 0.05})
    ctx = StageContext(kf, wopts, target, cfg)
    ev = evaluate("verify", ctx)
    stage = stage_of(ev.status)
    accepted = stage == "none"
    return VerifyResult(kernel=str(kf.path), accepted=accepted, stage=stage, status=ev.status,
                        message=ev.message or (accepted_message(ev.stages_skipped) if accepted else ""),
                        evaluation=ev, screen_flags=list(kf.extras.get("screen_flags", [])),
                        records={k: v for k, v in ctx.records.items() if k not in ("timing", "stage")},
                        stages_run=[*LOAD_STAGES, *ev.stages_run], stages_skipped=dict(ev.stages_skipped)
                        ).model_dump_json()
