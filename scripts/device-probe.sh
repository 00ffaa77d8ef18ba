#!/usr/bin/env bash
# Probe the device machine: versions, git, ncu counters, NVTX filtering, ncu_report import path.
# Usage (device tool): bash scripts/device-probe.sh   (writes $OUT/probe.txt)
set -u
out=${OUT:-/tmp/kp-probe}; mkdir -p "$out"
{
echo "== versions"; python3 --version; which python3 git ncu nvidia-smi cuobjdump
git --version; ncu --version | tail -1
python3 - <<'PY'
import torch, triton, sys
print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)
p = torch.cuda.get_device_properties(0)
print("gpu", p.name, "sms", p.multi_processor_count, "L2", getattr(p, "L2_cache_size", None), "cc", p.major, p.minor)
for mod in ("typer", "rich", "pynvml", "cuda.bindings", "numpy", "pydantic", "git"):
    try:
        m = __import__(mod); print(mod, getattr(m, "__version__", "ok"))
    except Exception as e: print(mod, "MISSING", e)
PY
ls /opt/nvidia/nsight-compute/*/extras/python 2>&1 | head
echo "== nvtx filter"
cat > /tmp/nvtx_t.py <<'PY'
import torch
x = torch.randn(1 << 20, device="cuda")
for _ in range(3): y = x * 2
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("kp_profile")
y = x + 1
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
PY
for flt in "kp_profile/" "regex:kp_profile/"; do
  echo "-- filter $flt"
  timeout 120 ncu --clock-control none --nvtx --nvtx-include "$flt" --metrics gpu__time_duration.sum $(which python3) /tmp/nvtx_t.py 2>&1 | grep -E "kernel|Kernel|duration|==PROF==|ERR|WARN" | head -8
done
} 2>&1 | tee "$out/probe.txt"
