#!/usr/bin/env bash
# One device session's verification, in stages that each fit one device call (<= 10 min), from the repository root:
#   bash scripts/device-session.sh occ      # issue 3: occupancy model == driver on every config of every example
#   bash scripts/device-session.sh search   # GPU-marked tests (broken kernels on the GPU, illegal access, specs, timing)
#                                           # + guided live on matmul (EVALS_MM) and softmax (EVALS_SM), no cache,
#                                           # static pruning overlapped with measurement
#   bash scripts/device-session.sh loop     # optimize with ncu cards (worker-isolated versions): vector_add,
#                                           # layer_norm, matmul (ITER)
#   bash scripts/device-session.sh multi    # on a several-GPU machine: guided softmax over all GPUs vs one GPU
# Logs and archives land in $OUT (at most 8 files come back). Needs the carried wheels (.whl; scripts/device-env.sh).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
KP="python3 -m kernelpilot.cli"
export KERNELPILOT_CACHE=$PWD/bench-cache
MM=(--constraint "GROUP_M == 8" --constraint "BLOCK_K <= 64" --constraint "num_warps >= 4"
    --constraint "num_stages >= 3" --constraint "num_stages <= 4")   # the space of the committed matmul cache
SM=(--constraint "num_stages == 2")
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
stage=${1:-search}
{
echo "== $stage, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
for m in pydantic git constraint optuna; do python3 -c "import $m; print('$m', getattr($m, '__version__', 'ok'))" 2>&1 | tail -1; done
case "$stage" in
occ)
  BUDGET_S=${BUDGET_S:-540} bash scripts/issue3-device.sh occupancy ;;
search)
  echo "== [$(elapsed) s] GPU-marked tests"
  timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests --deselect \
    "tests/test_occupancy_driver.py::test_occupancy_model_and_max_threads_equal_the_driver_on_every_config_of_every_example" 2>&1 | tail -n 25
  echo "== [$(elapsed) s] guided matmul live (budget ${EVALS_MM:-40}, no cache, prune drop, compile-ahead)"
  timeout 200 $KP tune examples/matmul.py --strategy guided --budget-evals "${EVALS_MM:-40}" --no-cache "${MM[@]}" \
    --out runs/matmul-guided 2>&1 | tail -n 60
  echo "== [$(elapsed) s] guided softmax live (budget ${EVALS_SM:-24})"
  timeout ${SM_LIMIT_S:-150} $KP tune examples/softmax.py --strategy guided --budget-evals "${EVALS_SM:-24}" --no-cache "${SM[@]}" \
    --out runs/softmax-guided 2>&1 | tail -n 40
  tar czf "$OUT/search-runs.tgz" runs ;;
loop)
  for ex in vector_add layer_norm matmul; do
    echo "== [$(elapsed) s] optimize $ex (ncu, ${ITER:-4} iterations)"
    lim=150; [ "$ex" = matmul ] && lim=230
    timeout $lim $KP optimize examples/$ex.py --iterations "${ITER:-4}" --out "runs/$ex" 2>&1 | tail -n 30
    for v in runs/$ex/v*/verdict.json; do
      python3 -c "import json,sys; c=json.load(open(sys.argv[1])); s=(c.get('suggested_changes') or [{}])[0]; \
print(sys.argv[1], c['class'], c['rule'], 'fired', c['fired_patterns'], 'first change:', s.get('action'), \
s.get('tunables'))" "$v" 2>&1 | tail -1
    done
  done
  tar czf "$OUT/loop-runs.tgz" runs ;;
softmax)  # the softmax half of `search` alone (each softmax evaluation takes ~9 s: 256 MiB rows, A/B samples)
  echo "== [$(elapsed) s] guided softmax live (budget ${EVALS_SM:-24})"
  timeout ${SM_LIMIT_S:-420} $KP tune examples/softmax.py --strategy guided --budget-evals "${EVALS_SM:-24}" \
    --no-cache "${SM[@]}" --out runs/softmax-guided 2>&1 | tail -n 40
  tar czf "$OUT/softmax-runs.tgz" runs ;;
multi)
  n=$(nvidia-smi -L | wc -l)
  echo "== [$(elapsed) s] guided softmax on $n GPUs (budget ${EVALS_MULTI:-16}, no cache)"
  timeout 200 $KP tune examples/softmax.py --strategy guided --budget-evals "${EVALS_MULTI:-16}" --no-cache "${SM[@]}" \
    --out runs/softmax-guided-${n}gpu 2>&1 | tail -n 8
  echo "== [$(elapsed) s] guided softmax on 1 GPU (budget ${EVALS_MULTI:-16}, no cache)"
  CUDA_VISIBLE_DEVICES=0 timeout 200 $KP tune examples/softmax.py --strategy guided --budget-evals "${EVALS_MULTI:-16}" --no-cache \
    "${SM[@]}" --out runs/softmax-guided-1gpu 2>&1 | tail -n 8
  echo "== [$(elapsed) s] local matmul on $n GPUs (budget 30, no cache)"
  timeout 200 $KP tune examples/matmul.py --strategy local --budget-evals 30 --no-cache "${MM[@]}" \
    --out runs/matmul-local-${n}gpu 2>&1 | tail -n 8
  tar czf "$OUT/multi-runs.tgz" runs ;;
esac
echo "== done in $(elapsed) s"
} 2>&1 | tee "$OUT/$stage.log"
