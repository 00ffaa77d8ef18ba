#!/usr/bin/env bash
# Issue 13 on a GPU machine: the softmax series (examples/series/softmax) through `kernelpilot session`, one call:
#   bash scripts/device-versions.sh
# start v0, try v1..v3 (real code changes), try the wrong v4, mask it, restart from v2, status, experience
# recommend, finish. The session folder comes back as $OUT/session.tgz, the log as $OUT/session.log.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
export KERNELPILOT_EXPERIENCE=$PWD/session-experience.db
rm -rf runs/softmax-session "$KERNELPILOT_EXPERIENCE"
KP="python3 -m kernelpilot.cli"
S=examples/series/softmax
R=runs/softmax-session
{
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
step() { local t=$(date +%s.%N); echo; echo "\$ kernelpilot $*"; $KP "$@"; local rc=$?; echo "(exit $rc, $(python3 -c "import time,sys; print(f'{time.time()-float(sys.argv[1]):.1f}')" $t) s)"; }
step session start $S/v0.py --out $R --kernel-type softmax
step session try $R $S/v1.py --hypothesis "online softmax: the max and the sum in one pass, so x is read twice instead of three times" --expect duration:down
step session try $R $S/v2.py --hypothesis "the whole row in one tile (BLOCK_N = 8192, 16 warps): x read once and y written once, the minimum traffic" --expect duration:down --expect dram_pct:up
step session try $R $S/v3.py --hypothesis "exp2 with log2(e) folded into one multiply: fewer instructions per element" --expect duration:down
step session try $R $S/v4.py --hypothesis "two rows per program: half the programs, more work per block"
step session mask $R v4 --why "a typo in the row reduction (tl.sum without axis=1), not a strategy: kept out of the record"
step session restart $R --from v2
step session status $R
step session status $R --json > "$OUT/status.json"
step experience recommend --kernel-type softmax --backend triton --arch sm_90
step experience recommend --kernel-type softmax --backend triton --arch sm_90 --json > "$OUT/recommend.json"
step session finish $R
echo; echo "== final_report.md"; cat $R/final_report.md
echo; echo "== git log"; git -C $R log --format='%h %s' --reverse
} 2>&1 | tee "$OUT/session.log"
tar -czf "$OUT/session.tgz" --exclude='*.ncu-rep' runs/softmax-session
ls runs/softmax-session/v*/profile.ncu-rep 2>/dev/null | head
