"""Run a workload bundle at shapes inside its ranges that the dispatch table never measured, in this (fresh)
process, and check every output against the kernel's reference (run on float64 copies of the inputs, compared
with kernelpilot's tolerance for the output dtype, or the file's own ``atol``/``rtol``:
:func:`kernelpilot.measure.compare.tolerance_for`) (issue 26, scripts/device-bundle26.sh).

    python3 scripts/bundle_workload_check.py BUNDLE KERNEL DISPATCH_JSON [--json OUT.json]

KERNEL is the kernel file (``.py``, or ``.cu`` with its sidecar ``.py`` holding ``setup``/``reference``). The bundle
is loaded first (``kernelpilot.bundle.load``, with no Triton imported); the kernel file is imported after it, for
its ``setup`` and ``reference`` only: every launch goes through the bundle's binaries, never Triton's JIT. Per bucket, the shapes tried are the low end, the
high end, the middle, the middle + 1 and a value 16 below the high end of every dispatch key (one key varied at a
time, the others at their middle), minus the measured ones, each capped at 2**26 per key. Prints a table; exits
1 when an output differs beyond the tolerance, or a shape was refused.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path


def _shapes(bucket: dict, keys: list[str], measured: set[str]) -> list[dict]:
    mid = {k: (bucket["ranges"][k][0] + bucket["ranges"][k][1]) // 2 for k in keys}
    out = []
    for k in keys:
        lo, hi = bucket["ranges"][k]
        hi = min(hi, 1 << 26)
        for v in (lo, hi, mid[k], mid[k] + 1, hi - 16):
            s = {**mid, k: v}
            ident = json.dumps(s, sort_keys=True)
            if lo <= v <= hi and ident not in measured and s not in out:
                out.append(s)
    return out


def main() -> int:
    bundle, kernel, dispatch = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    dump = Path(sys.argv[sys.argv.index("--json") + 1]) if "--json" in sys.argv else None
    t0 = time.perf_counter()
    from kernelpilot.bundle import load

    k = load(bundle)
    load_s = time.perf_counter() - t0
    table = json.loads(dispatch.read_text())
    keys = table["keys"]
    side = kernel.with_suffix(".py")
    spec = importlib.util.spec_from_file_location("kp_checked_kernel", side)
    mod = importlib.util.module_from_spec(spec)
    import torch

    from kernelpilot.measure.compare import tolerance_for

    cases = []
    for b in table["buckets"]:
        measured = {json.dumps({k: m["shape"][k] for k in keys}, sort_keys=True) for m in b["measured"]}
        base = {k: v for k, v in b["measured"][0]["shape"].items() if k not in keys}
        for s in _shapes(b, keys, measured):
            cases.append((b["name"], {**base, **s}))
    # Inputs come from the kernel file's setup (importing it imports Triton for a .py kernel, after load() above);
    # the launches below are the bundle's: k(**inputs).
    spec.loader.exec_module(mod)
    shape0 = dict(getattr(mod, "SHAPE", {}))
    rows, bad = [], 0
    for name, s in cases:
        row = {"bucket": name, "shape": s, "ok": False, "max_abs_err": None, "error": ""}
        try:
            made = mod.setup(**{**shape0, **s}, seed=0, device="cuda")
            inputs, outputs = made["inputs"], list(made.get("outputs") or [])
            # The reference runs on float64 copies of the floating inputs, as kernelpilot's own check runs it.
            ref_in = {n: ((v.double() if v.is_floating_point() else v.clone()) if hasattr(v, "clone") else v)
                      for n, v in inputs.items()}
            k(**inputs)
            torch.cuda.synchronize()
            r = mod.reference(**ref_in)
            want = ([ref_in[o] for o in outputs] if r is None else [r] if hasattr(r, "shape") else list(r))
            got = [inputs[o] for o in outputs]
            err, ok = 0.0, True
            for g, w in zip(got, want):
                tol = tolerance_for(g.dtype, mod)
                g64, w64 = g.double(), w.double()
                err = max(err, float((g64 - w64).abs().max()) if g.numel() else 0.0)
                ok = ok and bool(torch.allclose(g64, w64, atol=tol.atol, rtol=tol.rtol))
            row.update(ok=ok, max_abs_err=err)
        except Exception as exc:  # noqa: BLE001 - reported in the table, counted as a failure
            row["error"] = f"{type(exc).__name__}: {exc}"[:200]
        bad += not row["ok"]
        rows.append(row)
    print(f"{bundle.name}: loaded in {load_s * 1e3:.1f} ms; {len(rows)} never-measured shapes, {bad} failed")
    print("| bucket | shape (never measured) | max abs err | ok |")
    print("|---|---|---|---|")
    for r in rows:
        err = "-" if r["max_abs_err"] is None else f"{r['max_abs_err']:.2e}"
        print(f"| {r['bucket']} | {' '.join(f'{k}={v}' for k, v in r['shape'].items())} | {err} | "
              f"{'yes' if r['ok'] else 'NO ' + r['error']} |")
    if dump:
        dump.write_text(json.dumps({"bundle": str(bundle), "load_s": load_s, "rows": rows}, indent=1))
    return 1 if bad or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
