#!/usr/bin/env bash
# Session 10 on a machine of 2 GPUs (from the repository root; carry .whl25 and third_party/triton_tutorials,
# WHL=.whl25):
#   CALL_S=575 bash scripts/device-s10.sh big    # the 10,800-config space (benchmarks/search/softmax_big.py): its
#       exhaustive tune on both GPUs, its folder in .dev28/ex-big, cut by SIGTERM before the call's limit; every call
#       writes a summary of what it has answered (ex-big-summary.json) and the folder as ex-big.tgz.NN parts of
#       15 MiB (report.html left out). A warm machine does NOT keep an ignored folder between calls (this session's
#       call 2 started again from nothing): to resume, put the parts in .dev28/ here and carry them
#       (".dev28/ex-big.tgz.00", ...); the stage unpacks them and resumes.
#       Once the tune has answered every config, and 150 s or more are left: TAIL lanes (below), side by side
#   CALL_S=575 bash scripts/device-s10.sh tail   # the TAIL lanes alone:
#       GPU 0: optimize at its defaults on softmax_big (empty caches of its own; a table row with its timeline)
#       GPU 1: the attention and matmul tutorials, optimize beside a cold exhaustive tune (--cold-exhaustive)
#   CALL_S=575 bash scripts/device-s10.sh suite  # GPU 0: the adversarial suite; GPU 1: the GPU-marked tests
#   CALL_S=575 bash scripts/device-s10.sh next   # what issue 25 still lacks, for the next session: GPU 0 the attention
#       and matmul tutorials beside a cold exhaustive tune, then Liger GeGLU with its exhaustive tune; GPU 1 the
#       adversarial suite (the five cases added in session 9 have not run on a GPU)
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
stage=${1:-big}
T0=$(( $(date +%s) - SECONDS )); END=$(( T0 + ${CALL_S:-570} ))
echo "== $stage, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
L=benchmarks/library

tail_lanes() {  # optimize on the big space (GPU 0) beside the tutorials' cold comparison (GPU 1), to END - 12 s
  ( CUDA_VISIBLE_DEVICES=0 python3 benchmarks/search/table.py benchmarks/search/softmax_big.py --skip-exhaustive \
      --timeout-s 360 --deadline-unix $(( END - 12 )) --out /tmp/kp-table-0 --json-out "$OUT/rows.jsonl"
  ) > "$OUT/lane0.log" 2>&1 &
  ( CUDA_VISIBLE_DEVICES=1 python3 benchmarks/search/table.py $L/triton_tutorial_attention.py \
      $L/triton_tutorial_matmul.py --cold-exhaustive --timeout-s 300 --deadline-unix $(( END - 12 )) \
      --out /tmp/kp-table-1 --json-out "$OUT/rows.jsonl"
  ) > "$OUT/lane1.log" 2>&1 &
  wait
  (cd /tmp && tar czf "$OUT/runs.tgz" --exclude='*.ncu-rep' --exclude='.git' --exclude='report.html' \
     --exclude='tc-*' --exclude='ic-*' --exclude='v[0-9]*' --exclude='tune' --exclude='*.jsonl' kp-table-* 2>/dev/null)
  for f in "$OUT"/lane*.log; do echo "== $f"; grep -E "^\| |final:|stopped:" "$f" | cut -c1-400 | tail -n 8; done
}

case "$stage" in
big)
  mkdir -p .dev28; dir=.dev28/ex-big
  if [ ! -d "$dir" ] && ls .dev28/ex-big.tgz.* >/dev/null 2>&1; then cat .dev28/ex-big.tgz.* | tar xz -C .dev28; fi
  left=$(( END - $(date +%s) - 40 ))
  if [ -d "$dir" ]; then
    echo "-- resume $dir ($(wc -l < "$dir/evaluations.jsonl" 2>/dev/null) lines) at $(date -u +%T)" >> .dev28/ex-big.log
    CUDA_VISIBLE_DEVICES=0,1 timeout -s TERM $left python3 -m kernelpilot.cli tune --resume "$dir" --json \
      > .dev28/ex-big.json 2>> .dev28/ex-big.log
  else
    echo "-- start at $(date -u +%T)" >> .dev28/ex-big.log
    CUDA_VISIBLE_DEVICES=0,1 timeout -s TERM $left python3 -m kernelpilot.cli tune benchmarks/search/softmax_big.py \
      --strategy exhaustive --no-cache --out "$dir" --json > .dev28/ex-big.json 2>> .dev28/ex-big.log
  fi
  rc=$?; echo "-- exhaustive rc=$rc after $SECONDS s at $(date -u +%T)" >> .dev28/ex-big.log
  python3 - "$dir/evaluations.jsonl" .dev28/ex-big.json > "$OUT/ex-big-summary.json" <<'PY'
