#!/usr/bin/env bash
# Session 15 on a machine of 2 GPUs (from the repository root; only 2-GPU kinds were lent). Every lane is pinned to
# its half of the host's cores (`taskset -c $(lanecpus G)`) and every row runs its optimize, then its cold
# exhaustive tune (table.py --paired --cold-exhaustive). Carry .whl14 and third_party/triton_tutorials.
#   CALL_S=570 WHL=.whl14 bash scripts/device-s15.sh e    the examples' table whole, one call
#       GPU 0: the matmul example   GPU 1: softmax, layer_norm, vector_add
#   CALL_S=570 WHL=.whl14 bash scripts/device-s15.sh l1   the library table, first half
#       GPU 0: torchao int8 mm   GPU 1: Liger GeGLU
#   CALL_S=570 WHL=.whl14 bash scripts/device-s15.sh l2   the library table, second half, then the sgemm optimize
#       (its .cu Inductor candidate)
#       GPU 0: the attention tutorial, the matmul tutorial   GPU 1: fla-core l2norm, Liger RoPE, sgemm optimize
#   CALL_S=570 WHL=.whl14 bash scripts/device-s15.sh p    the peer table whole, one call (not run in session 15)
#       GPU 0: softmax and layer_norm, every tool   GPU 1: sgemm (.cu), every tool
#   CALL_S=140 WHL=.whl14 bash scripts/device-s15.sh v    (short) GPU 0: Inductor's kernel for the sgemm .cu
#       imported (`kernelpilot inductor`, the .cu original's setup) and checked   GPU 1: layer_norm's peer rows
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
stage=${1:-a}
source scripts/device-call.sh
case "$stage" in
e)
  ( lane 0 $EX/matmul.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $EX/softmax.py $EX/layer_norm.py $EX/vector_add.py ) > /tmp/lane1.log 2>&1 &
  wait ;;
l1)
  ( lane 0 $L/torchao_int8_mm.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $L/liger_geglu.py ) > /tmp/lane1.log 2>&1 &
  wait ;;
l2)
  ( lane 0 $L/triton_tutorial_attention.py $L/triton_tutorial_matmul.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 benchmarks/observed/fla_l2norm.py $L/liger_rope.py
    peers 1 "optimize" opt ) > /tmp/lane1.log 2>&1 &
  wait
  tail -n 40 /tmp/kp-peers-opt.log > "$OUT/peers.log" 2>&1 ;;
p)
  ( peers 0 "" ln "softmax,layer_norm" ) > /tmp/lane0.log 2>&1 &
  ( peers 1 "" sg sgemm ) > /tmp/lane1.log 2>&1 &
  wait
  tail -n 30 /tmp/kp-peers-ln.log /tmp/kp-peers-sg.log > "$OUT/peers.log" 2>&1 ;;
v)
  ( mkdir -p /tmp/sg
    CUDA_VISIBLE_DEVICES=0 taskset -c "$(lanecpus 0)" timeout -k 5 $(left 10) python3 -m kernelpilot.cli inductor \
      $EX/cuda/sgemm_db.cu --mode max-autotune-triton --out /tmp/sg/kernel.py --json > "$OUT/inductor-sgemm.json" \
      2> /tmp/sg/err.log; echo "-- inductor rc=$? at $SECONDS s"; grep -v "^E11\|^\s" /tmp/sg/err.log | tail -n 8
    CUDA_VISIBLE_DEVICES=0 taskset -c "$(lanecpus 0)" timeout -k 5 $(left 8) python3 -m kernelpilot.cli check \
      /tmp/sg/kernel.py --json > "$OUT/check-sgemm-inductor.json" 2>&1; echo "-- check rc=$? at $SECONDS s"
  ) > /tmp/lane0.log 2>&1 &
  ( peers 1 "eager,torch.compile,triton.autotune,inductor,tune exhaustive,optimize" ln layer_norm ) > /tmp/lane1.log 2>&1 &
  wait
  tail -n 30 /tmp/kp-peers-ln.log > "$OUT/peers.log" 2>&1 ;;
esac
summarize
