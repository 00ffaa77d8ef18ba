#!/usr/bin/env bash
# Session 16 on a machine of 4 GPUs (from the repository root). Every lane is pinned to its quarter of the host's
# cores (`taskset -c $(lanecpus G)`). Carry .whl14 and third_party/triton_tutorials.
#   CALL_S=570 WHL=.whl14 bash scripts/device-s16.sh P    the peer table whole, one call, one kernel per GPU
#       GPU 0: softmax   GPU 1: layer_norm   GPU 2: sgemm (.cu; optimize with its Inductor candidate), every tool
#       GPU 3: Inductor's kernel for the sgemm .cu imported and checked, then where Liger GeGLU's check spends its
#              seconds (benchmarks/check_cost.py, with and without the large-problem path)
#   CALL_S=585 WHL=.whl14 bash scripts/device-s16.sh L    the library table whole, one call (paired, cold exhaustive)
#       GPU 0: torchao int8 mm   GPU 1: Liger GeGLU   GPU 2: the attention and matmul tutorials
#       GPU 3: fla-core l2norm, Liger RoPE, then the GPU tests of tests/test_check_memory.py
#   CALL_S=450 WHL=.whl14 bash scripts/device-s16.sh E    the examples' table whole, one call
#       GPU 0: matmul   GPU 1: softmax   GPU 2: layer_norm, vector_add   GPU 3: tests/test_check_memory.py's GPU tests
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
stage=${1:-P}
source scripts/device-call.sh
case "$stage" in
P)
  ( peers 0 "" sm softmax ) > /tmp/lane0.log 2>&1 &
  ( peers 1 "" ln layer_norm ) > /tmp/lane1.log 2>&1 &
  ( peers 2 "" sg sgemm ) > /tmp/lane2.log 2>&1 &
  ( mkdir -p /tmp/sg
    pin=(env CUDA_VISIBLE_DEVICES=3 taskset -c "$(lanecpus 3)")
    "${pin[@]}" timeout -k 5 200 python3 -m kernelpilot.cli inductor $EX/cuda/sgemm_db.cu \
      --mode max-autotune-triton --out /tmp/sg/kernel.py --json > /tmp/sg/inductor.json 2> /tmp/sg/err.log
    echo "-- inductor rc=$? at $SECONDS s"; grep -v "^E11\|^\s" /tmp/sg/err.log | tail -n 8; tail -c 1500 /tmp/sg/inductor.json
    "${pin[@]}" timeout -k 5 120 python3 -m kernelpilot.cli check /tmp/sg/kernel.py --json > /tmp/sg/check.json 2>&1
    echo "-- check rc=$? at $SECONDS s"; tail -c 1500 /tmp/sg/check.json
    for lb in default $(( 1 << 40 )); do
      extra=(); [ "$lb" = default ] || extra=(--large-bytes "$lb")
      "${pin[@]}" timeout -k 5 $(left 10) python3 benchmarks/check_cost.py $L/liger_geglu.py --repeat 3 --top 35 \
        "${extra[@]}"
      echo "-- check_cost $lb rc=$? at $SECONDS s"
    done ) > /tmp/lane3.log 2>&1 &
  wait
  tail -n 30 /tmp/kp-peers-*.log > "$OUT/peers.log" 2>&1 ;;
L)
  ( lane 0 $L/torchao_int8_mm.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $L/liger_geglu.py ) > /tmp/lane1.log 2>&1 &
  ( lane 2 $L/triton_tutorial_attention.py $L/triton_tutorial_matmul.py ) > /tmp/lane2.log 2>&1 &
  ( lane 3 benchmarks/observed/fla_l2norm.py $L/liger_rope.py
    PIN=1 gputests 3 tests/test_check_memory.py ) > /tmp/lane3.log 2>&1 &
  wait ;;
E)
  ( lane 0 $EX/matmul.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $EX/softmax.py ) > /tmp/lane1.log 2>&1 &
  ( lane 2 $EX/layer_norm.py $EX/vector_add.py ) > /tmp/lane2.log 2>&1 &
  ( PIN=1 gputests 3 tests/test_check_memory.py ) > /tmp/lane3.log 2>&1 &
  wait ;;
esac
summarize
