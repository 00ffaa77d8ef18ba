#!/usr/bin/env bash
# Issue 16 on a GPU machine, one device call (<= 9.5 min): a real optimize, tune and session, each writing its
# report.html, with progress on stderr kept in the log; then the GPU tests of the bundle (issue 15).
#   bash scripts/device-report.sh
# Back in $OUT: report.log, opt.tgz, tune.tgz, session.tgz (the folders, .ncu-rep files included).
# Screenshot the pages here: python3 scripts/screenshot_report.py FOLDER/report.html OUT.png
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
export KERNELPILOT_EXPERIENCE=$PWD/report-experience.db
rm -rf runs/rep-* "$KERNELPILOT_EXPERIENCE"
KP="python3 -m kernelpilot.cli"
S=examples/series/softmax
start=$(date +%s)
step() { local t=$(date +%s); echo; echo "== [$(( t - start )) s] kernelpilot $*"; timeout ${T:-200} $KP "$@"; echo "(exit $?, $(( $(date +%s) - t )) s)"; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
step tune examples/softmax.py --budget-evals 16 --out runs/rep-tune --json > "$OUT/tune.json"
step optimize examples/layer_norm.py --budget-s 100 --out runs/rep-opt
step session start $S/v0.py --out runs/rep-session --kernel-type softmax
step session try runs/rep-session $S/v1.py --hypothesis "online softmax: max and sum in one pass, x read twice instead of three times" --expect duration:down
step session try runs/rep-session $S/v2.py --hypothesis "the whole row in one tile: x read once, y written once" --expect duration:down --expect dram_pct:up
step session try runs/rep-session $S/v4.py --hypothesis "two rows per program: half the programs"
step session finish runs/rep-session
for d in rep-tune rep-opt rep-session; do ls -la runs/$d/report.html 2>&1; done
left=$(( 560 - ($(date +%s) - start) ))
if (( left > 60 )); then
  echo "== [$(( $(date +%s) - start )) s] GPU tests of tests/test_bundle.py"
  timeout "$left" python3 -m pytest -q tests/test_bundle.py -m gpu -p no:cacheprovider 2>&1 | tail -n 6
fi
} 2>&1 | tee "$OUT/report.log"
for d in tune opt session; do tar czf "$OUT/$d.tgz" -C runs rep-$d; done
ls -la "$OUT"
