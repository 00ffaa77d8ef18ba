#!/usr/bin/env bash
# Issue 14 on a GPU (H100): the CUDA C++ backend end to end, in stages that each fit one device call (<= 9 min),
# from the repository root:
#   bash scripts/device-cuda.sh examples   # GPU-marked CUDA tests; check + bench --baselines + profile of each
#                                          # examples/cuda/*.cu; pipeline on sgemm_db.cu (both buffers)
#   bash scripts/device-cuda.sh series     # the public SGEMM series (benchmarks/cuda_sgemm_series; its third_party/
#                                          # folder carried): every version through `kernelpilot session` (check,
#                                          # A/B, ncu card), the versions table, pipeline on the double-buffered v8
#   bash scripts/device-cuda.sh tune       # tune (exhaustive over BLOCK_SIZE) and optimize --budget-s 60 of
#                                          # vector_add.cu; tune --budget-evals 12 of sgemm_db.cu
# Logs land in $OUT (<= 8 files come back). Sources scripts/device-env.sh (carried wheels, no interpreter).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
KP="python3 -m kernelpilot.cli"
export KERNELPILOT_CACHE=$PWD/bench-cache KERNELPILOT_CACHE_DIR=/tmp/kp-cuda-cache
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
stage=${1:-examples}
{
echo "== $stage, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv
nvcc --version | tail -2
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
case "$stage" in
examples)
  echo "== [$(elapsed) s] GPU-marked CUDA tests"
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_backend.py 2>&1 | tail -n 25
  for k in vector_add softmax sgemm_db; do
    echo "== [$(elapsed) s] $k: check"
    timeout 120 $KP check examples/cuda/$k.cu 2>&1 | tail -n 8
    echo "== [$(elapsed) s] $k: bench --baselines"
    timeout 150 $KP bench examples/cuda/$k.cu --baselines 2>&1 | tail -n 20
    echo "== [$(elapsed) s] $k: profile (ncu)"
    timeout 150 $KP profile examples/cuda/$k.cu --out "$OUT/$k.ncu-rep" --json > "$OUT/profile-$k.json" 2> "$OUT/profile-$k.err"
    python3 -c "import json,sys; d=json.load(open('$OUT/profile-$k.json')); c=d.get('card') or {}; v=d.get('verdict') or {}; print('verdict:', v.get('bound') or v, '|', (c.get('headline') or '')[:300])" 2>&1 | tail -3
    rm -f "$OUT/$k.ncu-rep"
  done
  echo "== [$(elapsed) s] pipeline sgemm_db.cu"
  timeout 120 $KP pipeline examples/cuda/sgemm_db.cu 2>&1 | tail -n 60 ;;
series)
  S=benchmarks/cuda_sgemm_series
  R=runs/sgemm-session
  # the series' headers include <cublas_v2.h>: take the headers of the cuBLAS wheel torch brings when the toolkit lacks them
  inc=$(python3 -c "import glob, os, site; print(next((os.path.dirname(p) for d in site.getsitepackages() for p in glob.glob(d + '/nvidia/**/cublas_v2.h', recursive=True)), ''))")
  [ -n "$inc" ] && export CPATH=$inc${CPATH:+:$CPATH} && echo "cuBLAS headers: $inc"
  if [ ! -f $S/third_party/SGEMM_CUDA/src/kernels/1_naive.cuh ]; then
    echo "SKIPPED: $S/third_party is absent (carry it: it is third-party code, kept out of the repository)"
  else
    export KERNELPILOT_EXPERIENCE=$PWD/cuda-experience.db
    rm -rf $R "$KERNELPILOT_EXPERIENCE"
    step() { local t=$(date +%s); echo; echo "\$ kernelpilot $*"; $KP "$@" 2>&1 | grep -v "_warn_once\|UserWarning"; echo "(exit ${PIPESTATUS[0]}, $(( $(date +%s) - t )) s)"; }
    step session start $S/v1_naive.cu --out $R --shape M=2048 --shape N=2048 --shape K=2048 --kernel-type matmul
    step session try $R $S/v2_coalesce.cu --hypothesis "coalesced global accesses: consecutive threads of a warp own consecutive columns of C" --expect duration:down
    step session try $R $S/v3_smem.cu --hypothesis "shared-memory blocking: 32x32 tiles of A and B staged in shared memory, each global element loaded once per block" --expect duration:down
    step session try $R $S/v4_1d_blocktiling.cu --hypothesis "1D block tiling: each thread computes 8 results of a column, fewer shared-memory loads per FMA" --expect duration:down
    step session try $R $S/v5_2d_blocktiling.cu --hypothesis "2D block tiling: an 8x8 tile of results per thread, outer products from registers" --expect duration:down
    step session try $R $S/v6_vectorize.cu --hypothesis "128-bit vectorized loads and a transposed A tile in shared memory" --expect duration:down
    step session try $R $S/v7_warptiling.cu --hypothesis "warp tiling: a warp-level tile between the block and thread tiles, for register reuse and fewer bank conflicts" --expect duration:down
    step session try $R $S/v8_double_buffering.cu --hypothesis "double buffering: load the next K tile into shared memory while the current one is computed" --expect duration:down
    step session status $R
    step session finish $R --no-benchmark
    tar czf "$OUT/sgemm-session.tgz" --exclude='*.ncu-rep' --exclude='third_party' $R
    echo "== [$(elapsed) s] pipeline v8 (double buffering) --tile 128,256,16"
    timeout 120 $KP pipeline $S/v8_double_buffering.cu --tile 128,256,16 2>&1 | tail -n 40
  fi ;;
tune)
  echo "== [$(elapsed) s] tune vector_add.cu (exhaustive over BLOCK_SIZE)"
  timeout 200 $KP tune examples/cuda/vector_add.cu --strategy exhaustive --no-cache --out runs/cuda-vadd-tune 2>&1 | tail -n 30
  echo "== [$(elapsed) s] optimize vector_add.cu --budget-s 60"
  timeout 200 $KP optimize examples/cuda/vector_add.cu --budget-s 60 --out runs/cuda-vadd-opt 2>&1 | tail -n 30
  echo "== [$(elapsed) s] tune sgemm_db.cu (guided, 12 evaluations)"
  timeout 150 $KP tune examples/cuda/sgemm_db.cu --strategy guided --budget-evals 12 --no-cache --out runs/cuda-sgemm-tune 2>&1 | tail -n 30
  tar czf "$OUT/cuda-runs.tgz" runs/cuda-* ;;
esac
echo "== done in $(elapsed) s"
} 2>&1 | tee "$OUT/device-cuda-$stage.log"
