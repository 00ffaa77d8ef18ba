#!/usr/bin/env bash
# Issue 11 on a GPU machine, in stages that each fit one device call (<= 10 min):
#   bash scripts/device-integrity.sh suite [FILE ...]   # the adversarial suite through `kernelpilot verify`, one at a time
#   bash scripts/device-integrity.sh cost [EX ...]      # wall per evaluation and medians, before (.old/src) and after
#   bash scripts/device-integrity.sh cprof [EX]         # cProfile of the parent of one tune, before and after
#   bash scripts/device-integrity.sh probe              # what the first profiler session of a process costs
#   bash scripts/device-integrity.sh honest             # verify on the examples and the library kernels: all accepted
#   bash scripts/device-integrity.sh eval-steps [EX]    # one evaluation's steps and whole evaluations, per side
# Sides: before = .old/src (the pre-hardening source: git archive 227ca44 src | tar -x -C .old), after = src, any
# other NAME = .old/NAME/src (e.g. git archive HEAD src | tar -x -C .old/head); carry .old with the command.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
stage=${1:-suite}; shift || true
src_of() { case "$1" in before) echo "$PWD/.old/src" ;; after) echo "$PWD/src" ;; *) echo "$PWD/.old/$1/src" ;; esac; }
echo "== $stage $*, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
case "$stage" in
suite)
  timeout 590 python3 scripts/adversarial.py --jobs 1 --json "$OUT/adversarial-gpu.json" "$@" ;;
honest)
  for f in examples/vector_add.py examples/softmax.py examples/layer_norm.py examples/matmul.py benchmarks/library/*.py; do
    echo "== verify $f"
    timeout 200 python3 -m kernelpilot.cli verify "$f" --json > "$OUT/verify-$(basename "$f" .py).json" 2> "$OUT/verify-$(basename "$f" .py).err"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); e=d.get('evaluation') or {}; print(' ', 'ACCEPTED' if d.get('accepted') else 'REFUSED', d.get('stage'), d.get('status'), (d.get('message') or d.get('error',''))[:200], e.get('duration_ns'), (e.get('phases_s') or {}))" "$OUT/verify-$(basename "$f" .py).json" || tail -n 5 "$OUT/verify-$(basename "$f" .py).err"
  done ;;
probe)
  for mode in work warm; do echo "== profiler probe ($mode)"; timeout 120 python3 scripts/profiler_probe.py $mode; done ;;
cprof)  # where the parent process of one tune spends its wall, per side
  ex=${1:-matmul}
  for side in ${SIDES:-before after}; do
    src=$(src_of "$side")
    PYTHONPATH=/tmp/site:$src timeout 200 python3 -m cProfile -o /tmp/cprof-$side.out -m kernelpilot.cli tune examples/$ex.py \
      --strategy exhaustive --budget-evals 12 --no-cache --prune off --json > /dev/null 2>&1
    echo "== $ex $side"
    python3 -c "import pstats,sys; p=pstats.Stats(sys.argv[1]); p.sort_stats('cumulative').print_stats('kernelpilot', 30)" /tmp/cprof-$side.out \
      | grep -E "^ +[0-9]" | awk '{printf "%8s %s\n", $4, $6}' | head -30
  done ;;
cost)
  [ $# -eq 0 ] && set -- vector_add softmax layer_norm matmul
  for ex in "$@"; do
    for side in ${SIDES:-before after}; do
      src=$(src_of "$side")
      # an empty Triton cache for every run: both sides pay the same compiles
      TRITON_CACHE_DIR=$(mktemp -d) PYTHONPATH=/tmp/site:$src timeout 200 python3 -m kernelpilot.cli tune examples/$ex.py \
        --strategy exhaustive --budget-evals 12 --no-cache --prune off --json > "$OUT/cost-$ex-$side.json" 2> "$OUT/cost-$ex-$side.err"
      python3 - "$OUT/cost-$ex-$side.json" "$ex" "$side" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
evs = [e for e in d["evaluations"] if e.get("status") == "ok" and e.get("duration_ns")]
walls = [e["wall_s"] for e in evs if e.get("wall_s")]
phases = {}
for e in evs:
    for k, v in (e.get("phases_s") or {}).items():
        phases.setdefault(k, []).append(v)
audits = [round(e["phases_s"]["audit"], 3) for e in d["evaluations"] if (e.get("phases_s") or {}).get("audit")]
print(f"{sys.argv[2]} {sys.argv[3]}: run wall {d['wall_s']:.2f} s over {len(d['evaluations'])} evals = {d['wall_s'] / len(d['evaluations']):.3f} s/eval; audits {audits}")
print(f"   {len(evs)} ok evals, wall/eval median {statistics.median(walls):.3f} s "
      f"(min {min(walls):.3f}, max {max(walls):.3f}); "
      + "; ".join(f"{k} {statistics.median(v):.3f}" for k, v in sorted(phases.items())))
print("   medians us:", {json.dumps(e["config"], sort_keys=True): round(e["duration_ns"] / 1e3, 2) for e in evs})
PY
    done
  done ;;
eval-steps)  # where one evaluation's wall goes (scripts/probe_eval_cost.py), per side
  ex=${1:-vector_add}
  for side in ${SIDES:-head after}; do
    echo "== side $side"
    PYTHONPATH=/tmp/site:$(src_of "$side") timeout 150 python3 scripts/probe_eval_cost.py steps "$ex" 2>&1 | grep -v Warning
  done
  for side in before ${SIDES:-head after}; do
    echo "== side $side"
    PYTHONPATH=/tmp/site:$(src_of "$side") timeout 150 python3 scripts/probe_eval_cost.py evals "$ex" 2>&1 | tail -n 3
  done
  CUDA_LAUNCH_BLOCKING=1 PYTHONPATH=/tmp/site:$PWD/src timeout 150 python3 scripts/probe_eval_cost.py cprofile "$ex" \
    2>&1 | grep -E "^ +[0-9]|==|ncalls" | head -34 ;;
esac
echo "== done"
