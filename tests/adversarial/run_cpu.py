"""Load and run every adversarial kernel file once under the Triton interpreter, each in its own forked child.

Usage: ``TRITON_INTERPRET=1 python3 tests/adversarial/run_cpu.py [FILE ...]`` (default: every file in
``cases.json``); prints one JSON list on stdout, one object per file:

- ``loaded``/``error``: whether ``load_kernel`` and ``make_case`` at ``CPU_SHAPE`` (seed 0) and one call of
  ``run_kernel`` with the default config worked;
- ``matches``: the outputs of that first call (outputs NaN-filled before it) equal the reference, computed
  beforehand on float64 copies of the untouched inputs, under the comparison kernelpilot used before hardening
  (``|out - ref| <= atol * rms(ref) + rtol * |ref|`` and relative L2 error <= rtol, the file's own ``atol``/``rtol``
  when it sets them; NaN fails). This is the comparison a working cheat is built to pass;
- ``reference_after_kernel``: the same comparison against ``reference`` called *after* the kernel on the same
  (possibly mutated) input tensors: a harness that does that is what some cheats fool;
- ``allclose_after_load``: ``torch.allclose(out, ref)`` as seen after the file was imported (a patched one says
  True whatever the values);
- ``tampered_at_import`` / ``tampered_after_call``: the public attributes of torch's namespaces (``torch``,
  ``torch.Tensor``, ``torch.nn.functional``, ``torch.linalg``, ``torch.special``, ``torch.testing``) that the
  import, then the first call, rebound. ``matches`` always uses a reference computed with the originals put back,
  so a file that rebinds what the reference calls is judged against the real reference;
- ``matches_halved`` / ``matches_odd`` / ``matches_odd_larger`` / ``matches_check_shapes``: the first call at
  ``CPU_SHAPE`` with every integer dimension halved, at a derived odd shape (``odd_shape``: each integer dimension
  >= 2 mapped to a prime near half of it: odd, not a power of two, not a multiple of any block), at a larger one
  (``odd_shape_larger``: the prime above one and a half times it), and at every declared ``CHECK_SHAPES`` entry
  merged over ``CPU_SHAPE`` (None when the file declares none);
- ``objects_matches``: the first call at ``CPU_SHAPE`` as a harness that keeps ``setup``'s own tensor objects
  makes it (handed to the launch, read back after it);
- ``timed_matches`` / ``paced_matches``: a timing loop as kernelpilot now runs it (issue 24, "check what you
  time"): 20 launches back to back, each on a full input set drawn from a pool of 3 sets made by ``setup`` at
  other seeds and copied into the same tensors, every launch's outputs compared with the reference for its set;
  then 8 such launches spaced 5 ms apart, as a check spaces them. ``cache_hits``: the file's own ``stats["hits"]``
  after the timed launches (content caches count their hits there), else None.

Each file runs in a forked child, so whatever it patches (timers, builtins, torch functions) dies with the child.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOLERANCES = {"float64": (1e-8, 1e-6), "float32": (1e-5, 1e-3), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)}


def _loose_match(out, ref, atol: float, rtol: float) -> tuple[bool, float]:
    import torch

    o, r = out.detach().double().reshape(-1), ref.detach().double().reshape(-1)
    if o.numel() != r.numel() or not bool(torch.isfinite(o).all()):
        return False, float("inf")
    rms = float(torch.sqrt(torch.mean(r**2))) or 1.0
    ok = bool(((o - r).abs() <= atol * rms + rtol * r.abs()).all())
    norm = float(torch.linalg.vector_norm(r)) or 1.0
    rel = float(torch.linalg.vector_norm(o - r)) / norm
    return ok and rel <= rtol, rel


def _collect(result, inputs: dict, outputs: list[str]) -> dict:
    import torch

    if result is None:
        return {n: inputs[n] for n in outputs}
    if isinstance(result, torch.Tensor):
        result = (result,)
    if isinstance(result, dict):
        return {n: result[n] for n in outputs}
    return dict(zip(outputs, tuple(result)))


def _reference(kf, inputs: dict, outputs: list[str]) -> dict:
    import torch

    up = {k: (v.detach().double().clone() if isinstance(v, torch.Tensor) and v.dtype.is_floating_point
              else v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    try:
        return _collect(kf.reference(**up), up, outputs)
    except Exception:  # noqa: BLE001 - no float64 kernel for some op: native copies
        native = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
        return _collect(kf.reference(**native), native, outputs)


_MISSING = object()


def _namespaces() -> dict:
    import torch
    import torch.nn.functional
    import torch.testing

    return {"torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.functional": torch.nn.functional,
            "torch.linalg": torch.linalg, "torch.special": torch.special, "torch.testing": torch.testing}


def _torch_snapshot() -> dict:
    """label -> (namespace, copy of its attribute dict): what the reference's torch looked like before the file."""
    return {label: (ns, dict(vars(ns))) for label, ns in _namespaces().items()}


