#!/usr/bin/env bash
# The one GPU verification script, run on the device machine from the repository root:
#   bash scripts/gpu-check.sh [examples...]      (default: softmax matmul)
# Installs carried wheels (.whl/, see ../shared/device/wheels.sh), runs the GPU-marked tests, measures the
# ceilings, then `kernelpilot optimize` with ncu on each example at its default shape; everything lands in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
ITER=${ITER:-6}
source scripts/device-env.sh
KP="python3 -m kernelpilot.cli"
start=$(date +%s)
{
  echo "== env"; $KP env
  echo "== gpu tests"; python3 -m pytest -q -m gpu tests 2>&1 | tail -n 15
  echo "== specs measure"; $KP specs measure --folder "$PWD/src/kernelpilot/hardware/specs/measured"
  for ex in ${@:-softmax matmul}; do
    echo "== optimize $ex"
    $KP optimize examples/$ex.py --iterations "$ITER" --out "runs/$ex"
    cat "runs/$ex/final_report.md" "runs/$ex/benchmark.md" 2>/dev/null
  done
  echo "== wall seconds: $(( $(date +%s) - start ))"
} 2>&1 | tee "$OUT/gpu-check.log"
tar czf "$OUT/runs.tgz" runs src/kernelpilot/hardware/specs/measured 2>/dev/null
