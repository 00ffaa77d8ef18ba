#!/usr/bin/env bash
# Session 13 on a machine of 4 GPUs (from the repository root): issue 25's table as two tables, each measured whole
# in one call, one lane per GPU (CUDA_VISIBLE_DEVICES), every command ended before the call's limit (CALL_S). Carry
# .whl12 (liger, fla, torchao, kernel-tuner 1.5 and their dependencies) and third_party/triton_tutorials.
#   CALL_S=575 WHL=.whl12 bash scripts/device-s13.sh a      the six library kernels, then the GPU-marked tests
#       GPU 0: torchao int8 mm (960-config list, compiled ahead since this session)   GPU 1: Liger GeGLU
#       GPU 2: the matmul tutorial, Liger RoPE    GPU 3: the attention tutorial, fla l2norm, then test_gpu/test_tune_gpu
#   CALL_S=575 WHL=.whl12 bash scripts/device-s13.sh b      the four examples and the peer table's sgemm rows
#       GPU 0: the matmul example   GPU 1: softmax, layer_norm, vector_add
#       GPU 2: sgemm peers: eager, torch.compile, kernelpilot tune exhaustive, Kernel Tuner brute_force
#       GPU 3: sgemm peers: kernelpilot optimize
#   CALL_S=560 WHL=.whl12 bash scripts/device-s13.sh c      after the session's changes (config lists compiled
#       ahead, light cards beside the audit, smaller records): the rows that were tight or missed, the records of
#       the largest run, where a .cu evaluation's seconds go, and the GPU-marked tests of what changed
#       GPU 0: the matmul example (its run folder broken down by file)   GPU 1: the attention tutorial, softmax,
#       then 12 evaluations of sgemm (tune --strategy exhaustive --budget-evals 12: its phases)
#       GPU 2: Liger GeGLU   GPU 3: layer_norm, vector_add, then the GPU-marked tests
# Every table row: optimize at its defaults, then an exhaustive tune on empty caches of its own (table.py
# --cold-exhaustive). Run folders' sizes are broken down by file (benchmarks/records_size.py --folder).
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
stage=${1:-a}
source scripts/device-call.sh
EX=src/kernelpilot/examples
lane() {  # lane GPU KERNEL...: table.py rows on one GPU
  local g=$1; shift
  CUDA_VISIBLE_DEVICES=$g python3 benchmarks/search/table.py "$@" --timeout-s 450 --cold-exhaustive \
    --deadline-unix $(( END - 15 )) --out /tmp/kp-table-$g --json-out "$OUT/rows.jsonl"
}
peers() {  # peers GPU TOOLS TAG: the sgemm rows of search_peers.py for those tools
  CUDA_VISIBLE_DEVICES=$1 timeout -k 10 $(left 15) python3 benchmarks/search_peers.py --only sgemm --tools "$2" \
    --out /tmp/kp-peers-$3 --json-out "$OUT/peers-sgemm-$3.json" --log /tmp/kp-peers-$3.log
  echo "-- peers $3 rc=$? at $SECONDS s"
}

case "$stage" in
a)
  ( lane 0 $L/torchao_int8_mm.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $L/liger_geglu.py ) > /tmp/lane1.log 2>&1 &
  ( lane 2 $L/triton_tutorial_matmul.py $L/liger_rope.py ) > /tmp/lane2.log 2>&1 &
  ( lane 3 $L/triton_tutorial_attention.py benchmarks/observed/fla_l2norm.py
    gputests 3 tests/test_gpu.py tests/test_tune_gpu.py ) > /tmp/lane3.log 2>&1 &
  wait ;;
b)
  ( lane 0 $EX/matmul.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $EX/softmax.py $EX/layer_norm.py $EX/vector_add.py ) > /tmp/lane1.log 2>&1 &
  ( peers 2 "eager,torch.compile,tune exhaustive,kernel tuner" kt ) > /tmp/lane2.log 2>&1 &
  ( peers 3 "optimize" opt ) > /tmp/lane3.log 2>&1 &
  wait ;;
c)
  ( lane 0 $EX/matmul.py ) > /tmp/lane0.log 2>&1 &
  ( lane 1 $L/triton_tutorial_attention.py $EX/softmax.py
    CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(left 20) python3 -m kernelpilot.cli tune $EX/cuda/sgemm_db.cu \
      --strategy exhaustive --budget-evals 12 --out /tmp/kp-sgemm-phases --json > /tmp/sgemm-tune.json \
      2> /tmp/sgemm-tune.err
    echo "-- sgemm tune rc=$? at $SECONDS s"
    python3 -c "
import json
for l in open('/tmp/kp-sgemm-phases/evaluations.jsonl'):
    e = json.loads(l); e = e.get('evaluation', e)
    print('sgemm phases', e.get('status'), round(e.get('wall_s') or 0, 3), json.dumps(e.get('phases_s')))
" 2>&1 | tail -n 14 ) > /tmp/lane1.log 2>&1 &
  ( lane 2 $L/liger_geglu.py ) > /tmp/lane2.log 2>&1 &
  ( lane 3 $EX/layer_norm.py $EX/vector_add.py
    gputests 3 tests/test_gpu.py tests/test_tune_gpu.py tests/test_library_kernels.py tests/test_inductor_import.py \
      tests/test_cuda_backend.py ) > /tmp/lane3.log 2>&1 &
  wait ;;
esac
cat /tmp/lane*.log > "$OUT/lanes.log"
python3 benchmarks/records_size.py --folder /tmp/kp-table-*/opt-* > "$OUT/records.md" 2>&1
(cd /tmp && tar czf "$OUT/runs.tgz" --exclude='*.ncu-rep' --exclude='report.html' --exclude='.git' --exclude='v[0-9]*' \
   kp-table-*/opt-*/run.json kp-table-*/opt-*/final_report.md kp-table-*/opt-*/skipped.jsonl \
   kp-table-*/opt-*/inductor/import.json kp-table-*/ex-*/tune.md kp-table-*/*.log kp-peers-*.log 2>/dev/null)
for f in /tmp/lane*.log; do echo "== $f"; grep -E "^\| |<!--|^-- |passed|failed|^sgemm" "$f" | cut -c1-400 | tail -n 16; done
grep -E "projected|^/tmp" "$OUT/records.md"
ls -la "$OUT"
