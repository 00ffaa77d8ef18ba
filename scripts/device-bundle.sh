#!/usr/bin/env bash
# Native code bundles on a GPU (issue 15), one device call (<= 9 min):
#   bash scripts/device-bundle.sh            # the four examples + Liger's RMSNorm (benchmarks/library)
#   bash scripts/device-bundle.sh softmax    # named examples only (a path works too)
# For each kernel: `kernelpilot export --arch auto` (this GPU), `bundle verify`, then fresh processes, each timed from
# process start to the first finished launch (scripts/bundle_first_launch.py): import (torch + kernelpilot only, the
# floor), cold (empty TRITON_CACHE_DIR: Triton compiles), warm (the same cache again), bundle
# (kernelpilot.bundle.load + launch; Triton never imported); outputs of cold, warm and bundle compared with
# torch.equal; then `kernelpilot bundle bench` (JIT vs bundle launch times at every entry). Also the GPU tests of
# tests/test_bundle.py. Writes to $OUT: bundle.log, bundle-summary.json, bundles.tgz (manifests and cubins).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
W=$(mktemp -d /tmp/kp-bundle.XXXX)
start=$(date +%s)
kernels=("$@")
[[ ${#kernels[@]} -gt 0 ]] || kernels=(vector_add softmax layer_norm matmul benchmarks/library/liger_rms_norm.py)
{
echo "== device-bundle $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
python3 -c "import cuda.bindings, cuda.bindings.driver as d; print('cuda-bindings', cuda.bindings.__version__, 'driver CUDA', d.cuDriverGetVersion()[1])" \
  || echo "NO cuda-bindings: bundle load cannot run (carry a wheel: bash ../shared/device/wheels.sh cuda-bindings cuda-pathfinder)"
# Bytecode as an installed package has it (pip compiles at install): without it every fresh process compiles
# kernelpilot's modules again, about 5 ms for the bundle path alone, which is no part of loading a bundle.
python3 -m compileall -q src/kernelpilot && echo "compiled src/kernelpilot to bytecode (dont_write_bytecode=$(python3 -c 'import sys; print(sys.dont_write_bytecode)'))"
python3 - "$W" "$OUT" "${kernels[@]}" <<'PY'
import json, os, statistics, subprocess, sys, time
from pathlib import Path
import torch
W, OUT, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
KP = [sys.executable, "-m", "kernelpilot.cli"]
summary = {"gpu": torch.cuda.get_device_name(0), "kernels": {}}

def run(cmd, env=None, timeout=120):
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        r = subprocess.CompletedProcess(cmd, 124, "", f"timed out after {timeout} s: {' '.join(map(str, cmd))}")
    return r, time.perf_counter() - t

rows = []
for name in names:
    kernel = Path(name) if name.endswith(".py") else Path("src/kernelpilot/examples") / f"{name}.py"
    b, rec = W / kernel.stem, {"kernel": str(kernel)}
    summary["kernels"][kernel.stem] = rec
    r, s = run(KP + ["export", str(kernel), "--arch", "auto", "--out", str(b), "--json"], timeout=150)
    rec["export_s"] = round(s, 2)
    if r.returncode:
        rec["export_error"] = (r.stdout + r.stderr)[-1500:]; print(kernel.stem, "EXPORT FAILED", rec["export_error"]); continue
    m = json.loads(r.stdout)
    rec["entries"] = [{k: e[k] for k in ("shape", "config", "grid", "num_warps", "shared_mem_bytes", "n_regs", "n_spills")} for e in m["entries"]]
    rec["min_driver_cuda"], rec["ptxas"] = m["min_driver_cuda"], m["ptxas_version"]
    r, _ = run(KP + ["bundle", "verify", str(b), "--json"])
    rec["verify"] = json.loads(r.stdout).get("ok", False) if r.stdout.strip() else r.stderr[-500:]
    cache = W / f"triton-cache-{kernel.stem}"; cache.mkdir()
    times = {}
    for mode, tmode, env, repeats in (("import", "import", {}, 3), ("cold", "jit", {"TRITON_CACHE_DIR": str(cache)}, 1),
                                      ("warm", "jit", {"TRITON_CACHE_DIR": str(cache)}, 2), ("bundle", "bundle", {}, 3)):
        runs = []
        for i in range(repeats):
            r, wall = run([sys.executable, "scripts/bundle_first_launch.py", tmode, str(b), str(kernel), str(W / f"{kernel.stem}-{mode}.pt")], env)
            if r.returncode:
                runs.append({"error": (r.stdout + r.stderr)[-1500:]}); print(kernel.stem, mode, "FAILED", runs[-1]["error"]); break
            runs.append({**json.loads(r.stdout.strip().splitlines()[-1]), "process_wall_s": round(wall, 4)})
        times[mode] = runs
    rec["times"] = times
    same = {}
    for mode in ("warm", "bundle"):
        try:
            a, c = torch.load(W / f"{kernel.stem}-cold.pt"), torch.load(W / f"{kernel.stem}-{mode}.pt")
            same[mode] = all(torch.equal(a[k], c[k]) for k in a)
        except Exception as exc:
            same[mode] = f"{type(exc).__name__}: {exc}"
    rec["identical_to_cold_jit"] = same
    r, _ = run(KP + ["bundle", "bench", str(b), str(kernel), "--json"], timeout=150)
    rec["bench"] = json.loads(r.stdout) if r.stdout.strip().startswith("{") else r.stderr[-1500:]
    med = lambda mode, key: (statistics.median(x[key] for x in times[mode]) if times.get(mode) and all(key in x for x in times[mode]) else None)
    rec["medians"] = {m: {"process_wall_s": med(m, "process_wall_s"), "over_inputs_s": med(m, "over_inputs_s")} for m in times}
    rows.append((kernel.stem, rec["medians"], same))

# Per mode, median over its fresh processes: "+s" is the time from inputs ready to the first finished launch in the
# same process (what the mode adds over import torch + kernelpilot + inputs); walls are whole processes.
print(f"\n{'kernel':<16}{'import wall':>12}{'cold +s':>10}{'warm +s':>10}{'bundle +s':>11}{'cold/bundle':>13}"
      f"{'bundle wall - import wall':>27}  identical(warm,bundle)")
for k, m, same in rows:
    f = lambda v: f"{v:.4f}" if isinstance(v, float) else "-"
    g = lambda mode, key: (m.get(mode) or {}).get(key)
    ratio = g("cold", "over_inputs_s") / g("bundle", "over_inputs_s") if g("cold", "over_inputs_s") and g("bundle", "over_inputs_s") else None
    over = g("bundle", "process_wall_s") - g("import", "process_wall_s") if g("bundle", "process_wall_s") and g("import", "process_wall_s") else None
    print(f"{k:<16}{f(g('import', 'process_wall_s')):>12}{f(g('cold', 'over_inputs_s')):>10}{f(g('warm', 'over_inputs_s')):>10}"
          f"{f(g('bundle', 'over_inputs_s')):>11}{(f'{ratio:.0f}x' if ratio else '-'):>13}{f(over):>27}  {same.get('warm')},{same.get('bundle')}")
(OUT / "bundle-summary.json").write_text(json.dumps(summary, indent=1))
PY
left=$(( 500 - ($(date +%s) - start) ))
if (( left > 90 )); then
  echo "== [$(( $(date +%s) - start )) s] GPU tests of tests/test_bundle.py (limit ${left} s)"
  timeout "$left" python3 -m pytest -q -x tests/test_bundle.py -m gpu -p no:cacheprovider 2>&1 | tail -n 15
else
  echo "== GPU tests skipped: $(( $(date +%s) - start )) s used of the 9 minutes (run: python3 -m pytest tests/test_bundle.py -m gpu)"
fi
tar czf "$OUT/bundles.tgz" -C "$W" $(cd "$W" && ls -d */ | grep -v triton-cache) 2>/dev/null
} 2>&1 | tee "$OUT/bundle.log"
