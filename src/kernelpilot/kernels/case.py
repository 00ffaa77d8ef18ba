"""One problem instance of a kernel file: the inputs ``setup`` built, which of them are outputs, in-place,
read in part or scratch, and the refresh every timed launch gets (docs/contract.md).

``setup``'s ``outputs``/``inplace``/``partial``/``scratch`` are claims (kept in :attr:`Case.declared`); once the
roles are observed (:func:`kernelpilot.kernels.roles.observe_roles`), :meth:`Case.apply_roles` makes the case
follow the observation: only pure outputs are poisoned, every other written tensor is restored."""

from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from kernelpilot.errors import ContractError

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile, Shape
    from kernelpilot.kernels.roles import RoleReport

__all__ = ["Case", "make_case", "poison_tensor", "shape_key"]


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@dataclass
class Case:
    """One problem instance: the inputs ``setup`` built, the names of the outputs among them, and the in-place ones.

    Attributes:
        inputs: name -> tensor or scalar, passed to ``run_kernel`` and ``reference`` as keywords.
        outputs: names of the tensors ``run_kernel`` writes, compared with the reference (declared; once roles are
            applied, those the reference was observed to write).
        inplace: the outputs whose prior values matter (read by the kernel, or kept where written only in part);
            restored by :meth:`restore` before each launch, never poisoned; the other outputs are poisoned.
        pristine: copies of the in-place tensors as ``setup`` built them (taken by :func:`make_case`).
        partial: tensors the kernel reads only in part (``setup()["partial"]``): a claim checked against the
            observed read fraction (docs/contract.md, "Buffer roles").
        scratch: inputs the kernel (or an autotune ``pre_hook``) may write freely: workspaces, locks, counters
            (``setup()["scratch"]``); not checked for modification, not counted in the minimum bytes.
        declared: what ``setup`` declared (``outputs``, ``inplace``, ``partial``, ``scratch``, and ``may_write``:
            the seed ABI's non-const pointers), kept as claims when :meth:`apply_roles` rewrites the lists above.
        roles: the observed :class:`~kernelpilot.kernels.roles.RoleReport` once applied, else None.
    """

    inputs: dict[str, Any]
    outputs: list[str]
    shape: Shape
    seed: int
    inplace: list[str] = field(default_factory=list)
    pristine: dict[str, Any] = field(default_factory=dict, repr=False)
    partial: list[str] = field(default_factory=list)
    scratch: list[str] = field(default_factory=list)
    declared: dict[str, list[str]] = field(default_factory=dict)
    roles: RoleReport | None = field(default=None, repr=False)
    _base: dict[str, Any] | None = field(default=None, repr=False)

    def apply_roles(self, report: RoleReport) -> None:
        """Follow observed roles: ``outputs`` (compared) become the tensors the reference writes, ``inplace``
        (restored before each launch, never poisoned) the written ones whose prior values matter or that are written
        only in part; pristine copies are taken of newly restored tensors (call before any launch). The declared
        lists stay in :attr:`declared`. A report naming no written tensor of this case leaves the lists as they are.
        """
        self.roles = report
        compared = [n for n in report.compared if n in self.inputs]
        if not compared:
            return
        self.outputs = compared
        self.inplace = [n for n in report.restored if n in self.inputs]
        self.pristine = {n: self.pristine[n] if n in self.pristine else self.inputs[n].detach().clone()
                         for n in self.inplace}
        self._base = None

    def refreshed_names(self) -> list[str]:
        """Tensor inputs the per-launch refresh gives new values: every tensor that is not an output (the
        observed ones once :meth:`apply_roles` ran, e.g. a seed non-const pointer that is only read) nor scratch;
        the in-place ones are refreshed from :attr:`pristine`."""
        import torch

        return [n for n, v in self.inputs.items()
                if isinstance(v, torch.Tensor) and n not in self.outputs and n not in self.scratch]

    def restore(self) -> None:
        """Copy the pristine values back into the in-place tensors (``copy_``, asynchronous on a GPU; same storage,
        so pointers captured by a launch stay valid). Does nothing without in-place tensors."""
        for name, saved in self.pristine.items():
            self.inputs[name].copy_(saved)

    @property
    def before_launch(self) -> Callable[[], None] | None:
        """:meth:`restore` when the case has in-place tensors, else None (for callers that only need inputs
        restored, e.g. ncu's replay); timers use :meth:`refresher`."""
        return self.restore if self.inplace else None

    def refresh(self, index: int) -> None:
        """Make the next launch see input values it has never seen, outside any timed region.

        Every floating input tensor (in-place ones too; not ``scratch``) becomes its value from ``setup`` scaled by
        ``1 + k·2⁻¹²`` with ``k = index mod 97 + 1`` (distinct across 97 consecutive launches, at most 2.4 %, same
        pointers). A kernel that memoizes results by pointer or by content then pays for the work in every timed
        sample (docs/measuring.md, "The kernel is an adversary"); one that skips work when its outputs already hold
        a result is caught by the re-check after timing. Integer inputs (indices) keep their values.
        """
        import torch

        if self._base is None:
            names = self.refreshed_names()
            self._base = {n: v.detach().clone() for n, v in self.inputs.items() if n in names
                          and v.dtype.is_floating_point}
        factor = 1.0 + (index % 97 + 1) * 2.0 ** -12
        for name, base in {**self._base, **self.pristine}.items():
            torch.mul(base, factor, out=self.inputs[name])

    def refresher(self) -> Callable[[], None]:
        """A ``before_each`` for the timers: :meth:`refresh` with a counter (one call per launch)."""
        counter = itertools.count()
        return lambda: self.refresh(next(counter))