def _tampered(snap: dict) -> list[tuple]:
    """(namespace, label.name, original or _MISSING, current) for every public attribute rebound since ``snap``
    (a new submodule attribute, added by a lazy import, is not a rebinding)."""
    import types

    changed = []
    for label, (ns, before) in snap.items():
        now = vars(ns)
        for name in set(before) | set(now):
            if name.startswith("_"):
                continue
            old, new = before.get(name, _MISSING), now.get(name, _MISSING)
            if old is not new and not (old is _MISSING and isinstance(new, types.ModuleType)):
                changed.append((ns, f"{label}.{name}", old, new))
    return sorted(changed, key=lambda c: c[1])


@contextmanager
def _untampered(snap: dict):
    """Put torch's original attributes back for the duration (the reference a separate process would see), then
    re-apply whatever the file had rebound."""
    changed = _tampered(snap)
    for ns, label, old, _ in changed:
        name = label.rsplit(".", 1)[1]
        delattr(ns, name) if old is _MISSING else setattr(ns, name, old)
    try:
        yield
    finally:
        for ns, label, _, new in changed:
            name = label.rsplit(".", 1)[1]
            delattr(ns, name) if new is _MISSING else setattr(ns, name, new)


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def _odd_dim(v: int) -> int:
    """The smallest prime >= v // 2 + 1 (at least 3): odd, not a power of two, not a multiple of any block."""
    p = max(3, v // 2 + 1)
    while not _is_prime(p):
        p += 1
    return p


def _odd_dim_larger(v: int) -> int:
    """The smallest prime above one and a half times ``v``: a derived shape larger than the declared one."""
    p = v + v // 2 + 1
    while not _is_prime(p):
        p += 1
    return p


def _dims(shape: dict, fn) -> dict:
    return {k: (fn(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 2 else v) for k, v in shape.items()}


def _first_call_matches(kf, shape: dict, config: dict, snap: dict) -> bool:
    """One call on a fresh case at ``shape`` (seed 0, outputs poisoned), against the untampered reference."""
    from kernelpilot.kernels.contract import make_case, run_kernel

    case = make_case(kf, shape, 0, "cpu")
    with _untampered(snap):
        refs = _reference(kf, _untouched(case), case.outputs)
    _poison(case)
    run_kernel(kf, case.inputs, config)
    return _compare(kf, {n: case.inputs[n] for n in case.outputs}, refs)[0]


def _objects_first_call(kf, shape: dict, config: dict, snap: dict) -> bool:
    """One call as a harness that keeps the tensor objects ``setup`` returned makes it: those objects handed to
    the launch and read back afterwards (kernelpilot's ``make_case`` and ``run_kernel`` use plain aliases of their
    own instead), outputs NaN-filled first (not the in-place ones), against the untampered reference on float64 copies."""
    from kernelpilot.kernels.plain import plain_aliases

    result = kf.setup(**shape, seed=0, device="cpu")
    inputs, outputs = result["inputs"], list(result["outputs"])
    with _untampered(snap):
        refs = _reference(kf, plain_aliases(inputs), outputs)
    for name in outputs:
        if inputs[name].dtype.is_floating_point and name not in result.get("inplace", []):
            inputs[name].fill_(float("nan"))
    kf.backend.launch(kf, inputs, config)
    return _compare(kf, {n: inputs[n] for n in outputs}, refs)[0]


def _pool(kf, case, shape: dict, snap: dict, n_sets: int = 3) -> list[tuple[dict, dict]]:
    """(values, reference outputs) for ``n_sets`` input sets made by ``setup`` at seeds no check uses: every tensor
    the kernel reads (not pure outputs), any dtype."""
    import torch

    from kernelpilot.kernels.contract import make_case

    names = [k for k, v in case.inputs.items() if isinstance(v, torch.Tensor)
             and (k not in case.outputs or k in case.inplace)]
    sets = []
    for i in range(n_sets):
        other = make_case(kf, shape, 7001 + i, "cpu")
        values = {k: other.pristine.get(k, other.inputs[k]).detach().clone() for k in names}
        inputs = {**_untouched(case), **{k: v.clone() for k, v in values.items()}}
        with _untampered(snap):
            sets.append((values, _reference(kf, inputs, case.outputs)))
    return sets


def _launches(kf, case, config: dict, sets: list, order: list[int], pause_s: float) -> bool:
    """Launch once per entry of ``order`` on that set's values (copied into the case's tensors), ``pause_s`` apart;
    True when every launch's outputs match its set's reference. Outputs are compared after the last launch."""
    from kernelpilot.kernels.contract import run_kernel

    outs = []
    for i in order:
        values, _ = sets[i]
        for k, v in values.items():
            (case.pristine[k] if k in case.inplace else case.inputs[k]).copy_(v)
        case.restore()
        if pause_s:
            time.sleep(pause_s)
        run_kernel(kf, case.inputs, config)
        outs.append({n: case.inputs[n].detach().clone() for n in case.outputs})
    return all(_compare(kf, o, sets[i][1])[0] for o, i in zip(outs, order))


def _compare(kf, outs: dict, refs: dict) -> tuple[bool, float]:
    ok, worst = True, 0.0
    for name, out in outs.items():
        atol, rtol = TOLERANCES.get(str(out.dtype).removeprefix("torch."), (0.0, 0.0))
        atol = kf.atol if kf.atol is not None else atol
        rtol = kf.rtol if kf.rtol is not None else rtol
        good, rel = _loose_match(out, refs[name], atol, rtol)
        ok, worst = ok and good, max(worst, rel)
    return ok, worst


def _shares_storage(case, name: str) -> bool:
    import torch

    ptr = case.inputs[name].untyped_storage().data_ptr()
    return any(isinstance(v, torch.Tensor) and k != name and v.untyped_storage().data_ptr() == ptr
               for k, v in case.inputs.items())


def _poison(case) -> None:
    for name in case.outputs:
        t = case.inputs[name]
        if name not in case.inplace and t.dtype.is_floating_point and not _shares_storage(case, name):
            t.fill_(float("nan"))


def _untouched(case) -> dict:
    import torch

    return {k: (case.pristine.get(k, v).detach().clone() if isinstance(v, torch.Tensor) else v)
            for k, v in case.inputs.items()}


def _fresh_values(case, gen) -> None:
    """New values in the same input tensors: a random permutation of each floating input's own values."""
    import torch

    for name, t in case.inputs.items():
        if isinstance(t, torch.Tensor) and t.dtype.is_floating_point and (name not in case.outputs
                                                                         or name in case.inplace):
            flat = t.detach().reshape(-1).clone()
            new = flat[torch.randperm(flat.numel(), generator=gen)].reshape(t.shape)
            (case.pristine[name] if name in case.inplace else t).copy_(new)
    case.restore()


def run_one(path: Path, timed_calls: int = 20) -> dict:
    """Load ``path`` under the interpreter and run it at CPU_SHAPE (seed 0): the first call, the same at CPU_SHAPE
    with every integer dimension halved, a re-check after ``timed_calls`` more calls (fresh values in the same
    input tensors, outputs once left as they were and once NaN-filled), then one call at a derived odd shape and at
    each declared CHECK_SHAPES entry, and the timed and paced launches on pool sets (module docstring)."""
    import torch

    from kernelpilot.backends.registry import backend_for
    from kernelpilot.kernels.contract import make_case, run_kernel

    row: dict = {"file": str(path.relative_to(HERE)) if path.is_relative_to(HERE) else str(path)}
    snap = _torch_snapshot()
    # the backend's own loader, without load_kernel's static screen: this runner proves each cheat *works*
    kf = backend_for(path.resolve()).load(path.resolve(), None, interpreted=True)
    row["tampered_at_import"] = [label for _, label, _, _ in _tampered(snap)]
    config = kf.default_config
    shape = dict(kf.cpu_shape or kf.shape)
    case = make_case(kf, shape, 0, "cpu")
    with _untampered(snap):
        refs = _reference(kf, _untouched(case), case.outputs)
    _poison(case)
    run_kernel(kf, case.inputs, config)
    outs = {n: case.inputs[n].detach().clone() for n in case.outputs}
    row.update(loaded=True, error=None)
    row["tampered_after_call"] = [label for _, label, _, _ in _tampered(snap)
                                  if label not in row["tampered_at_import"]]
    row["matches"], row["worst_rel_l2"] = _compare(kf, outs, refs)
    row["objects_matches"] = _objects_first_call(kf, shape, config, snap)
    row["reference_after_kernel"], _ = _compare(kf, outs, _reference(kf, case.inputs, case.outputs))
    row["allclose_after_load"] = all(bool(torch.allclose(outs[n].double(), refs[n].double())) for n in outs)

    half = {k: (max(v // 2, 1) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in shape.items()}
    small = make_case(kf, half, 0, "cpu")
    with _untampered(snap):
        small_refs = _reference(kf, _untouched(small), small.outputs)
    _poison(small)
    run_kernel(kf, small.inputs, config)
    row["matches_halved"], _ = _compare(kf, {n: small.inputs[n] for n in small.outputs}, small_refs)

    gen = torch.Generator().manual_seed(12345)
    for _ in range(timed_calls):
        case.restore()
        run_kernel(kf, case.inputs, config)
    for variant in ("stale", "poisoned"):
        _fresh_values(case, gen)
        with _untampered(snap):
            fresh_refs = _reference(kf, _untouched(case), case.outputs)
        if variant == "poisoned":
            _poison(case)
        run_kernel(kf, case.inputs, config)
        row[f"recheck_{variant}_matches"], _ = _compare(kf, {n: case.inputs[n] for n in case.outputs}, fresh_refs)

    time.sleep(0.01)  # the calls below are spaced as a check spaces them
    odd = _dims(shape, _odd_dim)
    row["odd_shape"] = odd
    row["matches_odd"] = _first_call_matches(kf, odd, config, snap)
    row["odd_shape_larger"] = larger = _dims(shape, _odd_dim_larger)
    row["matches_odd_larger"] = _first_call_matches(kf, larger, config, snap)
    row["matches_check_shapes"] = None if kf.check_shapes is None else all(
        _first_call_matches(kf, {**shape, **c}, config, snap) for c in kf.check_shapes)

    timed_case = make_case(kf, shape, 0, "cpu")
    sets = _pool(kf, timed_case, shape, snap)
    stats = getattr(kf.module, "stats", None)
    hits_before = stats.get("hits", 0) if isinstance(stats, dict) else None
    order = [0, 1, 2, 0, 2, 1, 1, 0, 2, 0, 1, 2, 2, 0, 1, 0, 2, 1, 0, 1][:timed_calls]
    row["timed_matches"] = _launches(kf, timed_case, config, sets, order, pause_s=0.0)
    row["cache_hits"] = None if hits_before is None else stats.get("hits", 0) - hits_before
    time.sleep(0.01)
    row["paced_matches"] = _launches(kf, make_case(kf, shape, 0, "cpu"), config, sets, order[:8], pause_s=0.005)
    return row


def run_forked(path: Path, timeout_s: float = 120.0) -> dict:
    """:func:`run_one` in a forked child; its result comes back through a pipe (a crash or hang is an error row)."""
    import select
    import signal

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            row = run_one(path)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, not raised
            row = {"file": str(path), "loaded": False, "error": f"{type(exc).__name__}: {exc}"}
        with os.fdopen(write_fd, "w") as fh:
            fh.write(json.dumps(row, default=str))
        os._exit(0)
    os.close(write_fd)
    ready, _, _ = select.select([read_fd], [], [], timeout_s)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_fd)
        return {"file": str(path), "loaded": False, "error": f"no answer in {timeout_s} s"}
    with os.fdopen(read_fd) as fh:
        text = fh.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else {"file": str(path), "loaded": False, "error": "child died"}


def main(argv: list[str]) -> int:
    """Run the given files (default: the manifest's) and print the JSON list."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch  # noqa: F401 - imported once in the parent, shared by every forked child
    import triton  # noqa: F401

    import kernelpilot.kernels.contract  # noqa: F401

    files = [Path(a).resolve() for a in argv] or [HERE / c["file"] for c in json.loads((HERE / "cases.json")
                                                                                       .read_text())
                                                  if c["file"].endswith(".py")]  # a .cu case needs a GPU
    rows = [run_forked(f) for f in files]
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
