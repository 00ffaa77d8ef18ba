#!/usr/bin/env bash
# Issue 25 on a GPU machine (from the repository root; carry .whl, third_party for the tutorials):
#   bash scripts/device-issue25.sh smoke        # optimize at defaults vs exhaustive tune on softmax and layer_norm;
#                                               # the cost of one evaluation of the 10,800-config benchmark space
#   bash scripts/device-issue25.sh table K...   # benchmarks/search/table.py over the given kernel files
#   bash scripts/device-issue25.sh lanes        # on a machine of 4 GPUs: the issue's table, one lane of kernels
#                                               # per GPU (CUDA_VISIBLE_DEVICES), side by side
#   bash scripts/device-issue25.sh x4a          # on 4 GPUs, side by side: GPU 0 the tutorial matmul row (Inductor
#                                               # candidate with its persistent TMA template); GPU 1 and 2 the
#                                               # exhaustive tunes of the matmul example (1162) and torchao int8 mm
#                                               # (960), cut at the call's end with SIGTERM (their --out folders come
#                                               # back as ex-*.tgz; `x4b` resumes them); GPU 3 the GPU-marked tests
#   bash scripts/device-issue25.sh x4b          # resume the exhaustive tunes carried in .dev26/ex-*/ (GPU 1, 2)
#   bash scripts/device-issue25.sh x4d|x4e      # on 4 GPUs, one lane of table rows per GPU (x4d: the GPU tests of the
#                                               # round-robin final first, the library kernels and the matmul
#                                               # example; x4e: the other examples and the layer_norm peer table)
#   bash scripts/device-issue25.sh x2a|x2b|x2c  # the same rows on 2 GPUs over three calls (x2a: GPU tests, the two
#                                               # GEMMs; x2b: the other library kernels; x2c: the examples;
#                                               # x2d: the GPU tests that time, beside the matmul example's row;
#                                               # x2e, one GPU: Liger GeGLU and RoPE; x1f, one GPU: the tutorial
#                                               # matmul row and the Inductor import's GPU tests)
#   bash scripts/device-issue25.sh x4t          # on 4 GPUs: the issue's whole table in one call, one lane of rows per
#                                               # GPU, every command ending before the call's limit (CALL_S)
#   bash scripts/device-issue25.sh x4u          # the same on 4 GPUs, each lane one table.py that runs every optimize
#                                               # before any exhaustive tune (a cut then loses an exhaustive wall only;
#                                               # COLD=1: the exhaustive tunes on empty caches of their own)
#   bash scripts/device-issue25.sh big4a|big4b  # on 4 GPUs: the 10,800-config space's exhaustive tune, cut at the
#                                               # call's end (ex-big.tgz), resumed from .dev27/ex-big by big4b
#   bash scripts/device-issue25.sh big4c S      # on 4 GPUs: tune --strategy auto over that space for S seconds
#   bash scripts/device-issue25.sh s8a|s8b      # 4 GPUs: the 10,800-config exhaustive tune on GPUs 0-2 beside
#                                               # optimize on GPU 3 (s8a); resumed on 0-2 beside the same (s8b)
#   bash scripts/device-issue25.sh x4c          # on 4 GPUs: GPU 0 the tutorial matmul row (its persistent template's
#                                               # tiles tunable), then torchao's optimize row; GPU 1 the matmul
#                                               # example's row, optimize and exhaustive; GPU 2+3 torchao's
#                                               # exhaustive tune over both
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
stage=${1:-smoke}; shift || true
echo "== $stage $*, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
EX=src/kernelpilot/examples
# keep: the run folders' small records (run.json, final_report.md, skipped.jsonl, inductor/import.json, the tune
# folder's tune.md) as one archive in $OUT
keep() {
  (cd /tmp/kp-table && tar czf "$OUT/runs.tgz" *.log --exclude='*.ncu-rep' --exclude='.git' --exclude='report.html' \
     --exclude='tc-*' --exclude='ic-*' opt-*/run.json opt-*/final_report.md opt-*/skipped.jsonl opt-*/benchmark.md \
     opt-*/inductor/import.json opt-*/inductor/capture*.json opt-*/inductor/tune/tune.md opt-*/*.log 2>/dev/null)
  ls -la "$OUT"
}
case "$stage" in
smoke)
  python3 benchmarks/search/table.py $EX/softmax.py $EX/layer_norm.py --out /tmp/kp-table \
    --json-out "$OUT/smoke-rows.jsonl" 2>&1 | tee "$OUT/smoke-table.md"
  t0=$(date +%s.%N)
  timeout 240 python3 -m kernelpilot.cli tune benchmarks/search/softmax_big.py --strategy random --budget-evals 120 \
    --no-cache --json --all --quiet > /tmp/big-random.json 2> /tmp/big-random.err
  python3 - /tmp/big-random.json "$t0" <<'PY' | tee -a "$OUT/smoke-table.md"
import json, sys, time
d = json.load(open(sys.argv[1]))
evs = d["evaluations"]
ran = [e for e in evs if e["status"] not in ("pruned", "invalid_config")]
print(f"softmax_big random 120: command {time.time() - float(sys.argv[2]):.1f} s, tune wall {d['wall_s']:.1f} s, "
      f"device {d['device_s']:.1f} s, {len(ran)} ran, {len(evs) - len(ran)} skipped, best {d['best']['duration_ns']:.0f} ns, "
      f"prune {d['prune'] and d['prune']['by_reason']}, stopped: {d['stopped']}")
PY
  tail -3 /tmp/big-random.err
  for r in /tmp/kp-table/opt-*; do
    echo "== $r"; cat "$r/run.json" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['stop_reason'], d.get('wall_s'), d.get('search_spent_s'))"
    git -C "$r" log --format='%ct %s' | tail -n 4
  done ;;
table)
  python3 benchmarks/search/table.py "$@" --out /tmp/kp-table --json-out "$OUT/rows.jsonl" ;;
call1)  # the examples with an exhaustive tune beside optimize, then library kernels (optimize only)
  python3 benchmarks/search/table.py $EX/vector_add.py $EX/layer_norm.py --timeout-s 240 --out /tmp/kp-table \
    --json-out "$OUT/rows.jsonl"
  python3 benchmarks/search/table.py benchmarks/library/liger_geglu.py benchmarks/library/liger_rope.py \
    benchmarks/observed/fla_l2norm.py --skip-exhaustive --timeout-s 200 --out /tmp/kp-table --json-out "$OUT/rows.jsonl"
  keep ;;
callA)  # the Inductor candidate (Liger GeGLU), the matmul example (GEMM vs cuBLAS, 1162 configs), layer_norm
  python3 benchmarks/search/table.py benchmarks/library/liger_geglu.py --skip-exhaustive --timeout-s 170 \
    --out /tmp/kp-table --json-out "$OUT/rows.jsonl"
  python3 benchmarks/search/table.py $EX/matmul.py --skip-exhaustive --timeout-s 280 --out /tmp/kp-table \
    --json-out "$OUT/rows.jsonl"
  keep
  python3 benchmarks/search/table.py $EX/layer_norm.py --skip-exhaustive --timeout-s 130 --out /tmp/kp-table \
    --json-out "$OUT/rows.jsonl"
  keep ;;
g1|g2|g3|g4|g5|g6)  # one kernel at a time, each given what the call has left (T: its command limit; x: skip exhaustive)
  row() {  # row KERNEL MAX_S [x]
    local left=$(( ${CALL_S:-570} - SECONDS - 15 ))
    [ $left -lt 60 ] && { echo "-- skipped $1: ${left} s left"; return; }
    local t=$(( $2 < left ? $2 : left ))
    rm -rf "/tmp/kp-table/opt-$(basename "$1" .py)"  # a folder left by an earlier call on a warm machine
    python3 benchmarks/search/table.py "$1" ${3:+--skip-exhaustive} --timeout-s $t --out /tmp/kp-table \
      --json-out "$OUT/rows.jsonl"
    keep >/dev/null
  }
  case "$stage" in
  g1) row $EX/vector_add.py 130; row benchmarks/library/triton_tutorial_matmul.py 150
      row benchmarks/library/torchao_int8_mm.py 150 ;;
  g2) row benchmarks/library/liger_geglu.py 340 x; row benchmarks/observed/fla_l2norm.py 120 ;;
  g3) row $EX/matmul.py 330 x; row benchmarks/library/liger_rope.py 330 x ;;
  g4) row benchmarks/library/triton_tutorial_attention.py 300 x; row benchmarks/library/torchao_int8_mm.py 330 x ;;
  g5) row benchmarks/library/torchao_int8_mm.py 300 x
      timeout $(( ${CALL_S:-570} - SECONDS )) python3 benchmarks/search_peers.py --only sgemm --tools "eager,kernel tuner" \
        --out /tmp/kp-peers --json-out "$OUT/peers.json" --log "$OUT/peers-progress.log" ;;
  g6) row benchmarks/library/triton_tutorial_matmul.py 480 x  # the Inductor candidate: max-autotune-triton
      python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_inductor_import.py 2>&1 | tail -n 4 ;;
  esac
  keep; for f in /tmp/kp-table/opt-*.log; do echo "== $f"; tail -n 4 "$f"; done ;;
x4a|x4b)
  ex() {  # ex GPU KERNEL NAME: the exhaustive tune (x4a: fresh; x4b: --resume the folder carried in .dev26)
    local dir=/tmp/ex-$3 left=$(( ${CALL_S:-570} - SECONDS - 25 ))
    if [ "$stage" = x4b ]; then rm -rf "$dir"; cp -r ".dev26/ex-$3" "$dir"
      CUDA_VISIBLE_DEVICES=$1 timeout $left python3 -m kernelpilot.cli tune --resume "$dir" --json > "$dir.json" 2> "$dir.log"
    else
      CUDA_VISIBLE_DEVICES=$1 timeout $left python3 -m kernelpilot.cli tune "$2" --strategy exhaustive --no-cache \
        --out "$dir" --json > "$dir.json" 2> "$dir.log"
    fi
    echo "-- exhaustive $3 rc=$? after $SECONDS s" >> "$dir.log"
    tar czf "$OUT/ex-$3.tgz" -C /tmp "ex-$3" "ex-$3.json" "ex-$3.log"
  }
  ( ex 1 $EX/matmul.py matmul ) &
  ( ex 2 benchmarks/library/torchao_int8_mm.py torchao_int8_mm ) &
  if [ "$stage" = x4a ]; then
    ( CUDA_VISIBLE_DEVICES=3 timeout $(( ${CALL_S:-570} - 20 )) python3 -m pytest -q -m gpu -p no:cacheprovider \
        --durations=20 tests > "$OUT/gputests.log" 2>&1; echo "-- gpu tests rc=$? after $SECONDS s" >> "$OUT/gputests.log" ) &
    ( export CUDA_VISIBLE_DEVICES=0; rm -rf /tmp/kp-table/opt-triton_tutorial_matmul
      python3 benchmarks/search/table.py benchmarks/library/triton_tutorial_matmul.py --skip-exhaustive \
        --timeout-s $(( ${CALL_S:-570} - 40 )) --out /tmp/kp-table --json-out "$OUT/rows.jsonl" > /tmp/row.log 2>&1
      echo "-- row rc=$? after $SECONDS s" >> /tmp/row.log; keep > /dev/null; cp /tmp/row.log "$OUT/" ) &
  fi
  wait
  for f in /tmp/ex-*.log /tmp/row.log "$OUT/gputests.log"; do echo "== $f"; tail -n 6 "$f"; done ;;
big4a|big4b|big4c)  # the 10,800-config space (benchmarks/search/softmax_big.py) on 4 GPUs, one worker each:
  # big4a: its exhaustive tune, cut by SIGTERM before the call's limit, its --out folder back as ex-big.tgz;
  # big4b: resumed from .dev27/ex-big (the unpacked archive, carried); big4c BUDGET_S: optimize's search (auto) on
  # the same 4 GPUs with BUDGET_S wall seconds (a quarter of the exhaustive tune's), for "within 3 % in <= 25 %"
  dir=/tmp/ex-big; left=$(( ${CALL_S:-570} - SECONDS - 25 )); export CUDA_VISIBLE_DEVICES=0,1,2,3
  if [ "$stage" = big4c ]; then
    timeout $left python3 -m kernelpilot.cli tune benchmarks/search/softmax_big.py --strategy auto --no-cache \
      --budget-s "${1:?budget seconds}" --out /tmp/auto-big --json > /tmp/auto-big.json 2> /tmp/auto-big.log
    echo "-- auto rc=$? after $SECONDS s" >> /tmp/auto-big.log
    tar czf "$OUT/auto-big.tgz" -C /tmp auto-big auto-big.json auto-big.log
  else
    if [ "$stage" = big4b ]; then rm -rf "$dir"; cp -r .dev27/ex-big "$dir"
      timeout -s TERM $left python3 -m kernelpilot.cli tune --resume "$dir" --json > "$dir.json" 2> "$dir.log"
    else
      timeout -s TERM $left python3 -m kernelpilot.cli tune benchmarks/search/softmax_big.py --strategy exhaustive \
        --no-cache --out "$dir" --json > "$dir.json" 2> "$dir.log"
    fi
    echo "-- exhaustive rc=$? after $SECONDS s" >> "$dir.log"
    tar czf "$OUT/ex-big.tgz" -C /tmp ex-big ex-big.json ex-big.log
  fi
  tail -n 5 /tmp/*-big.log ;;
s8a|s8b)  # the 10,800-config space (benchmarks/search/softmax_big.py):
  # s8a: its exhaustive tune on GPUs 0-2, cut by SIGTERM before the call's limit (ex-big.tgz); GPU 3: optimize at
  #      its defaults on the same space (a table row, its timeline in rows.jsonl), then vector_add and the attention
  #      tutorial beside a cold exhaustive tune (where optimize's time goes on a small space)
  # s8b: the exhaustive tune resumed on GPUs 0-2 from .dev27/ex-big.tgz (carried), GPU 3 as in s8a
  #      (EX_GPUS=0,1,2,3 NO_LANE3=1: the tune alone on all four)
  left=$(( ${CALL_S:-570} - SECONDS - 25 )); T0=$(( $(date +%s) - SECONDS ))
  ( if [ "$stage" = s8b ]; then rm -rf /tmp/ex-big; tar xzf .dev27/ex-big.tgz -C /tmp
      CUDA_VISIBLE_DEVICES=${EX_GPUS:-0,1,2} timeout -s TERM $left python3 -m kernelpilot.cli tune --resume /tmp/ex-big --json \
        > /tmp/ex-big.json 2>> /tmp/ex-big.log
    else
      CUDA_VISIBLE_DEVICES=0,1,2 timeout -s TERM $left python3 -m kernelpilot.cli tune benchmarks/search/softmax_big.py \
        --strategy exhaustive --no-cache --out /tmp/ex-big --json > /tmp/ex-big.json 2> /tmp/ex-big.log
    fi
    echo "-- exhaustive rc=$? after $SECONDS s" >> /tmp/ex-big.log
    python3 - /tmp/ex-big/evaluations.jsonl > "$OUT/ex-big-summary.json" <<'PY'  # small, whatever the archive's size
import json, sys
evs = [json.loads(line)["evaluation"] for line in open(sys.argv[1]) if line.strip()]
full = [e for e in evs if e["status"] == "ok" and not e["message"].startswith("raced out")]
best = sorted(full, key=lambda e: e["duration_ns"])[:10]
print(json.dumps({"answered": len(evs), "measured_fully": len(full), "raced_out": sum(
    1 for e in evs if e["message"].startswith("raced out")), "statuses": {s: sum(1 for e in evs if e["status"] == s)
    for s in {e["status"] for e in evs}}, "device_s": sum(e.get("wall_s") or 0 for e in evs),
    "best": [{"config": e["config"], "duration_ns": e["duration_ns"]} for e in best]}, indent=1))
PY
    tar czf "$OUT/ex-big.tgz" -C /tmp ex-big ex-big.json ex-big.log
    if [ "$stage" = s8b ]; then  # the GPUs the exhaustive tune leaves: the attention tutorial beside a cold one
      CUDA_VISIBLE_DEVICES=0 python3 benchmarks/search/table.py benchmarks/library/triton_tutorial_attention.py \
        --cold-exhaustive --timeout-s 200 --deadline-unix $(( T0 + ${CALL_S:-570} - 15 )) --out /tmp/kp-table-0 \
        --json-out "$OUT/rows.jsonl" > "$OUT/lane0.log" 2>&1
    fi ) &
  [ -n "${NO_LANE3:-}" ] || ( export CUDA_VISIBLE_DEVICES=3
    python3 benchmarks/search/table.py benchmarks/search/softmax_big.py --skip-exhaustive --timeout-s 330 \
      --deadline-unix $(( T0 + ${CALL_S:-570} - 15 )) --out /tmp/kp-table-3 --json-out "$OUT/rows.jsonl"
    python3 benchmarks/search/table.py $EX/vector_add.py ${S8A_ATTENTION-benchmarks/library/triton_tutorial_attention.py} \
      --cold-exhaustive --timeout-s 200 --deadline-unix $(( T0 + ${CALL_S:-570} - 15 )) --out /tmp/kp-table-3 \
      --json-out "$OUT/rows.jsonl" ) > "$OUT/lane3.log" 2>&1 &
  wait
  (cd /tmp && tar czf "$OUT/runs.tgz" --exclude='*.ncu-rep' --exclude='.git' --exclude='report.html' \
     --exclude='tc-*' --exclude='ic-*' --exclude='kp-ex-*' --exclude='v[0-9]*' --exclude='*.jsonl' kp-table-*)
  tail -n 4 /tmp/ex-big.log; grep -E "^\| " "$OUT/lane3.log" 2>/dev/null | cut -c1-300 ;;
x4c)
  row() {  # row GPU KERNEL MAX_S [x]: one table row on one GPU, given at most what the call has left
    local left=$(( ${CALL_S:-570} - SECONDS - 20 )); local t=$(( $3 < left ? $3 : left ))
    [ $t -lt 60 ] && { echo "-- skipped $2: ${left} s left"; return; }
    rm -rf "/tmp/kp-table/opt-$(basename "$2" .py)"
    CUDA_VISIBLE_DEVICES=$1 python3 benchmarks/search/table.py "$2" ${4:+--skip-exhaustive} --timeout-s $t \
      --out /tmp/kp-table --json-out "$OUT/rows.jsonl"
  }
  ( row 0 benchmarks/library/triton_tutorial_matmul.py 260 x; row 0 benchmarks/library/torchao_int8_mm.py 330 x
    ) > "$OUT/lane0.log" 2>&1 &
  ( row 1 $EX/matmul.py 290 ) > "$OUT/lane1.log" 2>&1 &
  ( CUDA_VISIBLE_DEVICES=2,3 timeout $(( ${CALL_S:-570} - 25 )) python3 -m kernelpilot.cli tune \
      benchmarks/library/torchao_int8_mm.py --strategy exhaustive --no-cache --out /tmp/ex-torchao_int8_mm --json \
      > /tmp/ex-torchao_int8_mm.json 2> /tmp/ex-torchao_int8_mm.log
    echo "-- exhaustive torchao rc=$? after $SECONDS s" >> /tmp/ex-torchao_int8_mm.log
    tar czf "$OUT/ex-torchao_int8_mm.tgz" -C /tmp ex-torchao_int8_mm ex-torchao_int8_mm.json ex-torchao_int8_mm.log ) &
  wait; keep > /dev/null
  for f in "$OUT"/lane*.log /tmp/ex-*.log; do echo "== $f"; tail -n 8 "$f"; done ;;
x4d|x4e|x4t|x4u|x2a|x2b|x2c|x2d|x2e|x1f)  # on 4 (x4) or 2 (x2) GPUs, one lane of rows per GPU, each row given at most what the call has left (x: optimize only)
  row() {  # row GPU KERNEL MAX_S [x]
    local left=$(( ${CALL_S:-540} - SECONDS - 20 )); local t=$(( $3 < left ? $3 : left ))
    [ $t -lt 60 ] && { echo "-- skipped $2: ${left} s left"; return; }
    CUDA_VISIBLE_DEVICES=$1 python3 benchmarks/search/table.py "$2" ${4:+--skip-exhaustive} --timeout-s $t \
      --deadline-unix $(( T0 + ${CALL_S:-540} - 15 )) --out /tmp/kp-table-$1 --json-out "$OUT/rows.jsonl"
  }
  T0=$(( $(date +%s) - SECONDS ))
  L=benchmarks/library
  gputests() {
    CUDA_VISIBLE_DEVICES=$1 timeout 240 python3 -m pytest -v -m gpu -p no:cacheprovider -rfE --tb=short \
      tests/test_gpu.py::test_optimize_end_to_end_on_gpu tests/test_timing.py tests/test_inductor_import.py
    echo "-- gpu tests rc=$? after $SECONDS s"
  }
  if [ "$stage" = x2a ]; then
    ( gputests 0; row 0 $L/triton_tutorial_matmul.py 320 x ) > "$OUT/lane0.log" 2>&1 &
    ( row 1 $EX/matmul.py 520 x ) > "$OUT/lane1.log" 2>&1 &
  elif [ "$stage" = x2b ]; then
    ( row 0 $L/torchao_int8_mm.py 320 x; row 0 $L/liger_rope.py 250 x ) > "$OUT/lane0.log" 2>&1 &
    ( row 1 $L/triton_tutorial_attention.py 200 x; row 1 benchmarks/observed/fla_l2norm.py 150;
      row 1 $L/liger_geglu.py 250 x ) > "$OUT/lane1.log" 2>&1 &
  elif [ "$stage" = x2d ]; then  # the GPU tests that time (the opening spin), beside the matmul example's row
    ( CUDA_VISIBLE_DEVICES=0 timeout $(( ${CALL_S:-540} - 20 )) python3 -m pytest -v -m gpu -p no:cacheprovider -rfE \
        --tb=short --durations=8 tests/test_timing.py tests/test_gpu.py tests/test_tune_gpu.py tests/test_isolation.py \
        tests/test_kernelbench_run.py; echo "-- gpu tests rc=$? after $SECONDS s" ) > "$OUT/lane0.log" 2>&1 &
    ( row 1 $EX/matmul.py 520 x ) > "$OUT/lane1.log" 2>&1 &
  elif [ "$stage" = x2e ]; then  # one GPU: Liger's GeGLU and RoPE, the rows nearest torch.compile
    ( row 0 $L/liger_geglu.py 280 x; row 0 $L/liger_rope.py 250 x ) > "$OUT/lane0.log" 2>&1 &
  elif [ "$stage" = x4t ]; then  # the whole table, one lane per GPU (torchao's 960-config exhaustive does not fit)
    ( row 0 $EX/matmul.py 330; row 0 benchmarks/observed/fla_l2norm.py 150 ) > "$OUT/lane0.log" 2>&1 &
    ( row 1 $L/torchao_int8_mm.py 300 x; row 1 $L/triton_tutorial_matmul.py 260 ) > "$OUT/lane1.log" 2>&1 &
    ( row 2 $EX/softmax.py 250; row 2 $EX/vector_add.py 200; row 2 $EX/layer_norm.py 200 ) > "$OUT/lane2.log" 2>&1 &
    ( row 3 $L/triton_tutorial_attention.py 200; row 3 $L/liger_rope.py 200; row 3 $L/liger_geglu.py 250 ) \
      > "$OUT/lane3.log" 2>&1 &
    wait
    cp /tmp/kp-table-1/opt-triton_tutorial_matmul/inductor/tune/tune.md "$OUT/tutorial-inductor-tune.md" 2>/dev/null
  elif [ "$stage" = x4u ]; then  # the whole table again, each lane one table.py: every optimize before any exhaustive
    lane() {  # lane GPU [--skip-exhaustive] KERNEL...
      local g=$1; shift
      CUDA_VISIBLE_DEVICES=$g python3 benchmarks/search/table.py "$@" --timeout-s 420 ${COLD:+--cold-exhaustive} \
        --deadline-unix $(( T0 + ${CALL_S:-540} - 12 )) --out /tmp/kp-table-$g --json-out "$OUT/rows.jsonl"
    }
    ( lane 0 $EX/matmul.py $EX/vector_add.py ) > "$OUT/lane0.log" 2>&1 &
    ( lane 1 --skip-exhaustive $L/torchao_int8_mm.py; lane 1 benchmarks/observed/fla_l2norm.py $EX/layer_norm.py ) \
      > "$OUT/lane1.log" 2>&1 &
    ( lane 2 $L/liger_geglu.py $L/triton_tutorial_matmul.py ) > "$OUT/lane2.log" 2>&1 &
    ( lane 3 $L/liger_rope.py $L/triton_tutorial_attention.py $EX/softmax.py ) > "$OUT/lane3.log" 2>&1 &
    wait
    cp /tmp/kp-table-2/opt-triton_tutorial_matmul/inductor/tune/tune.md "$OUT/tutorial-inductor-tune.md" 2>/dev/null
  elif [ "$stage" = x1f ]; then  # one GPU: the tutorial matmul row (its Inductor candidate's loop flattened or not)
    ( row 0 $L/triton_tutorial_matmul.py 420 x; CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m pytest -v -m gpu \
        -p no:cacheprovider -rfE --tb=short tests/test_inductor_import.py; echo "-- gpu tests rc=$?" ) > "$OUT/lane0.log" 2>&1 &
  elif [ "$stage" = x2c ]; then
    ( row 0 $EX/softmax.py 500 ) > "$OUT/lane0.log" 2>&1 &
    ( row 1 $EX/layer_norm.py 300; row 1 $EX/vector_add.py 300 ) > "$OUT/lane1.log" 2>&1 &
  elif [ "$stage" = x4d ]; then
    ( gputests 0; row 0 $L/triton_tutorial_attention.py 200 x; row 0 benchmarks/observed/fla_l2norm.py 200 ) > "$OUT/lane0.log" 2>&1 &
    ( row 1 $EX/matmul.py 500 x ) > "$OUT/lane1.log" 2>&1 &
    ( row 2 $L/triton_tutorial_matmul.py 300 x; row 2 $L/liger_rope.py 250 x ) > "$OUT/lane2.log" 2>&1 &
    ( row 3 $L/torchao_int8_mm.py 320 x; row 3 $L/liger_geglu.py 250 x ) > "$OUT/lane3.log" 2>&1 &
  else
    ( row 0 $EX/softmax.py 500 ) > "$OUT/lane0.log" 2>&1 &
    ( row 1 $EX/layer_norm.py 300; row 1 $EX/vector_add.py 300 ) > "$OUT/lane1.log" 2>&1 &
    ( row 2 $L/liger_rms_norm.py 250 x; row 2 $L/liger_swiglu.py 250 x ) > "$OUT/lane2.log" 2>&1 &
    ( timeout $(( ${CALL_S:-540} - 20 )) python3 benchmarks/search_peers.py --only layer_norm --out /tmp/kp-peers \
        --json-out "$OUT/peers.json" --log "$OUT/peers-progress.log" ) > "$OUT/lane3.log" 2>&1 &
  fi
  wait
  (cd /tmp && tar czf "$OUT/runs.tgz" --exclude='*.ncu-rep' --exclude='.git' --exclude='report.html' \
     --exclude='tc-*' --exclude='ic-*' --exclude='v[0-9]*' --exclude='tune' --exclude='*.jsonl' kp-table-* 2>/dev/null)
  for f in "$OUT"/lane*.log; do echo "== $f"; grep -E "^\| |final:|stopped:|PASSED|FAILED|passed|failed|skipped" "$f" | cut -c1-400 | tail -n 14; done ;;
peers)
  timeout ${CALL_S:-560} python3 benchmarks/search_peers.py --only "${1:-layer_norm,sgemm}" --tools "${2:-}" --out /tmp/kp-peers \
    --json-out "$OUT/peers.json" --log "$OUT/peers-progress.log" ;;
esac
