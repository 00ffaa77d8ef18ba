"""Buffer roles observed by running the reference, not declared (issue 23; docs/contract.md, "Buffer roles").

For every tensor argument of a case the reference is run on copies whose contents are changed one tensor at a time,
and what changes is compared (:func:`observe_roles`):

- **written**: an element is written when its value after the call differs from its value before, in the base run
  or in a run where only this tensor held other prior values (every element different): a write of the value the
  element already held still shows in one of the two. ``written_fraction`` = written elements / elements.
- **read**: changing the tensor's values (each element ×[1.25, 1.5), zeros → 1; integers resampled from the
  tensor's own values; booleans flipped) changes any other tensor's result, any returned value, or the tensor's own
  written elements. ``depends_on_prior``: its own written elements changed (a read-modify-write).
- **read in part**: the tensor is cut into :data:`CHUNKS` contiguous chunks of its flat storage order; a chunk is
  read when setting it alone to NaN (integers: other values of the tensor; booleans: flipped) changes what the
  reference returns or writes elsewhere. Then :data:`PROBES` single elements drawn at random (fixed seed) from the
  read chunks are changed one at a time; when one did not matter, probes continue up to :data:`PROBES_IN_PART` in
  all, so the bound below is tight. The fraction counted as read is ``read_chunks / CHUNKS`` when every probe
  mattered, else that times the one-sided 80 % Clopper-Pearson lower bound of ``probes_read / probes``. It is a
  lower bound: a gather into a table (every chunk touched, few elements used) has few probes that matter and
  counts near 0, never the whole table; a dense read counts in full.

Roles: ``output`` (written in full, not read: poisoned before each kernel launch), ``inplace`` (written in full
and read), ``partial-write`` (written in part: the rest keeps its prior value; restored before each launch like an
in-place one), ``input`` (read, never written), ``scratch`` (declared scratch and not read), ``unused``.

A reference may return its outputs, write them in place, or both (:func:`reference_results`): a returned tensor
that shares storage with an argument is that argument's result; other returned tensors are matched to the
declared outputs not returned by alias (by dict key, else in order).

Declarations (``outputs``, ``inplace``, ``partial``, ``scratch``, the seed ABI's non-const pointers) become claims
checked against the observation (:func:`kernelpilot.kernels.role_claims.check_claims`): contradictions that would hide a read from the checks or
the floor raise :class:`~kernelpilot.errors.RoleMismatch`; benign ones follow the observation with a note.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from kernelpilot.kernels.role_values import CONFIDENCE
from kernelpilot.kernels.role_values import lower_bound as _lower_bound
from kernelpilot.kernels.role_values import other_content as _other_content
from kernelpilot.kernels.role_values import probe_value as _probe_value
from kernelpilot.kernels.role_values import same_bits as _same_bits

if TYPE_CHECKING:
    import torch

    from kernelpilot.kernels.case import Case
    from kernelpilot.kernels.contract import KernelFile

__all__ = ["CHUNKS", "PROBES", "PROBES_IN_PART", "ReferenceFailed", "Role", "RoleReport", "TensorRole", "observe_roles",
           "reference_results", "shares_memory"]

#: Contiguous chunks of a tensor's flat storage probed one at a time for "read in part".
CHUNKS = 8
#: Single elements probed one at a time among the read chunks (dense when every one matters).
PROBES = 16
#: Single-element probes in all once one of the first :data:`PROBES` did not matter (a tensor read in part): with 16,
#: Liger cross-entropy's logits (7/8 of the rows read) counted 0.75 of x as read, its floor's bytes 12 % under what
#: ncu measured on an H100; with 128 the bound is within about 5 % of the share read.
PROBES_IN_PART = 128

Role = Literal["input", "output", "inplace", "partial-write", "scratch", "unused"]


class ReferenceFailed(Exception):
    """The reference raised on the case's own values (natively and on float64 copies): nothing can be observed;
    the check then records the reference's failure itself."""


