#!/usr/bin/env bash
# Issue 4 on the device. Run from the repository root on the GPU machine:
#   bash scripts/issue4-device.sh exhaustive matmul|softmax   # fill the cache: every config measured, pruning reported
#   bash scripts/issue4-device.sh guided matmul|softmax       # the guided strategy live, without the cache
#   bash scripts/issue4-device.sh tests                       # GPU-marked search tests (a real illegal memory access)
# Caches land in bench-cache/ (kept between calls on a warm machine) and come back as $OUT/cache.tgz; run folders
# as $OUT/runs.tgz. Each search runs under `timeout` so the archives are always written.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
export KERNELPILOT_CACHE=$PWD/bench-cache
KP="python3 -m kernelpilot.cli"
LIMIT=${LIMIT:-480}
mode=${1:-tests}; ex=${2:-matmul}
case "$ex" in
matmul) C=(--constraint "GROUP_M == 8" --constraint "BLOCK_K <= 64" --constraint "num_warps >= 4"
           --constraint "num_stages >= 3" --constraint "num_stages <= 4") ;;
softmax) C=(--constraint "num_stages == 2") ;;
*) C=() ;;
esac
start=$(date +%s)
case "$mode" in
exhaustive)
  timeout "$LIMIT" $KP tune examples/$ex.py --strategy exhaustive --prune report "${C[@]}" --out runs/$ex-exhaustive \
    > "$OUT/$ex-exhaustive.log" 2>&1 ;;
guided)
  timeout "$LIMIT" $KP tune examples/$ex.py --strategy guided --budget-evals "${EVALS:-24}" --no-cache "${C[@]}" \
    --out runs/$ex-guided > "$OUT/$ex-guided.log" 2>&1 ;;
tests)
  timeout "$LIMIT" python3 -m pytest -q -m gpu tests/test_tune_gpu.py > "$OUT/tests.log" 2>&1 ;;
esac
echo "rc $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/$mode-$ex.rc"
[ -d bench-cache ] && tar czf "$OUT/cache.tgz" bench-cache
[ -d runs ] && tar czf "$OUT/runs.tgz" runs
tail -n 25 "$OUT"/*.log
