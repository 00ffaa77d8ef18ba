# Sourced by the multi-lane device scripts (device-s11.sh, device-s12.sh) after `stage` is set: $OUT, the carried
# wheels (device-env.sh), the call's deadline END (CALL_S seconds from the script's start), a header with the GPUs
# and versions, and two helpers: `left [MARGIN]` (seconds to END less MARGIN) and `gputests GPU FILE...` (the
# GPU-marked tests in those files on that GPU, ended before END).
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
T0=$(( $(date +%s) - SECONDS )); END=$(( T0 + ${CALL_S:-570} ))
echo "== $stage, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
L=benchmarks/library
left() { echo $(( END - $(date +%s) - ${1:-0} )); }
gputests() {  # GPU $1, test files ...: the GPU-marked tests in them, ended before the call's limit
  local g=$1; shift
  CUDA_VISIBLE_DEVICES=$g timeout -k 10 $(left 20) python3 -m pytest -v -m gpu -p no:cacheprovider -rfE --tb=short \
    --durations=8 "$@"
  echo "-- gpu tests rc=$? at $SECONDS s"
}
