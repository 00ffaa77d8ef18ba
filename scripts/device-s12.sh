#!/usr/bin/env bash
# Session 12 on a machine of 4 GPUs (from the repository root), one lane per GPU (CUDA_VISIBLE_DEVICES), side by
# side, every command ended before the call's limit (CALL_S). Carry .whl12 (.whl25 and .whl27 together: liger, fla,
# torchao, kernel-tuner 1.5 and its dependencies) and third_party/triton_tutorials.
#   CALL_S=580 WHL=.whl12 bash scripts/device-s12.sh a
#       GPU 0,1,2: torchao int8 mm's 960-config exhaustive tune with an evaluation cache of its own
#                  (KERNELPILOT_CACHE): the cache comes back as a landscape to replay on the CPU
#       GPU 3:     exhaustive tunes with caches of the attention and matmul tutorials and Liger GeGLU, then the
#                  GPU-marked tests of the loop (test_gpu, test_tune_gpu)
#   CALL_S=540 WHL=.whl12 bash scripts/device-s12.sh b     then     CALL_S=470 ... c
#       issue 25's table on 2 GPUs (4-GPU machines were not lent), in two calls, one lane of rows per GPU, each
#       lane table.py runs that put every optimize at its defaults before any exhaustive tune (on empty caches of
#       its own, --cold-exhaustive); the library kernels whose landscapes came back from call a skip their
#       exhaustive tune. b: torchao, attention, layer_norm | the matmul example, vector_add;
#       c: GeGLU, RoPE | the matmul tutorial, fla l2norm, softmax
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
stage=${1:-a}
source scripts/device-call.sh
KP="python3 -m kernelpilot.cli"
landscape() {  # name, kernel, seconds: an exhaustive tune whose evaluations land in a cache of their own
  local name=$1 kernel=$2 t0=$SECONDS
  KERNELPILOT_CACHE=/tmp/kc-$name TRITON_CACHE_DIR=/tmp/tc-$name timeout -k 10 -s TERM $3 \
    $KP tune "$kernel" --strategy exhaustive --out /tmp/ex-$name --json > /tmp/ex-$name.json 2> /tmp/ex-$name.err
  echo "-- $name exhaustive rc=$? in $(( SECONDS - t0 )) s"; tail -n 2 /tmp/ex-$name.err | cut -c1-300
  python3 -c "
import json, sys; sys.path.insert(0, 'benchmarks/search'); from table import folder_best
print('$name exhaustive:', json.dumps(folder_best(__import__('pathlib').Path('/tmp/ex-$name'))))"
}

case "$stage" in
a)
  ( export CUDA_VISIBLE_DEVICES=0,1,2
    landscape torchao $L/torchao_int8_mm.py $(left 25)
  ) > "$OUT/lane0.log" 2>&1 &
  ( export CUDA_VISIBLE_DEVICES=3
    landscape attention $L/triton_tutorial_attention.py 150
    landscape matmul_tutorial $L/triton_tutorial_matmul.py 100
    landscape geglu $L/liger_geglu.py 150
    gputests 3 tests/test_gpu.py tests/test_tune_gpu.py
  ) > "$OUT/lane3.log" 2>&1 &
  wait
  (cd /tmp && tar czf "$OUT/caches.tgz" kc-*) ; ls -la /tmp/kc-*
  (cd /tmp && tar czf "$OUT/folders.tgz" --exclude=report.html --exclude='*.ncu-rep' ex-* 2>/dev/null)
  grep -E "^-- |exhaustive:|passed|failed" "$OUT"/lane*.log | cut -c1-400 ;;
b|c)
  EX=src/kernelpilot/examples
  lane() {  # lane GPU [--skip-exhaustive] KERNEL...
    local g=$1; shift
    CUDA_VISIBLE_DEVICES=$g python3 benchmarks/search/table.py "$@" --timeout-s 420 --cold-exhaustive \
      --deadline-unix $(( END - 12 )) --out /tmp/kp-table-$g --json-out "$OUT/rows.jsonl"
  }
  if [ "$stage" = b ]; then
    ( lane 0 --skip-exhaustive $L/torchao_int8_mm.py; lane 0 $L/triton_tutorial_attention.py $EX/layer_norm.py
    ) > "$OUT/lane0.log" 2>&1 &
    ( lane 1 $EX/matmul.py $EX/vector_add.py ) > "$OUT/lane1.log" 2>&1 &
  else
    ( lane 0 --skip-exhaustive $L/liger_geglu.py; lane 0 $L/liger_rope.py ) > "$OUT/lane0.log" 2>&1 &
    ( lane 1 --skip-exhaustive $L/triton_tutorial_matmul.py; lane 1 benchmarks/observed/fla_l2norm.py $EX/softmax.py
    ) > "$OUT/lane1.log" 2>&1 &
  fi
  wait
  (cd /tmp && tar czf "$OUT/runs.tgz" --exclude='*.ncu-rep' --exclude='report.html' --exclude='.git' \
     kp-table-*/opt-*/run.json kp-table-*/opt-*/final_report.md kp-table-*/opt-*/skipped.jsonl \
     kp-table-*/opt-*/inductor/import.json kp-table-*/ex-*/tune.md kp-table-*/*.log 2>/dev/null)
  for f in "$OUT"/lane*.log; do echo "== $f"; grep -E "^\| |<!--|-- " "$f" | cut -c1-400 | tail -n 12; done ;;
esac
ls -la "$OUT"
