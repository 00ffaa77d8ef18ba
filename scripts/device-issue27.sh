#!/usr/bin/env bash
# Issue 27 on a machine of 4 GPUs (from the repository root; carry .whl25, third_party/KernelBench/KernelBench and
# .dev26), one lane per GPU (CUDA_VISIBLE_DEVICES), side by side:
#   bash scripts/device-issue27.sh
# lane 0: `kernelpilot kernelbench run` on level-1 solutions 5, 19, 21, 23
# lane 1: level-1 24, 26, 36, 47; then the GPU tests of tests/test_kernelbench_run.py
# lane 2: level-1 48, 88 (samples 0 and 3: the autotuned one), the wrong (21/1) and the library-only (19/2)
#         solutions; then `optimize` on 88/3 (its autotune list is the space)
# lane 3: issue 26's second process: another machine (its GPU's UUID printed) imports the store exported by an
#         earlier call (.dev26/ln-configs.jsonl) and looks the layer_norm workload up; then the level-2 solutions
# Then one table over all lanes (scripts/kernelbench_merge.py): correctness, speedups vs eager and torch.compile,
# fast_p. Everything lands in $OUT (at most 8 files).
#   bash scripts/device-issue27.sh again     # one GPU: the layer_norm store looked up on this machine, then the
#                                            # solutions that failed for kernelpilot's own reasons on the H200 run
#   bash scripts/device-issue27.sh big [ID...]  # one GPU: `kernelbench run` on KernelBench's newest level-1
#       problems of 6-7 GiB per tensor (19 21 23 24 26 36 by default; .dev26/KernelBench, else $KB_PROBLEMS), a
#       Triton solution each: every row's status and the worker's peak device memory (docs/kernelbench.md, "Memory
#       at large sizes"); then, if time is left, the GPU test of tests/test_check_memory.py. Six problems may need
#       more than one call: pass a few ids per call.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
CALL_S=${CALL_S:-570}
P=${KB_PROBLEMS:-third_party/KernelBench/KernelBench}; S=benchmarks/kernelbench/solutions
echo "== issue 27, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.used --format=csv,noheader
kb() {  # kb LANE FILE...: one kernelbench run over these solutions on GPU LANE
  local lane=$1; shift
  local d=/tmp/kb-sol-$lane; rm -rf "$d"; mkdir -p "$d"
  for f in "$@"; do cp "$S/level_${f}_kernel.py" "$d/"; done
  CUDA_VISIBLE_DEVICES=${KB_GPU:-$lane} timeout $(( CALL_S - SECONDS - 40 )) python3 -m kernelpilot.cli kernelbench run "$P" "$d" \
    --out /tmp/kb-out-$lane --timeout-s ${KB_TIMEOUT_S:-240} --json > /tmp/kb-out-$lane.json 2> /tmp/kb-lane-$lane.log
  echo "-- lane $lane kernelbench run: rc=$? after $SECONDS s" >> /tmp/kb-lane-$lane.log
}
if [ "${1:-}" = big ]; then
  shift
  ids=${*:-19 21 23 24 26 36}
  [ -d .dev26/KernelBench/level1 ] && P=${KB_BIG_PROBLEMS:-.dev26/KernelBench}
  nvidia-smi -i 0 --query-gpu=name,memory.total,memory.used --format=csv,noheader | tee "$OUT/kb-big.md"
  for i in $ids; do  # one run per problem: a run cut short by the call's end loses only its own row
    [ $(( CALL_S - SECONDS )) -lt 150 ] && { echo "$i: not run (no time left in this call)" | tee -a "$OUT/kb-big.md"; continue; }
    rm -rf /tmp/kb-out-0; KB_TIMEOUT_S=${KB_TIMEOUT_S:-400} kb 0 "1_problem_${i}_sample_0"
    cat /tmp/kb-lane-0.log >> "$OUT/kb-big-lanes.log"
    python3 - "$i" "$OUT/kb-big-rows.jsonl" >> "$OUT/kb-big.md" 2>&1 <<'PY'
import json, sys
try:
    rows = json.load(open("/tmp/kb-out-0/kernelbench.json"))["rows"]
except (OSError, ValueError, KeyError) as exc:
    rows = []
    print(f"{sys.argv[1]}: no table ({exc!r}; see kb-big-lanes.log)")
with open(sys.argv[2], "a") as f:  # every row in full, one JSON line each
    f.writelines(json.dumps(r) + "\n" for r in rows)
for r in rows:
    peak = r.get("peak_device_bytes")
    d = r.get("durations_ns") or {}
    print(f"{r['problem']:<16} {r['status']:<20} failure={r.get('failure')} peak="
          f"{'%.1f GiB' % (peak / 2**30) if peak else 'not recorded'} solution_ns={d.get('solution')} "
          f"eager_ns={d.get('eager')} compile_ns={d.get('compile')} wall_s={r.get('wall_s', 0):.0f} "
          f"{r.get('message', '')[:400]}")
