#!/usr/bin/env bash
# Session 14 on a machine of 2 GPUs (from the repository root). Every lane is pinned to its share of the host's
# cores (`taskset -c $(lanecpus G)`; kernelpilot's pools size themselves to it) so one lane's compiles do not slow
# another's timings of time to best. Carry .whl14 (.whl12 without the SQL storage optuna does not import in
# memory: sqlalchemy, alembic, greenlet, mako; the tree must stay under 64 MiB) and third_party/triton_tutorials.
#   CALL_S=555 WHL=.whl14 bash scripts/device-s14.sh a      (2 GPUs) where the seconds before the best go, the
#       GPU tests
#       GPU 0: the attention tutorial and layer_norm, each optimize then its cold exhaustive tune (--paired), then
#       GPU tests (part 3)   GPU 1: vector_add the same way, `kernelpilot report` on its optimize folder, then GPU
#       tests (part 1)
#   CALL_S=555 WHL=.whl14 bash scripts/device-s14.sh b      (2 GPUs) after the warm compiles (drawn shapes and
#       v0's card compiled before they are needed): GPU 0: the attention tutorial, layer_norm, softmax rows
#       GPU 1: the GPU tests' part 2, test_tune_gpu and test_inplace (failed in a), then vector_add and fla l2norm
#   CALL_S=540 WHL=.whl14 bash scripts/device-s14.sh c      (2 GPUs) the peer table's sgemm rows, Kernel Tuner
#       given the whole space (no 48 KiB cap since 416c6f4), inputs drawn on the device (cd0d43d)
#       GPU 0: eager, torch.compile, kernelpilot tune exhaustive, Kernel Tuner brute_force   GPU 1: optimize
#   CALL_S=380 WHL=.whl14 bash scripts/device-s14.sh d      (2 GPUs) library rows in the device time left
#       GPU 0: fla l2norm, Liger RoPE   GPU 1: the matmul tutorial (its Inductor candidate)
#   CALL_S=555 WHL=.whl14 bash scripts/device-s14.sh t      (2 GPUs) the GPU tests' part 2, then part 3 again
# Every table row: table.py --paired --cold-exhaustive; the rows carry each command's set-up seconds and both
# timelines. Everything lands in $OUT (at most 8 files).
set -uo pipefail
stage=${1:-a}
source scripts/device-call.sh
pinned_tests() { PIN=1 gputests "$@"; }  # pinned_tests GPU FILE...: gputests on that GPU's share of the cores
PART1=(tests/test_gpu.py tests/test_tune_gpu.py tests/test_cuda_backend.py tests/test_inductor_import.py
       tests/test_library_kernels.py tests/test_library_wrappers.py)
PART2=(tests/test_isolation.py tests/test_bundle.py tests/test_bundle_workload.py tests/test_kernelbench.py
       tests/test_kernelbench_run.py tests/test_build_integrity.py tests/test_backends.py)
PART3=(tests/test_timing.py tests/test_specs.py tests/test_spare_worker.py tests/test_reference_memory.py
       tests/test_occupancy_driver.py tests/test_inplace.py tests/test_integrity_check.py tests/test_check_memory.py)
case "$stage" in
a)
  ( lane 0 $L/triton_tutorial_attention.py $EX/layer_norm.py
    pinned_tests 0 "${PART3[@]}" ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $EX/vector_add.py
    CUDA_VISIBLE_DEVICES=1 timeout 120 python3 -m kernelpilot.cli report /tmp/kp-table-1/opt-vector_add --json \
      > "$OUT/report-vector_add.json" 2>&1; echo "-- report rc=$?"
    pinned_tests 1 "${PART1[@]}" ) > /tmp/lane1.log 2>&1 &
  wait ;;
b)
  ( lane 0 $L/triton_tutorial_attention.py $EX/layer_norm.py $EX/softmax.py ) > /tmp/lane0.log 2>&1 &
  ( pinned_tests 1 "${PART2[@]}" tests/test_tune_gpu.py tests/test_inplace.py
    lane 1 $EX/vector_add.py benchmarks/observed/fla_l2norm.py ) > /tmp/lane1.log 2>&1 &
  wait ;;
c)
  ( peers 0 "eager,torch.compile,tune exhaustive,kernel tuner" kt ) > /tmp/lane0.log 2>&1 &
  ( peers 1 "optimize" opt ) > /tmp/lane1.log 2>&1 &
  wait
  tail -n 40 /tmp/kp-peers-kt.log /tmp/kp-peers-opt.log > "$OUT/peers.log" 2>&1 ;;
d)
  ( lane 0 benchmarks/observed/fla_l2norm.py $L/liger_rope.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $L/triton_tutorial_matmul.py ) > /tmp/lane1.log 2>&1 &
  wait ;;
t)
  ( pinned_tests 0 "${PART2[@]}" ) > /tmp/lane0.log 2>&1 &
  ( pinned_tests 1 "${PART3[@]}" ) > /tmp/lane1.log 2>&1 &
  wait ;;
esac
summarize
