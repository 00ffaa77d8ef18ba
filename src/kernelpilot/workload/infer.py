"""The capture mapping of a kernel file, observed: run its ``setup`` at a probe shape and its ``reference`` under the
profiler, and find where each ``SHAPE`` value shows up in the reference op's arguments (observed, not declared: no
kernel file has to state how its shape reads off a PyTorch call, and a statement could be wrong).

The probe shape gives every whole-number key of the base shape its own prime (:data:`PROBE_PRIMES`, in key order),
so a size in the op's arguments names one key; the other keys keep their values. The reference's top-level aten
calls are the candidates (``layer_norm``'s reference calls ``aten::layer_norm``; a softmax's may call ``aten::to``
then ``aten::softmax``); the op chosen is the one whose first call explains the most keys (``dtype`` counts when a
tensor argument has the probe's dtype), the first such in call order on a tie, or the ``op`` given.

Each key found becomes a spec of :mod:`kernelpilot.workload.capture` that still reads right when the program calls
the op with more leading (batch) dimensions than the reference did: dimension ``d`` of a rank-``r`` argument is
written ``d - r`` (from the end), except the leading dimension of the first tensor argument (``d = 0``, ``r >= 2``;
the activation), written ``:-(r-1)``: every dimension but the last ``r - 1`` multiplied (the rows of
``[batch, seq, hidden]``; a weight's leading dimension stays one dimension), and a 1-D tensor argument's size is
written ``:``: its element count (an elementwise kernel over ``N`` serves a flattened ``[B, N]`` call; a norm's
weight vector stays ``N``). A key found in several
arguments gets all of them (they must agree at every captured call: the mapping checks itself); an int-list
argument (``normalized_shape``) is read as its sizes. A key found nowhere is left out (the capture takes it from the
base shape and lists it in :attr:`~kernelpilot.workload.capture.Capture.unmapped`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from kernelpilot.workload.capture import DTYPE_NAMES, ProfiledCall, recorded_calls, op_name
from kernelpilot.workload.model import WorkloadError, value_kind

__all__ = ["PROBE_PRIMES", "probe_shape", "infer_mapping", "specs_in_call"]

#: The sizes a probe shape gives its whole-number keys, in key order: primes no block size, vector width or common
#: constant equals, small enough for a CPU run.
PROBE_PRIMES = (11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53)


def probe_shape(base_shape: Mapping[str, Any]) -> dict[str, Any]:
    """``base_shape`` with each whole-number key set to its own prime of :data:`PROBE_PRIMES` (bools, floats and
    words kept). Raises WorkloadError when it has more whole-number keys than primes."""
    ints = [k for k, v in base_shape.items() if value_kind(v) == "int"]
    if len(ints) > len(PROBE_PRIMES):
        raise WorkloadError(f"SHAPE has {len(ints)} whole-number keys; the probe tells apart at most "
                            f"{len(PROBE_PRIMES)}", "give the capture mapping by hand")
    return {**dict(base_shape), **dict(zip(ints, PROBE_PRIMES))}


def specs_in_call(call: ProfiledCall, probe: Mapping[str, Any]) -> dict[str, list[str]]:
    """Where each probe value shows up in one call: key -> specs (module docstring for their form); keys found
    nowhere are absent. Raises nothing."""
    found: dict[str, list[str]] = {}
    for key, value in probe.items():
        specs: list[str] = []
        if value_kind(value) == "int":
            first = next((a for a in range(len(call.sizes)) if call.is_tensor(a)), None)
            for arg, dims in enumerate(call.sizes):
                if not call.is_tensor(arg):
                    raw = call.values[arg]
                    dims = raw if isinstance(raw, list) and all(value_kind(v) == "int" for v in raw) else []
                r = len(dims)
                for d, size in enumerate(dims):
                    if size == value:
                        if r == 1 and call.is_tensor(arg):
                            specs.append(f"{arg}.:")  # a vector: its element count (a flattened call's too)
                        elif d == 0 and r >= 2 and arg == first:
                            specs.append(f"{arg}.:{-(r - 1)}")
                        else:
                            specs.append(f"{arg}.{d - r}")
        elif key == "dtype" and isinstance(value, str):
            for arg, raw in enumerate(call.dtypes):
                if call.is_tensor(arg) and DTYPE_NAMES.get(raw) == value.removeprefix("torch."):
                    specs.append(f"{arg}.dtype")
                    break  # the first tensor of the dtype: later ones (an output) say the same
        if specs:
            found[key] = specs
    return found


def infer_mapping(setup: Callable[..., Any], reference: Callable[..., Any], base_shape: Mapping[str, Any], *,
                  op: Any = None, seed: int = 0) -> tuple[str, dict[str, list[str]]]:
    """Observe a kernel file's capture mapping: its reference op and how ``SHAPE`` reads off the op's arguments.

    Args:
        setup: the kernel file's ``setup(**shape, seed, device)`` (run on the CPU at the probe shape).
        reference: the kernel file's ``reference(**inputs)``.
        base_shape: the kernel's ``SHAPE``.
        op: the op to map (as :func:`~kernelpilot.workload.capture.op_name` reads it); None: chosen as the module
            docstring says.
        seed: passed to ``setup``.

    Returns:
        ``(op name, mapping)``: the mapping as :func:`~kernelpilot.workload.capture.capture_workload` takes it.

    Raises:
        WorkloadError: ``setup`` or ``reference`` raised at the probe shape (the message names the shape); the
            reference called no aten op, or not ``op``; no key of ``SHAPE`` shows up in the op's arguments.
    """
    from torch.profiler import ProfilerActivity, profile

    probe = probe_shape(base_shape)
    try:
        made = setup(**probe, seed=seed, device="cpu")
        inputs = made["inputs"] if isinstance(made, Mapping) and "inputs" in made else made
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            reference(**inputs)
    except Exception as exc:  # the kernel file's own code: any failure means no mapping can be observed
        raise WorkloadError(f"cannot observe the capture mapping: setup/reference raised at the probe shape {probe}: "
                            f"{type(exc).__name__}: {exc}",
                            "give the mapping by hand, e.g. {'M': '0.:-1', 'N': '0.-1', 'dtype': '0.dtype'}") from exc
    events = list(prof.events())
    top = [e.name for e in events if e.cpu_parent is None and "::" in e.name and not e.name.startswith("autograd::")]
    names = list(dict.fromkeys(top))
    if op is not None:
        wanted = op_name(op)
        if wanted not in names:
            raise WorkloadError(f"the reference made no top-level call of {wanted}; it called: "
                                f"{', '.join(names) or 'no aten op'}", "name one of the ops listed")
        names = [wanted]
    best: Optional[tuple[int, str, dict[str, list[str]]]] = None
    for name in names:
        calls, _, _ = recorded_calls(events, name)
        if not calls:
            continue
        mapping = specs_in_call(calls[0], probe)
        if best is None or len(mapping) > best[0]:
            best = (len(mapping), name, mapping)
    if best is None or not best[0]:
        raise WorkloadError(f"no SHAPE value shows up in the arguments of the reference's ops "
                            f"({', '.join(names) or 'none'}) at the probe shape {probe}",
                            "give the mapping by hand, e.g. {'M': '0.0', 'N': '1.1'}")
    return best[1], best[2]
