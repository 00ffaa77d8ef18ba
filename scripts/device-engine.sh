#!/usr/bin/env bash
# The one-engine verification on a GPU machine, in stages that each fit one device call (<= 10 min):
#   bash scripts/device-engine.sh smoke             # optimize with a short budget on vector_add and matmul, bench --baselines
#   bash scripts/device-engine.sh optimize A B ...  # `kernelpilot optimize` at its defaults on the named examples
#   bash scripts/device-engine.sh exhaustive A ...  # tune --strategy exhaustive on the named examples (the reference best)
#   bash scripts/device-engine.sh baselines         # bench --baselines on every example (eager, torch.compile), timed
#   bash scripts/device-engine.sh bench-speed       # wall of `bench --baselines` cold, then warm (baseline cache), fresh
#   bash scripts/device-engine.sh gpu-tests         # the GPU-marked tests
# Logs, JSON summaries and run archives land in $OUT. Needs the carried wheels (.whl; scripts/device-env.sh).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
KP="python3 -m kernelpilot.cli"
export KERNELPILOT_CACHE=$PWD/bench-cache
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
stage=${1:-smoke}; shift || true
summary() {  # one line per run folder: wall, versions, best, stop reason, phases
  python3 - "$@" <<'PY'
import json, statistics, sys
from pathlib import Path
for run in sys.argv[1:]:
    r = Path(run)
    if not (r / "run.json").is_file():
        print(run, "no run.json"); continue
    info = json.loads((r / "run.json").read_text())
    vs = [json.loads(p.read_text()) for p in sorted(r.glob("v*/outcome.json"), key=lambda p: int(p.parent.name[1:]))]
    best = next((v for v in vs if v["index"] == info.get("best_version")), None)
    phases = {}
    for v in vs:
        for k, s in (v.get("phases_s") or {}).items():
            phases.setdefault(k, []).append(s)
    walls = [v["wall_s"] for v in vs if v.get("wall_s")]
    print(f"{r.name}: wall {info.get('wall_s', 0):.1f} s, {len(vs)} versions, best v{info.get('best_version')} "
          f"{(best or {}).get('duration_ns', 0) / 1e3:.2f} us {(best or {}).get('config')}, "
          f"{(best or {}).get('pct_of_roofline') or 0:.1f} % of roofline; baselines {info.get('baselines_ns')}; "
          f"stopped: {info.get('stop_reason')}")
    print("   per-evaluation seconds (median / max): worker wall "
          f"{statistics.median(walls) if walls else 0:.2f}/{max(walls) if walls else 0:.2f}; "
          + "; ".join(f"{k} {statistics.median(s):.2f}/{max(s):.2f} (n={len(s)})" for k, s in sorted(phases.items())))
PY
}
{
echo "== $stage $*, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
case "$stage" in
smoke)
  for ex in vector_add matmul; do
    echo "== [$(elapsed) s] optimize $ex --budget-s 45"; rm -rf runs/smoke-$ex
    /usr/bin/time -f "wall %e s" timeout 240 $KP optimize examples/$ex.py --budget-s 45 --out runs/smoke-$ex 2>&1 | tail -n 25
    summary runs/smoke-$ex
  done
  echo "== [$(elapsed) s] bench --baselines softmax"
  /usr/bin/time -f "wall %e s" timeout 200 $KP bench examples/softmax.py --baselines 2>&1 | tail -n 12
  tar czf "$OUT/smoke-runs.tgz" runs ;;
optimize)
  for ex in "$@"; do
    echo "== [$(elapsed) s] optimize $ex (defaults)"; rm -rf runs/opt-$ex
    /usr/bin/time -f "wall %e s" timeout 330 $KP optimize examples/$ex.py --out runs/opt-$ex 2>&1 | tail -n 12
    summary runs/opt-$ex
  done
  tar czf "$OUT/opt-$(echo "$@" | tr ' ' '-').tgz" runs ;;
exhaustive)
  for ex in "$@"; do
    echo "== [$(elapsed) s] tune $ex --strategy exhaustive (no cache)"; rm -rf runs/exh-$ex
    timeout 400 $KP tune examples/$ex.py --strategy exhaustive --no-cache --out runs/exh-$ex 2>&1 | tail -n 6
  done
  tar czf "$OUT/exh-$(echo "$@" | tr ' ' '-').tgz" runs ;;
baselines)
  for ex in vector_add layer_norm softmax matmul; do
    echo "== [$(elapsed) s] bench $ex --baselines"
    /usr/bin/time -f "wall %e s" timeout 200 $KP bench examples/$ex.py --baselines --json > "$OUT/bench-$ex.json" 2> "$OUT/bench-$ex.err"
    tail -n 2 "$OUT/bench-$ex.err"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({r['name']: round(r['timing']['median_ns']/1e3, 2) if r.get('timing') else r.get('skipped') for r in d['baselines']['rows']})" "$OUT/bench-$ex.json"
  done ;;
bench-speed)
  export KERNELPILOT_CACHE_DIR=$PWD/kp-cache-dir; rm -rf "$KERNELPILOT_CACHE_DIR"
  for ex in softmax layer_norm matmul; do
    for run in first second third fresh; do
      flag=""; [ "$run" = fresh ] && flag="--fresh-baselines"
      echo "== [$(elapsed) s] bench $ex --baselines $flag ($run run)"
      /usr/bin/time -f "wall %e s" timeout 200 $KP bench examples/$ex.py --baselines $flag --json > "$OUT/speed-$ex-$run.json" 2> "$OUT/speed-$ex-$run.err"
      tail -n 1 "$OUT/speed-$ex-$run.err"
      python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({r['name'][:24]: (round(r['timing']['median_ns']/1e3, 2), r['timing']['n_samples'], r.get('cached_at')) if r.get('timing') else r.get('skipped') for r in d['baselines']['rows']}); print('  note:', d['baselines']['rows'][-1].get('note'))" "$OUT/speed-$ex-$run.json"
    done
  done
  echo "== [$(elapsed) s] check softmax (worker picks the GPU)"
  /usr/bin/time -f "wall %e s" $KP check examples/softmax.py 2>&1 | tail -n 3 ;;
gpu-tests)
  timeout 560 python3 -m pytest -q -m gpu -p no:cacheprovider tests --deselect \
    "tests/test_occupancy_driver.py::test_occupancy_model_and_max_threads_equal_the_driver_on_every_config_of_every_example" 2>&1 | tail -n 25 ;;
esac
echo "== done in $(elapsed) s"
} 2>&1 | tee "$OUT/$stage.log"
