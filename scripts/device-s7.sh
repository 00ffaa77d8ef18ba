#!/usr/bin/env bash
# Session 7 on one GPU (from the repository root; carry .whl25 and third_party/triton_tutorials):
#   bash scripts/device-s7.sh
# 1. `kernelpilot check` of the fused-attention tutorial at the config its optimize run refused before it led
#    (v9: BLOCK_M 128, BLOCK_N 64, 4 warps, 3 stages), to read the audit's message; 2. the GPU tests of this
#    session's changes (round-robin secret check, timer, Inductor import, optimize end to end).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
timeout 150 python3 -m kernelpilot.cli check benchmarks/library/triton_tutorial_attention.py --config BLOCK_M=128 \
  --config BLOCK_N=64 --config num_warps=4 --config num_stages=3 --json > "$OUT/attention-check.json" \
  2> "$OUT/attention-check.log"
echo "-- check rc=$?"; head -c 3000 "$OUT/attention-check.json"; echo
timeout $(( ${CALL_S:-480} - SECONDS )) python3 -m pytest -v -m gpu -p no:cacheprovider -rfE --tb=short --durations=8 \
  tests/test_benchmark_round_robin.py tests/test_timing.py tests/test_inductor_import.py \
  tests/test_gpu.py::test_optimize_end_to_end_on_gpu > "$OUT/gputests.log" 2>&1
echo "-- gpu tests rc=$?"; grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUT/gputests.log" | tail -n 30
