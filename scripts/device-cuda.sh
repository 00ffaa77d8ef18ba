#!/usr/bin/env bash
# Issue 14 on a GPU (H100): the CUDA C++ backend end to end, in stages that each fit one device call (<= 9 min),
# from the repository root:
#   bash scripts/device-cuda.sh examples   # GPU-marked CUDA tests; check + bench --baselines + profile of each
#                                          # examples/cuda/*.cu; pipeline on sgemm_db.cu (both buffers)
#   bash scripts/device-cuda.sh series     # the public SGEMM series (benchmarks/cuda_sgemm_series, fetched first by
#                                          # scripts/fetch-sgemm-series.sh): check + bench + profile per version, the
#                                          # versions table with ncu verdicts, pipeline on the double-buffered v8
#   bash scripts/device-cuda.sh tune       # tune (exhaustive over BLOCK_SIZE) and optimize --budget-s 60 of
#                                          # vector_add.cu; tune --budget-evals 12 of sgemm_db.cu
# Logs land in $OUT (<= 8 files come back). Sources scripts/device-env.sh (carried wheels, no interpreter).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
KP="python3 -m kernelpilot.cli"
export KERNELPILOT_CACHE=$PWD/bench-cache KERNELPILOT_CACHE_DIR=/tmp/kp-cuda-cache
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
stage=${1:-examples}
{
echo "== $stage, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv
nvcc --version | tail -2
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
case "$stage" in
examples)
  echo "== [$(elapsed) s] GPU-marked CUDA tests"
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_backend.py 2>&1 | tail -n 25
  for k in vector_add softmax sgemm_db; do
    echo "== [$(elapsed) s] $k: check"
    timeout 120 $KP check examples/cuda/$k.cu 2>&1 | tail -n 8
    echo "== [$(elapsed) s] $k: bench --baselines"
    timeout 150 $KP bench examples/cuda/$k.cu --baselines 2>&1 | tail -n 20
    echo "== [$(elapsed) s] $k: profile (ncu)"
    timeout 150 $KP profile examples/cuda/$k.cu --out "$OUT/$k.ncu-rep" --json > "$OUT/profile-$k.json" 2> "$OUT/profile-$k.err"
    python3 -c "import json,sys; d=json.load(open('$OUT/profile-$k.json')); c=d.get('card') or {}; v=d.get('verdict') or {}; print('verdict:', v.get('bound') or v, '|', (c.get('headline') or '')[:300])" 2>&1 | tail -3
    rm -f "$OUT/$k.ncu-rep"
  done
  echo "== [$(elapsed) s] pipeline sgemm_db.cu"
  timeout 120 $KP pipeline examples/cuda/sgemm_db.cu 2>&1 | tail -n 60 ;;
series)
  S=benchmarks/cuda_sgemm_series
  if [ ! -f $S/third_party/SGEMM_CUDA/src/kernels/1_naive.cuh ]; then
    echo "SKIPPED: $S/third_party is absent: run scripts/fetch-sgemm-series.sh where there is network first"
  else
    for v in $S/v*.cu; do
      name=$(basename $v .cu)
      echo "== [$(elapsed) s] $name: check"
      timeout 90 $KP check $v --json > "$OUT/check-$name.json" 2>/dev/null; tail -c 300 "$OUT/check-$name.json"; echo
      echo "== [$(elapsed) s] $name: bench"
      timeout 90 $KP bench $v --json > "$OUT/bench-$name.json" 2>/dev/null; tail -c 200 "$OUT/bench-$name.json"; echo
      echo "== [$(elapsed) s] $name: profile"
      timeout 90 $KP profile $v --out /tmp/$name.ncu-rep --json > "$OUT/profile-$name.json" 2>/dev/null; echo "rc $?"
    done
    python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows = []
for b in sorted(glob.glob(f"{out}/bench-*.json")):
    name = os.path.basename(b)[6:-5]
    def load(kind):
        try:
            return json.load(open(f"{out}/{kind}-{name}.json"))
        except Exception as exc:
            return {"error": str(exc)}
    bench, check, prof = load("bench"), load("check"), load("profile")
    med = (bench.get("timing") or {}).get("median_ns")
    verdict = (prof.get("verdict") or {})
    rows.append((name, check.get("passed", check.get("error")), f"{med / 1e3:.1f}" if med else bench.get("message", "")[:60],
                 bench.get("pct_of_roofline"), verdict.get("bound") or verdict.get("summary") or prof.get("message", "")[:80]))
first = next((float(r[2]) for r in rows if r[2] and r[2][0].isdigit()), None)
print("| version | correct | median µs | speedup vs v1 | % of roofline | ncu verdict |")
print("|---|---|---|---|---|---|")
for name, ok, med, pct, verdict in rows:
    sp = f"{first / float(med):.2f}x" if first and med and med[0].isdigit() else ""
    print(f"| {name} | {ok} | {med} | {sp} | {pct if pct is None else round(pct, 1)} | {verdict} |")
PY
    tar czf "$OUT/series-json.tgz" -C "$OUT" $(cd "$OUT" && ls check-*.json bench-*.json profile-*.json 2>/dev/null) && rm -f "$OUT"/check-*.json "$OUT"/bench-*.json "$OUT"/profile-*.json
    echo "== [$(elapsed) s] pipeline v8 (double buffering) --tile 128,256,16"
    timeout 120 $KP pipeline $S/v8_double_buffering.cu --tile 128,256,16 2>&1 | tail -n 40
  fi ;;
tune)
  echo "== [$(elapsed) s] tune vector_add.cu (exhaustive over BLOCK_SIZE)"
  timeout 200 $KP tune examples/cuda/vector_add.cu --strategy exhaustive --no-cache --out runs/cuda-vadd-tune 2>&1 | tail -n 30
  echo "== [$(elapsed) s] optimize vector_add.cu --budget-s 60"
  timeout 200 $KP optimize examples/cuda/vector_add.cu --budget-s 60 --out runs/cuda-vadd-opt 2>&1 | tail -n 30
  echo "== [$(elapsed) s] tune sgemm_db.cu (guided, 12 evaluations)"
  timeout 150 $KP tune examples/cuda/sgemm_db.cu --strategy guided --budget-evals 12 --no-cache --out runs/cuda-sgemm-tune 2>&1 | tail -n 30
  tar czf "$OUT/cuda-runs.tgz" runs/cuda-* ;;
esac
echo "== done in $(elapsed) s"
} 2>&1 | tee "$OUT/device-cuda-$stage.log"
