#!/usr/bin/env bash
# Workload bundles on a GPU (issue 26), one device call:
#   bash scripts/device-bundle26.sh RUN_FOLDER [CU_RUN_FOLDER]
# RUN_FOLDER: a `tune --workload --out` folder holding dispatch.json (and the kernel file, or tune.json naming it).
# CU_RUN_FOLDER: the same for a .cu kernel; without it, a hand-written dispatch.json for
# src/kernelpilot/examples/cuda/vector_add.cu (three buckets over N, two configs; its times are placeholders: only
# the ranges and configs are bundled). RUN_FOLDER "-" does the same for the Triton vector_add, softmax and matmul
# examples.
# For each: `kernelpilot export RUN --arch auto --out B`, `kernelpilot bundle verify B`, then in a fresh process
# (scripts/bundle_workload_check.py) `kernelpilot.bundle.load(B)` and launches at shapes inside the ranges that the
# table never measured, every output checked against the kernel's reference; prints one table per bundle.
# Writes to $OUT: bundle26.log, bundle26-*.json, bundles26.tgz (manifests, no binaries).
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
W=$(mktemp -d /tmp/kp-bundle26.XXXX)
KP="python3 -m kernelpilot.cli"
RUN=${1:--}; CU=${2:-}
status=0
exec > >(tee "$OUT/bundle26.log") 2>&1
echo "== device-bundle26 $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
nvcc --version | tail -1
demo() {  # demo KERNEL_FILE FOLDER KIND: a hand-written dispatch.json (placeholder times) for an example
  python3 - "$1" "$2" "$3" <<'PY'
import hashlib, shutil, sys
from pathlib import Path
from kernelpilot.dispatch import Measurement, make_bucket, make_dispatch, make_total, write_dispatch
from kernelpilot.dispatch.model import KernelRef
kernel, folder, kind = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
folder.mkdir(parents=True, exist_ok=True)
for f in (kernel, kernel.with_suffix(".py")):
    if f.is_file():
        shutil.copy(f, folder / f.name)
row = lambda s: Measurement(shape=s, weight=1.0, duration_ns=1000.0, samples_n=1, record_id=str(sorted(s.items())))
if kind == "vector_add":
    keys, s = ["N"], (lambda n: {"N": n, "dtype": "float32"})
    spec = [("small", {"N": (1, 8192)}, {"BLOCK_SIZE": 256, "num_warps": 4}, [s(4096)]),
            ("large", {"N": (8193, 1 << 24)}, {"BLOCK_SIZE": 1024, "num_warps": 8}, [s(1 << 20), s(1 << 24)])]
elif kind == "softmax":
    keys, s = ["M", "N"], (lambda m, n: {"M": m, "N": n, "dtype": "float32"})
    spec = [("narrow", {"M": (1, 4096), "N": (1, 1024)}, {"BLOCK_N": 1024, "ROWS_PER_PROGRAM": 2, "num_warps": 4,
                                                           "num_stages": 2}, [s(1024, 512)]),
            ("wide", {"M": (1, 4096), "N": (1025, 8192)}, {"BLOCK_N": 2048, "ROWS_PER_PROGRAM": 1, "num_warps": 8,
                                                            "num_stages": 2}, [s(1024, 4096)])]
elif kind == "matmul":
    keys, s = ["M"], (lambda m: {"M": m, "N": 1024, "K": 1024, "dtype": "bfloat16"})
    spec = [("small", {"M": (1, 256)}, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4,
                                         "num_stages": 3}, [s(128)]),
            ("large", {"M": (257, 4096)}, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8,
                                            "num_warps": 8, "num_stages": 3}, [s(1024), s(4096)])]
else:  # cuda vector_add
    keys, s = ["N"], (lambda n: {"N": n})
    spec = [("small", {"N": (1, 4096)}, {"BLOCK_SIZE": 128}, [s(1024)]),
            ("mid", {"N": (4097, 1 << 20)}, {"BLOCK_SIZE": 512}, [s(1 << 16)]),
            ("large", {"N": ((1 << 20) + 1, 1 << 24)}, {"BLOCK_SIZE": 128}, [s(1 << 24)])]
buckets = [make_bucket(n, r, c, [row(x) for x in m]) for n, r, c, m in spec]
k = folder / kernel.name
d = make_dispatch(kernel=KernelRef(file_name=k.name, sha256=hashlib.sha256(k.read_bytes()).hexdigest()),
                  arch="sm_90", gpu_name="hand-written", toolchain={}, keys=keys, buckets=buckets,
                  single_config=make_total(spec[-1][2], [row(x) for *_, m in spec for x in m]))
write_dispatch(d, folder / "dispatch.json")
print(f"hand-written {folder / 'dispatch.json'} for {k.name}")
PY
}
check() {  # check RUN_FOLDER NAME
  local run=$1 name=$2 b="$W/bundle-$2"
  echo; echo "== $name: export $run"
  $KP export "$run" --arch auto --out "$b" || { status=1; return; }
  $KP bundle verify "$b" || status=1
  local kernel; kernel=$(python3 -c "import sys; from kernelpilot.bundle.export import find_dispatch; print(find_dispatch(sys.argv[1])[0])" "$run")
  echo "== $name: fresh process, never-measured shapes inside the ranges (kernel $kernel)"
  python3 scripts/bundle_workload_check.py "$b" "$kernel" "$run/dispatch.json" --json "$OUT/bundle26-$name.json" || status=1
  mkdir -p "$W/manifests/$name" && cp "$b/manifest.json" "$W/manifests/$name/"
}
if [[ "$RUN" == "-" ]]; then
  demo src/kernelpilot/examples/vector_add.py "$W/run-vadd" vector_add && check "$W/run-vadd" vector_add
  demo src/kernelpilot/examples/softmax.py "$W/run-softmax" softmax && check "$W/run-softmax" softmax
  demo src/kernelpilot/examples/matmul.py "$W/run-matmul" matmul && check "$W/run-matmul" matmul
else
  check "$RUN" "$(basename "$RUN")"
fi
if [[ -n "$CU" ]]; then
  check "$CU" "$(basename "$CU")-cu"
else
  demo src/kernelpilot/examples/cuda/vector_add.cu "$W/run-cu" cuda && check "$W/run-cu" vector_add-cu
fi
echo; echo "== the GPU test of tests/test_bundle_workload.py"
python3 -m pytest -q -x -m gpu -p no:cacheprovider tests/test_bundle_workload.py 2>&1 | tail -3
echo "== status $status"
tar -czf "$OUT/bundles26.tgz" -C "$W" manifests 2>/dev/null
exit $status
