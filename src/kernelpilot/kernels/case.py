"""One problem instance of a kernel file: the inputs ``setup`` built, which of them are outputs, in-place,
read in part or scratch, and the refresh every timed launch gets (docs/contract.md).

``setup``'s ``outputs``/``inplace``/``partial``/``scratch`` are claims (kept in :attr:`Case.declared`); once the
roles are observed (:func:`kernelpilot.kernels.roles.observe_roles`), :meth:`Case.apply_roles` makes the case
follow the observation: only pure outputs are poisoned, every other written tensor is restored."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from kernelpilot.errors import ContractError
from kernelpilot.kernels.plain import plain_aliases, storage_span

if TYPE_CHECKING:
    from kernelpilot.kernels.contract import KernelFile, Shape
    from kernelpilot.kernels.roles import RoleReport

__all__ = ["Case", "Draw", "POOL_BYTES", "Refresher", "POOL_SETS", "draw_values", "make_case", "poison_tensor", "refreshed_names",
           "scale_span", "shape_key"]


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
        redraw: ``seed -> Case``: the same kernel file's ``setup`` at the same shape and device, another seed (set
            by :func:`make_case`); the refresh's source of values (:func:`draw_values`).
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
    redraw: Callable[[int], Case] | None = field(default=None, repr=False, compare=False)
    _pool: Any = field(default=None, repr=False, compare=False)
    declared: dict[str, list[str]] = field(default_factory=dict)
    roles: RoleReport | None = field(default=None, repr=False)

    def apply_roles(self, report: RoleReport) -> None:
        """Follow observed roles: ``outputs`` (compared) become the tensors the reference writes, ``inplace``
        (restored before each launch, never poisoned) the written ones whose prior values matter or that are written
        only in part; pristine copies are taken of newly restored tensors (call before any launch). The declared
        lists stay in :attr:`declared`. A report naming no written tensor of this case leaves the lists as they are.
        """
        self.roles = report
        declared = self.declared.get("outputs", self.outputs)
        order = {n: (declared.index(n) if n in declared else len(declared), i) for i, n in enumerate(self.inputs)}
        # the declared outputs keep their order (a reference returning a tuple returns it in that order), then the
        # tensors observed written that were not declared outputs, in argument order
        compared = sorted((n for n in report.compared if n in self.inputs), key=order.__getitem__)
        if not compared:
            return
        self.outputs = compared
        self.inplace = [n for n in report.restored if n in self.inputs]
        self.pristine = {n: self.pristine[n] if n in self.pristine else self.inputs[n].detach().clone()
                         for n in self.inplace}
        self._pool = None  # the refresh's sets were drawn for the declared roles

    def refreshed_names(self) -> list[str]:
        """Tensor inputs the per-launch refresh and the re-check give new values (:func:`refreshed_names`): those
        the kernel reads, by the observed roles once :meth:`apply_roles` ran (e.g. a seed non-const pointer that is
        only read)."""
        return refreshed_names(self)

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
        """Write the values of timed launch ``index`` into the case's input tensors (outside any timed region).

        The values are a draw of :func:`draw_values`, the one function that also gives the re-check its values
        (:func:`kernelpilot.measure.correctness.recheck`), so timed and re-checked launches see one distribution
        and a kernel cannot tell them apart by looking at the values (a refresh that scaled by ``1 + k·2⁻¹²`` while
        the re-check scaled by 1.03–1.08 let a kernel skip its work when "timed": a 3.4× false speedup, issue 23).

        Every input tensor the kernel reads is written (not outputs that are not in-place, not ``scratch``), of any
        dtype: fp8, integers and bools included; ``copy_`` into the same storage, so pointers stay valid. The
        values come from ``setup`` itself called at fresh unpredictable seeds (so they keep whatever structure
        ``setup`` builds: valid indices, masks, monotone offsets, RoPE's equal cos/sin halves), then every floating
        tensor is scaled by a factor new at each launch (:func:`draw_values` has the rule and its reasons).

        Cost per launch: one pass over the refreshed inputs (``torch.mul(..., out=)`` or ``copy_``; fp8 through a
        float32 temporary), as before. When no floating tensor is refreshed (integer or bool inputs only), no
        factor can make a set new, so every launch gets its own ``setup`` call instead (the cost of ``setup``).
        Memory: the pool of :data:`POOL_SETS` sets, fewer when a set exceeds :data:`POOL_BYTES` (at least one).

        Raises:
            ContractError: ``setup`` raised at a fresh seed (from :func:`make_case`).
        """
        draw_values(self, index)

    def refresher(self, keep: int = 0, copy: Callable[[Any], Any] | None = None) -> Refresher:
        """A ``before_each`` for the timers (:class:`Refresher`: :meth:`refresh` before every launch, warm-ups too),
        which with ``keep`` > 0 also keeps the outputs of ``keep`` launches chosen in secret (its ``after``, the
        timers' ``after_each``), for :func:`kernelpilot.measure.timed_check.check_timed`; ``copy`` makes each kept
        copy (default ``clone``; the check passes :func:`kernelpilot.measure.memory.keep_copy`, which keeps large
        outputs in host memory). Refreshers of one case share the case's pool; each launch's factor is drawn
        anew, so two refreshers never replay one set of values."""
        return Refresher(self, keep, copy)


@dataclass
class Draw:
    """The values one launch got (:func:`draw_values`): the ``setup`` seed, the base set (a pool set, or a fresh
    ``setup`` call's values when nothing is floating), the uniform number ``u`` that fixed the factors, and the
    text for a failure message. :meth:`values` rebuilds the launch's inputs into new tensors."""

    seed: int
    base: dict[str, Any]
    u: float
    text: str

    def values(self, case: Case) -> dict[str, Any]:
        """The launch's inputs, as new tensors: ``case.inputs`` with every refreshed tensor replaced by this draw's
        values (the same arithmetic as the refresh, so bit for bit what the launch saw)."""
        import torch

        out = dict(case.inputs)
        with torch.no_grad():
            for name, src in self.base.items():
                dst = torch.empty_like(case.inputs[name])
                _write_one(src, dst, self.u, name in _floating(case, self.base))
                out[name] = dst
        return out


def _floating(case: Case, base: dict[str, Any]) -> set[str]:
    return {n for n in base if case.inputs[n].dtype.is_floating_point or case.inputs[n].dtype.is_complex}


class Refresher:
    """``before_each``/``after_each`` of one timed run on a case (:meth:`Case.refresher`).

    Calling it (``before_each``) writes a new draw into the case's tensors (:func:`draw_values`) and logs it.
    :meth:`after` (``after_each``, called after the launch's end event, outside the timed region) keeps a copy of
    the outputs of ``keep`` launches chosen by reservoir sampling over the launches offered to it (every launch, or
    in a round-robin only the kernel's: each offered launch equally likely to be kept, whatever the run's length),
    with a generator seeded from :mod:`secrets`: the kernel cannot know which of its launches will be compared
    (issue 24: "check what you time"). Memory: ``keep`` copies of the outputs.

    Attributes:
        launches: launches refreshed so far. offered: launches offered to the reservoir (:meth:`after`).
        kept: ``(launch number, tag, draw, outputs copy)`` of the chosen ones.
    """

    def __init__(self, case: Case, keep: int = 0, copy: Callable[[Any], Any] | None = None) -> None:
        import random
        import secrets

        self.case, self.keep = case, keep
        self.copy = copy if copy is not None else (lambda t: t.detach().clone())
        self.launches = 0
        self.offered = 0
        self.current: Draw | None = None
        self.kept: list[tuple[int, str, Draw, dict[str, Any]]] = []
        self._rng = random.Random(secrets.randbits(64))

    def __call__(self) -> None:
        self.launches += 1
        self.current = draw_values(self.case, self.launches)

    def after(self, tag: str = "") -> None:
        """After a launch: keep its outputs when the reservoir draws it (``tag`` names the side of an A/B)."""
        if not self.keep or self.current is None:
            return
        t = self.launches  # the launch just made: every timer calls after() once per before_each()
        self.offered += 1  # the launches offered to the reservoir: all of them, or one contender's of a round-robin
        slot = len(self.kept) if len(self.kept) < self.keep else self._rng.randrange(self.offered)
        if slot >= self.keep:
            return
        snap = {n: self.copy(self.case.inputs[n]) for n in self.case.outputs}
        item = (t, tag, self.current, snap)
        if slot == len(self.kept):
            self.kept.append(item)
        else:
            self.kept[slot] = item


#: Sets of input values drawn from ``setup`` and kept for the refresh (each launch scales one of them anew).
POOL_SETS = 3
#: The pool holds at most this many bytes (one set at least, whatever its size): inputs can be gigabytes.
POOL_BYTES = 2 << 30
#: Offset of the seeds the pool passes to ``setup``: far from the check's seeds (0, 1, 2, 1000).
_SEED_BASE = 1 << 20


def refreshed_names(case: Case) -> list[str]:
    """The inputs every launch gets new values for: tensors the kernel reads (in-place outputs included; not
    outputs it only writes, not ``scratch``), any dtype."""
    import torch

    return [n for n, v in case.inputs.items() if isinstance(v, torch.Tensor) and n not in case.scratch
            and (n not in case.outputs or n in case.inplace)]


def scale_span(dtype: Any) -> float:
    """How far below 1 the per-launch factor of a floating dtype reaches: factors lie in
    ``[1 − span, 1 − span/2)``, with ``span = min(0.5, max(2⁻⁵, 8·eps))`` (``eps = torch.finfo(dtype).eps``:
    2⁻²³ fp32, 2⁻¹⁰ fp16, 2⁻⁷ bf16, 2⁻³ fp8 e4m3, 2⁻² fp8 e5m2). At least 8 ulps, so rounding back to the
    dtype cannot undo the change (bf16, fp8), and at least 3 % so a key built from a coarse rounding of the
    values changes too; below 1 so fp8 values at the format's maximum (amax-scaled quantized data) never
    overflow or saturate, and non-negative indices held in a float tensor stay in range. Complex dtypes use their real part's eps."""
    import torch

    real = {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)
    return min(0.5, max(2.0 ** -5, 8 * torch.finfo(real).eps))


class _Pool:
    """The refresh's state on one case: the sets drawn from ``setup``, their seeds, and the generator of the
    per-launch choices (seeded from :mod:`secrets`: a kernel that reads this module cannot predict the values)."""

    def __init__(self, case: Case) -> None:
        import secrets

        import torch

        self.names = refreshed_names(case)
        self.floating = [n for n in self.names if case.inputs[n].dtype.is_floating_point
                         or case.inputs[n].dtype.is_complex]
        self.gen = torch.Generator(device="cpu").manual_seed(secrets.randbits(62))
        self.sets: list[dict[str, Any]] = []
        self.seeds: list[int] = []
        self.factors_used: set[float] = set()
        nbytes = sum(case.inputs[n].numel() * case.inputs[n].element_size() for n in self.names)
        self.size = max(1, min(POOL_SETS, POOL_BYTES // max(nbytes, 1)))

    def new_seed(self) -> int:
        import torch

        return _SEED_BASE + int(torch.randint(0, 1 << 30, (), generator=self.gen))

    def fresh_set(self, case: Case) -> tuple[int, dict[str, Any]]:
        """(seed, name -> tensor): ``setup`` at a new seed; a tensor whose shape, dtype or device differs from the
        case's (a setup that draws sizes at random) is replaced by the case's own value from ``setup``."""
        seed = self.new_seed()
        if case.redraw is None:  # a Case built by hand: its own values are the only draw there is
            drawn: dict[str, Any] = {}
        else:
            other = case.redraw(seed)
            drawn = {**other.inputs, **other.pristine}
        out = {}
        for n in self.names:
            mine = case.pristine.get(n, case.inputs[n])
            got = drawn.get(n)
            same = got is not None and hasattr(got, "shape") and got.shape == mine.shape and \
                got.dtype == mine.dtype and got.device == mine.device
            own = case.inputs[n]
            if same and got.untyped_storage().data_ptr() not in (own.untyped_storage().data_ptr(),
                                                                mine.untyped_storage().data_ptr()):
                out[n] = got.detach()
            else:  # another shape, or a setup that hands back the case's own tensors (a cached setup): a copy,
                out[n] = (got if same else mine).detach().clone()  # never the tensor the launch writes into
        return seed, out

    def draw(self, case: Case) -> tuple[int, dict[str, Any], float]:
        """(seed, base set, u in [0, 1)): the base set of one launch and the uniform number that fixes its factors."""
        import torch

        if not self.floating:  # nothing to scale: a fresh setup call per launch, kept no longer than the launch
            seed, values = self.fresh_set(case)
            return seed, values, 0.0
        while len(self.sets) < self.size:
            seed, values = self.fresh_set(case)
            self.sets.append(values)
            self.seeds.append(seed)
        i = int(torch.randint(0, len(self.sets), (), generator=self.gen))
        u = float(torch.rand((), generator=self.gen, dtype=torch.float64))
        while u in self.factors_used:  # a factor once used is never used again
            u = float(torch.rand((), generator=self.gen, dtype=torch.float64))
        self.factors_used.add(u)
        return self.seeds[i], self.sets[i], u


def draw_values(case: Case, index: int = 0) -> Draw:
    """Write one launch's values into the case's refreshed tensors (:func:`refreshed_names`); the refresh of every
    timed launch and the re-check both call this, so both draw from one distribution. Returns where the values
    came from as a :class:`Draw` (its ``text`` for a failure message, e.g.
    ``"setup(seed=1051234) scaled by 0.9791 (float32)"``; :meth:`Draw.values` rebuilds the launch's inputs).

    The rule, against a kernel that is an adversary (docs/measuring.md, "The kernel is an adversary"):

    - base values are ``setup``'s own, at seeds drawn from an unpredictable generator (never the check's
      seeds): structure is kept, and a kernel cannot precompute answers for seeds it cannot know;
    - each floating tensor becomes ``base × f``, ``f = 1 − span·(1 + u)/2`` with ``u`` uniform in [0, 1) and new at
      every draw (never reused), ``span`` per dtype (:func:`scale_span`): no two launches see the same values, so
      a cache by pointer or by content never hits, and no value ``setup`` returned reaches the kernel unmodified,
      so a result computed in ``setup`` and stashed cannot match (tests/adversarial/cheats/setup_stash.py);
    - integer and bool tensors are ``setup``'s values as drawn (scaling would break indices); with floating
      inputs beside them the set as a whole is new at every launch. With no floating input every draw is a new
      ``setup`` call: a content cache never hits, but a ``setup`` that stashes answers by content is not caught
      by values (integers offer no structure-keeping change): the speed-of-light floor remains against it.

    Limits: one factor per dtype per launch is a uniform scale, so a kernel that is exactly scale-equivariant
    (a GEMM) and caches by the *normalised* content of the pool's few base sets (or whose ``setup`` stashes the
    answers for the sets it returns, under such a key) could answer later launches from that cache, rescaled,
    and pass the re-check; a kernel that is not scale-equivariant returns stale results there and fails; fp8 tensors take few distinct values, so two factors may round
    to one fp8 tensor (the set is still new where any other input is floating).

    Args:
        index: the launch's number (unused by the values: the factor is drawn, not derived from it; kept for
            :meth:`Case.refresh`'s callers).
    """
    import torch

    del index
    pool = case._pool if case._pool is not None else _Pool(case)
    case._pool = pool
    seed, base, u = pool.draw(case)
    with torch.no_grad():  # inputs that require grad take values too (out= and copy_ refuse them under autograd)
        parts = _write(pool, base, u, case)
    how = f" scaled by {', '.join(dict.fromkeys(parts))}" if parts else " (integer/bool inputs as drawn)"
    return Draw(seed=seed, base={n: base[n] for n in pool.names}, u=u, text=f"setup(seed={seed}){how}")


def _write(pool: _Pool, base: dict[str, Any], u: float, case: Case) -> list[str]:
    """Copy one draw into the case's tensors, floating ones scaled by their dtype's factor for ``u``; returns the
    factors as text."""
    parts = []
    for name in pool.names:
        f = _write_one(base[name], case.inputs[name], u, name in pool.floating)
        if f is not None:
            parts.append(f"{f:.6g} ({str(case.inputs[name].dtype).removeprefix('torch.')})")
    return parts


def _write_one(src: Any, dst: Any, u: float, floating: bool) -> float | None:
    """Write ``src`` into ``dst`` (same shape and dtype), scaled by the factor of ``u`` for ``dst``'s dtype when
    ``floating``; returns the factor (None: copied as drawn). A broadcast ``dst`` (internal overlap) takes the
    storage of ``src`` laid out the same way (:func:`~kernelpilot.kernels.plain.storage_span`): the
    structure ``setup`` built is kept."""
    import torch

    span = storage_span(dst)
    if span is not dst:
        src_span = storage_span(src)
        if src_span.shape != span.shape:
            raise ContractError(f"setup built a broadcast input of {tuple(dst.shape)} with strides {dst.stride()} "
                                f"at one seed and strides {src.stride()} at another",
                                "build each input the same way at every seed")
        src, dst = src_span, span
    if not floating:
        dst.copy_(src)
        return None
    f = 1.0 - scale_span(dst.dtype) * (1.0 + u) / 2.0
    if dst.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
                         torch.complex128):  # fp8 and kin have no mul kernel: through a float32 temporary
        dst.copy_(src.to(torch.float32).mul_(f))
    else:
        torch.mul(src, f, out=dst)  # one pass, rounded once to the tensor's dtype
    return f


def poison_tensor(t: Any, finite: bool = False) -> None:
    """Fill a tensor so unwritten elements show: NaN for floating dtypes (fp8 included: e4m3fn and e5m2 have NaN,
    the fnuz variants their single NaN, byte 0x80, as ``torch`` encodes them), NaN+NaN·i for complex, True for
    bool, the minimum for signed integers and the maximum for unsigned ones (their minimum, 0, is too common a
    result to show anything). ``float8_e8m0fnu`` (exponents only) gets its NaN, 0xFF.

    ``finite``: floating tensors get a quarter of the dtype's largest finite value instead of NaN — for an output
    the file declares in place that the reference never reads: a kernel that computes ``alpha·A·B + beta·C`` with
    ``beta = 0`` (cuBLAS's convention, siboehm's SGEMM series) multiplies the old content away, which NaN would not
    allow (0·NaN is NaN), while an element left unwritten still holds a value no reference result is near.

    Raises:
        whatever ``fill_`` or ``torch.iinfo`` raise for a dtype without addressable elements (the sub-byte
        ``uint1``..``uint7``, ``int1``..``int7`` and packed ``float4_e2m1fn_x2``).
    """
    import torch

    if finite and t.dtype.is_floating_point and t.dtype.itemsize > 1:
        t.fill_(torch.finfo(t.dtype).max / 4)
    elif t.dtype.is_floating_point or t.dtype.is_complex:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        info = torch.iinfo(t.dtype)
        t.fill_(info.max if info.min == 0 else info.min)


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
            with every output name a tensor in ``inputs``; or ``inplace`` is not a list of output names; or a
            tensor is a subclass with its own dispatch (:func:`kernelpilot.kernels.plain.plain_aliases`).
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
    inputs = plain_aliases(inputs, strict=str(kf.path))  # the harness's own objects (kernelpilot.kernels.plain)
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
    extras = kf.extras or {}
    may_write = list(outputs) if extras.get("synthesized") and extras.get("signature") is not None else []
    declared = {"outputs": list(outputs), "inplace": list(inplace), "may_write": may_write, **extra}
    pristine = {name: inputs[name].detach().clone() for name in inplace}
    case = Case(inputs=dict(inputs), outputs=list(outputs), shape=dict(shape), seed=seed, inplace=list(inplace),
                pristine=pristine, declared=declared,
                redraw=lambda s: make_case(kf, shape, s, device), **extra)
    observed = (extras.get("roles_by_shape") or {}).get(shape_key(shape), extras.get("roles"))
    if observed is not None:  # observed earlier in this process (the check), at this shape if it was: follow it
        case.apply_roles(observed)
    return case


def shape_key(shape: Shape) -> str:
    """The key of a shape in ``kf.extras["roles_by_shape"]`` (JSON, sorted keys)."""
    import json

    return json.dumps(dict(shape), sort_keys=True, default=str)