class TensorRole(BaseModel):
    """What one tensor argument was observed to be (see the module docstring for how each field is measured).

    ``bytes_read``/``bytes_written`` in bytes at the observed shape; ``declared`` the claim the file made
    (``"output"``, ``"output+inplace"``, ``"input"``, ``"scratch"``, ``"partial"``, ``"may-write"`` for a seed
    ABI non-const pointer); ``kernel_written_fraction``: elements the kernel changed in the check's first launch
    (None until a check ran it)."""

    name: str
    dtype: str
    numel: int
    element_size: int
    read: bool
    written_fraction: float
    depends_on_prior: bool
    role: Role
    read_fraction: float = 0.0
    read_chunks: int = 0
    chunks: int = 0
    probes: int = 0
    probes_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    declared: str = "input"
    kernel_written_fraction: float | None = None
    note: str = ""


class RoleReport(BaseModel):
    """The roles of every tensor argument of a case, observed at ``shape`` (``tensors`` in argument order).

    ``reference_runs``: how many times the reference ran to observe them; ``precision``: ``"native"`` or
    ``"float64"`` (when the native run raised); ``notes``: declarations that disagreed benignly."""

    shape: dict[str, Any]
    tensors: dict[str, TensorRole]
    reference_runs: int
    precision: str
    notes: list[str] = []
    method: str = (f"written: changed after the call from two different prior contents; read: outputs change when "
                   f"the tensor's values change; read in part: {CHUNKS} contiguous chunks, then {PROBES} single "
                   f"elements, counted as a lower bound ({CONFIDENCE:.0%} Clopper-Pearson when a probe did not "
                   "matter)")

    def names(self, *roles: str) -> list[str]:
        """Tensor names whose observed role is one of ``roles``, in argument order."""
        return [n for n, t in self.tensors.items() if t.role in roles]

    @property
    def compared(self) -> list[str]:
        """Tensors the reference writes (``output``, ``inplace``, ``partial-write``): compared after a launch."""
        return self.names("output", "inplace", "partial-write")

    @property
    def poisoned(self) -> list[str]:
        """Pure outputs written in full: NaN/sentinel-filled before each kernel launch."""
        return self.names("output")

    @property
    def restored(self) -> list[str]:
        """Written tensors whose prior content matters (``inplace``, ``partial-write``): restored before a launch."""
        return self.names("inplace", "partial-write")

    @property
    def bytes_total(self) -> int:
        """Bytes read plus bytes written over every tensor (the observed floor's bytes)."""
        return sum(t.bytes_read + t.bytes_written for t in self.tensors.values())


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _span(t: torch.Tensor) -> tuple[int, int, int]:
    if t.numel() == 0:
        return (-2, 0, 0)
    extent = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride())) + 1
    start = t.data_ptr()
    return (t.device.index if t.device.index is not None else -1, start, start + extent * t.element_size())


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the byte ranges two tensors' elements can reach overlap (same device); False for empty ones."""
    (da, a0, a1), (db, b0, b1) = _span(a), _span(b)
    return da == db and a0 < b1 and b0 < a1 and a0 != a1 and b0 != b1


def reference_results(result: Any, args: dict[str, Any], outputs: list[str],
                      prior: dict[str, Any] | None = None) -> dict[str, Any]:
    """Map what a reference call returned (and wrote) to argument names.

    Args:
        result: the reference's return value: None, a tensor, a tuple/list, or a dict keyed by argument names.
        args: the arguments it was called with (after the call: in-place writes are in them).
        outputs: the declared outputs, in order (fresh returned tensors are matched to these).
        prior: the arguments' values before the call, when known: used only when fewer fresh tensors are returned
            than outputs remain, to match them to the outputs the call did not write in place (the last of those
            when still more remain: the seed ABI lists its outputs after its inputs, ``solve(A, B, C, ...)``).

    Returns:
        name -> result for every tensor argument (a returned tensor mapped to it, else its content after the
        call). Returned non-tensors, and dict entries under names that are no tensor argument, are ignored.

    Raises:
        ValueError: the returned tensors cannot be matched to the outputs (the message counts both).
    """
    returned: list[tuple[Any, Any]]
    if result is None:
        returned = []
    elif _is_tensor(result):
        returned = [(None, result)]
    elif isinstance(result, dict):
        returned = list(result.items())
    else:
        returned = [(None, v) for v in tuple(result)]
    res: dict[str, Any] = {n: v for n, v in args.items() if _is_tensor(v)}
    claimed: set[str] = set()
    fresh: list[Any] = []
    for key, value in returned:
        if key is not None and key in res:
            res[key] = value
            claimed.add(key)
            continue
        if not _is_tensor(value):
            continue
        alias = next((n for n, a in args.items() if _is_tensor(a) and shares_memory(value, a)), None)
        if alias is not None:
            claimed.add(alias)  # written in place and returned: the argument's content is its result
        else:
            fresh.append(value)
    unclaimed = [o for o in outputs if o not in claimed]
    if fresh:
        targets = unclaimed
        if len(fresh) != len(unclaimed) and prior is not None:
            targets = [o for o in unclaimed if _is_tensor(prior.get(o)) and _all_same(prior[o], args[o])]
        if len(fresh) > len(targets) or (len(fresh) < len(targets) and prior is None):
            raise ValueError(f"reference returned {len(fresh)} values for {len(unclaimed)} outputs {unclaimed}")
        targets = targets[len(targets) - len(fresh):]  # still more candidates: the last ones (outputs follow inputs)
        for name, value in zip(targets, fresh):
            res[name] = value
    return res


