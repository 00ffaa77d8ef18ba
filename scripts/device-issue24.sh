#!/usr/bin/env bash
# Issue 24 on a GPU machine (from the repository root; carry .whl, and for `library` also .whl with liger-kernel
# and flag-gems, third_party/kernel-opt-skill and benchmarks/cuda_sgemm_series/third_party):
#   bash scripts/device-issue24.sh smoke     # the new defences on real launches: check/verify of the examples, a
#                                            # .cu, an SGEMM-series kernel with its declared domain, a kernel that
#                                            # rebinds what the reference calls, the reference process's traffic
#   bash scripts/device-issue24.sh honest    # verify on the examples, benchmarks/library, benchmarks/observed, the
#                                            # SGEMM series and the seed's CUDA demo (v0..v3): every one accepted
# Everything lands in $OUT (at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
stage=${1:-smoke}; shift || true
echo "== $stage $*, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
# verify FILE [ARGS...]: one line per file: verdict, stage, status, message head, median, seconds per stage
verify() {
  local f=$1; shift
  local name; name=$(echo "$f" | tr '/.' '__')
  local t0; t0=$(date +%s.%N)
  timeout 300 python3 -m kernelpilot.cli verify "$f" "$@" --json > "/tmp/v-$name.json" 2> "/tmp/v-$name.err"
  local wall; wall=$(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$t0")
  python3 - "/tmp/v-$name.json" "$f" "$wall" <<'PY' || { echo "| $f | NO JSON | $(tail -n 2 /tmp/v-$name.err | tr '\n' ' ' | cut -c1-300) |"; }
import json, sys
d = json.load(open(sys.argv[1]))
e = d.get("evaluation") or {}
ph = {k: round(v, 2) for k, v in (e.get("phases_s") or {}).items()}
msg = (d.get("message") or d.get("error") or "").replace("|", "/").replace("\n", " ")[:220]
print(f"| {sys.argv[2]} | {'ACCEPTED' if d.get('accepted') else 'REFUSED'} | {d.get('stage')} ({d.get('status')}) "
      f"| {e.get('duration_ns')} | {sys.argv[3]} s | {msg} | {ph} |")
PY
}
case "$stage" in
smoke)
  cat > /tmp/reach.py <<'PY'
import torch
SHAPE = {"N": 1 << 20}
TUNABLES = {"BLOCK": [64]}
def setup(N, seed=0, device="cuda", **_):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}
def _same(t, *a, **k):
    return t * 1.0
def run_kernel(x, out, N, **_):
    vars(torch).update({"s" "in": _same})
    out.copy_(x)
def reference(x, out, N, **_):
    return torch.sin(x)
PY
  echo "| file | verdict | stage (status) | median ns | wall | message | seconds per stage |"
  echo "|---|---|---|---|---|---|---|"
  for f in examples/vector_add.py examples/softmax.py examples/layer_norm.py examples/matmul.py examples/cuda/softmax.cu \
           benchmarks/cuda_sgemm_series/v5_2d_blocktiling.cu /tmp/reach.py; do
    verify "$f"
  done ;;
honest)
  echo "| file | verdict | stage (status) | median ns | wall | message | seconds per stage |"
  echo "|---|---|---|---|---|---|---|"
  for f in examples/vector_add.py examples/softmax.py examples/layer_norm.py examples/matmul.py examples/cuda/*.cu \
           benchmarks/library/*.py benchmarks/observed/*.py benchmarks/cuda_sgemm_series/v*.cu "$@"; do
    [ -e "$f" ] && verify "$f"
  done
  SEED=third_party/kernel-opt-skill/demo/cuda  # the seed's demo, unmodified, at the seed's own shapes
  for v in 0 1 2 3; do
    verify $SEED/softmax/v$v/v$v.cu --ref $SEED/softmax/ref.py --shape N=10240 --shape D=1024
    verify $SEED/gemm/v$v/v$v.cu --ref $SEED/gemm/ref.py --shape M=4096 --shape K=4096 --shape N=4096
  done ;;
esac
