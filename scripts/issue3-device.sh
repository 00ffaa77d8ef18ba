#!/usr/bin/env bash
# Issue 3's one device command, run from the repository root on the GPU machine:
#   bash scripts/issue3-device.sh
# 1. scripts/capture_fixtures.py: six Nsight Compute fixtures (--set full --clock-control none), one ncu
#    process per case, bounded by a deadline -> $OUT/fixtures/h200_<case>.ncu-rep
# 2. tests/test_occupancy_driver.py: occupancy model vs cuOccupancyMaxActiveBlocksPerMultiprocessor on
#    every sampled example config -> $OUT/occupancy_driver.json
# Everything is logged to $OUT/issue3.log. At most 8 files come back from $OUT (device README): 6 reports +
# the json + the log; if anything else appears, the fixtures are tarred into one file.
# Time: ~4-5 min expected; hard bounds keep the whole run under BUDGET_S (default 480 s = 8 min).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
LOG="$OUT/issue3.log"
BUDGET_S=${BUDGET_S:-480}
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

source scripts/device-env.sh

{
  echo "== issue 3 device run, $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${BUDGET_S} s"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
    --format=csv 2>&1
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], '| torch', torch.__version__, \
'| triton', triton.__version__, '| cuda', torch.version.cuda)" 2>&1
  python3 -c "import cuda.bindings as b; print('cuda.bindings', b.__version__)" 2>&1 | tail -1
  ( command -v ncu || ls /usr/local/cuda/bin/ncu ) 2>&1; /usr/local/cuda/bin/ncu --version 2>&1 | tail -1

  # Leave ~200 s for the occupancy test; the capture's own deadline prints its table before the hard timeout.
  cap_deadline=$(( BUDGET_S - 200 - $(elapsed) )); (( cap_deadline > 300 )) && cap_deadline=300
  echo; echo "== [$(elapsed) s] capture fixtures (deadline ${cap_deadline} s)"
  timeout -k 10 $(( cap_deadline + 20 )) python3 scripts/capture_fixtures.py --out "$OUT/fixtures" \
    --deadline-s "$cap_deadline"
  echo "capture rc $?"
  ls -l "$OUT/fixtures" 2>&1

  occ_left=$(( BUDGET_S - $(elapsed) - 25 )); (( occ_left < 60 )) && occ_left=60; (( occ_left > 240 )) && occ_left=240
  echo; echo "== [$(elapsed) s] occupancy model vs driver (workers ${occ_left} s)"
  KP_OCC_TIMEOUT_S=$(( occ_left - 15 )) timeout -k 10 "$occ_left" \
    python3 -m pytest -q -m gpu tests/test_occupancy_driver.py -p no:cacheprovider
  echo "pytest rc $?"
  python3 - "$OUT/occupancy_driver.json" <<'PY' 2>&1
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as exc:
    sys.exit(f"no occupancy json: {exc}")
s = r["summary"]
print(f"occupancy model == driver on {s['matched']} of {s['compared']} configs; {s['by_status']}; "
      f"unfinished {s['unfinished']}; {r['device']} cc {r['compute_capability']}; {r['seconds']} s")
for x in r["results"]:
    extra = (f"regs {x['n_regs']} spills {x['n_spills']} smem {x['shared_bytes']} thr {x['threads']} "
             f"model {x['model_blocks']} ({x['model_limiter']}) driver {x['driver_blocks']} "
             f"static {x['driver_attributes'].get('static_shared_bytes')}"
             if x["status"] == "ok" else x.get("message", "")[:160])
    print(f"  [{x['index']:2d}] {x['example']:10s} {json.dumps(x['config'])} {x['status']}: {extra}")
PY

  echo; echo "== [$(elapsed) s] files in \$OUT"
  n=$(find "$OUT" -type f | wc -l)
  if (( n > 8 )) && [[ -d "$OUT/fixtures" ]]; then
    echo "$n files > 8: tarring the fixtures"
    tar -C "$OUT" -cf "$OUT/fixtures.tar" fixtures && rm -rf "$OUT/fixtures"
  fi
  find "$OUT" -type f -printf '%s\t%p\n'
  echo "== done in $(elapsed) s"
} 2>&1 | tee "$LOG"
