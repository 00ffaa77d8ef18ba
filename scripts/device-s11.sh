#!/usr/bin/env bash
# Session 11 on a machine of 4 GPUs (from the repository root), two calls, every lane side by side, one GPU each
# (CUDA_VISIBLE_DEVICES), every command ended before the call's limit (CALL_S):
#   CALL_S=580 WHL=.whl25 bash scripts/device-s11.sh a    # carry .whl25, third_party/triton_tutorials
#       GPU 0:   issue 25's rows of the attention and matmul tutorials, optimize beside a COLD exhaustive tune
#       GPU 1:   Liger GeGLU's row (cold exhaustive), then GPU-marked tests (first part)
#       GPU 2,3: torchao int8 mm's row on both GPUs (optimize, then its 960-config exhaustive tune, cold); a tune cut
#                by the limit comes back in runs.tgz (ex-torchao_int8_mm/) and `b` resumes it when carried as
#                .dev29/ex-torchao_int8_mm
#   CALL_S=580 WHL=.whl27 bash scripts/device-s11.sh b    # carry .whl27 (.whl25 without liger/fla/torchao, with
#       kernel-tuner 1.5 and its missing dependencies, torchao), third_party/triton_tutorials, .dev29 (old-s8.tgz: session 8's source, git archive b272550 src, as
#       s8/src; ex-torchao_int8_mm: call a's cut tune folder)
#       GPU 0,1: the adversarial suite, two shards; then (GPU 1, time left) the cost per evaluation, session 8's
#                source against this one (device-integrity.sh cost)
#       GPU 2:   scripts/probe_compile_baseline.py; the torchao resume when carried; the peer table's layer_norm rows
#       GPU 3:   the peer table's sgemm rows (Kernel Tuner on the .cu's defines)
#   CALL_S=330 WHL=.whl27 bash scripts/device-s11.sh c    # after the fixes (quick compiler-config check before a
#       baseline launch, spins that cover the host): GPU 0 the probe again and the matmul tutorial's optimize row;
#       GPU 1 the sgemm peer row of optimize (its progress log kept); GPU 2 the two unjoined-stream cases and the cost
#       per evaluation against session 8; GPU 3 GPU-marked tests of timing, isolation, library kernels, KernelBench
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
stage=${1:-a}
source scripts/device-call.sh