def _wide(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself, or a float32 copy for dtypes whose comparisons torch does not implement (fp8)."""
    import torch

    return t.float() if t.dtype.is_floating_point and t.element_size() == 1 else t


def _same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise equality that counts NaN equal to NaN (flat boolean tensor; ``a``'s element count)."""
    import torch

    a, b = _wide(a.reshape(-1)), _wide(b.reshape(-1))
    eq = a == b
    if a.dtype.is_floating_point or a.dtype.is_complex:
        eq |= torch.isnan(a) & torch.isnan(b)
    return eq


def _all_same(a: Any, b: Any) -> bool:
    if not (_is_tensor(a) and _is_tensor(b)):
        return a is b or a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return a.numel() == b.numel() and a.dtype == b.dtype and bool(_same(a, b).all())
    return bool(_same(a, b).all())


class _Runner:
    """Calls the reference on copies of a base argument set, counts the calls, and compares the results."""

    def __init__(self, kf: KernelFile, base: dict[str, Any], outputs: list[str]) -> None:
        self.kf, self.base, self.outputs, self.runs, self.exact = kf, base, outputs, 0, True

    def call(self, changed: dict[str, Any], owned: bool = False) -> dict[str, Any]:
        """The reference's results (name -> tensor, every tensor argument) on copies of the base set with
        ``changed`` in place of some tensors. ``owned``: the changed tensors are the caller's to give away (not
        copied again, unless they are declared outputs). An argument the call left bit for bit as it was is
        answered with its source tensor (the base's, or the changed one) instead of its copy, so a call keeps
        alive only what the reference wrote or returned (memory: a problem of gigabytes per tensor)."""
        sources = {k: changed.get(k, v) for k, v in self.base.items()}
        args = {k: (v if owned and k in changed and k not in self.outputs else v.clone()) if _is_tensor(v) else v
                for k, v in sources.items()}
        self.runs += 1
        results = reference_results(self.kf.reference(**args), args, self.outputs, sources)
        out = {}
        for k, v in results.items():
            if not _is_tensor(v):
                continue
            src = sources.get(k)
            if v is args.get(k) and v is not src and _is_tensor(src) and _same_bits(src, v):
                v = src  # unchanged: the copy is dropped
            out[k] = v.detach()
        return out


def _close(a: torch.Tensor, b: torch.Tensor, exact: bool) -> torch.Tensor:
    """Elementwise sameness (flat): bit-for-bit-ish (:func:`_same`), or within 1e-6 × RMS + 1e-5 relative when
    ``exact`` is False (a non-deterministic reference); NaN equals only NaN."""
    import torch

    same = _same(a, b)
    if exact or not (a.dtype.is_floating_point and b.dtype.is_floating_point):
        return same
    fa, fb = a.reshape(-1).double(), b.reshape(-1).double()
    finite = torch.isfinite(fa) & torch.isfinite(fb)
    rms = float(fa[finite].pow(2).mean().sqrt()) if bool(finite.any()) else 0.0
    return same | (finite & ((fa - fb).abs() <= 1e-6 * rms + 1e-5 * fa.abs()))


def _differs(ref: dict[str, Any], got: dict[str, Any], own: str | None = None, own_mask: Any = None,
             exact: bool = True) -> bool:
    """True when any result in ``got`` differs from ``ref`` (a missing/extra key or another shape counts); for the
    tensor ``own`` only the elements in ``own_mask`` are compared (its unwritten elements hold its prior value)."""
    if set(ref) != set(got):
        return True
    for k, a in ref.items():
        b = got[k]
        if a.shape != b.shape or a.dtype != b.dtype:
            return True
        if k == own and own_mask is not None and own_mask.numel() == a.numel():
            if bool((~_close(a, b, exact) & own_mask).any()):
                return True
        elif not bool(_close(a, b, exact).all()):
            return True
    return False


def _written_mask(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Elements that differ before/after (flat); a result of another element count counts as written in full."""
    import torch

    if after.numel() != before.numel():
        return torch.ones(before.numel(), dtype=torch.bool, device=before.device)
    return ~_same(before, after.to(before.device) if after.device != before.device else after)


def _declared(case: Case) -> dict[str, str]:
    decl = case.declared or {"outputs": case.outputs, "inplace": case.inplace, "partial": case.partial,
                             "scratch": case.scratch, "may_write": []}
    out: dict[str, str] = {}
    for name, value in case.inputs.items():
        if not _is_tensor(value):
            continue
        if name in decl.get("scratch", []):
            out[name] = "scratch"
        elif name in decl.get("may_write", []):
            out[name] = "may-write"
        elif name in decl.get("outputs", []):
            out[name] = "output+inplace" if name in decl.get("inplace", []) else "output"
        else:
            out[name] = "input"
        if name in decl.get("partial", []):
            out[name] += "+partial"
    return out


def observe_roles(kf: KernelFile, case: Case) -> RoleReport:
    """Observe every tensor argument's role by running ``kf.reference`` on copies of ``case.inputs`` (the case is
    not modified). Runs the reference ``1 + n_tensors`` times, plus ``CHUNKS + PROBES`` per read tensor with more
    than ``CHUNKS + PROBES`` elements (module docstring), in the tensors' own dtype (float64 copies when the native
    call raises).

    A reference whose two calls on the same values differ (atomics on a GPU) is compared with a tolerance of
    1e-6 × the result's RMS + 1e-5 relative instead of bit for bit (``report.notes`` says so); NaN probes still show.

    Raises:
        ReferenceFailed: the reference raises on the case's own values, so nothing can be observed.
    """
    import torch

    declared = _declared(case)
    outputs = [n for n in (case.declared or {}).get("outputs", case.outputs)]
    names = [n for n, v in case.inputs.items() if _is_tensor(v)]
    precision = "native"
    base = {k: (v.detach() if _is_tensor(v) else v) for k, v in case.inputs.items()}  # never written: calls copy
    runner = _Runner(kf, base, outputs)
    try:
        ref0 = runner.call({})
    except Exception as native_exc:  # noqa: BLE001 - some dtypes (fp8) have no native ops: try float64 copies
        base = {k: (v.detach().to(torch.float64, copy=True) if _is_tensor(v) and v.dtype.is_floating_point else v)
                for k, v in base.items()}
        runner = _Runner(kf, base, outputs)
        precision = "float64"
        try:
            ref0 = runner.call({})
        except Exception as exc:  # noqa: BLE001
            raise ReferenceFailed(f"{type(native_exc).__name__}: {native_exc}; in float64: "
                                  f"{type(exc).__name__}: {exc}") from exc
    g = torch.Generator(device="cpu").manual_seed(1234 + int(case.seed))
    report: dict[str, TensorRole] = {}
    notes: list[str] = []
    if _differs(ref0, runner.call({})):
        runner.exact = False
        notes.append("the reference's results differ between two calls on the same values (non-deterministic): "
                     "roles compared within 1e-6 of each result's RMS")
    for name in names:
        t0 = base[name]
        other = _other_content(t0, g)
        raised = None
        try:
            got = runner.call({name: other})
        except Exception as exc:  # noqa: BLE001 - other values broke the reference: it depends on them
            got, raised = None, f"{type(exc).__name__}: {exc}"
        written = _written_mask(t0, ref0[name])
        if got is not None:
            written |= _written_mask(other, got[name])
        wf = int(written.sum()) / written.numel() if written.numel() else 0.0  # exact: a count, not a float32 mean
        if got is None:
            depends = True
        elif ref0[name].numel() == t0.numel() == got[name].numel():
            depends = bool((~_close(ref0[name], got[name], runner.exact) & written).any())
        else:
            depends = not _all_same(ref0[name], got[name])
        read = got is None or depends or _differs({k: v for k, v in ref0.items() if k != name},
                                                  {k: v for k, v in got.items() if k != name}, exact=runner.exact)
        decl = declared[name]
        if decl.startswith("scratch") and not read:
            role: Role = "scratch"
        elif wf == 0.0:
            role = "input" if read else "unused"
        elif wf == 1.0:
            role = "inplace" if read else "output"
        else:
            role = "partial-write"
        native = case.inputs[name]  # sizes of the case's tensor (float64 copies when the native call raised)
        tr = TensorRole(name=name, dtype=str(native.dtype).removeprefix("torch."), numel=native.numel(),
                        element_size=native.element_size(), read=read, written_fraction=wf, depends_on_prior=depends,
                        role=role, declared=decl,
                        note=f"other values made the reference raise ({raised}): counted as read" if raised else "")
        if read:
            del got  # one problem-sized result fewer while the chunks are probed
            _read_in_part(runner, ref0, tr, t0, other, written, g)
        nbytes = tr.numel * tr.element_size
        if role not in ("scratch", "unused"):
            tr.bytes_read = int(math.floor(tr.read_fraction * nbytes)) if read else 0
            tr.bytes_written = int(math.floor(wf * nbytes))
        report[name] = tr
    return RoleReport(shape=dict(case.shape), tensors=report, reference_runs=runner.runs, precision=precision,
                      notes=notes)


def _read_in_part(runner: _Runner, ref0: dict[str, Any], tr: TensorRole, t0: torch.Tensor, other: torch.Tensor,
                  written: torch.Tensor, g: Any) -> None:
    """Fill ``tr.read_fraction`` (and the chunk/probe counts) of a read tensor (module docstring)."""
    import torch

    n = t0.numel()
    if n <= CHUNKS + PROBES:  # too small to be worth probing: counted in full
        tr.read_fraction, tr.chunks, tr.read_chunks = 1.0, 1, 1
        return
    flat0 = t0.reshape(-1)
    if t0.dtype.is_floating_point:  # one NaN, not a tensor of them (the bits a filled tensor holds: a vector cast)
        probe = _probe_value(t0[(0,) * t0.dim()].reshape(1).expand(64), other).reshape(-1)[0]
    else:
        probe = _probe_value(t0, other).reshape(-1)

    def matters(index: Any) -> bool:
        changed = flat0.clone()
        changed[index] = probe if t0.dtype.is_floating_point else probe[index]
        try:
            got = runner.call({tr.name: changed.reshape(t0.shape)}, owned=True)
        except Exception:  # noqa: BLE001 - the reference raised on these values: they are read
            return True
        return _differs(ref0, got, own=tr.name, own_mask=written, exact=runner.exact)

    bounds = [(j * n // CHUNKS, (j + 1) * n // CHUNKS) for j in range(CHUNKS)]
    read_chunks = [b for b in bounds if matters(slice(*b))]
    tr.chunks, tr.read_chunks = CHUNKS, len(read_chunks)
    if not read_chunks:
        tr.read_fraction = 0.0
        return
    sizes = torch.tensor([b - a for a, b in read_chunks], dtype=torch.float64)
    which = torch.multinomial(sizes, PROBES, replacement=True, generator=g)
    hits, done = 0, 0
    while done < PROBES or (hits < done < PROBES_IN_PART):
        a, b = read_chunks[int(which[done % PROBES])] if done < PROBES else read_chunks[
            int(torch.multinomial(sizes, 1, generator=g))]
        i = a + int(torch.randint(0, b - a, (), generator=g))
        hits += matters(i)
        done += 1
    tr.probes, tr.probes_read = done, hits
    dense = 1.0 if hits == done else _lower_bound(hits, done)
    tr.read_fraction = len(read_chunks) / CHUNKS * dense