PY
    tail -n 1 "$OUT/kb-big.md"
  done
  left=$(( CALL_S - SECONDS - 20 ))
  [ $left -gt 150 ] && timeout $left python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_check_memory.py \
    2>&1 | tail -n 5 | tee "$OUT/kb-big-test.log"
  exit 0
fi
if [ "${1:-}" = again ]; then
  export KERNELPILOT_HOME=/tmp/kp-home-lookup
  { echo "== lookup on: $(nvidia-smi -i 0 --query-gpu=uuid,name --format=csv,noheader)"
    python3 -m kernelpilot.cli configs import .dev26/ln-configs.jsonl --json
    for m in 32 100 200 700 1500 3000 5000 12000; do
      python3 -m kernelpilot.cli configs lookup src/kernelpilot/examples/layer_norm.py --shape M=$m --json; echo; done
  } > "$OUT/lookup-h100.log" 2>&1
  python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_reference_memory.py 2>&1 | tail -n 3
  kb 0 2_problem_14_sample_0 1_problem_19_sample_0 1_problem_23_sample_0
  python3 scripts/kernelbench_merge.py /tmp/kb-out-0 --out /tmp/kb-all > "$OUT/kb-again.md" 2>&1
  cat "$OUT/kb-again.md"; cp /tmp/kb-all/kernelbench.json "$OUT/kb-again.json"; cp /tmp/kb-lane-0.log "$OUT/"
  exit 0
fi
( kb 0 1_problem_5_sample_0 1_problem_19_sample_0 1_problem_21_sample_0 1_problem_23_sample_0 ) &
( kb 1 1_problem_24_sample_0 1_problem_26_sample_0 1_problem_36_sample_0 1_problem_47_sample_0
  CUDA_VISIBLE_DEVICES=1 timeout $(( CALL_S - SECONDS - 30 )) python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/test_kernelbench_run.py >> /tmp/kb-lane-1.log 2>&1 ) &
( kb 2 1_problem_48_sample_0 1_problem_88_sample_0 1_problem_88_sample_3 1_problem_21_sample_1 1_problem_19_sample_2
  left=$(( CALL_S - SECONDS - 30 ))
  [ $left -gt 90 ] && CUDA_VISIBLE_DEVICES=2 timeout $left python3 -m kernelpilot.cli optimize \
    $S/level_1_problem_88_sample_3_kernel.py --ref $P/level1/88_MinGPTNewGelu.py --out /tmp/kb-opt --budget-s $(( left - 80 )) \
    --json > /tmp/kb-opt.json 2> /tmp/kb-opt.log
  echo "-- optimize rc=$? after $SECONDS s" >> /tmp/kb-opt.log ) &
( export KERNELPILOT_HOME=/tmp/kp-home-lookup
  { echo "== lookup on: $(CUDA_VISIBLE_DEVICES=3 nvidia-smi -i 3 --query-gpu=uuid,name --format=csv,noheader)"
    python3 -m kernelpilot.cli configs import .dev26/ln-configs.jsonl --json
    for m in 32 48 100 200 700 1000 1500 3000 5000 8000 12000; do
      CUDA_VISIBLE_DEVICES=3 python3 -m kernelpilot.cli configs lookup src/kernelpilot/examples/layer_norm.py \
        --shape M=$m --json; echo; done; } > /tmp/lookup.log 2>&1
  kb 3 2_problem_12_sample_0 2_problem_14_sample_0 2_problem_29_sample_0 2_problem_40_sample_0 \
    2_problem_45_sample_0 2_problem_86_sample_0 ) &
wait
python3 scripts/kernelbench_merge.py /tmp/kb-out-0 /tmp/kb-out-1 /tmp/kb-out-2 /tmp/kb-out-3 --out /tmp/kb-all \
  > "$OUT/kb-table.md" 2>&1
cat "$OUT/kb-table.md"
cp /tmp/kb-all/kernelbench.json "$OUT/kb-all.json" 2>/dev/null
cat /tmp/kb-lane-*.log > "$OUT/kb-lanes.log" 2>&1
cp /tmp/lookup.log "$OUT/lookup.log"
{ cat /tmp/kb-opt.log; python3 -c "
import json; d = json.load(open('/tmp/kb-opt.json')); print(json.dumps({k: d.get(k) for k in ('best', 'baseline', 'final', 'stop_reason', 'speedup', 'versions')}, default=str)[:4000])"; } \
  > "$OUT/kb-optimize.log" 2>&1
tar -czf "$OUT/kb-runs.tgz" -C /tmp $(cd /tmp && ls -d kb-out-* kb-all 2>/dev/null) \
  $(cd /tmp && ls kb-opt/run.json kb-opt/final_report.md 2>/dev/null) 2>/dev/null
ls -la "$OUT"