case "$stage" in
a)
  ( CUDA_VISIBLE_DEVICES=0 python3 benchmarks/search/table.py $L/triton_tutorial_attention.py \
      $L/triton_tutorial_matmul.py --cold-exhaustive --timeout-s 400 --deadline-unix $(( END - 12 )) \
      --out /tmp/kp-table-0 --json-out "$OUT/rows.jsonl" ) > "$OUT/lane0.log" 2>&1 &
  ( CUDA_VISIBLE_DEVICES=1 python3 benchmarks/search/table.py $L/liger_geglu.py --cold-exhaustive --timeout-s 400 \
      --deadline-unix $(( END - 12 )) --out /tmp/kp-table-1 --json-out "$OUT/rows.jsonl"
    echo "-- GeGLU row done at $SECONDS s"
    gputests 1 tests/test_gpu.py tests/test_tune_gpu.py tests/test_cuda_backend.py ) > "$OUT/lane1.log" 2>&1 &
  ( CUDA_VISIBLE_DEVICES=2,3 python3 benchmarks/search/table.py $L/torchao_int8_mm.py --cold-exhaustive \
      --timeout-s 560 --deadline-unix $(( END - 12 )) --out /tmp/kp-table-2 --json-out "$OUT/rows.jsonl"
  ) > "$OUT/lane2.log" 2>&1 &
  wait
  # small records: every run's run.json, final report and skipped table; the exhaustive tunes' tune.md; the torchao
  # tune folder whole (without report.html) so a later call can resume it
  (cd /tmp && tar czf "$OUT/runs.tgz" --exclude='*.ncu-rep' --exclude='report.html' --exclude='.git' \
     kp-table-*/opt-*/run.json kp-table-*/opt-*/final_report.md kp-table-*/opt-*/skipped.jsonl \
     kp-table-*/opt-*/inductor/import.json kp-table-*/ex-*/tune.md kp-table-*/*.log kp-table-2/ex-torchao_int8_mm \
     2>/dev/null)
  for f in "$OUT"/lane*.log; do echo "== $f"; grep -E "^\| |<!--|passed|failed|-- " "$f" | cut -c1-500 | tail -n 12; done ;;
b)
  ( CUDA_VISIBLE_DEVICES=0 timeout -k 10 $(left 15) python3 scripts/adversarial.py --jobs 1 --shard 0/2 \
      --json "$OUT/adversarial-0.json" ) > /tmp/adv-0.log 2>&1 &
  ( CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(left 15) python3 scripts/adversarial.py --jobs 1 --shard 1/2 \
      --json "$OUT/adversarial-1.json"
    echo "-- shard 1 done at $SECONDS s"
    if [ $(left) -ge 170 ]; then
      [ -d .old/s8/src ] || { mkdir -p .old && tar xzf .dev29/old-s8.tgz -C .old; }
      OUT=/tmp/kp-cost SIDES="s8 after" CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(left 15) \
        bash scripts/device-integrity.sh cost vector_add softmax
    fi ) > /tmp/adv-1.log 2>&1 &
  ( export CUDA_VISIBLE_DEVICES=2
    timeout -k 10 150 python3 scripts/probe_compile_baseline.py
    echo "-- probe done at $SECONDS s"
    if [ -d .dev29/ex-torchao_int8_mm ]; then
      t0=$SECONDS
      timeout -k 10 -s TERM $(left 200) python3 -m kernelpilot.cli tune --resume .dev29/ex-torchao_int8_mm --json \
        > /tmp/torchao-resume.json 2> /tmp/torchao-resume.err
      echo "-- torchao resume rc=$? in $(( SECONDS - t0 )) s"; tail -n 3 /tmp/torchao-resume.err
      python3 -c "
import json, sys; sys.path.insert(0, 'benchmarks/search'); from table import folder_best
print('torchao exhaustive:', json.dumps(folder_best(__import__('pathlib').Path('.dev29/ex-torchao_int8_mm'))))"
      tar czf /tmp/torchao-ex.tgz --exclude=report.html -C .dev29 ex-torchao_int8_mm
    fi
    timeout -k 10 $(left 15) python3 benchmarks/search_peers.py --only layer_norm --out /tmp/kp-peers-ln \
      --json-out "$OUT/peers-layer_norm.json" --log /tmp/peers-ln-progress.log
    echo "-- peers layer_norm done at $SECONDS s"
  ) > "$OUT/lane2.log" 2>&1 &
  ( CUDA_VISIBLE_DEVICES=3 timeout -k 10 $(left 15) python3 benchmarks/search_peers.py --only sgemm --out /tmp/kp-peers-sg \
      --json-out "$OUT/peers-sgemm.json" --log /tmp/peers-sg-progress.log ) > /tmp/peers-sg.log 2>&1 &
  wait
  tail -n 40 /tmp/adv-0.log /tmp/adv-1.log > "$OUT/adversarial.log"
  (cd /tmp && tar czf "$OUT/logs.tgz" adv-*.log peers-*.log kp-cost torchao-ex.tgz torchao-resume.* 2>/dev/null)
  tail -n 30 "$OUT/adversarial.log"; grep -E "^\| |passed|failed|-- |run wall|µs|torchao" "$OUT/lane2.log" | cut -c1-300
  tail -n 12 /tmp/peers-sg.log ;;
c)  # after the fixes of the quick compiler-config check and the spin's cover (carry .whl27, third_party, .dev29)
  ( export CUDA_VISIBLE_DEVICES=0
    timeout -k 10 120 python3 scripts/probe_compile_baseline.py
    echo "-- probe done at $SECONDS s"
    python3 benchmarks/search/table.py $L/triton_tutorial_matmul.py --skip-exhaustive --timeout-s 400 \
      --deadline-unix $(( END - 12 )) --out /tmp/kp-table-0 --json-out "$OUT/rows.jsonl" ) > "$OUT/lane0.log" 2>&1 &
  ( CUDA_VISIBLE_DEVICES=1 timeout -k 10 $(left 15) python3 benchmarks/search_peers.py --only sgemm \
      --tools optimize --out /tmp/kp-peers-sg --json-out "$OUT/peers-sgemm.json" --log "$OUT/peers-sg-progress.log"
  ) > /tmp/peers-sg.log 2>&1 &
  ( export CUDA_VISIBLE_DEVICES=2
    timeout -k 10 120 python3 scripts/adversarial.py --jobs 1 cheats/side_stream_unjoined.py \
      cheats/other_stream_launch.py --json /tmp/adv-streams.json
    [ -d .old/s8/src ] || { mkdir -p .old && tar xzf .dev29/old-s8.tgz -C .old; }
    OUT=/tmp/kp-cost SIDES="s8 after" timeout -k 10 $(left 15) bash scripts/device-integrity.sh cost vector_add softmax
  ) > "$OUT/lane2.log" 2>&1 &
  ( gputests 3 tests/test_timing.py tests/test_isolation.py tests/test_library_kernels.py tests/test_kernelbench_run.py
  ) > "$OUT/lane3.log" 2>&1 &
  wait
  grep -E "^\| |<!--" "$OUT/lane0.log" | cut -c1-400; grep -E "µs|round-robin" "$OUT/lane0.log" | head -12
  tail -n 8 /tmp/peers-sg.log; grep -E "^\| |run wall|wall/eval" "$OUT/lane2.log" | cut -c1-300
  grep -E "passed|failed|FAILED|-- " "$OUT/lane3.log" ;;
esac
ls -la "$OUT"
