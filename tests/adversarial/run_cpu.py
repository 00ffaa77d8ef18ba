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
  True whatever the values).

Each file runs in a forked child, so whatever it patches (timers, builtins, torch functions) dies with the child.
"""

from __future__ import annotations

import json
import os
import sys
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
    with every integer dimension halved, and a re-check after ``timed_calls`` more calls (fresh values in the same
    input tensors, outputs once left as they were and once NaN-filled)."""
    import torch

    from kernelpilot.backends.registry import backend_for
    from kernelpilot.kernels.contract import make_case, run_kernel

    row: dict = {"file": str(path.relative_to(HERE)) if path.is_relative_to(HERE) else str(path)}
    # the backend's own loader, without load_kernel's static screen: this runner proves each cheat *works*
    kf = backend_for(path.resolve()).load(path.resolve(), None, interpreted=True)
    config = kf.default_config
    shape = dict(kf.cpu_shape or kf.shape)
    case = make_case(kf, shape, 0, "cpu")
    refs = _reference(kf, _untouched(case), case.outputs)
    _poison(case)
    run_kernel(kf, case.inputs, config)
    outs = {n: case.inputs[n].detach().clone() for n in case.outputs}
    row.update(loaded=True, error=None)
    row["matches"], row["worst_rel_l2"] = _compare(kf, outs, refs)
    row["reference_after_kernel"], _ = _compare(kf, outs, _reference(kf, case.inputs, case.outputs))
    row["allclose_after_load"] = all(bool(torch.allclose(outs[n].double(), refs[n].double())) for n in outs)

    half = {k: (max(v // 2, 1) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in shape.items()}
    small = make_case(kf, half, 0, "cpu")
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
        fresh_refs = _reference(kf, _untouched(case), case.outputs)
        if variant == "poisoned":
            _poison(case)
        run_kernel(kf, case.inputs, config)
        row[f"recheck_{variant}_matches"], _ = _compare(kf, {n: case.inputs[n] for n in case.outputs}, fresh_refs)
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
                                                                                       .read_text())]
    rows = [run_forked(f) for f in files]
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