def poison_tensor(t: Any) -> None:
    """Fill a tensor with NaN (floats), True (bools) or the dtype's minimum (integers) so unwritten elements show."""
    import torch

    if t.dtype.is_floating_point or t.dtype.is_complex:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).min)


def make_case(kf: KernelFile, shape: Shape, seed: int, device: str) -> Case:
    """Call ``setup(**shape, seed=seed, device=device)`` and validate what it returns.

    ``device`` is passed only when ``setup`` accepts it (a ``device`` parameter or ``**kwargs``).

    Roles observed earlier in this process (``kf.extras["roles_by_shape"]`` at this shape, else the last one
    observed, ``kf.extras["roles"]``; :func:`kernelpilot.measure.correctness.observe_case_roles`) are applied
    (:meth:`Case.apply_roles`); the declarations stay in :attr:`Case.declared`.

    When setup returns ``"inplace": [names]`` (outputs that ``run_kernel`` also reads), each named tensor is cloned
    once here into :attr:`Case.pristine` (extra memory: one copy of each in-place tensor) for :meth:`Case.restore`.

    Raises:
        ContractError: setup raised, or returned something other than ``{"inputs": dict, "outputs": [names]}``
            with every output name a tensor in ``inputs``; or ``inplace`` is not a list of output names.
    """
    import torch

    kwargs: dict[str, Any] = {**shape, "seed": seed}
    if _accepts(kf.setup, "device"):
        kwargs["device"] = device
    try:
        result = kf.setup(**kwargs)
    except Exception as exc:
        raise ContractError(f"{kf.path}: setup({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) raised "
                            f"{type(exc).__name__}: {exc}", "setup must build inputs for any shape in SHAPE") from exc
    hint = 'setup must return {"inputs": {name: tensor or scalar}, "outputs": [names of output tensors in inputs]}'
    if not isinstance(result, dict) or "inputs" not in result or "outputs" not in result:
        raise ContractError(f"{kf.path}: setup returned {type(result).__name__} without 'inputs' and 'outputs'", hint)
    inputs, outputs = result["inputs"], result["outputs"]
    if not isinstance(inputs, dict):
        raise ContractError(f"{kf.path}: setup()['inputs'] is a {type(inputs).__name__}, not a dict", hint)
    if isinstance(outputs, str) or not isinstance(outputs, (list, tuple)) or not outputs:
        raise ContractError(f"{kf.path}: setup()['outputs'] must be a non-empty list of names", hint)
    for name in outputs:
        if name not in inputs:
            raise ContractError(f"{kf.path}: output {name!r} is not among the inputs ({', '.join(inputs)})", hint)
        if not isinstance(inputs[name], torch.Tensor):
            raise ContractError(f"{kf.path}: output {name!r} is a {type(inputs[name]).__name__}, not a tensor", hint)
    inplace = result.get("inplace", [])
    ihint = 'list the outputs run_kernel also reads, e.g. "inplace": ["q", "k"] with "outputs": ["q", "k"]'
    if isinstance(inplace, str) or not isinstance(inplace, (list, tuple)):
        raise ContractError(f"{kf.path}: setup()['inplace'] must be a list of output names, "
                            f"got {type(inplace).__name__}", ihint)
    for name in inplace:
        if name not in outputs:
            raise ContractError(f"{kf.path}: in-place name {name!r} is not among the outputs ({', '.join(outputs)})",
                                ihint)
    if len(set(inplace)) != len(inplace):
        raise ContractError(f"{kf.path}: setup()['inplace'] repeats a name: {list(inplace)}", ihint)
    extra: dict[str, list[str]] = {}
    for key, example in (("partial", '"partial": ["table"] for an embedding table read by index'),
                         ("scratch", '"scratch": ["workspace"] for a buffer the kernel or a pre_hook writes')):
        names = result.get(key, [])
        if isinstance(names, str) or not isinstance(names, (list, tuple)) or any(
                n not in inputs or (key == "scratch" and n in outputs) or not isinstance(inputs[n], torch.Tensor)
                for n in names):
            what = "input tensors that are not outputs" if key == "scratch" else "tensors among the inputs"
            raise ContractError(f"{kf.path}: setup()[{key!r}] must list {what}, got {names!r}", f"e.g. {example}")
        extra[key] = list(names)
    extras = getattr(kf, "extras", None) or {}
    may_write = list(outputs) if extras.get("synthesized") and extras.get("signature") is not None else []
    declared = {"outputs": list(outputs), "inplace": list(inplace), "may_write": may_write, **extra}
    pristine = {name: inputs[name].detach().clone() for name in inplace}
    case = Case(inputs=dict(inputs), outputs=list(outputs), shape=dict(shape), seed=seed, inplace=list(inplace),
                pristine=pristine, declared=declared, **extra)
    observed = (extras.get("roles_by_shape") or {}).get(shape_key(shape), extras.get("roles"))
    if observed is not None:  # observed earlier in this process (the check), at this shape if it was: follow it
        case.apply_roles(observed)
    return case


def shape_key(shape: Shape) -> str:
    """The key of a shape in ``kf.extras["roles_by_shape"]`` (JSON, sorted keys)."""
    import json

    return json.dumps(dict(shape), sort_keys=True, default=str)
