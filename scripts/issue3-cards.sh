#!/usr/bin/env bash
# Issue 3 on the device: the bottleneck card of every example at its default config (ncu and light), and the
# loop choosing its changes from the card. Run from the repository root on the GPU machine:
#   bash scripts/issue3-cards.sh cards      # env probe, ceilings, 4 ncu cards + 4 light cards, light-card loop
#   bash scripts/issue3-cards.sh loop       # optimize softmax and matmul with ncu cards (ITER, default 6)
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
ITER=${ITER:-6}
source scripts/device-env.sh
KP="python3 -m kernelpilot.cli"
start=$(date +%s)
case "${1:-cards}" in
cards)
  {
    echo "== packages"; for m in scipy optuna constraint sqlalchemy alembic colorlog tqdm yaml ray; do
      python3 -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>/dev/null || echo "$m MISSING"; done
    echo "== env"; $KP env
    echo "== specs measure"; $KP specs measure --folder "$PWD/src/kernelpilot/hardware/specs/measured"
    for ex in vector_add softmax layer_norm matmul; do
      echo "== card $ex (ncu)"; $KP profile examples/$ex.py --out "$OUT/$ex.ncu-rep" --json > "$OUT/card-$ex.json"
      python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['card'] if 'card' in d else d)" "$OUT/card-$ex.json" | head -c 1500; echo
      echo "== card $ex (light)"; $KP profile examples/$ex.py --light --json > "$OUT/light-$ex.json"
    done
    echo "== optimize layer_norm --no-profile (light cards)"
    $KP optimize examples/layer_norm.py --iterations 4 --no-profile --out runs/layer_norm-light
    cat runs/layer_norm-light/final_report.md
    echo "== wall seconds: $(( $(date +%s) - start ))"
  } 2>&1 | tee "$OUT/cards.log"
  tar czf "$OUT/cards.tgz" -C "$OUT" $(cd "$OUT" && ls card-*.json light-*.json *.ncu-rep 2>/dev/null) \
    && rm -f "$OUT"/card-*.json "$OUT"/light-*.json "$OUT"/*.ncu-rep
  tar czf "$OUT/runs.tgz" runs src/kernelpilot/hardware/specs/measured 2>/dev/null
  ;;
loop)
  {
    for ex in softmax matmul; do
      echo "== optimize $ex"; $KP optimize examples/$ex.py --iterations "$ITER" --out "runs/$ex"
      cat "runs/$ex/final_report.md" "runs/$ex/benchmark.md" 2>/dev/null
    done
    echo "== wall seconds: $(( $(date +%s) - start ))"
  } 2>&1 | tee "$OUT/loop.log"
  tar czf "$OUT/runs.tgz" runs 2>/dev/null
  ;;
esac
