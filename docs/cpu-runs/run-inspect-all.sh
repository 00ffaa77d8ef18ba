#!/usr/bin/env bash
# Runs `kernelpilot inspect examples/<ex>.py --all-configs --json` for every example on this CPU machine, one at a
# time under `nice -n 10`, first with empty (cold) Triton and SASS caches, then again with the caches it filled
# (warm). Outputs go to $RUN (default /tmp/kp-cpu-runs): <ex>.<cold|warm>.json (stdout), .log (stderr), .time.
#   bash docs/cpu-runs/run-inspect-all.sh [examples...]        (default: vector_add layer_norm softmax matmul)
# Summarise with: python3 docs/cpu-runs/summarize.py $RUN
set -uo pipefail
RUN=${RUN:-/tmp/kp-cpu-runs}
mkdir -p "$RUN"
export TRITON_CACHE_DIR="$RUN/triton-cache" KERNELPILOT_CACHE_DIR="$RUN/kp-cache"
unset TRITON_INTERPRET
examples=${*:-vector_add layer_norm softmax matmul}
for pass in cold warm; do
  for ex in $examples; do
    echo "== $pass $ex $(date -u +%H:%M:%S)"
    start=$(date +%s.%N)
    nice -n 10 kernelpilot inspect "examples/$ex.py" --all-configs --json >"$RUN/$ex.$pass.json" 2>"$RUN/$ex.$pass.log"
    rc=$?
    end=$(date +%s.%N)
    printf '{"example": "%s", "pass": "%s", "rc": %d, "wall_s": %.1f}\n' "$ex" "$pass" "$rc" \
      "$(echo "$end - $start" | bc)" >"$RUN/$ex.$pass.time"
    cat "$RUN/$ex.$pass.time"
  done
done
echo "== done $(date -u +%H:%M:%S)"
