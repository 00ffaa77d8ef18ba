#!/usr/bin/env bash
# Issue 28's "no behaviour changes" check, with issue 25's GEMM rows, on a machine of 4 GPUs (from the repository
# root; carry .whl25 and third_party/triton_tutorials), one lane per GPU, side by side:
#   bash scripts/device-issue28.sh
# GPU 0 and 1: the GPU-marked tests, split by file (-v: every test's outcome is in the log as it ends)
# GPU 2:       issue 25: Triton's matmul tutorial, optimize at defaults with the Inductor candidate
# GPU 3:       issue 25: the matmul example, optimize at defaults beside eager (cuBLAS) and torch.compile
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
    tests/test_reference_memory.py tests/test_spare_worker.py tests/test_specs.py tests/test_tune_gpu.py tests/test_timing.py ) &
row() {  # row GPU KERNEL: one table row (optimize only), given what the call has left
  local left=$(( CALL_S - SECONDS - 20 ))
  CUDA_VISIBLE_DEVICES=$1 python3 benchmarks/search/table.py "$2" --skip-exhaustive --timeout-s $left \
    --out /tmp/kp-table-$1 --json-out "$OUT/rows-$1.jsonl"
  tail -n 30 /tmp/kp-table-$1/opt-*.log 2>/dev/null | cut -c1-300
}
( row 2 benchmarks/library/triton_tutorial_matmul.py > "$OUT/row-2.log" 2>&1 ) &
( row 3 src/kernelpilot/examples/matmul.py > "$OUT/row-3.log" 2>&1 ) &
wait
for f in "$OUT"/*.log; do echo "== $f"; tail -n 15 "$f"; done
