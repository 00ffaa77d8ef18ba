#!/usr/bin/env bash
# Issue 26 on a GPU machine (from the repository root; WHL=.whl25 to carry the wheels):
#   bash scripts/device-issue26.sh wl [K..]  # layer_norm and the matmul example over workloads of 17 shapes (M from
#                                            # 32 to 8192): tune --workload, the table vs the library default vs the
#                                            # best single config; then the bundles of the tables (fresh processes,
#                                            # never-measured shapes inside the ranges) and the store exported
#   bash scripts/device-issue26.sh lookup F [K] # a second process (another machine of the same kind) imports the
#                                            # exported store F and looks the workload up, measuring nothing
# Everything lands in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
stage=${1:-wl}; shift || true
echo "== $stage $*, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=index,uuid,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
EX=src/kernelpilot/examples
export KERNELPILOT_HOME=/tmp/kp-home
kp() { python3 -m kernelpilot.cli "$@"; }
case "$stage" in
wl)
  for k in ${@:-layer_norm matmul}; do
    left=$(( ${CALL_S:-570} - SECONDS - 60 ))
    [ $left -lt 60 ] && { echo "-- skipped $k: ${left} s left"; continue; }
    budget=$([ $k = matmul ] && echo ${MATMUL_EVALS:-54} || echo 36)   # configs over all buckets (9 buckets: 4 to 6 each)
    rm -rf /tmp/wl-$k
    timeout $left python3 -m kernelpilot.cli tune $EX/$k.py --workload-range M=32:8192 --top-k 1 --budget-evals $budget \
      --out /tmp/wl-$k --json > /tmp/wl-$k.json 2> "$OUT/wl-$k.log"
    echo "-- $k: rc=$? after $SECONDS s"
    cp /tmp/wl-$k/workload.md "$OUT/wl-$k.md" 2>/dev/null && cat "$OUT/wl-$k.md"
    cp /tmp/wl-$k/dispatch.json "$OUT/wl-$k-dispatch.json" 2>/dev/null
  done
  kp configs export "$OUT/configs.jsonl" --json | head -c 400; echo
  [ -z "${NO_BUNDLE:-}" ] && bash scripts/device-bundle26.sh /tmp/wl-layer_norm 2>&1 | tee "$OUT/bundle.log"
  # the run folders without binaries or profiles, one file (the device tool brings back at most 8)
  tar -czf "$OUT/wl-runs.tgz" --exclude='*.ncu-rep' --exclude='*.cubin' --exclude='*.so' -C /tmp \
    $(cd /tmp && ls -d wl-* 2>/dev/null) ;;
lookup)  # lookup FILE [KERNEL]: a store another machine exported; shapes inside its buckets, some never measured
  export KERNELPILOT_HOME=/tmp/kp-home2
  kp configs import "$1" --json | head -c 400; echo
  for m in 48 100 1000 3000 8000; do kp configs lookup $EX/${2:-layer_norm}.py --shape M=$m --json; echo; done ;;
esac
