#!/usr/bin/env bash
# Issue 25's Inductor import on a GPU machine (from the repository root; carry .whl for the Liger kernels):
#   bash scripts/device-inductor.sh capture   # torch.compile (Inductor) of the examples' and Liger's references:
#                                              # one CapturedCode JSON per kernel and mode (tests/data/inductor/)
#   bash scripts/device-inductor.sh import     # `kernelpilot inductor` on them (and two small shapes), then `check`
#                                              # of each converted file and `tune --strategy exhaustive` of three
# SRC (default src) is the source tree to run (a helper's copy: SRC=.h25/inductor/src); WHL a folder of wheels to
# install besides .whl. $OUT gets two files, rewritten after every step (so a run cut short still returns what it
# did): summary.log (one line per step) and raw.tgz (every JSON, log, capture and converted file).
set -uo pipefail
FINAL=${OUT:-/tmp/kp-out}; mkdir -p "$FINAL"
OUT=/tmp/kp-inductor; mkdir -p "$OUT"
exec > >(tee -a "$FINAL/summary.log") 2>&1
keep() { tar czf "$FINAL/raw.tgz" -C "$OUT" . 2>/dev/null; }
source scripts/device-env.sh
SRC=${SRC:-src}
export PYTHONPATH=${PYTHONPATH/$PWD\/src/$PWD/$SRC}
if [ -n "${WHL:-}" ]; then  # wheels carried elsewhere than .whl (e.g. only liger-kernel's, when .whl is too large)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-extra "$WHL"/*.whl 2>/dev/null
  export PYTHONPATH=/tmp/site-extra:$PYTHONPATH
fi
stage=${1:-capture}; shift || true
echo "== $stage, $(date -u +%Y-%m-%dT%H:%M:%SZ), PYTHONPATH=$PYTHONPATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
KERNELS=${KERNELS:-"src/kernelpilot/examples/softmax.py:default src/kernelpilot/examples/layer_norm.py:default
src/kernelpilot/examples/matmul.py:default src/kernelpilot/examples/matmul.py:max-autotune
benchmarks/library/liger_geglu.py:default benchmarks/library/liger_rope.py:default"}
case "$stage" in
capture)
  cp "$(python3 -c 'import torch._inductor.runtime.triton_heuristics as m; print(m.__file__)')" "$OUT/triton_heuristics.py.txt"
  for km in $KERNELS; do
    k=${km%%:*}; m=${km##*:}; name=$(basename "$k" .py)-$m
    ( t0=$(date +%s)
      timeout 400 python3 -c "
import sys
from kernelpilot.inductor import capture_kernel
cap = capture_kernel(sys.argv[1], mode=sys.argv[2], timeout_s=380)
open(sys.argv[3], 'w').write(cap.model_dump_json(indent=1))
print('arg_names', cap.arg_names, 'returns', cap.returns, 'chosen', cap.chosen)
" "$k" "$m" "$OUT/$name.json" > "$OUT/$name.log" 2>&1
      echo "-- $name rc=$? $(( $(date +%s) - t0 )) s"; tail -n 4 "$OUT/$name.log"; keep ) &
  done
  wait ;;
import)
  # 1. the imports, four at a time (each compiles in its own worker); small-shape captures for the interpreter
  imp() {  # NAME KERNEL MODE [ARGS...]
    local name=$1 k=$2 m=$3; shift 3; local t0; t0=$(date +%s)
    timeout 300 python3 -m kernelpilot.cli inductor "$k" --out "$OUT/$name.py" --mode "$m" --save-capture "$OUT/$name.json" \
      "$@" --json > "$OUT/$name-import.json" 2> "$OUT/$name-import.err"
    echo "-- import $name rc=$? $(( $(date +%s) - t0 )) s: $(head -c 700 "$OUT/$name-import.json")"; tail -n 2 "$OUT/$name-import.err"
    keep
  }
  imp softmax-default src/kernelpilot/examples/softmax.py default &
  imp softmax-max-autotune src/kernelpilot/examples/softmax.py max-autotune &
  imp layer_norm-default src/kernelpilot/examples/layer_norm.py default &
  wait
  imp liger_geglu-default benchmarks/library/liger_geglu.py default &
  imp liger_rope-default benchmarks/library/liger_rope.py default &
  imp matmul-default src/kernelpilot/examples/matmul.py default &
  imp softmax-small src/kernelpilot/examples/softmax.py default --shape M=16 --shape N=512 &
  imp layer_norm-small src/kernelpilot/examples/layer_norm.py default --shape M=16 --shape N=256 &
  wait
  # 2. check every converted file (in parallel: correctness, not time)
  for f in "$OUT"/*.py; do
    name=$(basename "$f" .py)
    ( timeout 200 python3 -m kernelpilot.cli check "$f" --json > "$OUT/$name-check.json" 2> "$OUT/$name-check.err"
      echo "-- check $name rc=$?: $(head -c 400 "$OUT/$name-check.json")"; tail -n 2 "$OUT/$name-check.err" ) &
  done
  wait; keep
  # 3. exhaustive tune, one at a time (timed), each within TUNE_S seconds
  for name in ${TUNE:-softmax-default layer_norm-default liger_geglu-default}; do
    [ -f "$OUT/$name.py" ] || continue
    t0=$(date +%s)
    timeout $(( ${TUNE_S:-30} + 90 )) python3 -m kernelpilot.cli tune "$OUT/$name.py" --strategy exhaustive --budget-s "${TUNE_S:-30}" \
      --out "/tmp/tune-$name" --json > "$OUT/$name-tune.json" 2> "$OUT/$name-tune.err"
    echo "-- tune $name rc=$? $(( $(date +%s) - t0 )) s: $(head -c 1200 "$OUT/$name-tune.json")"; tail -n 2 "$OUT/$name-tune.err"
    keep
  done ;;
esac
keep