import json, sys
evs = [json.loads(line)["evaluation"] for line in open(sys.argv[1]) if line.strip()]
full = [e for e in evs if e["status"] == "ok" and not e["message"].startswith("raced out")]
best = sorted(full, key=lambda e: e["duration_ns"])[:10]
try:
    d = json.load(open(sys.argv[2]))
    head = {k: d.get(k) for k in ("stopped", "wall_s", "device_s", "strategy")}
except (OSError, ValueError):
    head = {"stopped": None}
print(json.dumps({**head, "answered": len(evs), "measured_fully": len(full),
    "raced_out": sum(1 for e in evs if e["message"].startswith("raced out")),
    "statuses": {s: sum(1 for e in evs if e["status"] == s) for s in {e["status"] for e in evs}},
    "device_s": sum(e.get("wall_s") or 0 for e in evs),
    "best": [{"config": e["config"], "duration_ns": e["duration_ns"]} for e in best]}, indent=1))
PY
  cp .dev28/ex-big.log "$OUT/ex-big.log"
  tar czf /tmp/ex-big.tgz --exclude=report.html -C .dev28 ex-big && split -b 15M -d /tmp/ex-big.tgz "$OUT/ex-big.tgz."
  tail -n 4 .dev28/ex-big.log; head -c 1500 "$OUT/ex-big-summary.json"; echo
  done_all=$(python3 -c "import json; d=json.load(open('$OUT/ex-big-summary.json')); print(int(d['answered'] >= 10800))")
  if [ "$done_all" = 1 ] && [ $(( END - $(date +%s) )) -ge 150 ]; then tail_lanes; fi ;;
tail)
  tail_lanes ;;
next)
  ( CUDA_VISIBLE_DEVICES=0 python3 benchmarks/search/table.py $L/triton_tutorial_attention.py \
      $L/triton_tutorial_matmul.py $L/liger_geglu.py --cold-exhaustive --timeout-s 300 --deadline-unix $(( END - 12 )) \
      --out /tmp/kp-table-0 --json-out "$OUT/rows.jsonl" ) > "$OUT/lane0.log" 2>&1 &
  ( CUDA_VISIBLE_DEVICES=1 timeout $(( END - $(date +%s) - 15 )) python3 scripts/adversarial.py --jobs 1 --json \
      "$OUT/adversarial.json" ) > "$OUT/adversarial.log" 2>&1 &
  wait; grep -E "^\| " "$OUT/lane0.log" | cut -c1-300; tail -n 30 "$OUT/adversarial.log" ;;
suite)
  ( CUDA_VISIBLE_DEVICES=0 timeout $(( END - $(date +%s) - 15 )) python3 scripts/adversarial.py --jobs 1 --json \
      "$OUT/adversarial.json" ) > "$OUT/adversarial.log" 2>&1 &
  ( CUDA_VISIBLE_DEVICES=1 timeout $(( END - $(date +%s) - 15 )) python3 -m pytest -v -m gpu -p no:cacheprovider \
      -rfE --tb=short --durations=10 tests; echo "-- gpu tests rc=$?" ) > "$OUT/gputests.log" 2>&1 &
  wait; tail -n 30 "$OUT/adversarial.log"; grep -E "passed|failed|FAILED|ERROR" "$OUT/gputests.log" | tail -n 20 ;;
esac
ls -la "$OUT"
