#!/usr/bin/env bash
# Issue 28's "no behaviour changes" check, with the last pieces of issues 25 and 27, on a machine of 4 GPUs (from the
# repository root; carry .whl25, .dev26, .old/f0f22c9 (a tree of the commit before issue 28: `git archive f0f22c9 src`) and
# third_party/triton_tutorials), one lane per GPU, side by side:
#   bash scripts/device-issue28.sh
# GPU 0 and 1: the GPU-marked tests, split by file (-v: every test's outcome is in the log as it ends)
# GPU 2:       issue 27: `kernelbench run` on three of the 1.6e9-element level-1 problems (device-issue27.sh big)
# GPU 3:       the cost of one evaluation before (f0f22c9) and after issue 28 (scripts/probe_eval_cost.py evals, the
#              layer_norm and matmul examples, each tree twice, alternating); then the matmul example's optimize row
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
CALL_S=${CALL_S:-440}
source scripts/device-env.sh
SITE=${PYTHONPATH%%:*}
echo "== issue 28, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
gpu_tests() {  # gpu_tests GPU LOG FILE...
  local gpu=$1 log=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu timeout $(( CALL_S - SECONDS - 10 )) python3 -m pytest -v -m gpu -p no:cacheprovider \
    -rfE --tb=short --durations=12 "$@" > "$log" 2>&1
  echo "-- gpu tests rc=$? after $SECONDS s" >> "$log"
}
( gpu_tests 0 "$OUT/gputests-0.log" tests/test_backends.py tests/test_build_integrity.py tests/test_bundle.py \
    tests/test_check_memory.py tests/test_cuda_backend.py tests/test_gpu.py tests/test_inductor_import.py \
    tests/test_inplace.py tests/test_integrity_check.py tests/test_bundle_workload.py ) &
( gpu_tests 1 "$OUT/gputests-1.log" tests/test_isolation.py tests/test_kernelbench.py tests/test_kernelbench_run.py \
    tests/test_library_kernels.py tests/test_library_wrappers.py tests/test_occupancy_driver.py \
    tests/test_reference_memory.py tests/test_spare_worker.py tests/test_specs.py tests/test_tune_gpu.py ) &
( export CUDA_VISIBLE_DEVICES=2 KB_GPU=2 CALL_S=$(( CALL_S - 15 )); bash scripts/device-issue27.sh big 19 23 36 > /tmp/kb-big.out 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=3
  { for round in 1 2; do
      for tree in .old/f0f22c9/src src; do
        for ex in layer_norm matmul; do
          echo "-- round $round, $tree"
          PYTHONPATH=$SITE:$PWD/$tree timeout 120 python3 scripts/probe_eval_cost.py evals $ex 2>&1 | grep "^== evals"
        done
      done
    done
    left=$(( CALL_S - SECONDS - 15 ))
    echo "-- matmul optimize row, ${left} s left"
    [ $left -gt 120 ] && python3 benchmarks/search/table.py src/kernelpilot/examples/matmul.py --skip-exhaustive \
      --timeout-s $left --out /tmp/kp-table --json-out "$OUT/rows.jsonl"
    tail -n 25 /tmp/kp-table/opt-matmul.log 2>/dev/null | cut -c1-300
  } > "$OUT/cost.log" 2>&1 ) &
wait
for f in "$OUT"/*.log; do echo "== $f"; tail -n 15 "$f"; done
