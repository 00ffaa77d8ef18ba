#!/usr/bin/env bash
# Real library kernels (benchmarks/library/*.py) through kernelpilot on a GPU machine: for each kernel file,
#   kernelpilot check, kernelpilot bench --baselines --json, kernelpilot optimize --json --out runs/library/<name>
# then one summary line per kernel: default config vs optimize's best vs torch.compile vs eager (median µs).
#
#   bash scripts/library-kernels.sh                        # every benchmarks/library/*.py
#   bash scripts/library-kernels.sh liger_rms_norm liger_rope
#   ITER=4 OPT_LIMIT_S=200 bash scripts/library-kernels.sh liger_swiglu
#
# Needs liger-kernel on the device, which has no package registry: fetch its wheel here first with
#   bash ../shared/device/wheels.sh liger-kernel==0.8.5      (pure Python; torch and triton are on the device)
# and carry .whl (scripts/device-env.sh installs it into /tmp/site). triton_tutorial_attention additionally needs
# third_party/triton_tutorials/06-fused-attention.py (see third_party/triton_tutorials/README.md); without it that
# file is skipped. Everything lands in $OUT: library.log, library-summary.tsv and library-runs.tgz (JSON outputs and
# run folders). One device call is at most 10 minutes: name fewer kernels or lower ITER if a call runs out.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
KP="python3 -m kernelpilot.cli"
ITER=${ITER:-6}
OPT_LIMIT_S=${OPT_LIMIT_S:-200}
RES=runs/library; mkdir -p "$RES"
if [ $# -gt 0 ]; then names=("$@"); else names=($(ls benchmarks/library/*.py | xargs -n1 basename | sed 's/\.py$//')); fi
start=$(date +%s)
{
echo "== library kernels $(date -u +%Y-%m-%dT%H:%M:%SZ): ${names[*]} (optimize --budget-s ${OPT_BUDGET_S:-90})"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
python3 -c "import liger_kernel, importlib.metadata as m; print('liger-kernel', m.version('liger-kernel'))" 2>&1 | tail -1
for name in "${names[@]}"; do
  file=benchmarks/library/$name.py
  if [ "$name" = triton_tutorial_attention ] && [ ! -f third_party/triton_tutorials/06-fused-attention.py ]; then
    echo "== $name: SKIPPED (third_party/triton_tutorials/06-fused-attention.py is not there)"; continue
  fi
  echo "== [$(( $(date +%s) - start )) s] $name: check"
  timeout 180 $KP check "$file" --json > "$RES/$name.check.json" 2> "$RES/$name.check.err"; echo "rc=$?"
  tail -n 5 "$RES/$name.check.err"
  echo "== [$(( $(date +%s) - start )) s] $name: bench --baselines"
  timeout 180 $KP bench "$file" --baselines --json > "$RES/$name.bench.json" 2> "$RES/$name.bench.err"; echo "rc=$?"
  tail -n 5 "$RES/$name.bench.err"
  echo "== [$(( $(date +%s) - start )) s] $name: optimize"
  rm -rf "$RES/$name"
  timeout "$OPT_LIMIT_S" $KP optimize "$file" --budget-s "${OPT_BUDGET_S:-90}" --no-benchmark --json --out "$RES/$name" \
    > "$RES/$name.optimize.json" 2> "$RES/$name.optimize.err"; echo "rc=$?"
  tail -n 5 "$RES/$name.optimize.err"
done
echo "== summary (median µs; best = fastest accepted version of optimize)"
python3 - "$RES" "${names[@]}" <<'PY' | tee "$OUT/library-summary.tsv"
import json, sys
from pathlib import Path
res, names = Path(sys.argv[1]), sys.argv[2:]

def load(path):
    try:
        return json.loads(path.read_text())
    except Exception as exc:
        return {"_error": f"{type(exc).__name__}: {exc}"}

def us(ns):
    return f"{ns / 1e3:.1f}" if isinstance(ns, (int, float)) else "-"

def find(obj, key):
    """First value of `key` anywhere in a JSON object (optimize's record puts best_version under "run")."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for item in obj:
            got = find(item, key)
            if got is not None:
                return got
    return None

print("kernel\tcheck\tdefault_us\tbest_us\tbest_config\ttorch_compile_us\teager_us")
for name in names:
    check, bench, opt = (load(res / f"{name}.{k}.json") for k in ("check", "bench", "optimize"))
    rows = {r.get("name") or r.get("label"): r for r in (bench.get("baselines") or {}).get("rows", [])}
    def row_us(*labels):
        for label, row in rows.items():
            if label and any(l in label.lower() for l in labels):
                return us((row.get("timing") or {}).get("median_ns"))
        return "-"
    index = find(opt, "best_version")
    best = next((v for v in opt.get("versions", []) if v.get("index") == index), {})
    print("\t".join([name, str(check.get("passed", check.get("_error", "?"))),
                     us((bench.get("timing") or {}).get("median_ns")), us(best.get("duration_ns")),
                     json.dumps(best.get("config")), row_us("compile"), row_us("eager")]))
PY
} 2>&1 | tee "$OUT/library.log"
tar czf "$OUT/library-runs.tgz" "$RES"
