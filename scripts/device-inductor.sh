#!/usr/bin/env bash
# Issue 25's Inductor import on a GPU machine (from the repository root; carry .whl for the Liger kernels):
#   bash scripts/device-inductor.sh capture   # torch.compile (Inductor) of the examples' and Liger's references:
#                                              # one CapturedCode JSON per kernel and mode (tests/data/inductor/)
#   bash scripts/device-inductor.sh import     # `kernelpilot inductor` on them, then `check` and
#                                              # `tune --strategy exhaustive` of each converted file
# SRC (default src) is the source tree to run (a helper's copy: SRC=.h25/inductor/src). Everything lands in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
SRC=${SRC:-src}
export PYTHONPATH=${PYTHONPATH/$PWD\/src/$PWD/$SRC}
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
      echo "-- $name rc=$? $(( $(date +%s) - t0 )) s"; tail -n 4 "$OUT/$name.log" ) &
  done
  wait ;;
import)
  for km in $KERNELS; do
    k=${km%%:*}; m=${km##*:}; name=$(basename "$k" .py)-$m; f=/tmp/ind-$name.py
    t0=$(date +%s)
    timeout 300 python3 -m kernelpilot.cli inductor "$k" --out "$f" --mode "$m" --json > "$OUT/$name-import.json" 2> "$OUT/$name-import.err"
    echo "-- import $name rc=$? $(( $(date +%s) - t0 )) s: $(head -c 600 "$OUT/$name-import.json")"; tail -n 3 "$OUT/$name-import.err"
    [ -f "$f" ] || continue
    cp "$f" "$OUT/$name-converted.py"
    timeout 200 python3 -m kernelpilot.cli check "$f" --json > "$OUT/$name-check.json" 2> "$OUT/$name-check.err"
    echo "-- check $name rc=$?: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ('passed','error','message','max_abs_err')})" "$OUT/$name-check.json" 2>&1 | head -c 800)"
    t0=$(date +%s)
    timeout 240 python3 -m kernelpilot.cli tune "$f" --strategy exhaustive --out "/tmp/tune-$name" --json > "$OUT/$name-tune.json" 2> "$OUT/$name-tune.err"
    echo "-- tune $name rc=$? $(( $(date +%s) - t0 )) s: $(head -c 1500 "$OUT/$name-tune.json")"; tail -n 3 "$OUT/$name-tune.err"
  done ;;
esac
